#include "replica/unvouched_marker.h"

#include "replica/marker_record.h"
#include "store/endian.h"

namespace raftlog::replica {
namespace {

constexpr std::uint32_t kFormatVersion = 1;
constexpr std::size_t kPayloadBytes = 4 + 8 + 8 + 8;

}  // namespace

std::string UnvouchedMarker::encode(std::uint64_t node_id, std::uint64_t vouching_term,
                                    std::uint64_t vouching_index) {
  std::string out(kPayloadBytes, '\0');
  store::put_u32(out.data(), kFormatVersion);
  store::put_u64(out.data() + 4, node_id);
  store::put_u64(out.data() + 12, vouching_term);
  store::put_u64(out.data() + 20, vouching_index);
  return out;
}

store::Result<UnvouchedMarker::Found> UnvouchedMarker::find(store::Env* env,
                                                           const std::string& data_dir) {
  auto record = read_marker_record(env, data_dir, kFileName, kPayloadBytes, kFormatVersion);
  if (!record.ok()) return record.status();
  Found found;
  found.present = record->present;
  found.damage = record->damage;
  if (record->present && record->damage.empty()) {
    found.vouching_term = store::get_u64(record->payload.data() + 12);
    found.vouching_index = store::get_u64(record->payload.data() + 20);
  }
  return found;
}

store::Status UnvouchedMarker::write(store::Env* env, const std::string& data_dir,
                                     std::uint64_t node_id, std::uint64_t vouching_term,
                                     std::uint64_t vouching_index) {
  return write_marker_record(env, data_dir, kFileName,
                             encode(node_id, vouching_term, vouching_index));
}

store::Status UnvouchedMarker::remove(store::Env* env, const std::string& data_dir) {
  return remove_marker_record(env, data_dir, kFileName);
}

}  // namespace raftlog::replica

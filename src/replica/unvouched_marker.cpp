#include "replica/unvouched_marker.h"

#include "store/durable_record.h"
#include "store/endian.h"

namespace raftlog::replica {
namespace {

constexpr std::uint32_t kFormatVersion = 1;
constexpr std::size_t kPayloadBytes = 4 + 8 + 8 + 8;

store::Env* or_posix(store::Env* env) { return env != nullptr ? env : store::Env::posix(); }

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
  env = or_posix(env);
  const std::string path = store::join_path(data_dir, kFileName);
  Found found;
  if (!env->exists(path)) return found;
  found.present = true;
  auto file = store::DurableRecordFile::open(env, path, data_dir);
  if (!file.ok()) {
    found.damage = "it cannot be read (" + file.status().to_string() + ")";
    return found;
  }
  const auto& payload = (*file)->current();
  if (!payload.has_value()) {
    found.damage = "it holds no valid record";
  } else if (payload->size() != kPayloadBytes ||
             store::get_u32(payload->data()) != kFormatVersion) {
    found.damage = "its record is of an unknown format (" + std::to_string(payload->size()) +
                   " bytes)";
  } else {
    found.vouching_term = store::get_u64(payload->data() + 12);
    found.vouching_index = store::get_u64(payload->data() + 20);
  }
  return found;
}

store::Status UnvouchedMarker::write(store::Env* env, const std::string& data_dir,
                                     std::uint64_t node_id, std::uint64_t vouching_term,
                                     std::uint64_t vouching_index) {
  env = or_posix(env);
  // open() creates the file and syncs the directory; write() syncs the record before it returns.
  auto file = store::DurableRecordFile::open(env, store::join_path(data_dir, kFileName), data_dir);
  if (!file.ok()) return file.status();
  return (*file)->write(encode(node_id, vouching_term, vouching_index));
}

store::Status UnvouchedMarker::remove(store::Env* env, const std::string& data_dir) {
  env = or_posix(env);
  RAFTLOG_RETURN_IF_ERROR(env->remove(store::join_path(data_dir, kFileName)));
  return env->sync_dir(data_dir);
}

}  // namespace raftlog::replica

#include "replica/not_founder_marker.h"

#include "replica/marker_record.h"
#include "store/endian.h"

namespace raftlog::replica {
namespace {

constexpr std::uint32_t kFormatVersion = 1;
constexpr std::size_t kPayloadBytes = 4 + 8 + 4;

}  // namespace

const char* to_string(NotFounderMarker::Why why) {
  switch (why) {
    case NotFounderMarker::Why::kJoined:
      return "it was created outside its bootstrap configuration's voters (it joined)";
    case NotFounderMarker::Why::kCommitted:
      return "it knew a commit index above 0";
    case NotFounderMarker::Why::kUnknown:
      break;
  }
  return "its record is damaged";
}

std::string NotFounderMarker::encode(std::uint64_t node_id, Why why) {
  std::string out(kPayloadBytes, '\0');
  store::put_u32(out.data(), kFormatVersion);
  store::put_u64(out.data() + 4, node_id);
  store::put_u32(out.data() + 12, static_cast<std::uint32_t>(why));
  return out;
}

store::Result<NotFounderMarker::Found> NotFounderMarker::find(store::Env* env,
                                                             const std::string& data_dir) {
  auto record = read_marker_record(env, data_dir, kFileName, kPayloadBytes, kFormatVersion);
  if (!record.ok()) return record.status();
  Found found;
  found.present = record->present;
  found.damage = record->damage;
  if (!record->present || !record->damage.empty()) return found;
  const std::uint32_t why = store::get_u32(record->payload.data() + 12);
  if (why != static_cast<std::uint32_t>(Why::kJoined) &&
      why != static_cast<std::uint32_t>(Why::kCommitted)) {
    found.damage = "its record is of an unknown format (reason " + std::to_string(why) + ")";
    return found;
  }
  found.why = static_cast<Why>(why);
  return found;
}

store::Status NotFounderMarker::write(store::Env* env, const std::string& data_dir,
                                      std::uint64_t node_id, Why why) {
  return write_marker_record(env, data_dir, kFileName, encode(node_id, why));
}

}  // namespace raftlog::replica

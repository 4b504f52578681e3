#include "replica/not_founder_marker.h"

#include "store/durable_record.h"
#include "store/endian.h"

namespace raftlog::replica {
namespace {

constexpr std::uint32_t kFormatVersion = 1;
constexpr std::size_t kPayloadBytes = 4 + 8 + 4;

store::Env* or_posix(store::Env* env) { return env != nullptr ? env : store::Env::posix(); }

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
    return found;
  }
  const std::uint32_t why = payload->size() == kPayloadBytes ? store::get_u32(payload->data() + 12) : 0;
  if (payload->size() != kPayloadBytes || store::get_u32(payload->data()) != kFormatVersion ||
      (why != static_cast<std::uint32_t>(Why::kJoined) &&
       why != static_cast<std::uint32_t>(Why::kCommitted))) {
    found.damage = "its record is of an unknown format (" + std::to_string(payload->size()) +
                   " bytes)";
    return found;
  }
  found.why = static_cast<Why>(why);
  return found;
}

store::Status NotFounderMarker::write(store::Env* env, const std::string& data_dir,
                                      std::uint64_t node_id, Why why) {
  env = or_posix(env);
  // open() creates the file and syncs the directory; write() syncs the record before it returns.
  auto file = store::DurableRecordFile::open(env, store::join_path(data_dir, kFileName), data_dir);
  if (!file.ok()) return file.status();
  return (*file)->write(encode(node_id, why));
}

}  // namespace raftlog::replica

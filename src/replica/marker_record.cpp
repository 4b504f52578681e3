#include "replica/marker_record.h"

#include "store/durable_record.h"
#include "store/endian.h"

namespace raftlog::replica {
namespace {

store::Env* or_posix(store::Env* env) { return env != nullptr ? env : store::Env::posix(); }

}  // namespace

store::Result<MarkerRecord> read_marker_record(store::Env* env, const std::string& data_dir,
                                               const char* file_name, std::size_t payload_bytes,
                                               std::uint32_t format_version) {
  env = or_posix(env);
  const std::string path = store::join_path(data_dir, file_name);
  MarkerRecord found;
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
  } else if (payload->size() != payload_bytes || store::get_u32(payload->data()) != format_version) {
    found.damage = "its record is of an unknown format (" + std::to_string(payload->size()) +
                   " bytes)";
  } else {
    found.payload = *payload;
  }
  return found;
}

store::Status write_marker_record(store::Env* env, const std::string& data_dir,
                                  const char* file_name, const std::string& payload) {
  env = or_posix(env);
  auto file = store::DurableRecordFile::open(env, store::join_path(data_dir, file_name), data_dir);
  if (!file.ok()) return file.status();
  return (*file)->write(payload);
}

store::Status remove_marker_record(store::Env* env, const std::string& data_dir,
                                   const char* file_name) {
  env = or_posix(env);
  RAFTLOG_RETURN_IF_ERROR(env->remove(store::join_path(data_dir, file_name)));
  return env->sync_dir(data_dir);
}

}  // namespace raftlog::replica

#include "replica/removed_word_record.h"

#include "replica/marker_record.h"
#include "store/endian.h"

namespace raftlog::replica {
namespace {

constexpr std::uint32_t kFormatVersion = 1;
constexpr std::size_t kPayloadBytes = 4 + 8 + 8 + 8 + 8;

}  // namespace

std::string RemovedWordRecord::encode(std::uint64_t node_id, const raft::RemovedWord& word) {
  std::string out(kPayloadBytes, '\0');
  store::put_u32(out.data(), kFormatVersion);
  store::put_u64(out.data() + 4, node_id);
  store::put_u64(out.data() + 12, word.by);
  store::put_u64(out.data() + 20, word.conf_index);
  store::put_u64(out.data() + 28, word.conf_term);
  return out;
}

std::optional<raft::RemovedWord> RemovedWordRecord::decode(const std::string& payload,
                                                           std::uint64_t node_id,
                                                           std::string* why) {
  if (payload.size() != kPayloadBytes || store::get_u32(payload.data()) != kFormatVersion) {
    *why = "not a version 1 record";
    return std::nullopt;
  }
  if (store::get_u64(payload.data() + 4) != node_id) {
    *why = "a record for node " + std::to_string(store::get_u64(payload.data() + 4)) +
           ", not for node " + std::to_string(node_id);
    return std::nullopt;
  }
  raft::RemovedWord word;
  word.by = store::get_u64(payload.data() + 12);
  word.conf_index = store::get_u64(payload.data() + 20);
  word.conf_term = store::get_u64(payload.data() + 28);
  if (word.by == raft::kNoNode || word.by == node_id || word.conf_index == 0 ||
      word.conf_term == 0 || word.conf_term > raft::kMaxTerm) {
    *why = "an impossible word (member " + std::to_string(word.by) + ", entry " +
           std::to_string(word.conf_index) + " of term " + std::to_string(word.conf_term) + ")";
    return std::nullopt;
  }
  return word;
}

store::Result<RemovedWordRecord::Found> RemovedWordRecord::find(store::Env* env,
                                                               const std::string& data_dir,
                                                               std::uint64_t node_id) {
  auto record = read_marker_record(env, data_dir, kFileName, kPayloadBytes, kFormatVersion);
  if (!record.ok()) return record.status();
  Found found;
  found.present = record->present;
  found.damage = record->damage;
  if (!found.present || !found.damage.empty()) return found;
  std::optional<raft::RemovedWord> word = decode(record->payload, node_id, &found.damage);
  if (word) found.word = *word;
  return found;
}

store::Status RemovedWordRecord::write(store::Env* env, const std::string& data_dir,
                                       std::uint64_t node_id, const raft::RemovedWord& word) {
  return write_marker_record(env, data_dir, kFileName, encode(node_id, word));
}

store::Status RemovedWordRecord::remove(store::Env* env, const std::string& data_dir) {
  env = env != nullptr ? env : store::Env::posix();
  if (!env->exists(store::join_path(data_dir, kFileName))) return store::Status::ok_status();
  return remove_marker_record(env, data_dir, kFileName);
}

}  // namespace raftlog::replica

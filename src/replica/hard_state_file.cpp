#include "replica/hard_state_file.h"

#include "store/endian.h"

namespace raftlog::replica {

namespace {
// Version 3 adds the nonce of that leader's leadership, version 2 the leader this node knows for its
// term (docs/raft.md, "A second leader of a term"). Versions 1 and 2, written by older binaries,
// still read: no leader known, or no nonce known (0).
constexpr std::uint32_t kFormatVersion = 3;
constexpr std::size_t kPayloadBytes = 4 + 8 + 8 + 8 + 8;
constexpr std::uint32_t kVersion2 = 2;
constexpr std::size_t kVersion2PayloadBytes = 4 + 8 + 8 + 8;
constexpr std::uint32_t kVersion1 = 1;
constexpr std::size_t kVersion1PayloadBytes = 4 + 8 + 8;

std::size_t payload_bytes_of(std::uint32_t version) {
  switch (version) {
    case kVersion1:
      return kVersion1PayloadBytes;
    case kVersion2:
      return kVersion2PayloadBytes;
    case kFormatVersion:
      return kPayloadBytes;
    default:
      return 0;  // unknown
  }
}
}  // namespace

std::string HardStateFile::encode(const raft::HardState& hard_state) {
  std::string out(kPayloadBytes, '\0');
  store::put_u32(out.data(), kFormatVersion);
  store::put_u64(out.data() + 4, hard_state.term);
  store::put_u64(out.data() + 12, hard_state.vote);
  store::put_u64(out.data() + 20, hard_state.leader);
  store::put_u64(out.data() + 28, hard_state.leader_nonce);
  return out;
}

store::Result<raft::HardState> HardStateFile::decode(const std::string& payload) {
  if (payload.size() < 4) {
    return store::Status::corruption("hard state record is " + std::to_string(payload.size()) +
                                     " bytes, too short for a version");
  }
  const std::uint32_t version = store::get_u32(payload.data());
  const std::size_t expected = payload_bytes_of(version);
  if (expected == 0) {
    return store::Status::corruption("hard state record has unknown format version " +
                                     std::to_string(version));
  }
  if (payload.size() != expected) {
    return store::Status::corruption("hard state record of version " + std::to_string(version) +
                                     " is " + std::to_string(payload.size()) + " bytes, expected " +
                                     std::to_string(expected));
  }
  raft::HardState hard_state;
  hard_state.term = store::get_u64(payload.data() + 4);
  hard_state.vote = store::get_u64(payload.data() + 12);
  if (version >= kVersion2) hard_state.leader = store::get_u64(payload.data() + 20);
  if (version >= kFormatVersion) hard_state.leader_nonce = store::get_u64(payload.data() + 28);
  if (hard_state.leader == raft::kNoNode && hard_state.leader_nonce != 0) {
    // No writer makes it: the nonce is written with its leader.
    return store::Status::corruption("hard state record names a leadership nonce without a leader");
  }
  return hard_state;
}

store::Result<std::unique_ptr<HardStateFile>> HardStateFile::open(const std::string& data_dir,
                                                                  store::Env* env) {
  if (env == nullptr) env = store::Env::posix();
  RAFTLOG_RETURN_IF_ERROR(env->create_dir(data_dir));
  const std::string path = store::join_path(data_dir, "HARDSTATE");
  auto file = store::DurableRecordFile::open(env, path, data_dir);
  if (!file.ok()) return file.status();
  std::unique_ptr<HardStateFile> result(new HardStateFile(std::move(file).value()));
  if (result->file_->current().has_value() &&
      result->file_->bytes_at_open() < store::DurableRecordFile::kFileBytes) {
    // Cut short after a write (DurableRecordFile::bytes_at_open()): the slot left may hold an older
    // term and vote than the one lost, and this node could vote twice in one term.
    return store::Status::corruption(
        path + ": the file is " + std::to_string(result->file_->bytes_at_open()) +
        " bytes, not " + std::to_string(store::DurableRecordFile::kFileBytes) +
        ": it was cut short and may have lost this node's newest term and vote");
  }
  if (!result->file_->current().has_value()) {
    // No valid slot. All zeros is a file created but never written (a crash during the first
    // write); anything else is damage, and treating it as "term 0, no vote" could let this node
    // vote twice in one term.
    auto bytes = env->read_file(path, store::DurableRecordFile::kFileBytes);
    if (!bytes.ok()) return bytes.status();
    for (std::size_t i = 0; i < bytes->size(); ++i) {
      if ((*bytes)[i] != '\0') {
        return store::Status::corruption(
            path + ": neither hard state slot is valid (first non-zero byte at offset " +
            std::to_string(i) + "); refusing to forget this node's term and vote");
      }
    }
  }
  if (const auto& payload = result->file_->current(); payload.has_value()) {
    auto decoded = decode(*payload);
    if (!decoded.ok()) return decoded.status();
    result->current_ = *decoded;
  }
  return result;
}

store::Status HardStateFile::write(const raft::HardState& hard_state) {
  RAFTLOG_RETURN_IF_ERROR(file_->write(encode(hard_state)));
  current_.term = hard_state.term;
  current_.vote = hard_state.vote;
  current_.leader = hard_state.leader;
  current_.leader_nonce = hard_state.leader_nonce;
  return store::Status();
}

}  // namespace raftlog::replica

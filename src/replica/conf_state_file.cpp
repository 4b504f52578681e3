#include "replica/conf_state_file.h"

#include <algorithm>

#include "store/endian.h"

namespace raftlog::replica {

namespace {

constexpr std::uint32_t kFormatVersion = 1;
constexpr std::uint8_t kNotMember = 0;
constexpr std::uint8_t kVoter = 1;
constexpr std::uint8_t kLearner = 2;

std::uint8_t role_of(const raft::ConfState& conf, raft::NodeId node) {
  if (raft::is_voter(conf, node)) return kVoter;
  return raft::is_learner(conf, node) ? kLearner : kNotMember;
}

// `conf` with `node`'s role set to `role` (ids stay sorted).
raft::ConfState with_role(raft::ConfState conf, raft::NodeId node, std::uint8_t role) {
  std::erase(conf.voters, node);
  std::erase(conf.learners, node);
  std::vector<raft::NodeId>* target =
      role == kVoter ? &conf.voters : (role == kLearner ? &conf.learners : nullptr);
  if (target != nullptr) {
    target->insert(std::upper_bound(target->begin(), target->end(), node), node);
  }
  return conf;
}

void put_u8(std::string& out, std::uint8_t value) { out.push_back(static_cast<char>(value)); }
void put_u32(std::string& out, std::uint32_t value) {
  char bytes[4];
  store::put_u32(bytes, value);
  out.append(bytes, 4);
}
void put_u64(std::string& out, std::uint64_t value) {
  char bytes[8];
  store::put_u64(bytes, value);
  out.append(bytes, 8);
}

// Reads from a payload with bounds checks; any short read marks the reader failed.
struct Reader {
  const std::string& in;
  std::size_t offset = 0;
  bool failed = false;
  bool has(std::size_t bytes) {
    if (in.size() - offset < bytes) failed = true;
    return !failed;
  }
  std::uint8_t u8() { return has(1) ? static_cast<std::uint8_t>(in[offset++]) : 0; }
  std::uint32_t u32() {
    if (!has(4)) return 0;
    offset += 4;
    return store::get_u32(in.data() + offset - 4);
  }
  std::uint64_t u64() {
    if (!has(8)) return 0;
    offset += 8;
    return store::get_u64(in.data() + offset - 8);
  }
};

store::Status corrupt(const std::string& why) {
  return store::Status::corruption("configuration record: " + why);
}

}  // namespace

std::vector<raft::ConfRecord> ConfStateFile::kept_records(
    const std::vector<raft::ConfRecord>& history) {
  std::vector<raft::ConfRecord> kept;
  if (history.size() >= 2 &&
      raft::single_change_between(history[history.size() - 2].conf, history.back().conf)) {
    kept.push_back(history[history.size() - 2]);
  }
  kept.push_back(history.back());
  return kept;
}

std::string ConfStateFile::encode(const std::vector<raft::ConfRecord>& records) {
  const raft::ConfRecord& newest = records.back();
  std::string out;
  put_u32(out, kFormatVersion);
  put_u64(out, newest.index);
  put_u64(out, newest.term);
  const std::string conf = raft::encode_config(newest.conf);
  put_u32(out, static_cast<std::uint32_t>(conf.size()));
  out += conf;
  if (records.size() < 2) {
    put_u8(out, 0);
    return out;
  }
  const raft::ConfRecord& previous = records[records.size() - 2];
  const std::optional<raft::ConfChange> change =
      raft::single_change_between(previous.conf, newest.conf);
  if (!change) {  // kept_records() keeps a previous record only when it is one change away
    put_u8(out, 0);
    return out;
  }
  put_u8(out, 1);
  put_u64(out, previous.index);
  put_u64(out, previous.term);
  put_u64(out, change->node);
  put_u8(out, role_of(previous.conf, change->node));
  return out;
}

store::Result<std::vector<raft::ConfRecord>> ConfStateFile::decode(const std::string& payload) {
  Reader reader{payload};
  if (const std::uint32_t version = reader.u32(); !reader.failed && version != kFormatVersion) {
    return corrupt("unknown format version " + std::to_string(version));
  }
  raft::ConfRecord newest;
  newest.index = reader.u64();
  newest.term = reader.u64();
  const std::uint32_t conf_bytes = reader.u32();
  if (reader.failed || !reader.has(conf_bytes)) return corrupt("truncated");
  std::optional<raft::ConfState> conf =
      raft::decode_config(payload.substr(reader.offset, conf_bytes));
  if (!conf) return corrupt("the configuration does not decode");
  reader.offset += conf_bytes;
  newest.conf = std::move(*conf);
  std::vector<raft::ConfRecord> records;
  const std::uint8_t has_previous = reader.u8();
  if (has_previous == 1) {
    raft::ConfRecord previous;
    previous.index = reader.u64();
    previous.term = reader.u64();
    const raft::NodeId node = reader.u64();
    const std::uint8_t role = reader.u8();
    if (reader.failed) return corrupt("truncated");
    if (role > kLearner || node == raft::kNoNode || previous.index >= newest.index) {
      return corrupt("malformed previous configuration");
    }
    previous.conf = with_role(newest.conf, node, role);
    if (!raft::is_valid_conf(previous.conf)) return corrupt("invalid previous configuration");
    records.push_back(std::move(previous));
  } else if (has_previous != 0) {
    return corrupt("malformed previous-configuration flag");
  }
  if (reader.failed || reader.offset != payload.size()) return corrupt("wrong length");
  records.push_back(std::move(newest));
  return records;
}

store::Result<std::unique_ptr<ConfStateFile>> ConfStateFile::open(const std::string& data_dir,
                                                                  store::Env* env) {
  if (env == nullptr) env = store::Env::posix();
  RAFTLOG_RETURN_IF_ERROR(env->create_dir(data_dir));
  const std::string path = store::join_path(data_dir, "CONFSTATE");
  auto file = store::DurableRecordFile::open(env, path, data_dir);
  if (!file.ok()) return file.status();
  std::unique_ptr<ConfStateFile> result(new ConfStateFile(std::move(file).value()));
  const std::optional<std::string>& payload = result->file_->current();
  if (!payload.has_value()) {
    // No valid slot: all zeros is a file created but never written; anything else is damage, and
    // forgetting the configuration could let this node count votes of the wrong voters.
    auto bytes = env->read_file(path, store::DurableRecordFile::kFileBytes);
    if (!bytes.ok()) return bytes.status();
    for (std::size_t i = 0; i < bytes->size(); ++i) {
      if ((*bytes)[i] != '\0') {
        return store::Status::corruption(path +
                                         ": neither configuration slot is valid (first non-zero "
                                         "byte at offset " +
                                         std::to_string(i) + ")");
      }
    }
    return result;
  }
  auto decoded = decode(*payload);
  if (!decoded.ok()) return store::Status::corruption(path + ": " + decoded.status().to_string());
  result->current_ = std::move(decoded).value();
  return result;
}

store::Status ConfStateFile::write(const std::vector<raft::ConfRecord>& history) {
  std::vector<raft::ConfRecord> kept = kept_records(history);
  RAFTLOG_RETURN_IF_ERROR(file_->write(encode(kept)));
  current_ = std::move(kept);
  return store::Status();
}

}  // namespace raftlog::replica

#include "replica/conf_state_file.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "store/byte_io.h"

namespace raftlog::replica {

namespace {

// Version 2: the base configuration may record addresses (raft::encode_config version 3) and the
// payload may exceed the 1024 bytes version 1 fitted in. Version 3: the retired ids follow the
// records. All decode; version 3 is written.
constexpr std::uint32_t kIdsOnlyFormatVersion = 1;
constexpr std::uint32_t kAddressesFormatVersion = 2;
constexpr std::uint32_t kFormatVersion = 3;
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
  // A later record keeps no address of its own (its log entry holds them: Replica's open reads
  // them there); what it inherits is the previous record's, for the members that stay.
  std::erase_if(conf.addresses,
                [&](const raft::MemberAddress& member) { return !raft::is_member(conf, member.node); });
  return conf;
}

raft::ConfState without_addresses(raft::ConfState conf) {
  conf.addresses.clear();
  return conf;
}

store::Status corrupt(const std::string& why) {
  return store::Status::corruption("configuration record: " + why);
}

}  // namespace

store::Result<std::string> ConfStateFile::encode(const std::vector<raft::ConfRecord>& records,
                                                 const std::vector<raft::NodeId>& retired) {
  if (retired.size() > kMaxRetiredIds) {
    return store::Status::invalid_argument("configuration record: " +
                                           std::to_string(retired.size()) + " retired ids (at most " +
                                           std::to_string(kMaxRetiredIds) + ")");
  }
  if (records.empty() || records.size() > 1 + kMaxPendingRecords) {
    return store::Status::invalid_argument(
        "configuration record: " + std::to_string(records.size()) + " configurations (1 to " +
        std::to_string(1 + kMaxPendingRecords) + " fit)");
  }
  const raft::ConfRecord& base = records.front();
  std::string out;
  store::append_u32(&out, kFormatVersion);
  store::append_u64(&out, base.index);
  store::append_u64(&out, base.term);
  const std::string conf = raft::encode_config(base.conf);
  store::append_u32(&out, static_cast<std::uint32_t>(conf.size()));
  out += conf;
  store::append_u32(&out, static_cast<std::uint32_t>(records.size() - 1));
  for (std::size_t i = 1; i < records.size(); ++i) {
    // Roles only: the record keeps no addresses after the base (with_role).
    const std::optional<raft::ConfChange> change = raft::single_change_between(
        without_addresses(records[i - 1].conf), without_addresses(records[i].conf));
    if (!change || records[i].index <= records[i - 1].index) {
      return store::Status::invalid_argument(
          "configuration record: entry " + std::to_string(records[i].index) +
          " is not one change after entry " + std::to_string(records[i - 1].index));
    }
    store::append_u64(&out, records[i].index);
    store::append_u64(&out, records[i].term);
    store::append_u64(&out, change->node);
    store::append_u8(&out, role_of(records[i].conf, change->node));
  }
  store::append_u32(&out, static_cast<std::uint32_t>(retired.size()));
  for (raft::NodeId id : retired) {
    if (id == raft::kNoNode || raft::is_member(base.conf, id)) {
      return store::Status::invalid_argument("configuration record: retired id " +
                                             std::to_string(id) + " is no former member");
    }
    store::append_u64(&out, id);
  }
  return out;
}

store::Result<std::vector<raft::ConfRecord>> ConfStateFile::decode(const std::string& payload) {
  auto decoded = decode_all(payload);
  if (!decoded.ok()) return decoded.status();
  return std::move(decoded->records);
}

store::Result<ConfStateFile::Decoded> ConfStateFile::decode_all(const std::string& payload) {
  store::ByteReader reader(payload);
  std::uint32_t version = 0;
  const bool has_version = reader.u32(&version);
  if (has_version && version != kFormatVersion && version != kAddressesFormatVersion &&
      version != kIdsOnlyFormatVersion) {
    return corrupt("unknown format version " + std::to_string(version));
  }
  raft::ConfRecord base;
  std::uint32_t conf_bytes = 0;
  std::string conf_encoding;
  if (!has_version || !reader.u64(&base.index) || !reader.u64(&base.term) ||
      !reader.u32(&conf_bytes) || !reader.bytes(conf_bytes, &conf_encoding)) {
    return corrupt("truncated");
  }
  std::optional<raft::ConfState> conf = raft::decode_config(conf_encoding);
  if (!conf) return corrupt("the base configuration does not decode");
  base.conf = std::move(*conf);
  std::vector<raft::ConfRecord> records;
  records.push_back(std::move(base));
  std::uint32_t count = 0;
  if (!reader.u32(&count) || count > kMaxPendingRecords) return corrupt("bad record count");
  for (std::uint32_t i = 0; i < count; ++i) {
    raft::ConfRecord next;
    raft::NodeId node = raft::kNoNode;
    std::uint8_t role = 0;
    if (!reader.u64(&next.index) || !reader.u64(&next.term) || !reader.u64(&node) ||
        !reader.u8(&role)) {
      return corrupt("truncated");
    }
    if (role > kLearner || node == raft::kNoNode || next.index <= records.back().index) {
      return corrupt("malformed record " + std::to_string(i + 1));
    }
    next.conf = with_role(records.back().conf, node, role);
    if (!raft::is_valid_conf(next.conf) ||
        !raft::single_change_between(without_addresses(records.back().conf),
                                     without_addresses(next.conf))) {
      return corrupt("record " + std::to_string(i + 1) + " is no single change");
    }
    records.push_back(std::move(next));
  }
  Decoded decoded;
  if (version >= kFormatVersion) {
    std::uint32_t retired = 0;
    if (!reader.u32(&retired) || retired > kMaxRetiredIds) return corrupt("bad retired id count");
    for (std::uint32_t i = 0; i < retired; ++i) {
      raft::NodeId id = raft::kNoNode;
      if (!reader.u64(&id)) return corrupt("truncated");
      if (id == raft::kNoNode || raft::is_member(records.front().conf, id) ||
          std::find(decoded.retired.begin(), decoded.retired.end(), id) != decoded.retired.end()) {
        return corrupt("retired id " + std::to_string(i + 1) + " is no former member");
      }
      decoded.retired.push_back(id);
    }
  }
  if (!reader.done()) return corrupt("wrong length");
  decoded.records = std::move(records);
  return decoded;
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
  if (payload.has_value() && result->file_->bytes_at_open() < store::DurableRecordFile::kFileBytes) {
    // Cut short after a write (bytes_at_open()): the slot it lost may have held the newest record,
    // and the one left an older configuration.
    return store::Status::corruption(
        path + ": the file is " + std::to_string(result->file_->bytes_at_open()) +
        " bytes, not " + std::to_string(store::DurableRecordFile::kFileBytes) +
        ": it was cut short and may have lost its newest configuration record");
  }
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
  auto decoded = decode_all(*payload);
  if (!decoded.ok()) return store::Status::corruption(path + ": " + decoded.status().to_string());
  result->current_ = std::move(decoded->records);
  result->retired_ = std::move(decoded->retired);
  return result;
}

std::vector<raft::NodeId> ConfStateFile::retired_after(
    const std::vector<raft::ConfRecord>& records,
    const std::vector<raft::ConfState>& committed_between,
    const std::vector<raft::NodeId>& known_retired) const {
  const raft::ConfState& base = records.front().conf;
  std::vector<raft::NodeId> retired = known_retired;
  for (raft::NodeId id : retired_) {
    if (std::find(retired.begin(), retired.end(), id) == retired.end()) retired.push_back(id);
  }
  auto retire_from = [&](const raft::ConfState& conf) {
    for (const std::vector<raft::NodeId>* ids : {&conf.voters, &conf.learners}) {
      for (raft::NodeId id : *ids) {
        if (!raft::is_member(base, id) &&
            std::find(retired.begin(), retired.end(), id) == retired.end()) {
          retired.push_back(id);
        }
      }
    }
  };
  // The previous base was committed, so the members a newer base drops retired. A base replaced
  // by an older entry (one the log lost and the leader resent, below the old base) retires no one:
  // the old base's members are members still.
  if (!current_.empty() && records.front().index > current_.front().index) {
    retire_from(current_.front().conf);
  }
  for (const raft::ConfState& conf : committed_between) retire_from(conf);
  // A member again (a snapshot's configuration, or a cluster that did not know): no longer retired.
  std::erase_if(retired, [&](raft::NodeId id) { return raft::is_member(base, id); });
  return retired;
}

store::Status ConfStateFile::write(const std::vector<raft::ConfRecord>& records,
                                   const std::vector<raft::ConfState>& committed_between,
                                   const std::vector<raft::NodeId>& known_retired) {
  if (records.empty()) return encode(records).status();
  std::vector<raft::NodeId> retired = retired_after(records, committed_between, known_retired);
  std::size_t forgotten = 0;
  if (retired.size() > kMaxRetiredIds) {
    forgotten = retired.size() - kMaxRetiredIds;
    retired.erase(retired.begin(), retired.begin() + static_cast<std::ptrdiff_t>(forgotten));
  }
  auto encoded = encode(records, retired);
  // The oldest retirements go first when the configurations leave too little room beside them.
  while (encoded.ok() && encoded->size() > store::DurableRecordFile::kMaxPayloadBytes &&
         !retired.empty()) {
    const std::size_t over = encoded->size() - store::DurableRecordFile::kMaxPayloadBytes;
    const std::size_t drop = std::min(retired.size(), (over + 7) / 8);
    retired.erase(retired.begin(), retired.begin() + static_cast<std::ptrdiff_t>(drop));
    forgotten += drop;
    encoded = encode(records, retired);
  }
  if (!encoded.ok()) return encoded.status();
  if (forgotten > 0) {
    spdlog::warn("configuration record: forgetting the {} oldest retired ids (at most {}, and only "
                 "what fits beside the configurations): adding them again is no longer refused",
                 forgotten, kMaxRetiredIds);
  }
  RAFTLOG_RETURN_IF_ERROR(file_->write(*encoded));
  current_ = records;
  retired_ = std::move(retired);
  ++generation_;
  return store::Status();
}

}  // namespace raftlog::replica

#include "server/message_codec.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "raftlog/peer/v1/peer.pb.h"

namespace raftlog::server {
namespace {

namespace pb = raftlog::peer::v1;

pb::MessageType to_wire(raft::MessageType type) {
  switch (type) {
    case raft::MessageType::kPreVote:
      return pb::PRE_VOTE;
    case raft::MessageType::kPreVoteResponse:
      return pb::PRE_VOTE_RESPONSE;
    case raft::MessageType::kVote:
      return pb::VOTE;
    case raft::MessageType::kVoteResponse:
      return pb::VOTE_RESPONSE;
    case raft::MessageType::kAppend:
      return pb::APPEND;
    case raft::MessageType::kAppendResponse:
      return pb::APPEND_RESPONSE;
    case raft::MessageType::kHeartbeat:
      return pb::HEARTBEAT;
    case raft::MessageType::kHeartbeatResponse:
      return pb::HEARTBEAT_RESPONSE;
    case raft::MessageType::kTimeoutNow:
      return pb::TIMEOUT_NOW;
    case raft::MessageType::kSnapshot:
      return pb::SNAPSHOT;
  }
  return pb::MESSAGE_TYPE_UNSPECIFIED;  // unreachable for a valid enum value
}

// The wire enum is open (proto3): any int32 may arrive, so the raw number is mapped, not cast.
std::optional<raft::MessageType> from_wire(int type) {
  switch (type) {
    case pb::PRE_VOTE:
      return raft::MessageType::kPreVote;
    case pb::PRE_VOTE_RESPONSE:
      return raft::MessageType::kPreVoteResponse;
    case pb::VOTE:
      return raft::MessageType::kVote;
    case pb::VOTE_RESPONSE:
      return raft::MessageType::kVoteResponse;
    case pb::APPEND:
      return raft::MessageType::kAppend;
    case pb::APPEND_RESPONSE:
      return raft::MessageType::kAppendResponse;
    case pb::HEARTBEAT:
      return raft::MessageType::kHeartbeat;
    case pb::HEARTBEAT_RESPONSE:
      return raft::MessageType::kHeartbeatResponse;
    case pb::TIMEOUT_NOW:
      return raft::MessageType::kTimeoutNow;
    case pb::SNAPSHOT:
      return raft::MessageType::kSnapshot;
    default:
      return std::nullopt;
  }
}

pb::EntryType entry_type_to_wire(raft::EntryType type) {
  switch (type) {
    case raft::EntryType::kNormal:
      return pb::ENTRY_TYPE_NORMAL;
    case raft::EntryType::kNoop:
      return pb::ENTRY_TYPE_NOOP;
    case raft::EntryType::kConfig:
      return pb::ENTRY_TYPE_CONFIG;
  }
  return pb::ENTRY_TYPE_NORMAL;  // unreachable for a valid enum value
}

std::optional<raft::EntryType> entry_type_from_wire(int type) {
  switch (type) {
    case pb::ENTRY_TYPE_NORMAL:
      return raft::EntryType::kNormal;
    case pb::ENTRY_TYPE_NOOP:
      return raft::EntryType::kNoop;
    case pb::ENTRY_TYPE_CONFIG:
      return raft::EntryType::kConfig;
    default:
      return std::nullopt;
  }
}

std::string entry_problem(const pb::RaftMessage& in, int position, const char* what) {
  return "entry " + std::to_string(position) + " of " + std::to_string(in.entries_size()) +
         " in a message from node " + std::to_string(in.from()) + ": " + what;
}

// A SNAPSHOT carries a snapshot, and nothing else does; its index, term and configuration are what
// the core may take as they are (the core still checks them against its own state).
std::string check_snapshot(const pb::RaftMessage& in, raft::MessageType type) {
  const std::string from = " from node " + std::to_string(in.from());
  if (type != raft::MessageType::kSnapshot) {
    if (in.has_snapshot())
      return "a " + std::string(message_type_name(type)) + " message" + from +
             " must not carry a snapshot";
    return {};
  }
  if (!in.has_snapshot()) return "a snapshot message" + from + " carries no snapshot";
  const pb::Snapshot& snapshot = in.snapshot();
  if (snapshot.index() == 0) return "a snapshot" + from + " replaces no entry (index 0)";
  if (snapshot.index() > kMaxSnapshotIndex) {
    return "a snapshot" + from + " names index " + std::to_string(snapshot.index()) +
           ", above the limit of " + std::to_string(kMaxSnapshotIndex);
  }
  if (snapshot.term() == 0 || snapshot.term() > in.term()) {
    return "a snapshot" + from + " names term " + std::to_string(snapshot.term()) +
           " for its last entry, outside 1.." + std::to_string(in.term()) + " (the message's term)";
  }
  if (!raft::decode_config(snapshot.conf())) {
    return "a snapshot" + from + " carries a configuration that does not decode";
  }
  if (snapshot.total_bytes() == 0) {
    if (snapshot.chunk_offset() != 0 || snapshot.data_crc32c() != 0 || snapshot.has_splice() ||
        snapshot.has_data_digest())
      return "a whole snapshot" + from +
             " carries a chunk offset or checksum (or splice point, or digest)";
    return {};
  }
  // A chunk (snapshot_chunks.h): its bytes lie inside a total within the bound.
  if (snapshot.total_bytes() > kMaxSnapshotBytes) {
    return "a snapshot" + from + " of " + std::to_string(snapshot.total_bytes()) +
           " bytes exceeds the limit of " + std::to_string(kMaxSnapshotBytes) + " bytes";
  }
  return {};  // decode_snapshot_chunk checks where its data lies
}

}  // namespace

namespace {

// The types peer.proto gives RaftMessage.leader_nonce a meaning on.
bool carries_leader_nonce(raft::MessageType type) {
  return type == raft::MessageType::kAppend || type == raft::MessageType::kHeartbeat ||
         type == raft::MessageType::kSnapshot || type == raft::MessageType::kTimeoutNow ||
         type == raft::MessageType::kAppendResponse;
}

// Every field but the snapshot's data.
void encode_fields(const raft::Message& message, std::string_view cluster_id,
                   pb::RaftMessage* out) {
  out->Clear();
  out->set_cluster_id(std::string(cluster_id));
  out->set_type(to_wire(message.type));
  out->set_from(message.from);
  out->set_to(message.to);
  out->set_term(message.term);
  out->set_index(message.index);
  out->set_log_term(message.log_term);
  out->mutable_entries()->Reserve(static_cast<int>(message.entries.size()));
  for (const raft::Entry& entry : message.entries) {
    pb::LogEntry* wire = out->add_entries();
    wire->set_index(entry.index);
    wire->set_term(entry.term);
    wire->set_type(entry_type_to_wire(entry.type));
    wire->set_client_id(entry.client_id);
    wire->set_sequence(entry.sequence);
    wire->set_proposal_continues(entry.proposal_continues);
    wire->set_has_envelope(entry.has_envelope);
    wire->set_is_group_commit(entry.is_group_commit);
    wire->set_payload(entry.payload);
  }
  out->set_commit(message.commit);
  if (message.type == raft::MessageType::kHeartbeat) {
    out->set_leader_commit(message.leader_commit);
    out->set_sending_snapshot(message.sending_snapshot);
  }
  out->set_reject(message.reject);
  out->set_reject_hint(message.reject_hint);
  out->set_hint_term(message.hint_term);
  out->set_context(message.context);
  if (message.type == raft::MessageType::kAppendResponse) out->set_term_leader(message.term_leader);
  if (carries_leader_nonce(message.type)) out->set_leader_nonce(message.leader_nonce);
  out->set_disk_over_watermark(message.disk_over_watermark);
  // Every message says which snapshot data this node decodes (the leader picks a peer's format by it).
  out->set_snapshot_formats(kOwnSnapshotFormats);
  if (message.type == raft::MessageType::kAppend || message.type == raft::MessageType::kHeartbeat) {
    out->set_retention_hold(message.retention_hold);
  }
  if (message.snapshot) {
    pb::Snapshot* wire = out->mutable_snapshot();
    wire->set_index(message.snapshot->index);
    wire->set_term(message.snapshot->term);
    wire->set_conf(raft::encode_config(message.snapshot->conf));
  }
}

}  // namespace

void encode_message(const raft::Message& message, std::string_view cluster_id,
                    pb::RaftMessage* out) {
  encode_fields(message, cluster_id, out);
  if (message.snapshot) out->mutable_snapshot()->set_data(message.snapshot->data.str());
}

namespace {

void encode_splice_point(const replica::FramedSplicePoint& point, pb::SnapshotSplicePoint* out) {
  out->set_head_crc32c(point.head_crc32c);
  out->set_kept_bytes(point.kept_bytes);
  out->set_last_client_id(point.last_client_id);
  out->set_kept_crc32c(point.kept_crc32c);
  if (point.kept_digest) out->set_kept_digest(*point.kept_digest);
}

replica::FramedSplicePoint decode_splice_point(const pb::SnapshotSplicePoint& in) {
  return replica::FramedSplicePoint{
      in.head_crc32c(), in.kept_bytes(), in.last_client_id(), in.kept_crc32c(),
      in.has_kept_digest() ? std::optional<std::uint32_t>(in.kept_digest()) : std::nullopt};
}

}  // namespace

void encode_snapshot_chunk(const raft::Message& message, const SnapshotChunkPlace& place,
                           std::size_t length, std::string_view cluster_id, pb::RaftMessage* out,
                           const std::optional<replica::FramedSplicePoint>& splice) {
  encode_fields(message, cluster_id, out);
  pb::Snapshot* wire = out->mutable_snapshot();
  // A continuation's message holds only the bytes from its point on.
  const std::uint64_t base = splice ? splice->kept_bytes : 0;
  wire->set_data(message.snapshot->data.data() + (place.offset - base), length);
  wire->set_chunk_offset(place.offset);
  wire->set_total_bytes(place.total_bytes);
  wire->set_data_crc32c(place.data_crc32c);
  if (place.data_digest) wire->set_data_digest(*place.data_digest);
  if (splice) encode_splice_point(*splice, wire->mutable_splice());
}

namespace {

// `movable`: the same message as `in`, whose payloads may be moved out; null to copy them.
std::string decode_checked(const pb::RaftMessage& in, const MessageLimits& limits,
                           raft::Message* out, pb::RaftMessage* movable) {
  const std::optional<raft::MessageType> type = from_wire(in.type());
  if (!type) return "unknown message type " + std::to_string(in.type());
  if (in.from() == raft::kNoNode) return "message has no sender (from = 0)";
  if (in.to() == raft::kNoNode) return "message has no recipient (to = 0)";
  if (in.from() == in.to()) return "message from node " + std::to_string(in.from()) + " to itself";

  // Terms near 2^64 are never honest and would leave no term to campaign at (raft::kMaxTerm).
  if (in.term() > raft::kMaxTerm || in.log_term() > raft::kMaxTerm ||
      in.hint_term() > raft::kMaxTerm) {
    return "message from node " + std::to_string(in.from()) + " names a term above the limit of " +
           std::to_string(raft::kMaxTerm);
  }

  const std::size_t size_bytes = in.ByteSizeLong();
  if (size_bytes > limits.max_message_bytes) {
    return "message of " + std::to_string(size_bytes) + " bytes exceeds the limit of " +
           std::to_string(limits.max_message_bytes) + " bytes";
  }
  const auto entry_count = static_cast<std::size_t>(in.entries_size());
  if (entry_count > limits.max_entries_per_message) {
    return "message carries " + std::to_string(entry_count) + " entries, more than the limit of " +
           std::to_string(limits.max_entries_per_message);
  }
  if (entry_count > 0 && *type != raft::MessageType::kAppend) {
    return "a " + std::string(message_type_name(*type)) + " message must not carry entries";
  }
  if (entry_count > 0 && in.index() > std::numeric_limits<raft::Index>::max() - entry_count) {
    return "entry indexes overflow after index " + std::to_string(in.index());
  }
  std::string snapshot_error = check_snapshot(in, *type);
  if (!snapshot_error.empty()) return snapshot_error;

  out->type = *type;
  out->from = in.from();
  out->to = in.to();
  out->term = in.term();
  out->index = in.index();
  out->log_term = in.log_term();
  out->commit = in.commit();
  // Advice for a heartbeat's recipient only (peer.proto): never below the clamped commit.
  out->leader_commit =
      *type == raft::MessageType::kHeartbeat && in.leader_commit() != 0
          ? std::max(in.leader_commit(), in.commit())
          : 0;
  // Only a heartbeat says it (peer.proto); on anything else it is ignored.
  out->sending_snapshot = *type == raft::MessageType::kHeartbeat && in.sending_snapshot();
  out->reject = in.reject();
  out->reject_hint = in.reject_hint();
  out->hint_term = in.hint_term();
  out->context = in.context();
  // Only an append response names it (peer.proto); any value is information only (a node id the
  // recipient logs), never trusted for a decision.
  out->term_leader = *type == raft::MessageType::kAppendResponse ? in.term_leader() : raft::kNoNode;
  // Any value is as good as any other: the core only compares it with the nonce it learnt from the
  // term's first leader message (a forged one can refuse a leader, as a forged sender id can).
  out->leader_nonce = carries_leader_nonce(*type) ? in.leader_nonce() : 0;
  out->disk_over_watermark = in.disk_over_watermark();
  // Any value is harmless: the follower applies it only as min(its own limit, the hold), from the
  // leader it follows in its current term (replica/retention_hold.h). Other types carry none.
  out->retention_hold =
      *type == raft::MessageType::kAppend || *type == raft::MessageType::kHeartbeat
          ? in.retention_hold()
          : 0;
  out->snapshot.reset();
  if (*type == raft::MessageType::kSnapshot) {
    raft::Snapshot& snapshot = out->snapshot.emplace();
    snapshot.index = in.snapshot().index();
    snapshot.term = in.snapshot().term();
    snapshot.conf = *raft::decode_config(in.snapshot().conf());  // check_snapshot decoded it
    if (movable != nullptr) {
      snapshot.data = std::move(*movable->mutable_snapshot()->mutable_data());
    } else {
      snapshot.data = in.snapshot().data();
    }
  }
  out->entries.clear();
  out->entries.reserve(entry_count);

  raft::Term previous_term = in.log_term();
  for (int position = 0; position < in.entries_size(); ++position) {
    const pb::LogEntry& wire = in.entries(position);
    const std::optional<raft::EntryType> entry_type = entry_type_from_wire(wire.type());
    if (!entry_type) return entry_problem(in, position, "unknown entry type");
    const raft::Index expected_index = in.index() + 1 + static_cast<raft::Index>(position);
    if (wire.index() != expected_index) {
      return entry_problem(
          in, position,
          ("index " + std::to_string(wire.index()) + ", expected " + std::to_string(expected_index))
              .c_str());
    }
    if (wire.term() < previous_term) return entry_problem(in, position, "term goes backwards");
    if (wire.term() > in.term())
      return entry_problem(in, position, "term above the message's term");
    previous_term = wire.term();

    raft::Entry& entry = out->entries.emplace_back();
    entry.index = wire.index();
    entry.term = wire.term();
    entry.type = *entry_type;
    entry.client_id = wire.client_id();
    entry.sequence = wire.sequence();
    entry.proposal_continues = wire.proposal_continues();
    entry.has_envelope = wire.has_envelope();
    entry.is_group_commit = wire.is_group_commit();
    if (movable != nullptr) {
      entry.payload = std::move(*movable->mutable_entries(position)->mutable_payload());
    } else {
      entry.payload = wire.payload();
    }
  }
  return {};
}

}  // namespace

std::string decode_message(const pb::RaftMessage& in, const MessageLimits& limits,
                           raft::Message* out) {
  if (is_snapshot_chunk(in)) return "a snapshot chunk is not a whole message";
  return decode_checked(in, limits, out, nullptr);
}

std::string decode_message(pb::RaftMessage&& in, const MessageLimits& limits, raft::Message* out) {
  if (is_snapshot_chunk(in)) return "a snapshot chunk is not a whole message";
  return decode_checked(in, limits, out, &in);
}

bool is_snapshot_chunk(const pb::RaftMessage& in) {
  return in.has_snapshot() && in.snapshot().total_bytes() != 0;
}

std::string decode_snapshot_chunk(pb::RaftMessage&& in, const MessageLimits& limits,
                                  SnapshotChunk* out) {
  if (!is_snapshot_chunk(in)) return "not a snapshot chunk";
  // The data is taken out first, so that it is moved, not copied; the size bound still counts it.
  out->data = std::move(*in.mutable_snapshot()->mutable_data());
  in.mutable_snapshot()->clear_data();
  const std::size_t size_bytes = in.ByteSizeLong() + out->data.size();
  if (size_bytes > limits.max_message_bytes) {
    return "message of " + std::to_string(size_bytes) + " bytes exceeds the limit of " +
           std::to_string(limits.max_message_bytes) + " bytes";
  }
  std::string problem = decode_checked(in, limits, &out->message, &in);
  if (!problem.empty()) return problem;
  out->place = SnapshotChunkPlace{
      in.snapshot().chunk_offset(), in.snapshot().total_bytes(), in.snapshot().data_crc32c(),
      in.snapshot().has_data_digest() ? std::optional<std::uint32_t>(in.snapshot().data_digest())
                                      : std::nullopt};
  const std::string from = " from node " + std::to_string(in.from());
  if (out->data.empty()) return "a snapshot chunk" + from + " carries no data";
  if (out->place.offset >= out->place.total_bytes ||
      out->data.size() > out->place.total_bytes - out->place.offset) {
    return "a snapshot chunk" + from + " at offset " + std::to_string(out->place.offset) +
           " with " + std::to_string(out->data.size()) + " bytes lies outside its total of " +
           std::to_string(out->place.total_bytes) + " bytes";
  }
  if (in.snapshot().has_splice()) {
    out->splice = decode_splice_point(in.snapshot().splice());
    // The follower's bytes come first: the chunk lies after them, and they are not all the data.
    if (out->splice->kept_bytes == 0 || out->splice->kept_bytes > out->place.offset) {
      return "a snapshot continuation" + from + " at offset " +
             std::to_string(out->place.offset) + " splices after byte " +
             std::to_string(out->splice->kept_bytes);
    }
    // A digest of the kept frames names a digest of the spliced data: a sender has both or none.
    if (out->splice->kept_digest && !out->place.data_digest) {
      return "a snapshot continuation" + from + " names the kept frames' digest, not its data's";
    }
  }
  return {};
}

void encode_snapshot_receipt(const SnapshotReceipt& receipt, pb::RaftMessage* out) {
  pb::SnapshotReceipt* wire = out->mutable_snapshot_receipt();
  wire->set_index(receipt.snapshot.index);
  wire->set_term(receipt.snapshot.term);
  wire->set_total_bytes(receipt.snapshot.total_bytes);
  wire->set_data_crc32c(receipt.snapshot.data_crc32c);
  wire->set_received_bytes(receipt.received_bytes);
  if (receipt.snapshot.data_digest) wire->set_data_digest(*receipt.snapshot.data_digest);
  if (receipt.splice) encode_splice_point(*receipt.splice, wire->mutable_splice());
}

std::optional<SnapshotReceipt> decode_snapshot_receipt(const pb::RaftMessage& in,
                                                       std::string* problem) {
  problem->clear();
  if (!in.has_snapshot_receipt()) return std::nullopt;
  const pb::SnapshotReceipt& wire = in.snapshot_receipt();
  const std::string from = "a snapshot receipt from node " + std::to_string(in.from());
  if (wire.index() == 0 || wire.index() > kMaxSnapshotIndex) {
    *problem = from + " names index " + std::to_string(wire.index());
  } else if (wire.term() == 0 || wire.term() > raft::kMaxTerm) {
    *problem = from + " names term " + std::to_string(wire.term());
  } else if (wire.total_bytes() == 0 || wire.total_bytes() > kMaxSnapshotBytes) {
    *problem = from + " names a total of " + std::to_string(wire.total_bytes()) + " bytes";
  } else if (wire.received_bytes() == 0 || wire.received_bytes() >= wire.total_bytes()) {
    *problem = from + " acknowledges " + std::to_string(wire.received_bytes()) + " of " +
               std::to_string(wire.total_bytes()) + " bytes";
  }
  std::optional<replica::FramedSplicePoint> splice;
  if (problem->empty() && wire.has_splice()) {
    splice = decode_splice_point(wire.splice());
    if (splice->kept_bytes == 0 || splice->kept_bytes > wire.received_bytes()) {
      *problem = from + " names a splice point at byte " + std::to_string(splice->kept_bytes) +
                 " of the " + std::to_string(wire.received_bytes()) + " it holds";
    } else if (splice->kept_digest && !wire.has_data_digest()) {
      // A node that computes the kept frames' digest names its partial's: both or none.
      *problem = from + " names the kept frames' digest but not its data's";
    }
  }
  if (!problem->empty()) return std::nullopt;
  return SnapshotReceipt{
      SnapshotIdentity{
          wire.index(), wire.term(), wire.total_bytes(), wire.data_crc32c(),
          wire.has_data_digest() ? std::optional<std::uint32_t>(wire.data_digest()) : std::nullopt},
      wire.received_bytes(), splice};
}

std::string_view message_type_name(raft::MessageType type) {
  switch (type) {
    case raft::MessageType::kPreVote:
      return "pre_vote";
    case raft::MessageType::kPreVoteResponse:
      return "pre_vote_response";
    case raft::MessageType::kVote:
      return "vote";
    case raft::MessageType::kVoteResponse:
      return "vote_response";
    case raft::MessageType::kAppend:
      return "append";
    case raft::MessageType::kAppendResponse:
      return "append_response";
    case raft::MessageType::kHeartbeat:
      return "heartbeat";
    case raft::MessageType::kHeartbeatResponse:
      return "heartbeat_response";
    case raft::MessageType::kTimeoutNow:
      return "timeout_now";
    case raft::MessageType::kSnapshot:
      return "snapshot";
  }
  return "unknown";
}

}  // namespace raftlog::server

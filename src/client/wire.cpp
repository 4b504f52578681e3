#include "client/wire.h"

#include "api_errors/error_info.h"

namespace raftlog::client::internal {

namespace {

Role role_from_wire(pb::Role role) {
  switch (role) {
    case pb::ROLE_FOLLOWER:
      return Role::kFollower;
    case pb::ROLE_PRE_CANDIDATE:
      return Role::kPreCandidate;
    case pb::ROLE_CANDIDATE:
      return Role::kCandidate;
    case pb::ROLE_LEADER:
      return Role::kLeader;
    default:
      return Role::kUnknown;
  }
}

FlushMode flush_mode_from_wire(pb::FlushMode mode) {
  switch (mode) {
    case pb::FLUSH_MODE_SYNC:
      return FlushMode::kSync;
    case pb::FLUSH_MODE_ASYNC:
      return FlushMode::kAsync;
    default:
      return FlushMode::kUnknown;
  }
}

SnapshotTransfer snapshot_from_wire(const pb::SnapshotTransfer& wire) {
  SnapshotTransfer transfer;
  switch (wire.state()) {
    case pb::SnapshotTransfer::SENDING:
      transfer.state = "sending";
      break;
    case pb::SnapshotTransfer::SENT:
      transfer.state = "sent";
      break;
    case pb::SnapshotTransfer::RECEIVING:
      transfer.state = "receiving";
      break;
    case pb::SnapshotTransfer::INSTALLING:
      transfer.state = "installing";
      break;
    default:
      transfer.state = "unknown";
  }
  transfer.peer = wire.peer();
  transfer.index = wire.index();
  transfer.term = wire.term();
  transfer.bytes_done = wire.bytes_done();
  transfer.bytes_total = wire.bytes_total();
  transfer.bytes_skipped = wire.bytes_skipped();
  transfer.resume_missed = wire.resume_missed();
  return transfer;
}

PeerStatus peer_from_wire(const pb::PeerStatus& wire) {
  PeerStatus peer;
  peer.id = wire.id();
  peer.address = wire.address();
  peer.match_index = wire.match_index();
  peer.lag_entries = wire.lag_entries();
  peer.last_contact_ms = wire.last_contact_ms();
  peer.probing = wire.probing();
  peer.behind_first_index = wire.behind_first_index();
  peer.lag_bytes = wire.lag_bytes();
  peer.disk_over_watermark = wire.disk_over_watermark();
  if (wire.has_snapshot()) peer.snapshot = snapshot_from_wire(wire.snapshot());
  return peer;
}

}  // namespace

Status from_grpc(const grpc::Status& status, const grpc::ClientContext& context,
                 const std::string& endpoint) {
  return Status(static_cast<StatusCode>(status.error_code()),
                endpoint + ": " + status.error_message(), api_errors::error_details(context));
}

Entry entry_from_wire(const pb::Entry& wire) {
  Entry entry;
  entry.index = wire.index();
  entry.term = wire.term();
  entry.payload = wire.payload();
  switch (wire.type()) {
    case pb::ENTRY_TYPE_NOOP:
      entry.type = EntryType::kNoop;
      break;
    case pb::ENTRY_TYPE_CONFIG:
      entry.type = EntryType::kConfig;
      break;
    case pb::ENTRY_TYPE_GROUP_COMMIT:
      entry.type = EntryType::kGroupCommit;
      break;
    default:
      entry.type = EntryType::kNormal;
      break;
  }
  entry.client_id = wire.client_id();
  entry.sequence = wire.sequence();
  entry.has_attributes = wire.has_attributes();
  entry.topic = wire.topic();
  entry.keys.assign(wire.keys().begin(), wire.keys().end());
  entry.timestamp_ms = wire.timestamp_ms();
  return entry;
}

void attributes_to_wire(const std::vector<EntryAttributes>& attributes, pb::AppendRequest* out) {
  out->mutable_attributes()->Reserve(static_cast<int>(attributes.size()));
  for (const EntryAttributes& entry : attributes) {
    pb::EntryAttributes* wire = out->add_attributes();
    wire->set_topic(entry.topic);
    for (const std::string& key : entry.keys) wire->add_keys(key);
  }
}

NodeStatus status_from_wire(const pb::StatusResponse& wire, const std::string& endpoint) {
  NodeStatus status;
  status.endpoint = endpoint;
  status.node_id = wire.node_id();
  status.address = wire.address();
  status.role = role_from_wire(wire.role());
  status.term = wire.term();
  status.leader_id = wire.leader_id();
  status.leader_address = wire.leader_address();
  status.first_index = wire.first_index();
  status.last_index = wire.last_index();
  status.commit_index = wire.commit_index();
  status.flushed_index = wire.flushed_index();
  status.flush_mode = flush_mode_from_wire(wire.flush_mode());
  status.catching_up = wire.catching_up();
  status.removed = wire.removed();
  status.removed_by = wire.removed_by();
  status.catching_up_to_index = wire.catching_up_to_index();
  status.stranded_below_index = wire.stranded_below_index();
  status.disk_used_ratio = wire.disk_used_ratio();
  status.disk_high_watermark = wire.disk_high_watermark();
  status.disk_over_high_watermark = wire.disk_over_high_watermark();
  status.disk_keeping_leadership = wire.disk_keeping_leadership();
  status.disk_handover_wait_ms = wire.disk_handover_wait_ms();
  status.voters.assign(wire.voters().begin(), wire.voters().end());
  status.learners.assign(wire.learners().begin(), wire.learners().end());
  status.learner_catching_up_to_index = wire.learner_catching_up_to_index();
  status.catching_up_to_leader_commit = wire.catching_up_to_leader_commit();
  status.behind_leader_commit_entries = wire.behind_leader_commit_entries();
  status.not_serving_reason = wire.not_serving_reason();
  status.derived_indexed_through = wire.derived_indexed_through();
  status.derived_lag_entries = wire.derived_lag_entries();
  status.derived_problem = wire.derived_problem();
  status.groups_applied_through = wire.groups_applied_through();
  status.groups_retention_hold = wire.groups_retention_hold();
  status.groups_bad_commits = wire.groups_bad_commits();
  status.groups_refused_commits = wire.groups_refused_commits();
  status.storage_fault = wire.storage_fault();
  status.unvouched = wire.unvouched();
  status.unvouched_hint = wire.unvouched_hint();
  status.committed_conflict = wire.committed_conflict();
  status.second_leader = wire.second_leader();
  status.leadership_refused = wire.leadership_refused();
  status.corrupt_index = wire.corrupt_index();
  status.scrub_bytes_verified = wire.scrub_bytes_verified();
  status.scrub_passes = wire.scrub_passes();
  status.version = wire.version();
  status.revision = wire.revision();
  if (wire.has_receiving_snapshot())
    status.receiving_snapshot = snapshot_from_wire(wire.receiving_snapshot());
  status.snapshots_sent = wire.snapshots_sent();
  status.snapshots_abandoned = wire.snapshots_abandoned();
  status.snapshots_received = wire.snapshots_received();
  status.snapshot_chunks_refused = wire.snapshot_chunks_refused();
  status.snapshots_above_first_index = wire.snapshots_above_first_index();
  status.snapshot_encodes = wire.snapshot_encodes();
  status.snapshot_encodings_reused = wire.snapshot_encodings_reused();
  status.snapshots_resumed = wire.snapshots_resumed();
  status.snapshot_bytes_skipped = wire.snapshot_bytes_skipped();
  status.snapshot_partials_continued = wire.snapshot_partials_continued();
  status.snapshot_partials_restored = wire.snapshot_partials_restored();
  status.snapshot_bytes_restored = wire.snapshot_bytes_restored();
  status.snapshot_partial_files_dropped = wire.snapshot_partial_files_dropped();
  status.snapshots_continued = wire.snapshots_continued();
  status.snapshot_resume_saved_bytes = wire.snapshot_resume_saved_bytes();
  status.snapshot_partials_spliced = wire.snapshot_partials_spliced();
  status.snapshot_splices_refused = wire.snapshot_splices_refused();
  for (const pb::PeerStatus& peer_wire : wire.peers())
    status.peers.push_back(peer_from_wire(peer_wire));
  return status;
}

std::string encode_health_request(const std::string& service) {
  std::string out;
  if (service.empty()) return out;
  out.push_back('\x0a');  // field 1, length-delimited
  std::size_t length = service.size();
  while (length >= 0x80) {
    out.push_back(static_cast<char>((length & 0x7f) | 0x80));
    length >>= 7;
  }
  out.push_back(static_cast<char>(length));
  return out + service;
}

bool decode_health_response(const std::string& bytes, std::uint64_t* status) {
  *status = 0;
  std::size_t at = 0;
  // Bounded by the response size: every iteration consumes at least one byte.
  while (at < bytes.size()) {
    const auto tag = static_cast<unsigned char>(bytes[at++]);
    if (tag != 0x08) return false;  // only field 1 (varint) is defined
    std::uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at >= bytes.size()) return false;
      const auto byte = static_cast<unsigned char>(bytes[at++]);
      value |= std::uint64_t{byte & 0x7fu} << shift;
      if ((byte & 0x80) == 0) break;
    }
    *status = value;
  }
  return true;
}

}  // namespace raftlog::client::internal

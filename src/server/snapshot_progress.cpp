#include "server/snapshot_progress.h"

#include <functional>

namespace raftlog::server {

const char* to_string(SnapshotTransfer::State state) {
  switch (state) {
    case SnapshotTransfer::State::kSending:
      return "sending";
    case SnapshotTransfer::State::kSent:
      return "sent";
    case SnapshotTransfer::State::kReceiving:
      return "receiving";
    case SnapshotTransfer::State::kInstalling:
      return "installing";
  }
  return "unknown";
}

namespace {

// The peer's match index on this leader, or nullopt when the node is not the leader or does not
// track the peer.
std::optional<std::uint64_t> match_index(const NodeStatus& status, std::uint64_t peer) {
  if (status.role != raft::Role::kLeader) return std::nullopt;
  for (const PeerStatus& tracked : status.peers) {
    if (tracked.id == peer) return tracked.match_index;
  }
  return std::nullopt;
}

}  // namespace

SnapshotTransfers snapshot_transfers(const NodeStatus& status, const std::vector<PeerStats>& peers,
                                     const SnapshotReceiveStatus& receive,
                                     std::chrono::steady_clock::time_point now) {
  SnapshotTransfers transfers;
  for (const PeerStats& peer : peers) {
    transfers.snapshots_started += peer.snapshots_started;
    transfers.snapshots_sent += peer.snapshots_sent;
    transfers.snapshots_abandoned += peer.snapshots_abandoned;
    transfers.snapshots_resumed += peer.snapshots_resumed;
    transfers.snapshot_bytes_skipped += peer.snapshot_bytes_skipped;
    transfers.snapshot_resume_missed += peer.snapshot_resume_missed;
    transfers.snapshots_continued += peer.snapshots_continued;
    transfers.snapshot_resume_saved_bytes += peer.snapshot_resume_saved_bytes;
    if (!peer.snapshot || peer.snapshot->state == SnapshotSendProgress::State::kAbandoned) continue;
    const SnapshotSendProgress& progress = *peer.snapshot;
    // In flight while we lead and the follower has not acknowledged the snapshot's index, and only
    // when sent in this term: one this node sent in an earlier term of its own leadership (a new
    // leader starts every match at 0) is history, not a transfer.
    const std::optional<std::uint64_t> match = match_index(status, peer.id);
    if (!match || *match >= progress.index || progress.term != status.term) continue;
    transfers.sending.push_back(SnapshotTransfer{
        peer.id, progress.index, progress.term, progress.skipped_bytes + progress.sent_bytes,
        progress.total_bytes,
        progress.state == SnapshotSendProgress::State::kSending ? SnapshotTransfer::State::kSending
                                                                : SnapshotTransfer::State::kSent,
        progress.skipped_bytes,
        progress.resume_missed ? to_string(*progress.resume_missed) : ""});
  }
  transfers.received = receive.counters;
  // The newest term's partial: after a leader change the old leader's is moved to the new sender
  // (which continues it) or dropped, and one at or below the commit index is dropped at once.
  for (const SnapshotReceiveProgress& partial : receive.partials) {
    if (transfers.receiving && transfers.receiving->term >= partial.term) continue;
    transfers.receiving = SnapshotTransfer{
        partial.from,           partial.index,       partial.term,
        partial.received_bytes, partial.total_bytes, SnapshotTransfer::State::kReceiving,
        0,                      ""};
  }
  if (!transfers.receiving && receive.last_delivered && status.role != raft::Role::kLeader &&
      status.commit_index < receive.last_delivered->index &&
      now - receive.last_delivered->at < kSnapshotInstallReportWindow) {
    const SnapshotDelivery& delivered = *receive.last_delivered;
    transfers.receiving =
        SnapshotTransfer{delivered.from,  delivered.index, delivered.term,
                         delivered.bytes, delivered.bytes, SnapshotTransfer::State::kInstalling,
                         0,               ""};
  }
  return transfers;
}

std::function<SnapshotTransfers(const NodeStatus&)> snapshot_transfers_source(
    const PeerTransport* transport) {
  return [transport](const NodeStatus& status) {
    return snapshot_transfers(status, transport->peer_stats(), transport->snapshot_receive_status(),
                              std::chrono::steady_clock::now());
  };
}

std::string snapshot_not_serving_reason(const SnapshotTransfers& transfers) {
  if (!transfers.receiving) return "";
  const SnapshotTransfer& transfer = *transfers.receiving;
  if (transfer.state == SnapshotTransfer::State::kInstalling) {
    return "installing a snapshot of the log up to index " + std::to_string(transfer.index) +
           " from node " + std::to_string(transfer.peer);
  }
  return "receiving a snapshot of the log up to index " + std::to_string(transfer.index) +
         " from node " + std::to_string(transfer.peer) + " (" +
         std::to_string(transfer.bytes_done) + " of " + std::to_string(transfer.bytes_total) +
         " bytes)";
}

}  // namespace raftlog::server

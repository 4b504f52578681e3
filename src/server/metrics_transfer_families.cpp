// The families of snapshot transfers and of the peers (metrics_families.h; their meaning:
// docs/metrics.md).
#include <string>

#include "server/metrics_families.h"

namespace raftlog::server::metrics {

namespace {

// The snapshot this follower receives or installs: its figures, 0 when there is none.
template <std::uint64_t SnapshotTransfer::*Member>
double receiving(const SnapshotTransfers& transfers) {
  return transfers.receiving ? static_cast<double>((*transfers.receiving).*Member) : 0;
}

bool installing(const SnapshotTransfers& transfers) {
  return transfers.receiving && transfers.receiving->state == SnapshotTransfer::State::kInstalling;
}

// A field of a peer's status.
template <auto Member>
double peer_status(const PeerMetrics::Peer& peer) {
  return static_cast<double>(peer.status.*Member);
}

// The snapshot in flight to a peer: its figures, 0 when there is none.
template <std::uint64_t SnapshotTransfer::*Member>
double in_flight(const PeerMetrics::Peer& peer) {
  return peer.snapshot ? static_cast<double>(peer.snapshot->*Member) : 0;
}

}  // namespace

SnapshotMetrics::SnapshotMetrics(FamilyBuilder& builder) {
  transfers_.add_gauges(
      builder,
      {{"raftlog_node_snapshot_receiving",
        "1 while this follower receives its leader's snapshot in chunks (NOT_SERVING).",
        [](const SnapshotTransfers& transfers) {
          return transfers.receiving && !installing(transfers) ? 1.0 : 0.0;
        }},
       {"raftlog_node_snapshot_installing",
        "1 while this follower has its leader's snapshot whole and not yet installed "
        "(NOT_SERVING).",
        [](const SnapshotTransfers& transfers) { return installing(transfers) ? 1.0 : 0.0; }},
       {"raftlog_node_snapshot_index",
        "Index of the snapshot being received or installed (0 = none).",
        &receiving<&SnapshotTransfer::index>},
       {"raftlog_node_snapshot_received_bytes",
        "Bytes of the snapshot being received that arrived so far.",
        &receiving<&SnapshotTransfer::bytes_done>},
       {"raftlog_node_snapshot_total_bytes",
        "Size of the snapshot being received or installed (0 = none).",
        &receiving<&SnapshotTransfer::bytes_total>}});
  // The transport's totals only grow: the counters follow them.
  transfers_.add_totals(
      builder,
      {{"raftlog_snapshots_sent_total",
        "Snapshots sent (whole, or every chunk) to a peer's stream.",
        &field<&SnapshotTransfers::snapshots_sent>},
       {"raftlog_snapshots_abandoned_total",
        "Snapshots whose chunked sending stopped: a chunk dropped, or a newer snapshot replaced "
        "it.",
        &field<&SnapshotTransfers::snapshots_abandoned>}});
  status_.add_totals(
      builder,
      {{"raftlog_snapshots_above_first_index_total",
        "Snapshots this leader sent above its first index - 1 (the follower's log starts above "
        "the leader's: its state at its first index - 1 not known, after an older binary's trim "
        "or a lost SNAPSHOT).",
        &field<&NodeStatus::snapshots_above_first_index>}});
  transfers_.add_totals(
      builder,
      {{"raftlog_snapshots_received_total",
        "Whole snapshots handed to the Raft core (chunked or not).",
        [](const SnapshotTransfers& transfers) {
          return static_cast<double>(transfers.received.snapshots_delivered);
        }},
       {"raftlog_snapshot_chunks_refused_total",
        "Snapshot chunks refused (stale, past the partial's end, mismatched, or completing a "
        "snapshot whose CRC-32C did not match); a gap keeps the sender's partial.",
        [](const SnapshotTransfers& transfers) {
          return static_cast<double>(transfers.received.chunks_refused +
                                     transfers.received.checksum_mismatches);
        }}});
  status_.add_totals(
      builder,
      {{"raftlog_snapshot_encodes_total", "Snapshot data this leader encoded for a send.",
        &field<&NodeStatus::snapshot_encodes>},
       {"raftlog_snapshot_encodings_reused_total",
        "Snapshot sends that reused this leader's last encoding (a retry, or another follower at "
        "the same point).",
        &field<&NodeStatus::snapshot_encodings_reused>}});
  status_.add_gauges(
      builder,
      {{"raftlog_snapshot_encoding_in_flight",
        "1 while this leader gathers or encodes (off the Raft loop) a snapshot's data.",
        &field<&NodeStatus::snapshot_encoding_in_flight>},
       {"raftlog_snapshot_last_encoding_seconds",
        "How long this leader's last snapshot encoding (and CRC) took on its worker.",
        [](const NodeStatus& status) {
          return std::chrono::duration<double>(status.snapshot_last_encoding_duration).count();
        }}});
  status_.add_totals(
      builder, {{"raftlog_snapshot_sends_dropped_total",
                 "Snapshot sends dropped while they waited for an encoding (a trim, an install or "
                 "a loss of leadership overtook it, or another point's was in flight).",
                 &field<&NodeStatus::snapshot_sends_dropped>},
                {"raftlog_snapshot_install_write_failures_total",
                 "Received snapshots whose preparation could not write SNAPSHOT.install (a full "
                 "disk): the old state is kept and the leader sends the snapshot again.",
                 &field<&NodeStatus::snapshot_install_write_failures>}});
  status_.add_gauges(
      builder,
      {{"raftlog_snapshot_install_preparing",
        "1 while this follower prepares a received snapshot off the Raft loop.",
        &field<&NodeStatus::snapshot_install_preparing>},
       {"raftlog_snapshot_last_install_loop_seconds",
        "How long this follower's last snapshot install held its Raft loop (the rename, the log "
        "reset, CONFSTATE, TOPICSTATE, the tables moved in).",
        [](const NodeStatus& status) {
          return std::chrono::duration<double>(status.snapshot_last_install_on_loop).count();
        }}});
  transfers_.add_totals(
      builder,
      {{"raftlog_snapshots_resumed_total",
        "Chunked snapshots this leader started at a follower's receipt instead of offset 0.",
        &field<&SnapshotTransfers::snapshots_resumed>},
       {"raftlog_snapshot_bytes_skipped_total",
        "Snapshot data bytes resumed transfers did not resend.",
        &field<&SnapshotTransfers::snapshot_bytes_skipped>},
       {"raftlog_snapshot_partials_continued_total",
        "Partial snapshots this follower kept because a new leader continued them with the same "
        "data.",
        [](const SnapshotTransfers& transfers) {
          return static_cast<double>(transfers.received.partials_continued);
        }},
       {"raftlog_snapshot_partial_bytes_restored_total",
        "Snapshot data bytes this follower restored at start from the partial it kept on disk "
        "(SNAPSHOT.partial): its leader resumes after them.",
        [](const SnapshotTransfers& transfers) {
          return static_cast<double>(transfers.received.bytes_restored);
        }},
       {"raftlog_snapshot_partial_files_dropped_total",
        "SNAPSHOT.partial files dropped at start (unreadable, another cluster's or node's, above "
        "the receive bound) or removed after a failed write.",
        [](const SnapshotTransfers& transfers) {
          return static_cast<double>(transfers.received.partial_files_dropped +
                                     transfers.received.partial_file_write_failures);
        }},
       {"raftlog_snapshots_continued_total",
        "Continuations this leader sent: its snapshot data after a follower's splice point (the "
        "follower's partial of another leader's data at the same point), instead of the whole data.",
        &field<&SnapshotTransfers::snapshots_continued>},
       {"raftlog_snapshot_resume_saved_bytes_total",
        "Snapshot data bytes continuations did not send: the followers' partials they continued.",
        &field<&SnapshotTransfers::snapshot_resume_saved_bytes>},
       {"raftlog_snapshot_partials_spliced_total",
        "Partial snapshots this follower cut at a new leader's splice point and continued with its "
        "continuation.",
        [](const SnapshotTransfers& transfers) {
          return static_cast<double>(transfers.received.partials_spliced);
        }},
       {"raftlog_snapshot_splices_refused_total",
        "Continuations this follower refused (its partial did not match their splice point): the "
        "partial is dropped and the leader starts again at 0.",
        [](const SnapshotTransfers& transfers) {
          return static_cast<double>(transfers.received.splices_refused);
        }}});
  prometheus::Family<Counter>& missed = builder.counters(
      "raftlog_snapshot_resume_missed_total",
      "Chunked snapshots this leader started at offset 0 although the follower's receipt named a "
      "partial it holds, by why it could not resume: point (another snapshot point), bytes (the "
      "same point, other data, no splice point named), beyond_sent (more than this leader sent of "
      "it), head (a splice point under another head), continuation (no continuation could be "
      "cut).");
  for (std::size_t reason = 0; reason < kResumeMissReasons; ++reason) {
    resume_missed_[reason] =
        &missed.Add({{"reason", to_string(static_cast<ResumeMiss>(reason))}});
  }
}

void SnapshotMetrics::refresh(const NodeStatus& status, const SnapshotTransfers& transfers) const {
  transfers_.refresh(transfers);
  status_.refresh(status);
  for (std::size_t reason = 0; reason < kResumeMissReasons; ++reason) {
    follow_total(*resume_missed_[reason],
                 static_cast<double>(transfers.snapshot_resume_missed.by_reason[reason]));
  }
}

PeerMetrics::PeerMetrics(FamilyBuilder& builder) {
  const std::initializer_list<Reading<Peer>> peer_gauges = {
      {"raftlog_peer_match_index", "Highest index known replicated on the peer.",
       &peer_status<&PeerStatus::match_index>},
      {"raftlog_peer_lag_entries", "Leader's last index minus the peer's match index.",
       &peer_status<&PeerStatus::lag_entries>},
      {"raftlog_peer_lag_bytes", "Log bytes after the peer's match index.",
       &peer_status<&PeerStatus::lag_bytes>},
      {"raftlog_peer_inflight_messages", "Append messages sent and not yet acknowledged.",
       &peer_status<&PeerStatus::inflight_messages>},
      {"raftlog_peer_inflight_bytes", "Entry bytes of the append messages not yet acknowledged.",
       &peer_status<&PeerStatus::inflight_bytes>},
      {"raftlog_peer_last_contact_seconds", "Seconds since the leader last heard from the peer.",
       [](const Peer& peer) { return static_cast<double>(peer.status.last_contact_ms) / 1000.0; }},
      {"raftlog_peer_behind_first_index",
       "1 when the peer needs entries the leader no longer holds (a snapshot catches it up).",
       [](const Peer& peer) { return peer.status.behind_first_index ? 1.0 : 0.0; }},
      {"raftlog_peer_snapshot_index", "Index of the snapshot in flight to the peer (0 = none).",
       &in_flight<&SnapshotTransfer::index>},
      {"raftlog_peer_snapshot_sent_bytes",
       "Bytes of the snapshot in flight to the peer sent so far.",
       &in_flight<&SnapshotTransfer::bytes_done>},
      {"raftlog_peer_snapshot_total_bytes",
       "Size of the snapshot in flight to the peer (0 = none).",
       &in_flight<&SnapshotTransfer::bytes_total>}};
  for (const Reading<Peer>& row : peer_gauges)
    families_.emplace_back(&builder.gauges(row.name, row.help), row.value);
  admission_.add_gauges(
      builder, {{"raftlog_peer_unconfigured_peers",
                 "Nodes in none of this node's configurations admitted on the peer port now "
                 "(authenticated for this cluster).",
                 &field<&InboundStats::unconfigured_peers>}});
  admission_.add_totals(
      builder, {{"raftlog_peer_unconfigured_admitted_total",
                 "Nodes in none of this node's configurations admitted on the peer port.",
                 &field<&InboundStats::admitted_unconfigured_peers>},
                {"raftlog_peer_unconfigured_refused_total",
                 "Peer streams of nodes in none of this node's configurations refused (no or a bad "
                 "advertised address, the bound full).",
                 &field<&InboundStats::refused_unconfigured_streams>},
                {"raftlog_peer_unconfigured_forgotten_total",
                 "Admitted unconfigured peers forgotten after being idle.",
                 &field<&InboundStats::forgotten_unconfigured_peers>}});
  prometheus::Family<Counter>& queue_full = builder.counters(
      "raftlog_peer_queue_full_drops_total",
      "Messages to peers dropped because their lane's outbound queue was full, by lane.");
  queue_full_control_ = &queue_full.Add({{"lane", "control"}});
  queue_full_append_ = &queue_full.Add({{"lane", "append"}});
}

void PeerMetrics::refresh_outbound(const OutboundTotals& totals) const {
  follow_total(*queue_full_control_, static_cast<double>(totals.dropped_queue_full_control));
  follow_total(*queue_full_append_, static_cast<double>(totals.dropped_queue_full_append));
}

void PeerMetrics::refresh(const NodeStatus& status, const SnapshotTransfers& transfers) const {
  // Peer series exist only on the leader (a follower does not know its peers' progress).
  std::set<std::string> current;
  for (const PeerStatus& peer_status : status.peers) {
    const std::string id = std::to_string(peer_status.id);
    current.insert(id);
    Peer peer{peer_status, nullptr};
    for (const SnapshotTransfer& sending : transfers.sending) {
      if (sending.peer == peer_status.id) peer.snapshot = &sending;
    }
    const prometheus::Labels labels{{"peer", id}};
    for (const auto& [family, value] : families_) family->Add(labels).Set(value(peer));
  }
  for (const std::string& id : exported_peers_) {
    if (current.contains(id)) continue;
    const prometheus::Labels labels{{"peer", id}};
    for (const auto& [family, value] : families_) family->Remove(&family->Add(labels));
  }
  exported_peers_ = std::move(current);
}

}  // namespace raftlog::server::metrics

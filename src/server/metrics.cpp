#include "server/metrics.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_interceptor.h>
#include <malloc.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <spdlog/spdlog.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <array>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "api_errors/error_details.h"
#include "raftlog/v1/client.pb.h"
#include "util/build_info.h"
#include "util/host_port.h"

namespace raftlog::server {

namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Counter;
using prometheus::Gauge;
using prometheus::Histogram;

double seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// Exponential bucket bounds: start, start*factor, ... (count bounds).
Histogram::BucketBoundaries exponential(double start, double factor, int count) {
  Histogram::BucketBoundaries bounds;
  double bound = start;
  for (int i = 0; i < count; ++i, bound *= factor) bounds.push_back(bound);
  return bounds;
}

const char* code_name(grpc::StatusCode code) {
  static constexpr std::array<const char*, 17> kNames = {"OK",
                                                         "CANCELLED",
                                                         "UNKNOWN",
                                                         "INVALID_ARGUMENT",
                                                         "DEADLINE_EXCEEDED",
                                                         "NOT_FOUND",
                                                         "ALREADY_EXISTS",
                                                         "PERMISSION_DENIED",
                                                         "RESOURCE_EXHAUSTED",
                                                         "FAILED_PRECONDITION",
                                                         "ABORTED",
                                                         "OUT_OF_RANGE",
                                                         "UNIMPLEMENTED",
                                                         "INTERNAL",
                                                         "UNAVAILABLE",
                                                         "DATA_LOSS",
                                                         "UNAUTHENTICATED"};
  const auto index = static_cast<std::size_t>(code);
  return index < kNames.size() ? kNames[index] : "UNKNOWN";
}

const char* role_name(raft::Role role) {
  switch (role) {
    case raft::Role::kFollower:
      return "follower";
    case raft::Role::kPreCandidate:
      return "pre_candidate";
    case raft::Role::kCandidate:
      return "candidate";
    case raft::Role::kLeader:
      return "leader";
  }
  return "unknown";
}

constexpr std::array<raft::Role, 4> kRoles = {raft::Role::kFollower, raft::Role::kPreCandidate,
                                              raft::Role::kCandidate, raft::Role::kLeader};
constexpr std::array<store::RecoveryMode, 3> kRecoveryModes = {
    store::RecoveryMode::kFresh, store::RecoveryMode::kNormal, store::RecoveryMode::kAbnormal};

// Process figures from /proc/self (prometheus-cpp exports none of its own).
struct ProcessSample {
  double cpu_seconds = 0;
  double resident_bytes = 0;
  double anonymous_bytes =
      0;  // resident minus file-backed pages (the mapped segments are file-backed)
  double heap_in_use_bytes = 0;
  double heap_free_bytes = 0;
};
ProcessSample sample_process() {
  ProcessSample sample;
  std::ifstream stat("/proc/self/stat");
  std::string line;
  if (std::getline(stat, line)) {
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    const auto close = line.rfind(')');
    if (close != std::string::npos) {
      std::istringstream rest(line.substr(close + 2));
      std::string field;
      double utime = 0, stime = 0;
      for (int i = 3; i <= 15 && rest >> field; ++i) {
        if (i == 14) utime = std::stod(field);
        if (i == 15) stime = std::stod(field);
      }
      sample.cpu_seconds = (utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
    }
  }
  std::ifstream statm("/proc/self/statm");
  double size_pages = 0, resident_pages = 0, shared_pages = 0;
  if (statm >> size_pages >> resident_pages >> shared_pages) {
    const auto page_bytes = static_cast<double>(::sysconf(_SC_PAGESIZE));
    sample.resident_bytes = resident_pages * page_bytes;
    sample.anonymous_bytes = std::max(0.0, resident_pages - shared_pages) * page_bytes;
  }
  // glibc's view of the heap: what the program holds (small chunks in the arenas plus chunks it
  // mmapped on its own), and what the arenas keep free for reuse. Growing anonymous memory with a
  // flat in-use figure is the allocator keeping memory, not a leak (docs/operations.md). mallinfo2()
  // walks every arena under its lock; a scrape every few seconds costs microseconds.
  const struct mallinfo2 heap = ::mallinfo2();
  sample.heap_in_use_bytes = static_cast<double>(heap.uordblks + heap.hblkhd);
  sample.heap_free_bytes = static_cast<double>(heap.fordblks);
  return sample;
}

}  // namespace

class Metrics::Impl final : public prometheus::Collectable {
 public:
  Impl(std::uint64_t node_id, std::string data_dir)
      : data_dir_(std::move(data_dir)), registry_(std::make_shared<prometheus::Registry>()) {
    const prometheus::Labels node{{"node_id", std::to_string(node_id)}};
    auto& r = *registry_;
    auto gauge = [&](const char* name, const char* help) -> Gauge& {
      return BuildGauge().Name(name).Help(help).Labels(node).Register(r).Add({});
    };
    auto counter = [&](const char* name, const char* help) -> Counter& {
      return BuildCounter().Name(name).Help(help).Labels(node).Register(r).Add({});
    };
    auto histogram = [&](const char* name, const char* help,
                         Histogram::BucketBoundaries buckets) -> Histogram& {
      return BuildHistogram().Name(name).Help(help).Labels(node).Register(r).Add(
          {}, std::move(buckets));
    };
    // The usual Prometheus build-info idiom: a constant 1 whose labels say what is running, so a
    // dashboard or an upgrade check can group nodes by version (`count by (version)`).
    BuildGauge()
        .Name("raftlog_build_info")
        .Help("Always 1; the labels name the raftlogd version and git revision.")
        .Labels(node)
        .Register(r)
        .Add({{"version", std::string(util::build_version())},
              {"revision", std::string(util::build_revision())}})
        .Set(1);
    term_ = &gauge("raftlog_raft_term", "Current Raft term.");
    is_leader_ = &gauge("raftlog_raft_is_leader", "1 on the leader, 0 elsewhere.");
    auto& roles = BuildGauge()
                      .Name("raftlog_raft_role")
                      .Help("1 for the node's current role.")
                      .Labels(node)
                      .Register(r);
    for (raft::Role role : kRoles)
      role_[static_cast<std::size_t>(role)] = &roles.Add({{"role", role_name(role)}});
    leader_id_ =
        &gauge("raftlog_raft_leader_id", "Raft id of the known leader, 0 when none is known.");
    leader_changes_ =
        &counter("raftlog_raft_leader_changes_total", "Times this node saw the leader change.");
    auto& elections = BuildCounter()
                          .Name("raftlog_raft_elections_total")
                          .Help("Elections this node ran as a candidate, by outcome.")
                          .Labels(node)
                          .Register(r);
    elections_won_ = &elections.Add({{"outcome", "won"}});
    elections_lost_ = &elections.Add({{"outcome", "lost"}});
    first_index_ = &gauge("raftlog_raft_first_index", "First retained log index.");
    last_index_ = &gauge("raftlog_raft_last_index", "Last log index (written, maybe uncommitted).");
    commit_index_ = &gauge("raftlog_raft_commit_index", "Highest index known committed.");

    append_requests_ =
        &counter("raftlog_append_requests_total", "Append calls accepted into Raft by the leader.");
    appended_entries_ = &counter("raftlog_appended_entries_total",
                                 "Client entries committed and acknowledged by this leader.");
    appended_bytes_ = &counter("raftlog_appended_bytes_total", "Payload bytes of those entries.");
    commit_latency_ =
        &histogram("raftlog_commit_latency_seconds",
                   "Leader: from proposal to the append being acknowledged as committed.",
                   exponential(0.0005, 2, 15));
    rejected_ =
        &BuildCounter()
             .Name("raftlog_rejected_requests_total")
             .Help("Client requests answered with an error carrying a reason word, by reason.")
             .Labels(node)
             .Register(r);

    auto peer_gauge = [&](const char* name, const char* help) -> prometheus::Family<Gauge>* {
      return &BuildGauge().Name(name).Help(help).Labels(node).Register(r);
    };
    peer_match_ =
        peer_gauge("raftlog_peer_match_index", "Highest index known replicated on the peer.");
    peer_lag_entries_ =
        peer_gauge("raftlog_peer_lag_entries", "Leader's last index minus the peer's match index.");
    peer_lag_bytes_ =
        peer_gauge("raftlog_peer_lag_bytes", "Log bytes after the peer's match index.");
    peer_inflight_ = peer_gauge("raftlog_peer_inflight_messages",
                                "Append messages sent and not yet acknowledged.");
    peer_inflight_bytes_ = peer_gauge("raftlog_peer_inflight_bytes",
                                      "Entry bytes of the append messages not yet acknowledged.");
    peer_last_contact_ = peer_gauge("raftlog_peer_last_contact_seconds",
                                    "Seconds since the leader last heard from the peer.");
    peer_behind_ = peer_gauge(
        "raftlog_peer_behind_first_index",
        "1 when the peer needs entries the leader no longer holds (a snapshot catches it up).");
    peer_snapshot_index_ = peer_gauge("raftlog_peer_snapshot_index",
                                      "Index of the snapshot in flight to the peer (0 = none).");
    peer_snapshot_sent_ = peer_gauge("raftlog_peer_snapshot_sent_bytes",
                                     "Bytes of the snapshot in flight to the peer sent so far.");
    peer_snapshot_total_ = peer_gauge("raftlog_peer_snapshot_total_bytes",
                                      "Size of the snapshot in flight to the peer (0 = none).");
    snapshot_receiving_ =
        &gauge("raftlog_node_snapshot_receiving",
               "1 while this follower receives its leader's snapshot in chunks (NOT_SERVING).");
    snapshot_installing_ = &gauge("raftlog_node_snapshot_installing",
                                  "1 while this follower has its leader's snapshot whole and not "
                                  "yet installed (NOT_SERVING).");
    snapshot_index_ = &gauge("raftlog_node_snapshot_index",
                             "Index of the snapshot being received or installed (0 = none).");
    snapshot_received_ = &gauge("raftlog_node_snapshot_received_bytes",
                                "Bytes of the snapshot being received that arrived so far.");
    snapshot_total_ = &gauge("raftlog_node_snapshot_total_bytes",
                             "Size of the snapshot being received or installed (0 = none).");
    unconfigured_peers_ = &gauge("raftlog_peer_unconfigured_peers",
                                 "Nodes in none of this node's configurations admitted on the peer "
                                 "port now (authenticated for this cluster).");
    unconfigured_admitted_ = &counter("raftlog_peer_unconfigured_admitted_total",
                                      "Nodes in none of this node's configurations admitted on the "
                                      "peer port.");
    unconfigured_refused_ = &counter("raftlog_peer_unconfigured_refused_total",
                                     "Peer streams of nodes in none of this node's configurations "
                                     "refused (no or a bad advertised address, the bound full).");
    unconfigured_forgotten_ = &counter("raftlog_peer_unconfigured_forgotten_total",
                                       "Admitted unconfigured peers forgotten after being idle.");
    snapshots_sent_ = &counter("raftlog_snapshots_sent_total",
                               "Snapshots sent (whole, or every chunk) to a peer's stream.");
    snapshots_abandoned_ = &counter("raftlog_snapshots_abandoned_total",
                                    "Snapshots whose chunked sending stopped: a chunk dropped, or "
                                    "a newer snapshot replaced it.");
    snapshots_above_first_ =
        &counter("raftlog_snapshots_above_first_index_total",
                 "Snapshots this leader sent above its first index - 1 (the follower's log starts "
                 "above the leader's: its state at its first index - 1 not known, after an older "
                 "binary's trim or a lost SNAPSHOT).");
    snapshots_received_ = &counter("raftlog_snapshots_received_total",
                                   "Whole snapshots handed to the Raft core (chunked or not).");
    snapshot_chunks_refused_ = &counter(
        "raftlog_snapshot_chunks_refused_total",
        "Snapshot chunks refused (stale, past the partial's end, mismatched, or completing a "
        "snapshot whose CRC-32C did not match); a gap keeps the sender's partial.");
    snapshot_encodes_ =
        &counter("raftlog_snapshot_encodes_total", "Snapshot data this leader encoded for a send.");
    snapshot_encodings_reused_ =
        &counter("raftlog_snapshot_encodings_reused_total",
                 "Snapshot sends that reused this leader's last encoding (a retry, or another "
                 "follower at the same point).");
    snapshot_encoding_in_flight_ =
        &gauge("raftlog_snapshot_encoding_in_flight",
               "1 while this leader gathers or encodes (off the Raft loop) a snapshot's data.");
    snapshot_last_encoding_seconds_ =
        &gauge("raftlog_snapshot_last_encoding_seconds",
               "How long this leader's last snapshot encoding (and CRC) took on its worker.");
    snapshot_sends_dropped_ =
        &counter("raftlog_snapshot_sends_dropped_total",
                 "Snapshot sends dropped while they waited for an encoding (a trim, an install or "
                 "a loss of leadership overtook it, or another point's was in flight).");
    snapshots_resumed_ = &counter("raftlog_snapshots_resumed_total",
                                  "Chunked snapshots this leader started at a follower's receipt "
                                  "instead of offset 0.");
    snapshot_bytes_skipped_ = &counter("raftlog_snapshot_bytes_skipped_total",
                                       "Snapshot data bytes resumed transfers did not resend.");
    snapshot_partials_continued_ =
        &counter("raftlog_snapshot_partials_continued_total",
                 "Partial snapshots this follower kept because a new leader continued them with "
                 "the same data.");
    snapshot_bytes_restored_ =
        &counter("raftlog_snapshot_partial_bytes_restored_total",
                 "Snapshot data bytes this follower restored at start from the partial it kept on "
                 "disk (SNAPSHOT.partial): its leader resumes after them.");
    snapshot_partial_files_dropped_ =
        &counter("raftlog_snapshot_partial_files_dropped_total",
                 "SNAPSHOT.partial files dropped at start (unreadable, another cluster's or "
                 "node's, above the receive bound) or removed after a failed write.");

    loop_round_ = &histogram("raftlog_raft_loop_round_seconds",
                             "Duration of one round of the Raft loop (ticks and heartbeats wait "
                             "behind it).",
                             exponential(0.0005, 2, 14));
    fsync_ = &histogram("raftlog_store_fsync_duration_seconds",
                        "Duration of one flush cycle's sync calls.", exponential(0.0001, 2, 16));
    group_commit_ = &histogram("raftlog_store_group_commit_entries",
                               "Entries made durable by one flush cycle.", exponential(1, 2, 14));
    written_index_ = &gauge("raftlog_store_written_index", "Last entry written to the segment.");
    flushed_index_ = &gauge("raftlog_store_flushed_index", "Last entry known durable.");
    catching_up_ = &gauge(
        "raftlog_node_catching_up",
        "1 while the node catches up after a storage fault (no votes, not counted for commit).");
    stranded_ = &gauge("raftlog_node_stranded",
                       "1 while this follower needs entries its leader no longer holds (until its "
                       "snapshot arrives).");
    corrupt_index_ = &gauge("raftlog_store_corrupt_index",
                            "First entry found corrupt by the scrub or a read (0 = none).");
    scrub_bytes_ = &gauge("raftlog_store_scrub_verified_bytes",
                          "Durable bytes the background scrub verified.");
    scrub_passes_ =
        &gauge("raftlog_store_scrub_passes", "Completed scrub passes over the durable log.");
    segments_ = &gauge("raftlog_store_segments", "Data segment files on disk.");
    derived_lag_ = &gauge("raftlog_derived_lag_entries",
                          "Committed entries the derived indexes (topics, keys, time) lack yet.");
    groups_applied_ =
        &gauge("raftlog_groups_applied_index", "Last log index the consumer group table applied.");
    groups_hold_ = &gauge("raftlog_groups_retention_hold_index",
                          "Retention keeps entries from this index for the consumer group table "
                          "(0 = no hold).");
    groups_bad_ = &gauge("raftlog_groups_bad_commits",
                         "Group-commit entries the group table could not decode, since start.");
    groups_refused_ = &gauge("raftlog_groups_refused_commits",
                             "Group commits past the table's stored bounds, since start.");
    derived_stopped_ =
        &gauge("raftlog_derived_stopped",
               "1 when the derived indexes stopped on an error (see the node's log).");
    disk_bytes_ = &gauge("raftlog_store_disk_bytes", "Bytes of segment and index files on disk.");
    disk_free_ratio_ = &gauge("raftlog_store_disk_free_ratio",
                              "Free space of the data directory's file system, 0..1.");
    watermark_ = &gauge("raftlog_store_disk_watermark_exceeded",
                        "1 while appends are refused because disk use passed the high watermark.");
    segments_deleted_ =
        &counter("raftlog_store_segments_deleted_total", "Segments removed by retention or trim.");
    recovery_duration_ =
        &gauge("raftlog_store_recovery_duration_seconds", "How long the start-up recovery took.");
    auto& modes = BuildGauge()
                      .Name("raftlog_store_recovery_mode")
                      .Help("1 for the mode the last start-up used.")
                      .Labels(node)
                      .Register(r);
    for (store::RecoveryMode mode : kRecoveryModes) {
      recovery_mode_[static_cast<std::size_t>(mode)] =
          &modes.Add({{"mode", store::to_string(mode)}});
    }

    grpc_requests_ = &BuildCounter()
                          .Name("raftlog_grpc_requests_total")
                          .Help("Finished client RPCs by method and status code.")
                          .Labels(node)
                          .Register(r);
    grpc_duration_ = &BuildHistogram()
                          .Name("raftlog_grpc_request_duration_seconds")
                          .Help("Client RPC latency (streams: their lifetime).")
                          .Labels(node)
                          .Register(r);

    resident_ =
        &gauge("raftlog_process_resident_memory_bytes", "Resident memory of the raftlogd process.");
    anonymous_ =
        &gauge("raftlog_process_anonymous_memory_bytes",
               "Resident memory that is not file-backed (heap, stacks; not the mapped segments).");
    heap_in_use_ = &gauge("raftlog_process_heap_in_use_bytes",
                          "Heap bytes the process holds (glibc mallinfo2).");
    heap_free_ = &gauge("raftlog_process_heap_free_bytes",
                        "Free heap bytes glibc's arenas keep for reuse (mallinfo2 fordblks).");
    cpu_ = &counter("raftlog_process_cpu_seconds_total",
                    "User and system CPU time of the raftlogd process.");
  }

  std::vector<prometheus::MetricFamily> Collect() const override {
    refresh();
    return registry_->Collect();
  }

  void record_rpc(const std::string& method, grpc::StatusCode code, double latency_seconds,
                  const std::string& reason) {
    grpc_requests_->Add({{"method", method}, {"code", code_name(code)}}).Increment();
    grpc_duration_->Add({{"method", method}}, rpc_latency_buckets_).Observe(latency_seconds);
    if (!reason.empty()) rejected_->Add({{"reason", reason}}).Increment();
  }

  void refresh() const {
    std::lock_guard lock(source_mu_);
    const ProcessSample process = sample_process();
    resident_->Set(process.resident_bytes);
    anonymous_->Set(process.anonymous_bytes);
    heap_in_use_->Set(process.heap_in_use_bytes);
    heap_free_->Set(process.heap_free_bytes);
    if (process.cpu_seconds > cpu_->Value()) cpu_->Increment(process.cpu_seconds - cpu_->Value());
    struct statvfs fs {};
    if (::statvfs(data_dir_.c_str(), &fs) == 0 && fs.f_blocks > 0) {
      disk_free_ratio_->Set(static_cast<double>(fs.f_bavail) / static_cast<double>(fs.f_blocks));
    }
    if (watermark_source_) watermark_->Set(watermark_source_() ? 1 : 0);
    if (admission_source_) refresh_admission(admission_source_());
    if (!status_source_) return;
    const NodeStatus status = status_source_();
    term_->Set(static_cast<double>(status.term));
    is_leader_->Set(status.role == raft::Role::kLeader ? 1 : 0);
    for (raft::Role role : kRoles)
      role_[static_cast<std::size_t>(role)]->Set(status.role == role ? 1 : 0);
    leader_id_->Set(static_cast<double>(status.leader_id));
    first_index_->Set(static_cast<double>(status.first_index));
    last_index_->Set(static_cast<double>(status.last_index));
    commit_index_->Set(static_cast<double>(status.commit_index));
    written_index_->Set(static_cast<double>(status.last_index));
    flushed_index_->Set(static_cast<double>(status.flushed_index));
    catching_up_->Set(status.catching_up ? 1 : 0);
    stranded_->Set(status.stranded_below_index != 0 ? 1 : 0);
    corrupt_index_->Set(static_cast<double>(status.corrupt_index));
    scrub_bytes_->Set(static_cast<double>(status.scrub_bytes_verified));
    scrub_passes_->Set(static_cast<double>(status.scrub_passes));
    segments_->Set(static_cast<double>(status.store_segments));
    derived_lag_->Set(static_cast<double>(status.derived_lag_entries));
    derived_stopped_->Set(status.derived_problem.empty() ? 0 : 1);
    groups_applied_->Set(static_cast<double>(status.groups_applied_through));
    groups_hold_->Set(static_cast<double>(status.groups_retention_hold));
    groups_bad_->Set(static_cast<double>(status.groups_bad_commits));
    groups_refused_->Set(static_cast<double>(status.groups_refused_commits));
    disk_bytes_->Set(static_cast<double>(status.store_disk_bytes));
    recovery_duration_->Set(std::chrono::duration<double>(status.recovery_duration).count());
    for (store::RecoveryMode mode : kRecoveryModes) {
      recovery_mode_[static_cast<std::size_t>(mode)]->Set(status.recovery_mode == mode ? 1 : 0);
    }
    const SnapshotTransfers transfers =
        snapshot_source_ ? snapshot_source_(status) : SnapshotTransfers{};
    refresh_snapshots(transfers);
    if (const double above = static_cast<double>(status.snapshots_above_first_index);
        above > snapshots_above_first_->Value()) {
      snapshots_above_first_->Increment(above - snapshots_above_first_->Value());
    }
    follow_total(snapshot_encodes_, status.snapshot_encodes);
    follow_total(snapshot_encodings_reused_, status.snapshot_encodings_reused);
    follow_total(snapshot_sends_dropped_, status.snapshot_sends_dropped);
    snapshot_encoding_in_flight_->Set(status.snapshot_encoding_in_flight ? 1 : 0);
    snapshot_last_encoding_seconds_->Set(
        std::chrono::duration<double>(status.snapshot_last_encoding_duration).count());
    // Peer series exist only on the leader (a follower does not know its peers' progress).
    std::set<std::string> current;
    for (const PeerStatus& peer : status.peers) {
      const std::string id = std::to_string(peer.id);
      current.insert(id);
      const prometheus::Labels labels{{"peer", id}};
      peer_match_->Add(labels).Set(static_cast<double>(peer.match_index));
      peer_lag_entries_->Add(labels).Set(static_cast<double>(peer.lag_entries));
      peer_lag_bytes_->Add(labels).Set(static_cast<double>(peer.lag_bytes));
      peer_inflight_->Add(labels).Set(static_cast<double>(peer.inflight_messages));
      peer_inflight_bytes_->Add(labels).Set(static_cast<double>(peer.inflight_bytes));
      peer_last_contact_->Add(labels).Set(static_cast<double>(peer.last_contact_ms) / 1000.0);
      peer_behind_->Add(labels).Set(peer.behind_first_index ? 1 : 0);
      const SnapshotTransfer* in_flight = nullptr;
      for (const SnapshotTransfer& sending : transfers.sending) {
        if (sending.peer == peer.id) in_flight = &sending;
      }
      peer_snapshot_index_->Add(labels).Set(in_flight ? static_cast<double>(in_flight->index) : 0);
      peer_snapshot_sent_->Add(labels).Set(in_flight ? static_cast<double>(in_flight->bytes_done)
                                                     : 0);
      peer_snapshot_total_->Add(labels).Set(in_flight ? static_cast<double>(in_flight->bytes_total)
                                                      : 0);
    }
    for (const std::string& id : exported_peers_) {
      if (current.contains(id)) continue;
      const prometheus::Labels labels{{"peer", id}};
      for (auto* family : {peer_match_, peer_lag_entries_, peer_lag_bytes_, peer_inflight_,
                           peer_inflight_bytes_, peer_last_contact_, peer_behind_,
                           peer_snapshot_index_, peer_snapshot_sent_, peer_snapshot_total_}) {
        family->Remove(&family->Add(labels));
      }
    }
    exported_peers_ = std::move(current);
  }

  void refresh_admission(const InboundStats& stats) const {
    unconfigured_peers_->Set(static_cast<double>(stats.unconfigured_peers));
    follow_total(unconfigured_admitted_, stats.admitted_unconfigured_peers);
    follow_total(unconfigured_refused_, stats.refused_unconfigured_streams);
    follow_total(unconfigured_forgotten_, stats.forgotten_unconfigured_peers);
  }

  // A counter that follows a total which only grows.
  static void follow_total(Counter* counter, std::uint64_t total) {
    const double value = static_cast<double>(total);
    if (value > counter->Value()) counter->Increment(value - counter->Value());
  }

  void refresh_snapshots(const SnapshotTransfers& transfers) const {
    const std::optional<SnapshotTransfer>& receiving = transfers.receiving;
    const bool installing = receiving && receiving->state == SnapshotTransfer::State::kInstalling;
    snapshot_receiving_->Set(receiving && !installing ? 1 : 0);
    snapshot_installing_->Set(installing ? 1 : 0);
    snapshot_index_->Set(receiving ? static_cast<double>(receiving->index) : 0);
    snapshot_received_->Set(receiving ? static_cast<double>(receiving->bytes_done) : 0);
    snapshot_total_->Set(receiving ? static_cast<double>(receiving->bytes_total) : 0);
    // The transport's totals only grow: the counters follow them.
    const auto follow = [](Counter* counter, std::uint64_t total) {
      const double value = static_cast<double>(total);
      if (value > counter->Value()) counter->Increment(value - counter->Value());
    };
    follow(snapshots_sent_, transfers.snapshots_sent);
    follow(snapshots_abandoned_, transfers.snapshots_abandoned);
    follow(snapshots_received_, transfers.received.snapshots_delivered);
    follow(snapshot_chunks_refused_,
           transfers.received.chunks_refused + transfers.received.checksum_mismatches);
    follow(snapshots_resumed_, transfers.snapshots_resumed);
    follow(snapshot_bytes_skipped_, transfers.snapshot_bytes_skipped);
    follow(snapshot_partials_continued_, transfers.received.partials_continued);
    follow(snapshot_bytes_restored_, transfers.received.bytes_restored);
    follow(snapshot_partial_files_dropped_, transfers.received.partial_files_dropped +
                                                transfers.received.partial_file_write_failures);
  }

  const std::string data_dir_;
  // Built once: record_rpc() runs for every client RPC.
  const Histogram::BucketBoundaries rpc_latency_buckets_ = exponential(0.0005, 2, 16);
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string bound_address_;

  mutable std::mutex
      source_mu_;  // guards the sources and exported_peers_ (scrapes may run concurrently)
  std::function<NodeStatus()> status_source_;
  std::function<bool()> watermark_source_;
  std::function<InboundStats()> admission_source_;
  Gauge* unconfigured_peers_ = nullptr;
  Counter* unconfigured_admitted_ = nullptr;
  Counter* unconfigured_refused_ = nullptr;
  Counter* unconfigured_forgotten_ = nullptr;
  std::function<SnapshotTransfers(const NodeStatus&)> snapshot_source_;
  mutable std::set<std::string> exported_peers_;
  prometheus::Family<Gauge>* peer_snapshot_index_ = nullptr;
  prometheus::Family<Gauge>* peer_snapshot_sent_ = nullptr;
  prometheus::Family<Gauge>* peer_snapshot_total_ = nullptr;
  Gauge* snapshot_receiving_ = nullptr;
  Gauge* snapshot_installing_ = nullptr;
  Gauge* snapshot_index_ = nullptr;
  Gauge* snapshot_received_ = nullptr;
  Gauge* snapshot_total_ = nullptr;
  Counter* snapshots_sent_ = nullptr;
  Counter* snapshots_abandoned_ = nullptr;
  Counter* snapshot_encodes_ = nullptr;
  Counter* snapshot_encodings_reused_ = nullptr;
  Gauge* snapshot_encoding_in_flight_ = nullptr;
  Gauge* snapshot_last_encoding_seconds_ = nullptr;
  Counter* snapshot_sends_dropped_ = nullptr;
  Counter* snapshots_resumed_ = nullptr;
  Counter* snapshot_bytes_skipped_ = nullptr;
  Counter* snapshot_partials_continued_ = nullptr;
  Counter* snapshot_bytes_restored_ = nullptr;
  Counter* snapshot_partial_files_dropped_ = nullptr;
  Counter* snapshots_received_ = nullptr;
  Counter* snapshots_above_first_ = nullptr;
  Counter* snapshot_chunks_refused_ = nullptr;

  Gauge* term_ = nullptr;
  Gauge* is_leader_ = nullptr;
  std::array<Gauge*, 4> role_{};
  Gauge* leader_id_ = nullptr;
  Counter* leader_changes_ = nullptr;
  Counter* elections_won_ = nullptr;
  Counter* elections_lost_ = nullptr;
  Gauge* first_index_ = nullptr;
  Gauge* last_index_ = nullptr;
  Gauge* commit_index_ = nullptr;
  Counter* append_requests_ = nullptr;
  Counter* appended_entries_ = nullptr;
  Counter* appended_bytes_ = nullptr;
  Histogram* commit_latency_ = nullptr;
  prometheus::Family<Counter>* rejected_ = nullptr;
  prometheus::Family<Gauge>* peer_match_ = nullptr;
  prometheus::Family<Gauge>* peer_lag_entries_ = nullptr;
  prometheus::Family<Gauge>* peer_lag_bytes_ = nullptr;
  prometheus::Family<Gauge>* peer_inflight_ = nullptr;
  prometheus::Family<Gauge>* peer_inflight_bytes_ = nullptr;
  prometheus::Family<Gauge>* peer_last_contact_ = nullptr;
  prometheus::Family<Gauge>* peer_behind_ = nullptr;
  Histogram* fsync_ = nullptr;
  Histogram* loop_round_ = nullptr;
  Histogram* group_commit_ = nullptr;
  Gauge* written_index_ = nullptr;
  Gauge* flushed_index_ = nullptr;
  Gauge* catching_up_ = nullptr;
  Gauge* stranded_ = nullptr;
  Gauge* corrupt_index_ = nullptr;
  Gauge* scrub_bytes_ = nullptr;
  Gauge* scrub_passes_ = nullptr;
  Gauge* segments_ = nullptr;
  Gauge* derived_lag_ = nullptr;
  Gauge* derived_stopped_ = nullptr;
  Gauge* groups_applied_ = nullptr;
  Gauge* groups_hold_ = nullptr;
  Gauge* groups_bad_ = nullptr;
  Gauge* groups_refused_ = nullptr;
  Gauge* disk_bytes_ = nullptr;
  Gauge* disk_free_ratio_ = nullptr;
  Gauge* watermark_ = nullptr;
  Counter* segments_deleted_ = nullptr;
  Gauge* recovery_duration_ = nullptr;
  std::array<Gauge*, 3> recovery_mode_{};
  prometheus::Family<Counter>* grpc_requests_ = nullptr;
  prometheus::Family<Histogram>* grpc_duration_ = nullptr;
  Gauge* resident_ = nullptr;
  Gauge* anonymous_ = nullptr;
  Gauge* heap_in_use_ = nullptr;
  Gauge* heap_free_ = nullptr;
  Counter* cpu_ = nullptr;
};

namespace {

// One per client RPC: remembers when it started and records the outcome when the status is sent.
class RpcMetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  RpcMetricsInterceptor(Metrics::Impl* metrics, std::string method)
      : metrics_(metrics), method_(std::move(method)), started_(std::chrono::steady_clock::now()) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status status = methods->GetSendStatus();
      std::string reason;
      if (!status.ok()) {
        if (auto* trailing = methods->GetSendTrailingMetadata(); trailing != nullptr) {
          const auto it = trailing->find(std::string(api_errors::kErrorInfoMetadataKey));
          raftlog::v1::ErrorInfo info;
          if (it != trailing->end() && info.ParseFromString(it->second)) reason = info.reason();
        }
      }
      metrics_->record_rpc(method_, status.error_code(),
                           seconds(std::chrono::steady_clock::now() - started_), reason);
    }
    methods->Proceed();
  }

 private:
  Metrics::Impl* metrics_;
  const std::string method_;
  const std::chrono::steady_clock::time_point started_;
};

class RpcMetricsFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit RpcMetricsFactory(Metrics::Impl* metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    std::string_view method = info->method() == nullptr ? "" : info->method();
    // Peer streams are replication, not client requests (their traffic shows in the peer gauges).
    if (method.starts_with("/raftlog.peer.")) return nullptr;
    // A long-lived call: each append on it is recorded as it is answered (request_answered), and
    // the call's own end would put its lifetime into the request latency histogram.
    if (method == "/raftlog.v1.Log/AppendStream") return nullptr;
    if (method.starts_with('/')) method.remove_prefix(1);
    return new RpcMetricsInterceptor(metrics_, std::string(method));
  }

 private:
  Metrics::Impl* metrics_;
};

}  // namespace

std::unique_ptr<Metrics> Metrics::start(std::uint64_t node_id, const std::string& listen_address,
                                        const std::string& data_dir, std::string* error) {
  auto impl = std::make_shared<Impl>(node_id, data_dir);
  try {
    // Two threads: a scrape is quick; a second serves a concurrent scraper.
    impl->exposer_ = std::make_unique<prometheus::Exposer>(listen_address, 2);
  } catch (const std::exception& e) {
    *error = "cannot serve metrics on " + listen_address + ": " + e.what();
    return nullptr;
  }
  const std::vector<int> ports = impl->exposer_->GetListeningPorts();
  if (ports.empty()) {
    *error = "cannot serve metrics on " + listen_address + " (address in use or invalid?)";
    return nullptr;
  }
  impl->bound_address_ =
      listen_address.substr(0, listen_address.rfind(':')) + ":" + std::to_string(ports.front());
  impl->exposer_->RegisterCollectable(impl);
  return std::unique_ptr<Metrics>(new Metrics(std::move(impl)));
}

Metrics::Metrics(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

namespace {

// One connection to the metrics listener, closed at once (its only purpose is to wake the listener).
void connect_once(const util::HostPort& address) {
  std::string host(address.host);
  if (host == "0.0.0.0") host = "127.0.0.1";  // a wildcard listener: reach it over loopback
  if (host == "::") host = "::1";
  sockaddr_storage storage{};
  socklen_t length = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&storage);
  if (::inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<std::uint16_t>(address.port));
    length = sizeof(sockaddr_in);
  } else if (::inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<std::uint16_t>(address.port));
    length = sizeof(sockaddr_in6);
  } else {
    return;  // a host name: not worth resolving during shutdown (the stop then takes its 2 s)
  }
  const int fd = ::socket(storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  (void)::connect(fd, reinterpret_cast<const sockaddr*>(&storage), length);
  ::close(fd);
}

}  // namespace

Metrics::~Metrics() {
  // Stop serving first: a scrape in progress must not outlive the sources it reads.
  // civetweb's mg_stop() (inside the Exposer's destructor) waits for its listener thread, which sees
  // the stop only when its poll() returns: up to 2 s later without a new connection (civetweb's
  // SOCKET_TIMEOUT_QUANTUM), which made every SIGTERM of a node with --metrics-addr take ~2 s. A
  // thread connects every 20 ms until the destructor has returned (at most ~100 connections), so
  // the listener wakes, sees the stop and exits at once.
  util::HostPort address;
  const bool parsed =
      util::parse_host_port(impl_->bound_address_, util::PortZero::kRefused, &address).empty();
  std::atomic<bool> stopped{false};
  std::thread waker;
  if (parsed) {
    waker = std::thread([&] {
      constexpr int kMaxWakeups = 100;  // 2 s: civetweb's own bound, in case a wake-up is missed
      for (int i = 0; i < kMaxWakeups && !stopped.load(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (!stopped.load()) connect_once(address);
      }
    });
  }
  impl_->exposer_.reset();
  stopped.store(true);
  if (waker.joinable()) waker.join();
}

void Metrics::set_status_source(std::function<NodeStatus()> source) {
  std::lock_guard lock(impl_->source_mu_);
  impl_->status_source_ = std::move(source);
}

void Metrics::set_snapshot_source(std::function<SnapshotTransfers(const NodeStatus&)> source) {
  std::lock_guard lock(impl_->source_mu_);
  impl_->snapshot_source_ = std::move(source);
}

void Metrics::set_admission_source(std::function<InboundStats()> source) {
  std::lock_guard lock(impl_->source_mu_);
  impl_->admission_source_ = std::move(source);
}

void Metrics::set_watermark_source(std::function<bool()> source) {
  std::lock_guard lock(impl_->source_mu_);
  impl_->watermark_source_ = std::move(source);
}

const std::string& Metrics::bound_address() const { return impl_->bound_address_; }

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
Metrics::interceptor_factory() {
  return std::make_unique<RpcMetricsFactory>(impl_.get());
}

void Metrics::append_proposed() { impl_->append_requests_->Increment(); }

void Metrics::append_committed(std::uint64_t entries, std::uint64_t payload_bytes,
                               std::chrono::steady_clock::duration latency) {
  impl_->appended_entries_->Increment(static_cast<double>(entries));
  impl_->appended_bytes_->Increment(static_cast<double>(payload_bytes));
  impl_->commit_latency_->Observe(seconds(latency));
}

void Metrics::leader_changed() { impl_->leader_changes_->Increment(); }

void Metrics::election_finished(bool won) {
  (won ? impl_->elections_won_ : impl_->elections_lost_)->Increment();
}

void Metrics::segments_deleted(std::uint64_t count) {
  impl_->segments_deleted_->Increment(static_cast<double>(count));
}

void Metrics::store_flushed(const store::CommitLog::FlushCycle& cycle) {
  impl_->fsync_->Observe(seconds(cycle.sync_duration));
  if (cycle.entries > 0) impl_->group_commit_->Observe(static_cast<double>(cycle.entries));
}

void Metrics::loop_round_finished(std::chrono::steady_clock::duration duration) {
  impl_->loop_round_->Observe(seconds(duration));
}

void Metrics::request_answered(std::string_view method, int grpc_code,
                               std::chrono::steady_clock::duration latency,
                               std::string_view reason) {
  impl_->record_rpc(std::string(method), static_cast<grpc::StatusCode>(grpc_code), seconds(latency),
                    std::string(reason));
}

}  // namespace raftlog::server

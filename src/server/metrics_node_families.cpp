// The families of the node and its Raft state, of client requests and of the process
// (metrics_families.h; their meaning: docs/metrics.md).
#include <array>
#include <string>

#include "server/metrics_families.h"
#include "util/build_info.h"

namespace raftlog::server::metrics {

namespace {

constexpr std::array<raft::Role, 4> kRoles = {raft::Role::kFollower, raft::Role::kPreCandidate,
                                              raft::Role::kCandidate, raft::Role::kLeader};

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

// grpc::StatusCode's names, by value (no gRPC header here: the code arrives as an int).
const char* code_name(int code) {
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
  return code >= 0 && index < kNames.size() ? kNames[index] : "UNKNOWN";
}

}  // namespace

NodeMetrics::NodeMetrics(FamilyBuilder& builder) {
  // The usual Prometheus build-info idiom: a constant 1 whose labels say what is running, so a
  // dashboard or an upgrade check can group nodes by version (`count by (version)`).
  builder
      .gauges("raftlog_build_info",
              "Always 1; the labels name the raftlogd version and git revision.")
      .Add({{"version", std::string(util::build_version())},
            {"revision", std::string(util::build_revision())}})
      .Set(1);
  readings_.add_gauges(
      builder,
      {{"raftlog_raft_term", "Current Raft term.", &field<&NodeStatus::term>},
       {"raftlog_raft_is_leader", "1 on the leader, 0 elsewhere.",
        [](const NodeStatus& status) { return status.role == raft::Role::kLeader ? 1.0 : 0.0; }}});
  auto& roles = builder.gauges("raftlog_raft_role", "1 for the node's current role.");
  for (raft::Role role : kRoles)
    role_[static_cast<std::size_t>(role)] = &roles.Add({{"role", role_name(role)}});
  readings_.add_gauges(
      builder, {{"raftlog_raft_leader_id", "Raft id of the known leader, 0 when none is known.",
                 &field<&NodeStatus::leader_id>}});
  leader_changes = &builder.counter("raftlog_raft_leader_changes_total",
                                    "Times this node saw the leader change.");
  auto& elections = builder.counters("raftlog_raft_elections_total",
                                     "Elections this node ran as a candidate, by outcome.");
  elections_won = &elections.Add({{"outcome", "won"}});
  elections_lost = &elections.Add({{"outcome", "lost"}});
  readings_.add_gauges(
      builder,
      {{"raftlog_raft_first_index", "First retained log index.", &field<&NodeStatus::first_index>},
       {"raftlog_raft_last_index", "Last log index (written, maybe uncommitted).",
        &field<&NodeStatus::last_index>},
       {"raftlog_raft_commit_index", "Highest index known committed.",
        &field<&NodeStatus::commit_index>},
       {"raftlog_node_catching_up",
        "1 while the node catches up after a storage fault (no votes, not counted for commit).",
        &field<&NodeStatus::catching_up>},
       {"raftlog_node_unvouched",
        "1 while this node, started on an empty data directory, waits for a leader to catch it up "
        "(it grants no vote to a candidate with entries; health NOT_SERVING).",
        &field<&NodeStatus::unvouched>},
       {"raftlog_node_stranded",
        "1 while this follower needs entries its leader no longer holds (until its snapshot "
        "arrives).",
        [](const NodeStatus& status) { return status.stranded_below_index != 0 ? 1.0 : 0.0; }},
       {"raftlog_node_catching_up_to_leader",
        "1 while this follower catches up to the commit index its leader named (it started or "
        "reconnected, or fell more than --serving-lag-entries behind; health NOT_SERVING).",
        [](const NodeStatus& status) {
          return status.catching_up_to_leader_commit != 0 ? 1.0 : 0.0;
        }}});
  readings_.add_totals(
      builder, {{"raftlog_node_committed_conflicts_total",
                 "Appends of a leader that contradicted an entry this node holds as committed (a "
                 "safety violation: docs/operations.md; health NOT_SERVING once one was seen).",
                 &field<&NodeStatus::committed_conflicts>},
                {"raftlog_node_second_leader_messages_total",
                 "Leader messages of this node's term from another node than the term's leader it "
                 "knows, refused (two leaders of one term: docs/operations.md; health NOT_SERVING "
                 "while they keep coming).",
                 &field<&NodeStatus::second_leader_messages>},
                {"raftlog_node_leadership_refusals_total",
                 "Refusals of this node's leadership of a term by a node that knows another leader "
                 "of it (two leaders of one term: docs/operations.md).",
                 &field<&NodeStatus::leadership_refusals>}});
  loop_round = &builder.histogram(
      "raftlog_raft_loop_round_seconds",
      "Duration of one round of the Raft loop (ticks and heartbeats wait behind it).",
      exponential(0.0005, 2, 14));
}

void NodeMetrics::refresh(const NodeStatus& status) const {
  readings_.refresh(status);
  for (raft::Role role : kRoles)
    role_[static_cast<std::size_t>(role)]->Set(status.role == role ? 1 : 0);
}

ClientMetrics::ClientMetrics(FamilyBuilder& builder) {
  append_requests = &builder.counter("raftlog_append_requests_total",
                                     "Append calls accepted into Raft by the leader.");
  appended_entries = &builder.counter("raftlog_appended_entries_total",
                                      "Client entries committed and acknowledged by this leader.");
  appended_bytes =
      &builder.counter("raftlog_appended_bytes_total", "Payload bytes of those entries.");
  commit_latency =
      &builder.histogram("raftlog_commit_latency_seconds",
                         "Leader: from proposal to the append being acknowledged as committed.",
                         exponential(0.0005, 2, 15));
  rejected_ = &builder.counters(
      "raftlog_rejected_requests_total",
      "Client requests answered with an error carrying a reason word, by reason.");
  grpc_requests_ = &builder.counters("raftlog_grpc_requests_total",
                                     "Finished client RPCs by method and status code.");
  grpc_duration_ = &builder.histograms("raftlog_grpc_request_duration_seconds",
                                       "Client RPC latency (streams: their lifetime).");
}

void ClientMetrics::record_rpc(const std::string& method, int grpc_code, double latency_seconds,
                               const std::string& reason) {
  grpc_requests_->Add({{"method", method}, {"code", code_name(grpc_code)}}).Increment();
  grpc_duration_->Add({{"method", method}}, rpc_latency_buckets_).Observe(latency_seconds);
  if (!reason.empty()) rejected_->Add({{"reason", reason}}).Increment();
}

ProcessMetrics::ProcessMetrics(FamilyBuilder& builder) {
  readings_.add_gauges(
      builder,
      {{"raftlog_process_resident_memory_bytes", "Resident memory of the raftlogd process.",
        &field<&ProcessSample::resident_bytes>},
       {"raftlog_process_anonymous_memory_bytes",
        "Resident memory that is not file-backed (heap, stacks; not the mapped segments).",
        &field<&ProcessSample::anonymous_bytes>},
       {"raftlog_process_heap_in_use_bytes", "Heap bytes the process holds (glibc mallinfo2).",
        &field<&ProcessSample::heap_in_use_bytes>},
       {"raftlog_process_heap_free_bytes",
        "Free heap bytes glibc's arenas keep for reuse (mallinfo2 fordblks).",
        &field<&ProcessSample::heap_free_bytes>}});
  readings_.add_totals(builder, {{"raftlog_process_cpu_seconds_total",
                                  "User and system CPU time of the raftlogd process.",
                                  &field<&ProcessSample::cpu_seconds>}});
}

}  // namespace raftlog::server::metrics

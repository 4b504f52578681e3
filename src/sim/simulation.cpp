#include "sim/simulation.h"

#include <fmt/format.h>
#include <malloc.h>

#include <algorithm>
#include <utility>

#include "sim/fault_schedule.h"
#include "sim/trace.h"
#include "sim/workload.h"
#include "util/prng.h"

namespace raftlog::sim {

namespace {

// Upper bound on one replication round trip once the network is calm: a message each way
// (calm_network: at most kStepsPerTick steps) plus the slowest flush cycle once the disks are calm
// (ClusterConfig::max_flush_delay_steps: at most 3 * kStepsPerTick steps), in ticks.
constexpr std::uint64_t kCalmRoundTripTicks = 5;

// Liveness-phase patience: a barrier proposal or read not done after this many ticks is retried (its
// leader may have been replaced), well within the liveness bound.
constexpr std::uint64_t kRetryAfterTicks = 30;

ClusterConfig draw_cluster_config(util::Prng& prng, std::size_t node_count, bool aggressive,
                                  bool reconfigure, bool retention) {
  ClusterConfig config;
  config.node_count = reconfigure ? node_count + kSpareSlots : node_count;
  config.voter_count = node_count;
  raft::Config& core = config.raft;
  core.election_ticks = 10;
  core.heartbeat_ticks = static_cast<int>(prng.between(1, 2));
  core.pre_vote = true;
  core.check_quorum = true;
  // Small bounds so that batching, flow control and back-pressure paths run in every seed.
  // One entry per message separates a new leader's no-op from the older entries before it, which is
  // what a previous-term commit needs to go wrong (Figure 8); aggressive runs favour it.
  core.max_entries_per_message = prng.below(aggressive ? 2 : 4) == 0 ? 1 : prng.between(2, 16);
  core.max_bytes_per_message = prng.between(512, 4096);
  core.max_inflight_messages = prng.between(1, 8);
  core.max_uncommitted_entries = prng.between(16, 256);
  core.max_uncommitted_bytes = 1 << 20;
  core.max_pending_reads = prng.between(4, 64);
  // The disk: how long an fsync takes, how often one stalls or fails, how often the checkpoint is
  // written (all in simulated time, drawn per seed).
  config.min_flush_delay_steps = 1;
  config.max_flush_delay_steps = prng.between(1, 3 * kStepsPerTick);
  config.slow_flush_per_million = static_cast<std::uint32_t>(prng.below(3) * 20'000);
  config.slow_flush_max_steps = prng.between(kStepsPerTick, 20 * kStepsPerTick);
  config.failing_sync_per_million = prng.below(4) == 0 ? 2'000 : 0;
  config.checkpoint_every_ticks = prng.between(1, 30);
  config.payload_padding_max_bytes = 32;
  // The replica installs and fills snapshots (docs/raft.md, "Snapshots"), as raftlogd's does.
  core.snapshots = true;
  if (retention) {
    // Drawn last, so that the other runs keep their histories. Entries of up to 1-6 KiB roll the
    // 64 KiB segments every 10-60 entries, so trims remove whole segments within a run; a
    // leader waits only a few ticks for a silent follower; a lost snapshot is sent again soon.
    config.payload_padding_max_bytes = prng.between(1024, 6144);
    // A proposal (at most max_entries_per_message entries, WorkloadRates caps it lower) must fit
    // one message, or the leader refuses it as too large.
    const std::size_t largest_entry = config.payload_padding_max_bytes + 128;
    core.max_bytes_per_message = std::max<std::size_t>(
        core.max_bytes_per_message, core.max_entries_per_message * largest_entry);
    config.retention_follower_grace_ms = static_cast<std::uint32_t>(prng.between(2, 10) * kTickMs);
    core.snapshot_retry_ticks = static_cast<int>(prng.between(10, 60));
    // A leader's snapshot gathers its dedup table in slices (one per loop round): small enough
    // here that a gather spans rounds, and appends, evictions and trims fall between its slices.
    config.snapshot_gather_slice_bytes = prng.between(64, 4096);
    // Its encoding, off the loop, is quick in one seed in two; in the others it may outlast the
    // core's snapshot retry timeout (the retry waits for the same job) and leaderships.
    if (prng.below(2) == 0) {
      config.max_off_loop_steps = prng.between(
          1, 2 * static_cast<std::uint64_t>(core.snapshot_retry_ticks) * kStepsPerTick);
    }
  }
  // The in-flight window's byte bound, two full messages: it binds whenever a window of up to 8
  // messages carries more (the byte-bounded catch-up raftlogd runs). Derived, not drawn, so every
  // seed draws the same configuration and faults as before.
  core.max_inflight_bytes = 2 * core.max_bytes_per_message;
  return config;
}

// Every member of the leader's configuration running, agreeing on one leader and term, with
// identical, fully committed logs. Nodes outside it (spare slots, removed nodes) receive nothing.
bool converged(const Cluster& cluster, raft::NodeId leader) {
  const raft::LogReader& leader_log = cluster.log(leader);
  const raft::Index last = leader_log.last_index();
  const raft::ConfState& conf = cluster.conf(leader);
  for (raft::NodeId id = 1; id <= cluster.size(); ++id) {
    if (id != leader && !raft::is_member(conf, id)) continue;
    if (!cluster.is_running(id)) return false;
    const raft::SoftState& soft = cluster.soft_state(id);
    if (soft.leader != leader || soft.term != cluster.soft_state(leader).term) return false;
    const raft::LogReader& log = cluster.log(id);
    if (log.last_index() != last || log.term_at(last) != leader_log.term_at(last)) return false;
    if (cluster.commit_index(id) != last) return false;
  }
  return true;
}

// Recovery time the configuration itself needs on top of the base bound: the most lagging node must
// receive every entry it misses, at most entries_per_message * inflight entries per round trip, where
// the byte window (two full messages) may hold only two messages.
std::uint64_t catch_up_allowance_ticks(const Cluster& cluster, const ClusterConfig& config) {
  raft::Index longest_log = 0;
  raft::Index lowest_commit = UINT64_MAX;
  for (raft::NodeId id = 1; id <= cluster.size(); ++id) {
    longest_log = std::max(longest_log, cluster.log(id).last_index());
    lowest_commit = std::min(lowest_commit, cluster.commit_index(id));
  }
  const std::uint64_t backlog_entries =
      longest_log > lowest_commit ? longest_log - lowest_commit : 0;
  const std::uint64_t entries_per_round_trip =
      std::max<std::uint64_t>(1, config.raft.max_entries_per_message *
                                     std::min<std::uint64_t>(config.raft.max_inflight_messages, 2));
  return (backlog_entries + entries_per_round_trip - 1) / entries_per_round_trip *
         kCalmRoundTripTicks;
}

// Recovery time a snapshot catch-up needs on top of that (the retention runs): a node that needs
// one when the faults stop (wiped, or behind the leader's first index) waits for jobs of two
// off-loop workers that each run one job at a time, each job up to max_off_loop_steps: the
// leader's encoding, its own preparation, its install's TOPICSTATE write; a trim that moves the
// leader's first index past the point meanwhile costs a second such round, and a lost snapshot a
// retry timeout. (`--wipe --retention --seed 39` with 3 nodes needed both rounds at ~90 ticks a
// job, past the bound without this term.)
std::uint64_t snapshot_catch_up_allowance_ticks(const ClusterConfig& config) {
  constexpr std::uint64_t kJobsPerSnapshotRound = 3;
  constexpr std::uint64_t kSnapshotRounds = 2;
  const std::uint64_t job_ticks = (config.max_off_loop_steps + kStepsPerTick - 1) / kStepsPerTick;
  return kSnapshotRounds * kJobsPerSnapshotRound * job_ticks +
         static_cast<std::uint64_t>(config.raft.snapshot_retry_ticks);
}

std::string describe_cluster(const Cluster& cluster) {
  std::string text;
  for (raft::NodeId id = 1; id <= cluster.size(); ++id) {
    const raft::SoftState& soft = cluster.soft_state(id);
    const raft::LogReader& log = cluster.log(id);
    text += fmt::format(" n{}:{}{} t{} leader=n{} last={}/t{} commit={}", id,
                        cluster.is_up(id) ? "" : "DOWN ", raft::to_string(soft.role), soft.term,
                        soft.leader, log.last_index(), log.term_at(log.last_index()).value_or(0),
                        cluster.commit_index(id));
    if (const raft::Index stranded = cluster.stranded_below(id); stranded != 0) {
      text += fmt::format(" STRANDED below {} (first {})", stranded, log.first_index());
    }
    if (cluster.conf(id) != cluster.bootstrap_conf()) {
      text += " (" + raft::to_string(cluster.conf(id)) + ")";
    }
    text += ";";
  }
  return text;
}

class LivenessPhase {
 public:
  LivenessPhase(Cluster& cluster, Workload& workload, Checker& checker, Trace& trace)
      : cluster_(cluster), workload_(workload), checker_(checker), trace_(trace) {}

  // Runs up to `bound_ticks`; returns the ticks used, or reports a liveness violation.
  std::uint64_t run(std::uint64_t bound_ticks) {
    for (std::uint64_t tick = 1; tick <= bound_ticks; ++tick) {
      cluster_.run_tick();
      if (checker_.failed()) return tick;
      if (step(tick)) return tick;
      if (checker_.failed()) return tick;
    }
    checker_.report("liveness",
                    fmt::format("not recovered {} ticks after faults stopped: {}; cluster:{}",
                                bound_ticks, waiting_for_, describe_cluster(cluster_)));
    return bound_ticks;
  }

 private:
  // One tick's worth of client activity; true when the cluster has fully recovered.
  bool step(std::uint64_t tick) {
    const raft::NodeId leader = cluster_.leader();
    if (leader == raft::kNoNode) {
      waiting_for_ = "a leader";
      return false;
    }
    if (!barrier_acknowledged()) {
      waiting_for_ = "a proposal to commit";
      if (!barrier_index_ || tick >= barrier_tick_ + kRetryAfterTicks || barrier_failed()) {
        std::vector<std::string> payloads;
        const replica::Replica::AppendPlacement placement =
            workload_.propose(cluster_, 1, &payloads);
        if (placement.proposed) {
          barrier_index_ = placement.first;
          barrier_payload_ = payloads[0];
          barrier_tick_ = tick;
        }
      }
      return false;
    }
    if (!converged(cluster_, leader)) {
      waiting_for_ = "every node to hold and commit the leader's log";
      return false;
    }
    // Converged: nothing beyond the common log can ever commit, and every member runs the
    // committed configuration.
    if (!check_conf_converged(leader)) return true;
    checker_.abandon_proposals_beyond(cluster_.log(leader).last_index());
    if (checker_.pending_proposals() != 0) {
      checker_.report("liveness",
                      fmt::format("{} proposals neither committed nor lost after convergence",
                                  checker_.pending_proposals()));
      return true;
    }
    if (checker_.released_reads() > reads_before_) return true;
    waiting_for_ = "a linearizable read to be released";
    if (read_tick_ == 0 || tick >= read_tick_ + kRetryAfterTicks) {
      if (read_tick_ == 0) reads_before_ = checker_.released_reads();
      if (cluster_.request_read(leader)) read_tick_ = tick;
    }
    return false;
  }

  bool check_conf_converged(raft::NodeId leader) {
    const raft::ConfState& committed = checker_.committed_conf();
    for (raft::NodeId id = 1; id <= cluster_.size(); ++id) {
      if (id != leader && !raft::is_member(committed, id)) continue;
      if (cluster_.conf(id) != committed) {
        checker_.report(
            "conf-convergence",
            fmt::format("node {} runs {} after recovery, but {} is committed", id,
                        raft::to_string(cluster_.conf(id)), raft::to_string(committed)));
        return false;
      }
    }
    return true;
  }

  bool barrier_acknowledged() const {
    const raft::Entry* entry = barrier_index_ ? checker_.committed_entry(barrier_index_) : nullptr;
    return entry != nullptr && entry->payload == barrier_payload_;
  }
  bool barrier_failed() const {
    const raft::Entry* entry = barrier_index_ ? checker_.committed_entry(barrier_index_) : nullptr;
    return entry != nullptr && entry->payload != barrier_payload_;
  }

  Cluster& cluster_;
  Workload& workload_;
  Checker& checker_;
  Trace& trace_;
  raft::Index barrier_index_ = 0;
  std::string barrier_payload_;
  std::uint64_t barrier_tick_ = 0;
  std::uint64_t read_tick_ = 0;
  std::uint64_t reads_before_ = 0;
  std::string waiting_for_ = "nothing";
};

}  // namespace

namespace {

SimResult run_traced(const SimOptions& options, Trace& trace);

}  // namespace

SimResult run_simulation(const SimOptions& options) {
  // Every crash frees and every restart allocates the simulated disks' file images (64 KiB segments
  // and their index files): glibc would hand the top of the heap back to the kernel each time and
  // fault it in again, which cost a fifth of a run. Keep freed memory in the process instead.
  static const bool heap_kept = [] {
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    return true;
  }();
  (void)heap_kept;
  if (options.full_trace) {
    Trace trace(options.trace_tail_events, true);
    return run_traced(options, trace);
  }
  // Formatting the trace is a quarter of a run's time and only a failure report reads it: run without
  // it, and rerun a failing seed (the same history, event for event) with its tail kept.
  Trace untraced = Trace::off();
  SimResult result = run_traced(options, untraced);
  if (result.ok()) return result;
  Trace tail(options.trace_tail_events, false);
  SimResult traced = run_traced(options, tail);
  if (!traced.violation || traced.violation->invariant != result.violation->invariant ||
      traced.violation->detail != result.violation->detail) {
    traced.violation = Violation{
        "determinism", fmt::format("the untraced run found {} ({}); the traced rerun found {}",
                                   result.violation->invariant, result.violation->detail,
                                   traced.violation ? traced.violation->detail : "nothing")};
  }
  return traced;
}

namespace {

SimResult run_traced(const SimOptions& options, Trace& trace) {
  util::Prng prng(options.seed);
  ClusterConfig config =
      draw_cluster_config(prng, options.node_count, options.aggressive, options.reconfigure,
                          options.retention);
  config.ignore_unvouched_marker = options.plant_ignore_unvouched;
  config.ignore_not_founder_marker = options.plant_ignore_not_founder;
  Checker checker(config.node_count);
  const FaultProfile profile =
      draw_fault_profile(prng, options.aggressive, options.reconfigure, options.retention,
                         options.wipe);
  trace.log(
      "seed {} nodes {} heartbeat {} election {} entries/msg {} bytes/msg {} inflight {} "
      "({} bytes) uncommitted {} "
      "reads {} flush 1..{} steps (slow {}/M up to {}, failing {}/M) checkpoint every {} ticks",
      options.seed, options.node_count, config.raft.heartbeat_ticks, config.raft.election_ticks,
      config.raft.max_entries_per_message, config.raft.max_bytes_per_message,
      config.raft.max_inflight_messages, config.raft.max_inflight_bytes,
      config.raft.max_uncommitted_entries, config.raft.max_pending_reads,
      config.max_flush_delay_steps, config.slow_flush_per_million, config.slow_flush_max_steps,
      config.failing_sync_per_million, config.checkpoint_every_ticks);

  if (options.reconfigure) {
    trace.log("reconfigure: {} voters, {} spare slots, a change every ~{} ticks",
              options.node_count, kSpareSlots,
              1'000'000 / std::max<std::uint32_t>(profile.reconfigure_per_million, 1));
  }
  SimResult result;
  result.seed = options.seed;
  {
    Cluster cluster(config, options.seed, prng, checker, trace);
    FaultSchedule faults(profile, prng, trace);
    WorkloadRates rates;
    if (profile.leader_churn) rates.propose_per_million = 900'000;
    // Clients respect the server's batch limit (a larger batch is refused with kTooLarge).
    rates.max_entries_per_proposal = std::min<std::uint64_t>(rates.max_entries_per_proposal,
                                                             config.raft.max_entries_per_message);
    Workload workload(rates, prng, checker);
    cluster.network().set_conditions(calm_network());
    faults.start(cluster);

    for (std::uint64_t tick = 0; tick < options.fault_ticks && !checker.failed(); ++tick) {
      faults.on_tick(cluster);
      if (checker.failed()) break;
      workload.on_tick(cluster);
      if (checker.failed()) break;
      cluster.run_tick();
    }
    if (!checker.failed()) {
      faults.stop_and_heal(cluster);
      cluster.calm_disks();
      const std::uint64_t bound_ticks =
          options.liveness_ticks +
          (options.catch_up_allowance ? catch_up_allowance_ticks(cluster, config) : 0) +
          (options.catch_up_allowance && options.retention ? snapshot_catch_up_allowance_ticks(config)
                                                           : 0);
      trace.log("LIVENESS phase: recovery bound {} ticks", bound_ticks);
      LivenessPhase liveness(cluster, workload, checker, trace);
      if (!checker.failed()) result.liveness_ticks = liveness.run(bound_ticks);
    }
    if (!checker.failed()) checker.check_committed_prefixes();

    result.ticks = cluster.now_tick();
    result.cluster = cluster.stats();
    result.partitions = faults.partitions_started();
  }
  result.violation = checker.violation();
  result.proposals_acknowledged = checker.acknowledged_proposals();
  result.proposals_failed = checker.failed_proposals();
  result.reads_released = checker.released_reads();
  result.appends_acknowledged = checker.acknowledged_appends();
  result.leaders_elected = checker.leaders_elected();
  result.committed_entries = checker.committed_length();
  if (result.violation) {
    trace.log("VIOLATION {}: {}", result.violation->invariant, result.violation->detail);
    result.trace_tail = trace.tail();
  }
  if (options.full_trace) result.full_trace = trace.full();
  return result;
}

}  // namespace

std::string format_failure(const SimResult& result) {
  if (!result.violation) return {};
  std::string text =
      fmt::format("FAILURE seed={} invariant={}\n  {}\n  last {} events:\n", result.seed,
                  result.violation->invariant, result.violation->detail, result.trace_tail.size());
  for (const std::string& line : result.trace_tail) {
    text += "    ";
    text += line;
    text += '\n';
  }
  return text;
}

}  // namespace raftlog::sim

// One simulated run, start to finish: draw a configuration and fault profile from the seed, run the fault
// phase with a random workload, then stop every fault and require the cluster to recover (liveness).
// The same options always produce the same result and the same trace.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/checker.h"
#include "sim/cluster.h"

namespace raftlog::sim {

struct SimOptions {
  std::uint64_t seed = 1;
  std::size_t node_count = 3;
  std::uint64_t fault_ticks = 500;  // ticks of faults and workload
  std::uint64_t liveness_ticks =
      250;                         // bound on recovery once faults stop, plus a catch-up allowance
                                   // for the entries the most lagging node misses
  bool catch_up_allowance = true;  // add the catch-up allowance to liveness_ticks
  std::size_t trace_tail_events = 120;  // events printed with a failure
  bool full_trace = false;              // keep every event (for --trace)
  bool aggressive = false;  // always the leader-churn fault profile (broken-rule hunting)
  // Membership changes in the fault schedule: node_count voters to start with plus kSpareSlots spare
  // node slots outside the configuration (docs/testing.md, "Reconfiguration").
  bool reconfigure = false;
  // Retention trims in the fault schedule (docs/testing.md, "Retention and snapshots"): nodes trim
  // their committed whole segments, with a short follower grace on leaders and larger entries (so
  // that segments roll), which strands followers that were down or cut off; the liveness phase then
  // requires them to catch up through the leader's snapshot.
  bool retention = false;
  // Wiped data directories in the fault schedule (docs/testing.md, "Wiped data directories"): a
  // running node crashes and restarts under its id on an empty data directory (a lost or replaced
  // disk), only while every other node is up with a non-empty log (so that no majority is
  // indistinguishable from a brand-new cluster: docs/raft.md, "Unvouched nodes", limit 2).
  bool wipe = false;
  // TEST ONLY: the planted bug for --wipe: every replica ignores DATA_DIR/UNVOUCHED
  // (ReplicaConfig::ignore_unvouched_marker), so that a wiped node votes at once, as before the
  // guard. A sweep must then report lost acknowledged entries.
  bool plant_ignore_unvouched = false;
  // TEST ONLY: the planted bug for --wipe --reconfigure: every replica ignores DATA_DIR/NOT_FOUNDER
  // (ReplicaConfig::ignore_not_founder_marker), so that a joined node, or one that knew a commit,
  // grants an empty candidate again after it lost its log (docs/testing.md, "Wiped data
  // directories"). A sweep must then report a violation.
  bool plant_ignore_not_founder = false;
};

inline constexpr std::size_t kSpareSlots = 2;

struct SimResult {
  std::uint64_t seed = 0;
  std::optional<Violation> violation;  // a safety violation, or invariant "liveness"
  std::uint64_t ticks = 0;             // ticks actually simulated
  std::uint64_t liveness_ticks = 0;    // ticks the recovery took
  ClusterStats cluster;
  std::uint64_t proposals_acknowledged = 0;
  std::uint64_t proposals_failed = 0;
  std::uint64_t reads_released = 0;
  std::uint64_t appends_acknowledged =
      0;  // client appends the replicas acknowledged ((client, seq) pairs)
  std::uint64_t leaders_elected = 0;
  std::uint64_t committed_entries = 0;
  std::uint64_t partitions = 0;
  std::vector<std::string> trace_tail;
  std::string full_trace;

  bool ok() const { return !violation.has_value(); }
  bool liveness_failure() const { return violation && violation->invariant == "liveness"; }
};

SimResult run_simulation(const SimOptions& options);

// The failure report: seed, invariant, detail and the trace tail (multi-line, ends with a newline).
std::string format_failure(const SimResult& result);

}  // namespace raftlog::sim

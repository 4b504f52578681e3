// The simulator must catch a broken safety rule: in the Raft core (linked against a
// raftlog_raft_broken_* variant) or in the replica's Ready driver (a raftlog_replica_broken_* variant),
// chosen at link time by tests/sim/CMakeLists.txt; production targets are never built with either.
// RAFTLOG_BROKEN_INVARIANTS names the invariants that may report it (comma-separated): the test fails
// if the violation found is another one (a driver-contract complaint, say).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "sim/simulation.h"

#include <string>

#if !defined(RAFTLOG_BROKEN_RULE) || !defined(RAFTLOG_BROKEN_SUITE) || \
    !defined(RAFTLOG_BROKEN_INVARIANTS)
#error \
    "define RAFTLOG_BROKEN_RULE (a name string), RAFTLOG_BROKEN_SUITE (a test suite name) and RAFTLOG_BROKEN_INVARIANTS"
#endif

namespace raftlog::sim {
namespace {

// Bounds: the search must succeed within this many seeds and this much wall-clock time. The leader-churn
// profile (--aggressive) shows a previous-term-commit bug in about 1 seed in 100, a vote-check bug in
// nearly every seed, but the driver's held-acknowledgement bug with 3 nodes first at seed 989
// (clean-clone CI of 2026-12-07): 1,000 seeds left it no margin, so the hunts run up to 3,000 (a
// hunt stops at its first catch, so the bound costs nothing while the bug is caught). The wall-clock
// bound grows with the seed bound (50 s per 1,000 seeds, as before for 1,000): the 5-node
// sweep-seed hunt of the held rule needs 2,842 seeds, and a flat 50 s let a loaded CI machine reach
// only seed 1,692 (clean-clone CI of 2026-12-07).
constexpr std::uint64_t kMaxSeeds = 3'000;
constexpr auto kMaxWallTimePerThousandSeeds = std::chrono::seconds(50);

bool expected_invariant(const std::string& invariant) {
  const std::string list = std::string(",") + RAFTLOG_BROKEN_INVARIANTS + ",";
  return list.find("," + invariant + ",") != std::string::npos;
}

void expect_violation_within_bound(std::size_t nodes, bool aggressive = true,
                                   std::uint64_t max_seeds = kMaxSeeds) {
  const auto started = std::chrono::steady_clock::now();
  const auto max_wall_time =
      kMaxWallTimePerThousandSeeds * static_cast<std::int64_t>((max_seeds + 999) / 1000);
  for (std::uint64_t seed = 1; seed <= max_seeds; ++seed) {
    ASSERT_LT(std::chrono::steady_clock::now() - started, max_wall_time)
        << RAFTLOG_BROKEN_RULE << ": no violation found with " << nodes << " nodes before seed "
        << seed;
    SimOptions options;
    options.seed = seed;
    options.node_count = nodes;
    options.aggressive = aggressive;
#ifdef RAFTLOG_BROKEN_RECONFIGURE
    options.reconfigure = true;  // the membership rules need membership changes to break
#endif
#ifdef RAFTLOG_BROKEN_RETENTION
    options.retention = true;  // snapshot installs need followers stranded by trims
#endif
    const SimResult result = run_simulation(options);
    if (result.ok() || result.liveness_failure()) continue;
    std::printf("%s, %zu nodes, %s profile: caught at seed %llu by %s\n%s", RAFTLOG_BROKEN_RULE,
                nodes, aggressive ? "aggressive" : "sweep", static_cast<unsigned long long>(seed),
                result.violation->invariant.c_str(), format_failure(result).c_str());
    // A real safety invariant, one of those the bug breaks.
    EXPECT_TRUE(expected_invariant(result.violation->invariant))
        << RAFTLOG_BROKEN_RULE << " reported as " << result.violation->invariant
        << " (expected one of " << RAFTLOG_BROKEN_INVARIANTS << "): " << result.violation->detail;
    return;
  }
  ADD_FAILURE() << RAFTLOG_BROKEN_RULE << ": no violation in " << max_seeds << " seeds with "
                << nodes << " nodes";
}

// The suite name differs per linked variant so that ctest names stay unique.
TEST(RAFTLOG_BROKEN_SUITE, CaughtWithThreeNodes) { expect_violation_within_bound(3); }
TEST(RAFTLOG_BROKEN_SUITE, CaughtWithFiveNodes) { expect_violation_within_bound(5); }

#ifdef RAFTLOG_BROKEN_IN_SWEEP
// The driver's durability bugs need no special profile: the seed sweep's own seeds (ctest's
// sim_sweep_*, seeds 1-2000 with the drawn profiles) catch them.
TEST(RAFTLOG_BROKEN_SUITE, CaughtByTheSweepSeedsWithThreeNodes) {
  expect_violation_within_bound(3, false, 2000);
}
// 3,000 for 5 nodes: since NOT_FOUNDER (docs/raft.md, "Nodes that never found a cluster") the
// held-acknowledgement bug is no longer caught within seeds 1-2000 with 5 nodes; seed 2842 catches
// it (docs/testing.md).
TEST(RAFTLOG_BROKEN_SUITE, CaughtByTheSweepSeedsWithFiveNodes) {
  expect_violation_within_bound(5, false, 3000);
}
#endif

}  // namespace
}  // namespace raftlog::sim

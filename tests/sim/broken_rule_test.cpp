// The simulator must catch a Raft core with a broken safety rule. This file is linked against a broken
// core variant (raftlog_raft_broken_vote or raftlog_raft_broken_commit, chosen at link time by
// tests/sim/CMakeLists.txt); the production core is never built with the broken rule.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "sim/simulation.h"

#if !defined(RAFTLOG_BROKEN_RULE) || !defined(RAFTLOG_BROKEN_SUITE)
#error "define RAFTLOG_BROKEN_RULE (a name string) and RAFTLOG_BROKEN_SUITE (a test suite name)"
#endif

namespace raftlog::sim {
namespace {

// Bounds: the search must succeed within this many seeds and this much wall-clock time. The leader-churn
// profile (--aggressive) shows a previous-term-commit bug in about 1 seed in 100, a vote-check bug in
// nearly every seed, so 1,000 seeds leave a wide margin.
constexpr std::uint64_t kMaxSeeds = 1'000;
constexpr auto kMaxWallTime = std::chrono::seconds(50);

void expect_violation_within_bound(std::size_t nodes) {
  const auto started = std::chrono::steady_clock::now();
  for (std::uint64_t seed = 1; seed <= kMaxSeeds; ++seed) {
    ASSERT_LT(std::chrono::steady_clock::now() - started, kMaxWallTime)
        << RAFTLOG_BROKEN_RULE << ": no violation found with " << nodes << " nodes before seed " << seed;
    SimOptions options;
    options.seed = seed;
    options.node_count = nodes;
    options.aggressive = true;
    const SimResult result = run_simulation(options);
    if (result.ok() || result.liveness_failure()) continue;
    std::printf("%s, %zu nodes, aggressive profile: caught at seed %llu\n%s", RAFTLOG_BROKEN_RULE, nodes,
                static_cast<unsigned long long>(seed), format_failure(result).c_str());
    // A real safety invariant, not a driver-contract complaint.
    EXPECT_NE(result.violation->invariant, "ready-contract") << result.violation->detail;
    return;
  }
  ADD_FAILURE() << RAFTLOG_BROKEN_RULE << ": no violation in " << kMaxSeeds << " seeds with " << nodes << " nodes";
}

// The suite name differs per linked variant so that ctest names stay unique.
TEST(RAFTLOG_BROKEN_SUITE, CaughtWithThreeNodes) { expect_violation_within_bound(3); }
TEST(RAFTLOG_BROKEN_SUITE, CaughtWithFiveNodes) { expect_violation_within_bound(5); }

}  // namespace
}  // namespace raftlog::sim

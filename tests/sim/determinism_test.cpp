// One seed names one run: the same options must give the same result and a byte-identical trace.
#include <gtest/gtest.h>

#include "sim/simulation.h"

namespace raftlog::sim {
namespace {

SimOptions traced(std::uint64_t seed, std::size_t nodes) {
  SimOptions options;
  options.seed = seed;
  options.node_count = nodes;
  options.full_trace = true;
  return options;
}

TEST(SimDeterminism, SameSeedGivesByteIdenticalTraces) {
  for (std::size_t nodes : {3U, 5U}) {
    const SimResult first = run_simulation(traced(17, nodes));
    const SimResult second = run_simulation(traced(17, nodes));
    ASSERT_FALSE(first.full_trace.empty());
    EXPECT_EQ(first.full_trace, second.full_trace) << "nodes=" << nodes;
    EXPECT_EQ(first.ticks, second.ticks);
    EXPECT_EQ(first.cluster.messages_sent, second.cluster.messages_sent);
    EXPECT_EQ(first.ok(), second.ok());
  }
}

TEST(SimDeterminism, DifferentSeedsGiveDifferentRuns) {
  const SimResult a = run_simulation(traced(1, 3));
  const SimResult b = run_simulation(traced(2, 3));
  EXPECT_NE(a.full_trace, b.full_trace);
}

TEST(SimDeterminism, RunsDoWorkAndRecover) {
  // A seed is only evidence if the cluster did something: elections, commits, reads.
  const SimResult result = run_simulation(traced(3, 5));
  ASSERT_TRUE(result.ok()) << format_failure(result);
  EXPECT_GT(result.leaders_elected, 0U);
  EXPECT_GT(result.committed_entries, 10U);
  EXPECT_GT(result.proposals_acknowledged, 0U);
  EXPECT_GT(result.appends_acknowledged, 0U)
      << "no client append was acknowledged through the replica";
  EXPECT_GT(result.reads_released, 0U);
  EXPECT_GT(result.cluster.messages_sent, 100U);
  EXPECT_GT(result.cluster.flush_cycles, 0U);
  EXPECT_GT(result.liveness_ticks, 0U);
}

TEST(SimRun, EveryKindOfFaultHappens) {
  // Guards against a fault silently never firing: over a few seeds, each kind must occur.
  ClusterStats total;
  std::uint64_t partitions = 0;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    SimOptions options;
    options.seed = seed;
    options.node_count = 5;
    const SimResult result = run_simulation(options);
    ASSERT_TRUE(result.ok()) << format_failure(result);
    total.crashes += result.cluster.crashes;
    total.leader_strikes += result.cluster.leader_strikes;
    total.pauses += result.cluster.pauses;
    total.messages_dropped += result.cluster.messages_dropped;
    total.transfers_started += result.cluster.transfers_started;
    total.reads_aborted += result.cluster.reads_aborted;
    total.sync_failures += result.cluster.sync_failures;
    total.duplicate_answers += result.cluster.duplicate_answers;
    partitions += result.partitions;
  }
  EXPECT_GT(total.crashes, 0U);
  EXPECT_GT(total.leader_strikes, 0U);
  EXPECT_GT(total.pauses, 0U);
  EXPECT_GT(total.messages_dropped, 0U);
  EXPECT_GT(total.transfers_started, 0U);
  EXPECT_GT(partitions, 0U);
  EXPECT_GT(total.sync_failures, 0U) << "no injected sync failure";
  EXPECT_GT(total.duplicate_answers, 0U) << "no retry was answered from the dedup table";
}

TEST(SimRun, RecoveryThatTakesTooLongIsALivenessFailure) {
  // One tick after the faults stop is not enough for an election: the run must fail as liveness.
  SimOptions options;
  options.seed = 4;
  options.liveness_ticks = 1;
  options.catch_up_allowance = false;
  const SimResult result = run_simulation(options);
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(result.liveness_failure()) << format_failure(result);
  EXPECT_FALSE(result.trace_tail.empty());
}

TEST(SimRun, AggressiveProfileStillRecovers) {
  // The leader-churn profile must not be so hostile that a correct core fails.
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    SimOptions options;
    options.seed = seed;
    options.node_count = 3;
    options.aggressive = true;
    const SimResult result = run_simulation(options);
    ASSERT_TRUE(result.ok()) << format_failure(result);
  }
}

}  // namespace
}  // namespace raftlog::sim

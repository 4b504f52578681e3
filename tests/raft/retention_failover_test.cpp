// The retention hold across a leader change (src/replica/retention_hold.h, docs/operations.md
// "Retention"). A new leader does not know the match of a peer that has not answered it yet (one
// that is down): it keeps for it what the previous leader kept (the hold it inherited, within that
// hold's grace period), not the whole log. It used to count such a peer as just heard with match
// 0, so every leader change held the whole log on every node for a grace period while a node stayed
// down, including one the previous leader had stopped holding for long before (review of the
// retention hold).
#include <gtest/gtest.h>

#include "test_cluster.h"

namespace raftlog::raft {
namespace {

using testing::TestCluster;

constexpr int kGraceTicks = 20;

void grace_of_20_ticks(replica::ReplicaConfig& config) {
  config.retention_follower_grace_ms = kGraceTicks * config.tick_ms;
}

// Leader 1 commits 2..10 on every node, then 11..20 without node 3 (isolated: down).
void leave_node_3_at_10(TestCluster& c) {
  ASSERT_TRUE(c.campaign_until_leader(1));
  for (int i = 2; i <= 10; ++i) ASSERT_TRUE(c.propose(1, {"e" + std::to_string(i)}).proposed());
  c.deliver_all();
  ASSERT_EQ(c.node(3).log.last_index(), 10u);
  c.isolate(3);
  for (int i = 11; i <= 20; ++i) ASSERT_TRUE(c.propose(1, {"e" + std::to_string(i)}).proposed());
  c.deliver_all();
  ASSERT_EQ(c.raft(1).commit_index(), 20u);
}

// Leadership moves from node 1 to node 2 (node 3 still down); returns node 2's trim limit then.
std::uint64_t trim_limit_after_handing_1_to_2(TestCluster& c) {
  const testing::TransferRequest transfer = c.transfer_leadership(1, 2);
  EXPECT_FALSE(transfer.answered()) << transfer.result().error.message;
  c.deliver_all();
  EXPECT_EQ(c.leader(), 2u);
  const replica::TrimResult trimmed = c.trim(2, 1000);
  EXPECT_TRUE(trimmed.error.ok()) << trimmed.error.message;
  return trimmed.limit;
}

// Node 3 went down moments ago: leader 1 kept entries from 11 for it, and so does leader 2.
TEST(RetentionFailover, ANewLeaderKeepsForADownPeerWhatThePreviousLeaderKept) {
  TestCluster c({1, 2, 3}, {}, grace_of_20_ticks);
  ASSERT_NO_FATAL_FAILURE(leave_node_3_at_10(c));
  ASSERT_EQ(c.trim(1, 1000).limit, 11u) << "leader 1 keeps what node 3 needs";
  EXPECT_EQ(trim_limit_after_handing_1_to_2(c), 11u) << "not the whole log (1)";
  // Past the inherited hold's grace period (from leader 1's last message), node 3 is no longer
  // held for.
  c.tick_all(kGraceTicks + 2);
  EXPECT_GT(c.trim(2, 1000).limit, 20u);
}

// Node 3 has been down longer than the grace period: leader 1 stopped holding for it, and leader 2
// does not start again.
TEST(RetentionFailover, ANodeDownPastTheGracePeriodIsNotHeldForAgainAfterALeaderChange) {
  TestCluster c({1, 2, 3}, {}, grace_of_20_ticks);
  ASSERT_NO_FATAL_FAILURE(leave_node_3_at_10(c));
  c.tick_all(kGraceTicks + 2);
  ASSERT_GT(c.trim(1, 1000).limit, 20u) << "leader 1 no longer holds for node 3";
  EXPECT_GT(trim_limit_after_handing_1_to_2(c), 20u) << "held for again (the whole log: 1)";
}

}  // namespace
}  // namespace raftlog::raft

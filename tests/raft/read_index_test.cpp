// ReadIndex: deferred until the leader commits an entry of its term, released after a heartbeat
// quorum, aborted when leadership is lost, bounded.
#include <gtest/gtest.h>

#include "test_cluster.h"

namespace raftlog::raft {
namespace {

using testing::TestCluster;

TEST(ReadIndex, ReleasedOnlyAfterAHeartbeatQuorum) {
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  Entry e;
  e.payload = "w";
  ASSERT_EQ(c.raft(1).propose({e}).status, ProposeStatus::kOk);
  c.deliver_all();
  ASSERT_EQ(c.raft(1).commit_index(), 2u);
  // Heartbeat answers are lost: the read must wait.
  c.add_drop_rule([](const Message& m) { return m.type == MessageType::kHeartbeatResponse; });
  ASSERT_EQ(c.raft(1).read_index(77), ReadIndexStatus::kOk);
  c.deliver_all();
  EXPECT_TRUE(c.node(1).read_states.empty());
  EXPECT_EQ(c.raft(1).pending_reads(), 1u);
  c.heal();
  // A regular heartbeat carries the pending round's context, so the read completes without a retry.
  c.tick(1);
  c.deliver_all();
  ASSERT_EQ(c.node(1).read_states.size(), 1u);
  EXPECT_EQ(c.node(1).read_states[0], (ReadState{77, 2}));
  EXPECT_EQ(c.raft(1).pending_reads(), 0u);
}

TEST(ReadIndex, OneFollowerAckIsAMajorityOfThree) {
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  c.isolate(3);
  ASSERT_EQ(c.raft(1).read_index(5), ReadIndexStatus::kOk);
  c.deliver_all();
  ASSERT_EQ(c.node(1).read_states.size(), 1u);
  EXPECT_EQ(c.node(1).read_states[0].index, 1u);
}

TEST(ReadIndex, DeferredUntilTheLeaderCommitsAnEntryOfItsTerm) {
  TestCluster c({1, 2, 3});
  // Followers' append acknowledgements are lost: the new leader's no-op cannot commit.
  c.add_drop_rule([](const Message& m) { return m.type == MessageType::kAppendResponse; });
  ASSERT_TRUE(c.campaign_until_leader(1));
  ASSERT_EQ(c.raft(1).commit_index(), 0u);
  ASSERT_EQ(c.raft(1).read_index(9), ReadIndexStatus::kOk);
  c.tick(1, 3);
  c.deliver_all();
  EXPECT_TRUE(c.node(1).read_states.empty())
      << "heartbeats alone cannot release a read before own-term commit";
  c.heal();
  c.tick(1, 2);
  c.deliver_all();
  ASSERT_EQ(c.raft(1).commit_index(), 1u);
  ASSERT_EQ(c.node(1).read_states.size(), 1u);
  EXPECT_EQ(c.node(1).read_states[0], (ReadState{9, 1}));
}

TEST(ReadIndex, AbortedWhenLeadershipIsLost) {
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  c.isolate(1);
  ASSERT_EQ(c.raft(1).read_index(31), ReadIndexStatus::kOk);
  ASSERT_EQ(c.raft(1).read_index(32), ReadIndexStatus::kOk);
  c.tick(1, 20);  // check-quorum step-down
  ASSERT_EQ(c.raft(1).role(), Role::kFollower);
  EXPECT_TRUE(c.node(1).read_states.empty());
  EXPECT_EQ(c.node(1).aborted_reads, (std::vector<std::uint64_t>{31, 32}));
  EXPECT_EQ(c.raft(1).pending_reads(), 0u);
}

TEST(ReadIndex, RefusedOnFollowersAndWhenTooManyPending) {
  TestCluster c({1, 2, 3}, [](Config& config) { config.max_pending_reads = 2; });
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  EXPECT_EQ(c.raft(2).read_index(1), ReadIndexStatus::kNotLeader);
  c.isolate(2);
  c.isolate(3);
  EXPECT_EQ(c.raft(1).read_index(1), ReadIndexStatus::kOk);
  EXPECT_EQ(c.raft(1).read_index(2), ReadIndexStatus::kOk);
  EXPECT_EQ(c.raft(1).read_index(3), ReadIndexStatus::kTooManyPending);
  c.heal();
  c.tick(1);
  c.deliver_all();
  EXPECT_EQ(c.node(1).read_states.size(), 2u);
  EXPECT_EQ(c.raft(1).read_index(3), ReadIndexStatus::kOk);
}

TEST(ReadIndex, SingleVoterReleasesAtOnce) {
  TestCluster c({4});
  ASSERT_TRUE(c.campaign_until_leader(4, 40));
  ASSERT_EQ(c.raft(4).commit_index(), 1u);
  ASSERT_EQ(c.raft(4).read_index(8), ReadIndexStatus::kOk);
  c.process(4);
  ASSERT_EQ(c.node(4).read_states.size(), 1u);
  EXPECT_EQ(c.node(4).read_states[0], (ReadState{8, 1}));
}

}  // namespace
}  // namespace raftlog::raft

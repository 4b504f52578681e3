// ReadIndex: deferred until the leader commits an entry of its term, released after a heartbeat
// quorum, aborted when leadership is lost, bounded. Reads go through the replica, which numbers them
// itself: the core's ReadStates carry the replica's request ids, and each read's answer comes back
// through its callback (testing::ReadRequest).
#include <gtest/gtest.h>

#include "test_cluster.h"

namespace raftlog::raft {
namespace {

using testing::ReadRequest;
using testing::TestCluster;
using ErrorCode = replica::ErrorCode;

bool released_at(const ReadRequest& read, Index index) {
  return read.answered() && read.result().error.ok() && read.result().read_index == index;
}

TEST(ReadIndex, ReleasedOnlyAfterAHeartbeatQuorum) {
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  ASSERT_TRUE(c.propose(1, {"w"}).proposed());
  c.deliver_all();
  ASSERT_EQ(c.raft(1).commit_index(), 2u);
  // Heartbeat answers are lost: the read must wait.
  c.add_drop_rule([](const Message& m) { return m.type == MessageType::kHeartbeatResponse; });
  const ReadRequest read = c.read_index(1);
  c.deliver_all();
  EXPECT_TRUE(c.node(1).read_states.empty());
  EXPECT_FALSE(read.answered());
  EXPECT_EQ(c.raft(1).pending_reads(), 1u);
  c.heal();
  // A regular heartbeat carries the pending round's context, so the read completes without a retry.
  c.tick(1);
  c.deliver_all();
  ASSERT_EQ(c.node(1).read_states.size(), 1u);
  EXPECT_EQ(c.node(1).read_states[0].index, 2u);
  EXPECT_TRUE(released_at(read, 2));
  EXPECT_EQ(c.raft(1).pending_reads(), 0u);
}

TEST(ReadIndex, OneFollowerAckIsAMajorityOfThree) {
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  c.isolate(3);
  const ReadRequest read = c.read_index(1);
  c.deliver_all();
  ASSERT_EQ(c.node(1).read_states.size(), 1u);
  EXPECT_EQ(c.node(1).read_states[0].index, 1u);
  EXPECT_TRUE(released_at(read, 1));
}

TEST(ReadIndex, DeferredUntilTheLeaderCommitsAnEntryOfItsTerm) {
  TestCluster c({1, 2, 3});
  // Followers' append acknowledgements are lost: the new leader's no-op cannot commit.
  c.add_drop_rule([](const Message& m) { return m.type == MessageType::kAppendResponse; });
  ASSERT_TRUE(c.campaign_until_leader(1));
  ASSERT_EQ(c.raft(1).commit_index(), 0u);
  const ReadRequest read = c.read_index(1);
  ASSERT_FALSE(read.answered()) << "refused: " << read.result().error.message;
  c.tick(1, 3);
  c.deliver_all();
  EXPECT_TRUE(c.node(1).read_states.empty())
      << "heartbeats alone cannot release a read before own-term commit";
  EXPECT_FALSE(read.answered());
  c.heal();
  c.tick(1, 2);
  c.deliver_all();
  ASSERT_EQ(c.raft(1).commit_index(), 1u);
  ASSERT_EQ(c.node(1).read_states.size(), 1u);
  EXPECT_EQ(c.node(1).read_states[0].index, 1u);
  EXPECT_TRUE(released_at(read, 1));
}

TEST(ReadIndex, AbortedWhenLeadershipIsLost) {
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  c.isolate(1);
  const ReadRequest first = c.read_index(1);
  const ReadRequest second = c.read_index(1);
  ASSERT_FALSE(first.answered());
  ASSERT_FALSE(second.answered());
  c.tick(1, 20);  // check-quorum step-down
  ASSERT_EQ(c.raft(1).role(), Role::kFollower);
  EXPECT_TRUE(c.node(1).read_states.empty());
  EXPECT_EQ(c.node(1).aborted_reads.size(), 2u);
  EXPECT_LT(c.node(1).aborted_reads[0], c.node(1).aborted_reads[1]) << "aborted in request order";
  for (const ReadRequest* read : {&first, &second}) {
    ASSERT_TRUE(read->answered());
    EXPECT_EQ(read->code(), ErrorCode::kNoLeader) << "the node knows no leader after stepping down";
  }
  EXPECT_EQ(c.raft(1).pending_reads(), 0u);
}

TEST(ReadIndex, RefusedOnFollowersAndWhenTooManyPending) {
  TestCluster c({1, 2, 3}, [](Config& config) { config.max_pending_reads = 2; });
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  EXPECT_EQ(c.read_index(2).code(), ErrorCode::kNotLeader);
  c.isolate(2);
  c.isolate(3);
  const ReadRequest first = c.read_index(1);
  const ReadRequest second = c.read_index(1);
  EXPECT_FALSE(first.answered());
  EXPECT_FALSE(second.answered());
  const ReadRequest third = c.read_index(1);
  EXPECT_EQ(third.code(), ErrorCode::kResourceExhausted);
  EXPECT_EQ(third.result().error.reason, replica::kReasonTooManyPending);
  c.heal();
  c.tick(1);
  c.deliver_all();
  EXPECT_EQ(c.node(1).read_states.size(), 2u);
  EXPECT_TRUE(released_at(first, 1));
  EXPECT_TRUE(released_at(second, 1));
  EXPECT_FALSE(c.read_index(1).answered()) << "accepted again";
}

TEST(ReadIndex, SingleVoterReleasesAtOnce) {
  TestCluster c({4});
  ASSERT_TRUE(c.campaign_until_leader(4, 40));
  ASSERT_EQ(c.raft(4).commit_index(), 1u);
  const ReadRequest read = c.read_index(4);
  ASSERT_EQ(c.node(4).read_states.size(), 1u);
  EXPECT_EQ(c.node(4).read_states[0].index, 1u);
  EXPECT_TRUE(released_at(read, 1));
}

}  // namespace
}  // namespace raftlog::raft

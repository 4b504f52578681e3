// Leadership transfer: catch the target up, TimeoutNow, the target campaigns at once; proposals are
// refused meanwhile; an unfinished transfer aborts after an election timeout.
#include <gtest/gtest.h>

#include "test_cluster.h"

namespace raftlog::raft {
namespace {

using testing::payload_entry;
using testing::TestCluster;

TEST(Transfer, LaggingFollowerIsCaughtUpThenTakesOver) {
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.isolate(3);
  for (int i = 0; i < 5; ++i)
    ASSERT_EQ(c.raft(1).propose({payload_entry("p")}).status, ProposeStatus::kOk);
  c.deliver_all();
  ASSERT_EQ(c.raft(1).commit_index(), 6u);
  ASSERT_EQ(c.node(3).log.last_index(), 1u) << "node 3 lags";
  c.heal();
  auto pre_votes = [&] {
    return c.count_delivered([](const Message& m) { return m.type == MessageType::kPreVote; });
  };
  const std::size_t pre_votes_before = pre_votes();
  ASSERT_EQ(c.raft(1).transfer_leadership(3), TransferStatus::kOk);
  EXPECT_EQ(c.raft(1).transfer_target(), 3u);
  EXPECT_EQ(c.raft(1).propose({payload_entry("q")}).status, ProposeStatus::kTransferring);
  EXPECT_EQ(c.raft(1).transfer_leadership(2), TransferStatus::kInProgress);
  c.deliver_all();
  EXPECT_EQ(c.raft(3).role(), Role::kLeader);
  EXPECT_EQ(c.raft(3).term(), 2u);
  EXPECT_EQ(c.raft(1).role(), Role::kFollower);
  EXPECT_EQ(c.raft(1).leader(), 3u);
  EXPECT_GE(c.raft(3).commit_index(), 6u);
  EXPECT_EQ(c.count_delivered([](const Message& m) { return m.type == MessageType::kTimeoutNow; }),
            1u);
  EXPECT_EQ(pre_votes(), pre_votes_before) << "the target skips pre-vote";
}

TEST(Transfer, TargetCampaignsDespiteTheLeaderLease) {
  // Node 2 hears from the leader (in lease) yet must grant the transfer target's vote.
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  c.isolate(1);  // the old leader cannot vote; node 3 needs node 2
  Message timeout_now;
  timeout_now.type = MessageType::kTimeoutNow;
  timeout_now.from = 1;
  timeout_now.to = 3;
  timeout_now.term = 1;
  c.raft(3).step(timeout_now);
  c.process(3);
  c.deliver_all();
  EXPECT_EQ(c.raft(3).role(), Role::kLeader);
}

TEST(Transfer, AbortedAfterAnElectionTimeout) {
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  c.isolate(3);
  ASSERT_EQ(c.raft(1).transfer_leadership(3), TransferStatus::kOk);
  for (int i = 0; i < 9; ++i) {
    c.tick(1);
    c.tick(2);
    c.deliver_all();
  }
  EXPECT_EQ(c.raft(1).transfer_target(), 3u);
  c.tick(1);
  EXPECT_EQ(c.raft(1).transfer_target(), kNoNode);
  EXPECT_EQ(c.raft(1).role(), Role::kLeader);
  EXPECT_EQ(c.raft(1).propose({payload_entry("again")}).status, ProposeStatus::kOk);
}

TEST(Transfer, RefusalsNameTheirReason) {
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  EXPECT_EQ(c.raft(2).transfer_leadership(3), TransferStatus::kNotLeader);
  EXPECT_EQ(c.raft(1).transfer_leadership(1), TransferStatus::kAlreadyLeader);
  EXPECT_EQ(c.raft(1).transfer_leadership(9), TransferStatus::kUnknownTarget);
}

}  // namespace
}  // namespace raftlog::raft

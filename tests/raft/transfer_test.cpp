// Leadership transfer: catch the target up, TimeoutNow, the target campaigns at once; proposals are
// refused meanwhile; an unfinished transfer aborts after an election timeout.
#include <gtest/gtest.h>

#include "raft/memory_log.h"
#include "test_cluster.h"

namespace raftlog::raft {
namespace {

using testing::TestCluster;
using ErrorCode = replica::ErrorCode;

TEST(Transfer, LaggingFollowerIsCaughtUpThenTakesOver) {
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.isolate(3);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(c.propose(1, {"p"}).proposed());
  c.deliver_all();
  ASSERT_EQ(c.raft(1).commit_index(), 6u);
  ASSERT_EQ(c.node(3).log.last_index(), 1u) << "node 3 lags";
  c.heal();
  auto pre_votes = [&] {
    return c.count_delivered([](const Message& m) { return m.type == MessageType::kPreVote; });
  };
  const std::size_t pre_votes_before = pre_votes();
  const testing::TransferRequest transfer = c.transfer_leadership(1, 3);
  ASSERT_FALSE(transfer.answered()) << "refused: " << transfer.result().error.message;
  EXPECT_EQ(c.raft(1).transfer_target(), 3u);
  const testing::Proposal during = c.propose(1, {"q"});
  EXPECT_EQ(during.refusal(), ErrorCode::kUnavailable) << "the core answers kTransferring";
  const testing::TransferRequest second = c.transfer_leadership(1, 2);
  EXPECT_EQ(second.code(), ErrorCode::kUnavailable);
  EXPECT_EQ(second.result().error.reason, replica::kReasonTransferInProgress);
  c.deliver_all();
  EXPECT_EQ(c.raft(3).role(), Role::kLeader);
  EXPECT_EQ(c.raft(3).term(), 2u);
  EXPECT_EQ(c.raft(1).role(), Role::kFollower);
  EXPECT_EQ(c.raft(1).leader(), 3u);
  EXPECT_GE(c.raft(3).commit_index(), 6u);
  EXPECT_EQ(c.count_delivered([](const Message& m) { return m.type == MessageType::kTimeoutNow; }),
            1u);
  EXPECT_EQ(pre_votes(), pre_votes_before) << "the target skips pre-vote";
  // The replica answered the transfer once the target led.
  ASSERT_TRUE(transfer.answered());
  EXPECT_TRUE(transfer.result().error.ok());
  EXPECT_EQ(transfer.result().leader_id, 3u);
  EXPECT_EQ(transfer.result().term, 2u);
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
  c.step(3, timeout_now);
  c.deliver_all();
  EXPECT_EQ(c.raft(3).role(), Role::kLeader);
}

TEST(Transfer, AbortedAfterAnElectionTimeout) {
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  c.isolate(3);
  const testing::TransferRequest transfer = c.transfer_leadership(1, 3);
  ASSERT_FALSE(transfer.answered());
  for (int i = 0; i < 9; ++i) {
    c.tick(1);
    c.tick(2);
    c.deliver_all();
  }
  EXPECT_EQ(c.raft(1).transfer_target(), 3u);
  c.tick(1);
  EXPECT_EQ(c.raft(1).transfer_target(), kNoNode);
  EXPECT_EQ(c.raft(1).role(), Role::kLeader);
  EXPECT_TRUE(c.propose(1, {"again"}).proposed());
  // The replica answers the request once its own deadline (four election timeouts) passed.
  EXPECT_FALSE(transfer.answered()) << "answered before the replica's transfer deadline";
  for (int i = 0; i < 4 * 10 && !transfer.answered(); ++i) {
    c.tick(1);
    c.tick(2);
    c.deliver_all();
  }
  ASSERT_TRUE(transfer.answered());
  EXPECT_EQ(transfer.result().error.reason, replica::kReasonTransferTimeout);
  EXPECT_EQ(c.raft(1).role(), Role::kLeader);
}

// drills6 L10: `transfer-leader --to` a dead voter was accepted, refused proposals for an election
// timeout, aborted, and the client retried it for its whole deadline ("Deadline Exceeded"), the
// cluster refusing appends most of that time. A target the leader has not heard from for an
// election timeout is refused at once with a reason and the silence, and appends go on.
TEST(Transfer, ATargetSilentForAnElectionTimeoutIsRefusedAtOnceAndAppendsGoOn) {
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  c.isolate(3);
  for (int i = 0; i < 10; ++i) {
    c.tick(1);
    c.tick(2);
    c.deliver_all();
  }
  const testing::TransferRequest silent = c.transfer_leadership(1, 3);
  ASSERT_TRUE(silent.answered()) << "refused at once, not tried for an election timeout";
  EXPECT_EQ(silent.code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(silent.result().error.reason, replica::kReasonTransferTargetSilent);
  EXPECT_NE(silent.result().error.message.find("node 3 has not answered this leader (node 1) for "),
            std::string::npos)
      << silent.result().error.message;
  EXPECT_NE(silent.result().error.message.find("is it running?"), std::string::npos);
  EXPECT_EQ(c.raft(1).transfer_target(), kNoNode);
  EXPECT_TRUE(c.propose(1, {"goes on"}).proposed()) << "no transfer holds proposals back";

  // Once node 3 answers again, the same transfer goes through.
  c.heal();
  for (int i = 0; i < 2; ++i) {
    c.tick(1);
    c.deliver_all();
  }
  const testing::TransferRequest answered = c.transfer_leadership(1, 3);
  c.deliver_all();
  ASSERT_TRUE(answered.answered());
  EXPECT_TRUE(answered.result().error.ok()) << answered.result().error.message;
  EXPECT_EQ(c.raft(3).role(), Role::kLeader);
}

// drills7 L2: a learner is a member, so TRANSFER_TARGET_UNKNOWN ("not a member" in docs/errors.md)
// misled; it has its own word, and the message says what to do.
TEST(Transfer, ATransferToALearnerIsRefusedAsALearner) {
  TestCluster c({1, 2, 3, 4}, [](Config& config) { config.initial_conf = ConfState{{1, 2, 3}}; });
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  const testing::MembershipRequest added =
      c.propose_conf_change(1, ConfChange{ConfChangeType::kAddLearner, 4});
  c.deliver_all();
  ASSERT_TRUE(added.answered());
  ASSERT_TRUE(added.result().error.ok()) << added.result().error.message;
  const testing::TransferRequest to_learner = c.transfer_leadership(1, 4);
  ASSERT_TRUE(to_learner.answered());
  EXPECT_EQ(to_learner.code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(to_learner.result().error.reason, replica::kReasonTransferTargetLearner);
  EXPECT_NE(to_learner.result().error.message.find("node 4 is a learner"), std::string::npos)
      << to_learner.result().error.message;
  EXPECT_EQ(c.raft(1).transfer_target(), kNoNode);
}

TEST(Transfer, RefusalsNameTheirReason) {
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  // The replica's answers to the core's refusals.
  const testing::TransferRequest from_follower = c.transfer_leadership(2, 3);
  EXPECT_EQ(from_follower.code(), ErrorCode::kNotLeader);
  EXPECT_EQ(from_follower.result().error.leader_id, 1u);
  const testing::TransferRequest to_itself = c.transfer_leadership(1, 1);
  ASSERT_TRUE(to_itself.answered()) << "kAlreadyLeader is answered at once";
  EXPECT_TRUE(to_itself.result().error.ok());
  EXPECT_EQ(to_itself.result().leader_id, 1u);
  const testing::TransferRequest unknown = c.transfer_leadership(1, 9);
  EXPECT_EQ(unknown.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(unknown.result().error.reason, replica::kReasonTransferTargetUnknown);
  EXPECT_NE(unknown.result().error.message.find("node 9 is not a member"), std::string::npos)
      << unknown.result().error.message;
  EXPECT_EQ(c.raft(1).transfer_target(), kNoNode);

  // The same refusal on a bare single-voter core.
  testing::SoloLeader solo;
  ASSERT_EQ(solo.core.role(), Role::kLeader);
  EXPECT_EQ(solo.core.transfer_leadership(9), TransferStatus::kUnknownTarget);
}

// Review of failover, L-5: the disk handover goes only to a follower whose match the leader knows
// (it acknowledged an append of this term), the most caught-up of them. Node 3 has room, but the
// leader heard from it through heartbeats only (its appends are lost), so its log may be far
// behind: a transfer to it would refuse appends for an election timeout, likely fail, and spend
// the one handover per 10 s. It is not chosen: the leader keeps leadership (node 2 reports no
// room). Once node 3 acknowledges appends, it is chosen and takes over.
TEST(Transfer, TheDiskHandoverGoesOnlyToAFollowerWhoseMatchTheLeaderKnows) {
  TestCluster c({1, 2, 3});
  c.add_drop_rule([](const Message& m) { return m.type == MessageType::kAppend && m.to == 3; });
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.set_disk_used_ratio(2, 0.95);
  c.tick_all(10);  // node 2's probe sees its disk past the mark; its answers say so
  c.set_disk_used_ratio(1, 0.95);
  c.tick_all(10);
  ASSERT_EQ(c.leader(), 1u);
  bool heard_3 = false;
  for (const PeerProgress& p : c.raft(1).progress()) {
    if (p.id == 3) heard_3 = p.heard_this_term && p.probing && !p.disk_over_watermark;
  }
  ASSERT_TRUE(heard_3) << "node 3 answers heartbeats, reports room, acknowledged no append";
  EXPECT_EQ(c.raft(1).transfer_target(), kNoNode);
  const replica::NodeStatus status = c.replica(1).status();
  EXPECT_TRUE(status.disk_over_high_watermark);
  EXPECT_TRUE(status.disk_keeping_leadership) << "no follower with room whose match is known";
  EXPECT_EQ(c.count_delivered([](const Message& m) { return m.type == MessageType::kTimeoutNow; }),
            0u);

  c.heal();  // node 3's appends get through: it catches up, and the leader hands over to it
  c.tick_all(20);
  EXPECT_EQ(c.leader(), 3u);
  EXPECT_EQ(c.raft(3).commit_index(), c.raft(1).commit_index());
}

}  // namespace
}  // namespace raftlog::raft

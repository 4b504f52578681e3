// A follower far behind its leader is not ready for reads (drills7 L1; replica/catch_up_rule.h):
// a voter back after missing entries reports it (NodeStatus::catching_up_to_leader_commit, which
// health turns into NOT_SERVING) until its log reaches the commit index its leader named, and a
// caught-up voter starts catching up again only past --serving-lag-entries. Before this, only a
// learner had such a rule, and a voter restarted 15,000 entries behind reported SERVING.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_cluster.h"

namespace raftlog::raft {
namespace {

using testing::TestCluster;

// Elects node 1 and commits its no-op; every node then holds the commit index.
void elect_one(TestCluster& c) {
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  ASSERT_EQ(c.raft(1).commit_index(), 1u);
}

void commit_entries(TestCluster& c, int count) {
  for (int i = 0; i < count; ++i) ASSERT_TRUE(c.propose(1, {"e" + std::to_string(i)}).proposed());
  c.deliver_all();
}

// Delivers everything but the appends to node 3 (heartbeats reach it, so it keeps its leader and
// hears the leader's commit index), bounded.
void deliver_all_but_appends_to_3(TestCluster& c) {
  for (int i = 0; i < 10000; ++i) {
    std::vector<Message> next = c.take_from_network(
        [](const Message& m) { return !(m.to == 3 && m.type == MessageType::kAppend); }, 1);
    if (next.empty()) return;
    c.step(next.front().to, next.front());
  }
  ADD_FAILURE() << "the network never drained";
}

// Node 3, cut off long enough to lose its leader while two entries commit without it, is catching
// up from the leader's first heartbeat on, though two entries are far below the threshold (it does
// not know what it missed), and is caught up once its log reaches the commit index.
TEST(FollowerReadiness, AVoterBackFromACutOffIsCatchingUpUntilItReachesTheCommitIndex) {
  TestCluster c({1, 2, 3});
  ASSERT_NO_FATAL_FAILURE(elect_one(c));
  EXPECT_EQ(c.replica(3).status().catching_up_to_leader_commit, 0u);
  c.isolate(3);
  ASSERT_NO_FATAL_FAILURE(commit_entries(c, 2));
  const Index commit = c.raft(1).commit_index();
  ASSERT_EQ(commit, 3u);
  for (int i = 0; i < 40 && c.raft(3).leader() != kNoNode; ++i) c.tick(3);
  ASSERT_EQ(c.raft(3).leader(), kNoNode) << "its election timer fired";
  c.heal();
  for (int round = 0; round < 20 && c.raft(3).leader() != 1; ++round) {
    c.tick(1);
    deliver_all_but_appends_to_3(c);
  }
  ASSERT_EQ(c.raft(3).leader(), 1u) << "a heartbeat reached it";
  const replica::NodeStatus behind = c.replica(3).status();
  EXPECT_EQ(behind.catching_up_to_leader_commit, commit);
  EXPECT_EQ(behind.behind_leader_commit_entries, 2u);
  EXPECT_EQ(behind.learner_catching_up_to_index, 0u) << "a voter's is the new field alone";

  c.tick_all(3);
  ASSERT_EQ(c.node(3).log.last_index(), c.raft(1).last_index());
  const replica::NodeStatus caught_up = c.replica(3).status();
  EXPECT_EQ(caught_up.catching_up_to_leader_commit, 0u);
  EXPECT_EQ(caught_up.behind_leader_commit_entries, 0u);
}

// A voter that keeps its leader (heartbeats reach it, appends do not) stays caught up while it is at
// most serving_lag_entries behind, and is catching up once it is further behind, until its log
// reaches the commit index again.
TEST(FollowerReadiness, ACaughtUpVoterIsCatchingUpOnlyPastTheThreshold) {
  TestCluster c({1, 2, 3}, {},
                [](replica::ReplicaConfig& config) { config.serving_lag_entries = 4; });
  ASSERT_NO_FATAL_FAILURE(elect_one(c));
  c.add_drop_rule([](const Message& m) { return m.to == 3 && m.type == MessageType::kAppend; });
  ASSERT_NO_FATAL_FAILURE(commit_entries(c, 4));
  c.tick_all(2);  // heartbeats name the leader's commit index
  ASSERT_EQ(c.raft(3).leader(), 1u);
  ASSERT_EQ(c.node(3).log.last_index(), 1u);
  replica::NodeStatus status = c.replica(3).status();
  EXPECT_EQ(status.behind_leader_commit_entries, 4u);
  EXPECT_EQ(status.catching_up_to_leader_commit, 0u) << "4 behind, the threshold: still ready";

  ASSERT_NO_FATAL_FAILURE(commit_entries(c, 1));
  c.tick_all(2);
  status = c.replica(3).status();
  EXPECT_EQ(status.behind_leader_commit_entries, 5u);
  EXPECT_EQ(status.catching_up_to_leader_commit, c.raft(1).commit_index());

  c.heal();
  c.tick_all(3);
  ASSERT_EQ(c.node(3).log.last_index(), c.raft(1).last_index());
  status = c.replica(3).status();
  EXPECT_EQ(status.catching_up_to_leader_commit, 0u);
  EXPECT_EQ(status.behind_leader_commit_entries, 0u);
}

// Review of lagging6, #1: a learner never campaigns, so its core keeps its leader for ever; cut off,
// it reported that leader and SERVING with a frozen log. Silent past twice the election timeout, its
// leader is no longer reported (health: "no leader known"), and back in touch it must reach the
// commit index again, as a voter back from a cut-off does.
TEST(FollowerReadiness, ALearnerCutOffFromItsLeaderNoLongerReportsOne) {
  TestCluster c({1, 2, 3, 4}, [](Config& config) { config.initial_conf = ConfState{{1, 2, 3}}; });
  ASSERT_NO_FATAL_FAILURE(elect_one(c));
  const testing::MembershipRequest added =
      c.propose_conf_change(1, ConfChange{ConfChangeType::kAddLearner, 4});
  c.tick_all(3);
  ASSERT_TRUE(added.answered());
  ASSERT_TRUE(added.result().error.ok()) << added.result().error.message;
  ASSERT_EQ(c.raft(4).leader(), 1u);
  ASSERT_EQ(c.replica(4).status().leader_id, 1u);
  ASSERT_EQ(c.replica(4).status().catching_up_to_leader_commit, 0u);
  c.isolate(4);
  ASSERT_NO_FATAL_FAILURE(commit_entries(c, 2));
  const Index commit = c.raft(1).commit_index();
  const int election_ticks = c.node(4).config.raft.election_ticks;
  c.tick(4, 2 * election_ticks - 1);
  EXPECT_EQ(c.replica(4).status().leader_id, 1u) << "not yet past twice the election timeout";
  c.tick(4, 1);
  EXPECT_EQ(c.raft(4).leader(), 1u) << "the core keeps it (a learner never campaigns)";
  EXPECT_EQ(c.replica(4).status().leader_id, kNoNode);
  EXPECT_EQ(c.replica(4).status().catching_up_to_leader_commit, 0u);
  c.heal();
  for (int round = 0; round < 20 && c.replica(4).status().leader_id == kNoNode; ++round) {
    c.tick(1);
    for (int i = 0; i < 10000; ++i) {
      std::vector<Message> next = c.take_from_network(
          [](const Message& m) { return !(m.to == 4 && m.type == MessageType::kAppend); }, 1);
      if (next.empty()) break;
      c.step(next.front().to, next.front());
    }
  }
  const replica::NodeStatus back = c.replica(4).status();
  ASSERT_EQ(back.leader_id, 1u) << "a heartbeat reached it";
  EXPECT_EQ(back.catching_up_to_leader_commit, commit);
  EXPECT_EQ(back.learner_catching_up_to_index, commit);
  c.tick_all(3);
  ASSERT_EQ(c.node(4).log.last_index(), c.raft(1).last_index());
  EXPECT_EQ(c.replica(4).status().catching_up_to_leader_commit, 0u);
}

// The leader is never catching up, and neither is a node without a leader (health says "no leader
// known" for it instead).
TEST(FollowerReadiness, TheLeaderAndANodeWithoutALeaderAreNeverCatchingUp) {
  TestCluster c({1, 2, 3});
  EXPECT_EQ(c.replica(2).status().catching_up_to_leader_commit, 0u);
  ASSERT_NO_FATAL_FAILURE(elect_one(c));
  ASSERT_NO_FATAL_FAILURE(commit_entries(c, 3));
  EXPECT_EQ(c.replica(1).status().catching_up_to_leader_commit, 0u);
  EXPECT_EQ(c.replica(1).status().behind_leader_commit_entries, 0u);
  EXPECT_EQ(c.replica(2).status().catching_up_to_leader_commit, 0u);
}

}  // namespace
}  // namespace raftlog::raft

// Elections: randomized timeouts, heartbeats, vote persistence, the up-to-date check, pre-vote,
// check-quorum and determinism.
#include <gtest/gtest.h>

#include <set>

#include "test_cluster.h"

namespace raftlog::raft {
namespace {

using testing::make_entries;
using testing::TestCluster;

bool is_type(const Message& m, MessageType type) { return m.type == type; }

TEST(Election, ThreeNodesElectOneLeaderWhoCommitsItsNoop) {
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  EXPECT_EQ(c.raft(1).term(), 1u);
  for (NodeId id : c.ids()) {
    EXPECT_EQ(c.raft(id).leader(), 1u);
    EXPECT_EQ(c.raft(id).commit_index(), 1u) << "node " << id;
    EXPECT_EQ(c.node(id).log.entry(1).type, EntryType::kNoop);
    EXPECT_EQ(c.node(id).log.entry(1).term, 1u);
  }
  int leaders = 0;
  for (NodeId id : c.ids()) leaders += c.raft(id).role() == Role::kLeader ? 1 : 0;
  EXPECT_EQ(leaders, 1);
}

TEST(Election, SingleVoterElectsItselfAndCommitsOnlyOnceDurable) {
  TestCluster c({7});
  c.node(7).hold_persistence = true;
  ASSERT_TRUE(c.campaign_until_leader(7, 40));
  EXPECT_EQ(c.raft(7).last_index(), 1u);
  EXPECT_EQ(c.node(7).log.durable_index(), 0u) << "the no-op is written, not flushed";
  EXPECT_EQ(c.raft(7).commit_index(), 0u) << "its own no-op is not durable yet";
  c.persist_all(7);
  c.node(7).hold_persistence = false;
  c.process(7);
  EXPECT_EQ(c.raft(7).commit_index(), 1u);
  EXPECT_EQ(c.replica(7).commit_index(), 1u) << "the replica delivered the commit";
}

TEST(Election, TimeoutIsRandomizedWithinOneToTwoElectionTimeouts) {
  std::set<int> observed;
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    TestCluster c({1, 2, 3}, [seed](Config& config) { config.random_seed = seed; });
    int ticks = 0;
    while (c.raft(1).role() == Role::kFollower && ticks < 100) {
      c.tick(1);
      ++ticks;
    }
    EXPECT_GE(ticks, 10) << "seed " << seed;
    EXPECT_LT(ticks, 20) << "seed " << seed;
    EXPECT_EQ(c.raft(1).role(), Role::kPreCandidate);
    observed.insert(ticks);
  }
  EXPECT_GE(observed.size(), 4u) << "timeouts should spread over [T, 2T)";
}

TEST(Election, HeartbeatsEveryHeartbeatTicks) {
  TestCluster c({1, 2, 3}, [](Config& config) { config.heartbeat_ticks = 3; });
  ASSERT_TRUE(c.campaign_until_leader(1));
  auto heartbeats = [&] {
    return c.count_delivered([](const Message& m) { return is_type(m, MessageType::kHeartbeat); });
  };
  const std::size_t before = heartbeats();
  c.tick(1, 2);
  c.deliver_all();
  EXPECT_EQ(heartbeats(), before);
  c.tick(1);
  c.deliver_all();
  EXPECT_EQ(heartbeats(), before + 2);  // one per follower
}

TEST(Election, VoteIsGrantedOnlyAfterItIsPersisted) {
  TestCluster c({1, 2, 3}, [](Config& config) { config.pre_vote = false; });
  Message vote;
  vote.type = MessageType::kVote;
  vote.from = 1;
  vote.to = 2;
  vote.term = 1;
  c.step(2, vote);
  ASSERT_EQ(c.node(2).readies.size(), 1u);
  const Ready& rd = c.node(2).readies[0];
  ASSERT_TRUE(rd.hard_state.has_value());
  EXPECT_EQ(rd.hard_state->vote, 1u);
  EXPECT_EQ(rd.hard_state->term, 1u);
  EXPECT_TRUE(rd.must_sync);
  EXPECT_TRUE(rd.messages.empty()) << "a grant must not leave before the vote is durable";
  ASSERT_EQ(rd.messages_after_persist.size(), 1u);
  EXPECT_EQ(rd.messages_after_persist[0].type, MessageType::kVoteResponse);
  EXPECT_FALSE(rd.messages_after_persist[0].reject);
  // The replica wrote the vote (HARDSTATE, synced) before the held grant left: a restart keeps it.
  ASSERT_EQ(c.network_size(), 1u);
  EXPECT_EQ(c.in_flight()[0].type, MessageType::kVoteResponse);
  c.crash_restart(2);
  EXPECT_EQ(c.raft(2).term(), 1u);
  EXPECT_EQ(c.raft(2).hard_state().vote, 1u);
}

TEST(Election, CandidateSendsVoteRequestsOnlyAfterPersistingItsOwnVote) {
  TestCluster c({1, 2, 3}, [](Config& config) { config.pre_vote = false; });
  for (int i = 0; i < 20 && c.raft(1).role() == Role::kFollower; ++i) c.tick(1);
  ASSERT_EQ(c.raft(1).role(), Role::kCandidate);
  ASSERT_FALSE(c.node(1).readies.empty());
  const Ready& rd = c.node(1).readies[0];  // the campaign's (a follower's ticks hand out nothing)
  EXPECT_TRUE(rd.must_sync);
  EXPECT_EQ(rd.hard_state->vote, 1u);
  EXPECT_TRUE(rd.messages.empty());
  EXPECT_EQ(rd.messages_after_persist.size(), 2u);
}

TEST(Election, OnlyOneVotePerTerm) {
  TestCluster c({1, 2, 3}, [](Config& config) { config.pre_vote = false; });
  Message vote;
  vote.type = MessageType::kVote;
  vote.from = 1;
  vote.to = 2;
  vote.term = 1;
  c.step(2, vote);
  vote.from = 3;
  std::size_t mark = c.node(2).readies.size();
  c.step(2, vote);
  ASSERT_GT(c.node(2).readies.size(), mark);
  const Ready refusal = c.node(2).readies[mark];
  ASSERT_EQ(refusal.messages_after_persist.size(), 1u);
  EXPECT_TRUE(refusal.messages_after_persist[0].reject);
  vote.from = 1;  // a retransmitted request from the node we voted for is granted again
  mark = c.node(2).readies.size();
  c.step(2, vote);
  ASSERT_GT(c.node(2).readies.size(), mark);
  const Ready grant = c.node(2).readies[mark];
  ASSERT_EQ(grant.messages_after_persist.size(), 1u);
  EXPECT_FALSE(grant.messages_after_persist[0].reject);
}

// Runs the partition-rejoin scenario; returns the leader's term and whether node 1 is still leader.
struct RejoinOutcome {
  Term cluster_term = 0;
  Term rejoined_term = 0;
  bool leader_kept = false;
};

RejoinOutcome rejoin_after_partition(bool pre_vote, bool check_quorum) {
  TestCluster c({1, 2, 3}, [&](Config& config) {
    config.pre_vote = pre_vote;
    config.check_quorum = check_quorum;
  });
  EXPECT_TRUE(c.campaign_until_leader(1));
  const Term term_before = c.raft(1).term();
  c.isolate(3);
  // Node 3 times out again and again while partitioned; the others keep a healthy leader.
  for (int round = 0; round < 60; ++round) {
    c.tick(3);
    c.tick(1);
    c.tick(2);
    c.deliver_all();
  }
  EXPECT_EQ(c.raft(1).role(), Role::kLeader);
  c.heal();
  // Node 3 rejoins. Tick only it, so its next campaign reaches nodes that hear from their leader.
  c.tick(3, 25);
  c.deliver_all();
  c.tick_all(5);
  RejoinOutcome outcome;
  outcome.cluster_term = c.raft(2).term();
  outcome.rejoined_term = c.raft(3).term();
  outcome.leader_kept = c.raft(1).role() == Role::kLeader && c.raft(1).term() == term_before;
  return outcome;
}

TEST(PreVote, RejoiningPartitionedNodeDoesNotInflateTermsOrDisruptTheLeader) {
  const RejoinOutcome outcome = rejoin_after_partition(/*pre_vote=*/true, /*check_quorum=*/true);
  EXPECT_TRUE(outcome.leader_kept);
  EXPECT_EQ(outcome.cluster_term, 1u);
  EXPECT_EQ(outcome.rejoined_term, 1u) << "pre-vote never bumped the isolated node's term";
}

TEST(PreVote, WithoutPreVoteTheSameScenarioDisruptsTheLeader) {
  // The control experiment: proves the scenario above can fail.
  const RejoinOutcome outcome = rejoin_after_partition(/*pre_vote=*/false, /*check_quorum=*/false);
  EXPECT_FALSE(outcome.leader_kept);
  EXPECT_GT(outcome.cluster_term, 1u);
}

TEST(PreVote, PreCandidateKeepsItsTermAndVote) {
  TestCluster c({1, 2, 3});
  for (int i = 0; i < 20 && c.raft(1).role() == Role::kFollower; ++i) c.tick(1);
  ASSERT_EQ(c.raft(1).role(), Role::kPreCandidate);
  EXPECT_EQ(c.raft(1).term(), 0u);
  ASSERT_FALSE(c.node(1).readies.empty());
  const Ready& rd = c.node(1).readies[0];
  EXPECT_FALSE(rd.hard_state.has_value());
  ASSERT_EQ(rd.messages.size(), 2u) << "pre-votes need no persistence";
  EXPECT_EQ(rd.messages[0].type, MessageType::kPreVote);
  EXPECT_EQ(rd.messages[0].term, 1u) << "asks about term + 1";
}

TEST(CheckQuorum, IsolatedLeaderStepsDownAfterAnElectionTimeout) {
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.isolate(1);
  c.tick(1, 9);
  EXPECT_EQ(c.raft(1).role(), Role::kLeader);
  c.tick(1, 11);
  EXPECT_EQ(c.raft(1).role(), Role::kFollower);
  EXPECT_EQ(c.raft(1).term(), 1u) << "stepping down does not change the term";
  EXPECT_EQ(c.raft(1).leader(), kNoNode);
}

TEST(CheckQuorum, LeaderWithAMajorityStaysLeader) {
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.isolate(3);
  for (int i = 0; i < 50; ++i) {
    c.tick(1);
    c.tick(2);
    c.deliver_all();
  }
  EXPECT_EQ(c.raft(1).role(), Role::kLeader);
}

TEST(CheckQuorum, FollowerInLeaseIgnoresVoteRequests) {
  TestCluster c({1, 2, 3}, [](Config& config) { config.pre_vote = false; });
  ASSERT_TRUE(c.campaign_until_leader(1));
  Message vote;
  vote.type = MessageType::kVote;
  vote.from = 3;
  vote.to = 2;
  vote.term = 5;
  vote.index = 10;
  vote.log_term = 5;
  const std::size_t mark = c.node(2).readies.size();
  c.step(2, vote);
  EXPECT_EQ(c.raft(2).term(), 1u) << "in lease: the request is ignored, term unchanged";
  for (std::size_t i = mark; i < c.node(2).readies.size(); ++i)
    EXPECT_TRUE(c.node(2).readies[i].messages_after_persist.empty());
  c.tick(2, 10);  // no contact with the leader for an election timeout: lease over
  vote.from = 3;
  c.step(2, vote);
  EXPECT_EQ(c.raft(2).term(), 5u);
  EXPECT_EQ(c.raft(2).hard_state().vote, 3u);
}

TEST(Determinism, SameSeedSameOutputs) {
  auto run = [](std::uint64_t seed) {
    TestCluster c({1, 2, 3, 4, 5}, [seed](Config& config) { config.random_seed = seed; });
    c.isolate(2);
    c.tick_all(40);
    c.heal();
    for (int i = 0; i < 5; ++i) {
      const NodeId leader = c.leader();
      if (leader != kNoNode) (void)c.propose(leader, {"x" + std::to_string(i)});
      c.tick_all(7);
    }
    return c.delivered();
  };
  const std::vector<Message> first = run(11);
  EXPECT_FALSE(first.empty());
  EXPECT_EQ(first, run(11));
  EXPECT_NE(first, run(12)) << "a different seed should change the run";
}

}  // namespace
}  // namespace raftlog::raft

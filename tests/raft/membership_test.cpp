// Membership changes (single-server, Raft dissertation ch. 4; docs/raft.md "Membership changes"):
// learners, promotion, removal, one change at a time, in force when appended, rolled back when cut,
// the leader-change bug fix, a removed leader stepping down, and hostile configuration entries.
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>

#include "shared/captured_log.h"
#include "test_cluster.h"
#include "util/crc32c.h"

namespace raftlog::raft {
namespace {

using testing::MembershipRequest;
using testing::removed_answer;
using testing::TestCluster;

// Nodes `ids`, of which only `voters` form the bootstrap configuration (the rest are spare nodes
// outside it).
TestCluster cluster_with_voters(const std::vector<NodeId>& ids, const std::vector<NodeId>& voters) {
  return TestCluster(ids, [voters](Config& config) { config.initial_conf = ConfState{voters}; });
}

std::size_t sent_by(const TestCluster& c, NodeId from, MessageType type) {
  return c.count_delivered([&](const Message& m) { return m.from == from && m.type == type; });
}

// Elects node 1 and commits its no-op (a leader changes membership only after that).
void elect_one(TestCluster& c) {
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  ASSERT_EQ(c.raft(1).commit_index(), 1u);
}

// A change through the leader's replica. Accepted: not answered yet (it waits for its commit) or
// answered OK; refused: answered at once with the replica's error, whose reason names the core's
// refusal (replica_membership.cpp).
struct Change {
  MembershipRequest request;
  bool accepted() const { return !request.answered() || request.result().error.ok(); }
  std::string reason() const { return request.answered() ? request.result().error.reason : ""; }
  std::string message() const { return request.answered() ? request.result().error.message : ""; }
};

Change change(TestCluster& c, NodeId leader, ConfChangeType type, NodeId node) {
  return Change{c.propose_conf_change(leader, ConfChange{type, node})};
}

// "Not ready" (no entry of the leader's term committed yet) and "another change pending" have
// their own reason words (both retryable).
bool refused_not_ready(const Change& refusal) {
  return refusal.reason() == replica::kReasonLeaderNotReady &&
         refusal.message().find("has not committed an entry of its term") != std::string::npos;
}
bool refused_in_progress(const Change& refusal) {
  return refusal.reason() == replica::kReasonConfChangeInProgress &&
         refusal.message().find("another configuration change") != std::string::npos;
}

TEST(Membership, ANodeOutsideTheConfigurationNeverCampaigns) {
  TestCluster c = cluster_with_voters({1, 2, 3, 4}, {1, 2, 3});
  for (int i = 0; i < 100; ++i) {
    c.tick(4);
    c.deliver_all();
  }
  EXPECT_EQ(c.raft(4).role(), Role::kFollower);
  EXPECT_EQ(c.network_size(), 0u);
  EXPECT_EQ(sent_by(c, 4, MessageType::kPreVote) + sent_by(c, 4, MessageType::kVote), 0u);
}

TEST(Membership, LearnerReceivesTheLogButNeverCountsOrCampaigns) {
  TestCluster c = cluster_with_voters({1, 2, 3, 4}, {1, 2, 3});
  elect_one(c);
  const Change added = change(c, 1, ConfChangeType::kAddLearner, 4);
  ASSERT_TRUE(added.accepted()) << added.message();
  c.deliver_all();
  ASSERT_TRUE(added.request.answered()) << "answered once committed";
  EXPECT_EQ(added.request.result().index, 2u);
  EXPECT_EQ(added.request.result().conf, (ConfState{{1, 2, 3}, {4}}));
  for (NodeId id : {1, 2, 3, 4}) {
    EXPECT_EQ(c.raft(id).conf(), (ConfState{{1, 2, 3}, {4}})) << "node " << id;
  }
  ASSERT_TRUE(c.propose(1, {"a"}).proposed());
  c.deliver_all();
  EXPECT_EQ(c.node(4).log.last_index(), 3u) << "the learner holds the log";
  EXPECT_EQ(c.raft(4).commit_index(), 3u);

  // With both other voters gone, the learner's acknowledgements commit nothing.
  c.isolate(2);
  c.isolate(3);
  ASSERT_TRUE(c.propose(1, {"b"}).proposed());
  c.deliver_all();
  EXPECT_EQ(c.node(4).log.last_index(), 4u);
  EXPECT_EQ(c.raft(1).commit_index(), 3u);

  // Cut off from everyone, the learner never campaigns.
  c.isolate(1);
  for (int i = 0; i < 100; ++i) c.tick(4);
  EXPECT_EQ(c.raft(4).role(), Role::kFollower);
  EXPECT_EQ(sent_by(c, 4, MessageType::kPreVote), 0u);
}

// Voters 1-3 elect node 1, which adds node 4 (cut off) as a learner and commits 8 entries: commit
// index 10, none of it on node 4.
void add_learner_4_cut_off_then_commit_8_entries(TestCluster& c) {
  elect_one(c);
  c.isolate(4);
  ASSERT_TRUE(change(c, 1, ConfChangeType::kAddLearner, 4).accepted());
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(c.propose(1, {"e" + std::to_string(i)}).proposed());
  c.deliver_all();
  ASSERT_EQ(c.raft(1).commit_index(), 10u);
}

// A learner still catching up says so (status, and so health NOT_SERVING) until its log reaches the
// commit index its leader named.
TEST(Membership, ALearnerStillCatchingUpSaysSoUntilItReachesTheLeadersCommit) {
  TestCluster c({1, 2, 3, 4}, [](Config& config) {
    config.initial_conf = ConfState{{1, 2, 3}};
    config.max_entries_per_message = 2;
  });
  ASSERT_NO_FATAL_FAILURE(add_learner_4_cut_off_then_commit_8_entries(c));
  const Index commit = c.raft(1).commit_index();
  EXPECT_EQ(c.replica(2).status().learner_catching_up_to_index, 0u) << "a voter never is";
  c.heal();
  // Everything flows but the appends to the learner, which the test hands over one at a time.
  auto deliver_all_but_appends_to_learner = [&c] {
    for (int i = 0; i < 1000; ++i) {
      std::vector<Message> other = c.take_from_network(
          [](const Message& m) { return !(m.to == 4 && m.type == MessageType::kAppend); }, 1);
      if (other.empty()) return;
      c.step(other.front().to, other.front());
    }
  };
  bool behind_seen = false;
  for (int round = 0; round < 50 && c.node(4).log.last_index() < commit; ++round) {
    c.tick(1);  // a heartbeat; its answer makes the leader send the learner what it lacks
    deliver_all_but_appends_to_learner();
    std::vector<Message> to_learner = c.take_from_network(
        [](const Message& m) { return m.to == 4 && m.type == MessageType::kAppend; }, 1);
    if (to_learner.empty()) continue;
    c.step(4, to_learner.front());  // two entries at most, naming commit 10
    if (c.node(4).log.last_index() < commit) {
      EXPECT_EQ(c.raft(4).behind_leader_commit(), commit);
      EXPECT_EQ(c.replica(4).status().learner_catching_up_to_index, commit);
      behind_seen = true;
    }
    deliver_all_but_appends_to_learner();
  }
  EXPECT_TRUE(behind_seen) << "the learner never took an append that left it behind";
  c.tick_all(3);
  EXPECT_EQ(c.node(4).log.last_index(), c.raft(1).last_index());
  EXPECT_EQ(c.raft(4).behind_leader_commit(), 0u);
  EXPECT_EQ(c.replica(4).status().learner_catching_up_to_index, 0u);
}

// A heartbeat's commit is clamped to what the follower is known to hold, so a learner that hears
// only heartbeats (just restarted, or under a new leader, before the next append reaches it) took
// itself for caught up and reported SERVING for up to a few hundred ms. The heartbeat now also says
// the leader's own commit index.
TEST(Membership, ALearnerKnowsHowFarBehindItIsFromTheLeadersFirstHeartbeat) {
  TestCluster c({1, 2, 3, 4}, [](Config& config) { config.initial_conf = ConfState{{1, 2, 3}}; });
  ASSERT_NO_FATAL_FAILURE(add_learner_4_cut_off_then_commit_8_entries(c));
  const Index commit = c.raft(1).commit_index();
  c.heal();
  bool heartbeat_reached_learner = false;
  for (int round = 0; round < 10 && !heartbeat_reached_learner; ++round) {
    c.tick(1);
    for (int i = 0; i < 1000; ++i) {
      // Appends to the learner are lost; everything else arrives.
      c.take_from_network([](const Message& m) { return m.to == 4 && m.type == MessageType::kAppend; },
                          1000);
      std::vector<Message> next = c.take_from_network([](const Message&) { return true; }, 1);
      if (next.empty()) break;
      if (next.front().to == 4 && next.front().type == MessageType::kHeartbeat) {
        EXPECT_LT(next.front().commit, commit) << "clamped to what the learner holds";
        heartbeat_reached_learner = true;
      }
      c.step(next.front().to, next.front());
    }
  }
  ASSERT_TRUE(heartbeat_reached_learner);
  EXPECT_EQ(c.node(4).log.last_index(), 0u) << "no append reached it";
  EXPECT_EQ(c.raft(4).leader(), 1u);
  EXPECT_EQ(c.raft(4).behind_leader_commit(), commit);
  EXPECT_EQ(c.replica(4).status().learner_catching_up_to_index, commit);
}

TEST(Membership, PromotedLearnerCountsTowardCommit) {
  TestCluster c = cluster_with_voters({1, 2, 3}, {1, 2});
  elect_one(c);
  ASSERT_TRUE(change(c, 1, ConfChangeType::kAddLearner, 3).accepted());
  c.deliver_all();
  c.isolate(2);
  ASSERT_TRUE(c.propose(1, {"a"}).proposed());
  c.deliver_all();
  EXPECT_EQ(c.raft(1).commit_index(), 2u) << "voters {1, 2}: node 2 is needed";
  c.heal();
  c.tick(1);
  c.deliver_all();
  ASSERT_EQ(c.raft(1).commit_index(), 3u);
  ASSERT_TRUE(change(c, 1, ConfChangeType::kPromoteLearner, 3).accepted());
  c.deliver_all();
  EXPECT_EQ(c.raft(3).conf(), (ConfState{{1, 2, 3}}));
  c.isolate(2);
  ASSERT_TRUE(c.propose(1, {"b"}).proposed());
  c.deliver_all();
  EXPECT_EQ(c.raft(1).commit_index(), 5u) << "voters {1, 2, 3}: nodes 1 and 3 are a majority";
}

TEST(Membership, ALearnerIsPromotedOnlyOnceItHoldsEveryCommittedEntry) {
  TestCluster c = cluster_with_voters({1, 2, 3, 4}, {1, 2, 3});
  elect_one(c);
  c.isolate(4);
  ASSERT_TRUE(change(c, 1, ConfChangeType::kAddLearner, 4).accepted());
  ASSERT_TRUE(c.propose(1, {"a"}).proposed());
  c.deliver_all();
  ASSERT_EQ(c.raft(1).commit_index(), 3u);
  EXPECT_EQ(change(c, 1, ConfChangeType::kPromoteLearner, 4).reason(),
            replica::kReasonLearnerBehind);
  c.heal();
  c.tick(1);
  c.deliver_all();
  ASSERT_EQ(c.node(4).log.last_index(), 3u);
  EXPECT_TRUE(change(c, 1, ConfChangeType::kPromoteLearner, 4).accepted());
}

TEST(Membership, ConfigurationIsInForceWhenAppendedNotWhenCommitted) {
  TestCluster c = cluster_with_voters({1, 2, 3, 4}, {1, 2, 3});
  elect_one(c);
  // Acknowledgements to the leader are lost: nothing commits, yet every log holds the entry.
  c.add_drop_rule([](const Message& m) { return m.type == MessageType::kAppendResponse; });
  ASSERT_TRUE(change(c, 1, ConfChangeType::kAddLearner, 4).accepted());
  EXPECT_EQ(c.raft(1).conf(), (ConfState{{1, 2, 3}, {4}})) << "in force on the leader at once";
  c.deliver_all();
  EXPECT_EQ(c.raft(1).commit_index(), 1u);
  EXPECT_EQ(c.raft(2).conf(), (ConfState{{1, 2, 3}, {4}})) << "in force once appended";
  EXPECT_EQ(c.raft(2).conf_history().size(), 2u) << "the bootstrap one is kept for a rollback";
  // One change at a time: the first is not committed.
  EXPECT_TRUE(refused_in_progress(change(c, 1, ConfChangeType::kRemoveNode, 3)));
  c.heal();
  c.tick(1);
  c.deliver_all();
  ASSERT_EQ(c.raft(1).commit_index(), 2u);
  EXPECT_EQ(c.raft(2).conf_history().size(), 1u) << "committed: nothing to roll back to";
  EXPECT_TRUE(change(c, 1, ConfChangeType::kRemoveNode, 3).accepted());
}

TEST(Membership, RefusalsNameTheirReason) {
  TestCluster c = cluster_with_voters({1, 2, 3, 4}, {1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  const Change not_leader = change(c, 2, ConfChangeType::kAddLearner, 4);
  EXPECT_EQ(not_leader.request.code(), replica::ErrorCode::kNotLeader);
  EXPECT_EQ(not_leader.request.result().error.leader_id, 1u);
  EXPECT_EQ(change(c, 1, ConfChangeType::kPromoteLearner, 4).reason(), replica::kReasonNotAMember);
  EXPECT_EQ(change(c, 1, ConfChangeType::kAddVoter, 2).reason(), replica::kReasonAlreadyAMember);
  EXPECT_EQ(change(c, 1, ConfChangeType::kRemoveNode, 9).reason(), replica::kReasonNotAMember);
  EXPECT_EQ(change(c, 1, ConfChangeType::kAddLearner, kNoNode).reason(), replica::kReasonBadMember);
  ASSERT_FALSE(c.transfer_leadership(1, 2).answered()) << "the transfer is under way";
  EXPECT_EQ(change(c, 1, ConfChangeType::kAddLearner, 4).reason(),
            replica::kReasonTransferInProgress);
  EXPECT_EQ(c.raft(1).last_index(), 1u) << "refused changes append nothing";
  // That configurations change only through propose_conf_change (the core refuses a kConfig entry
  // proposed as data) is checked on a bare core: Proposals.ResultsForEveryRefusal.
}

TEST(Membership, LastVoterCannotBeRemoved) {
  TestCluster c = cluster_with_voters({1, 2}, {1});
  elect_one(c);
  ASSERT_TRUE(change(c, 1, ConfChangeType::kAddLearner, 2).accepted());
  c.deliver_all();
  const Change last_voter = change(c, 1, ConfChangeType::kRemoveNode, 1);
  EXPECT_EQ(last_voter.reason(), replica::kReasonWouldLoseQuorum);
  EXPECT_NE(last_voter.message().find("is the last voter"), std::string::npos);
}

// The new configuration must be able to commit: a quorum of its voters must have answered within an
// election timeout. A voter new to the cluster has not: it joins as a learner and is promoted.
TEST(Membership, ChangeThatWouldLeaveNoReachableQuorumIsRefused) {
  TestCluster c = cluster_with_voters({1, 2, 3, 4}, {1, 2, 3});
  elect_one(c);
  c.isolate(3);
  c.tick_all(12);  // node 3 unheard for longer than an election timeout
  ASSERT_EQ(c.raft(1).role(), Role::kLeader);
  const Change remove_two = change(c, 1, ConfChangeType::kRemoveNode, 2);
  EXPECT_EQ(remove_two.reason(), replica::kReasonWouldLoseQuorum)
      << "voters {1, 3} with node 3 unreachable";
  // The refusal names the voter and why (drills7 L6: it named none, and hinted "a new voter joins
  // as a learner first" for a removal).
  EXPECT_NE(remove_two.message().find("needs 2 voters answering this leader, and 1 do"),
            std::string::npos)
      << remove_two.message();
  EXPECT_NE(remove_two.message().find("node 3 has not answered for "), std::string::npos)
      << remove_two.message();
  EXPECT_EQ(remove_two.message().find("learner"), std::string::npos) << remove_two.message();
  const Change add_four = change(c, 1, ConfChangeType::kAddVoter, 4);
  EXPECT_EQ(add_four.reason(), replica::kReasonWouldLoseQuorum)
      << "voters {1, 2, 3, 4} with only 1 and 2 reachable";
  EXPECT_NE(add_four.message().find("node 3 has not answered for "), std::string::npos)
      << add_four.message();
  EXPECT_NE(add_four.message().find("node 4 is new to the cluster: add it as a learner first"),
            std::string::npos)
      << add_four.message();
  EXPECT_TRUE(change(c, 1, ConfChangeType::kRemoveNode, 3).accepted())
      << "removing the unreachable voter leaves {1, 2}, both reachable";
}

TEST(Membership, NewLeaderRefusesAChangeUntilAnEntryOfItsTermCommitted) {
  TestCluster c = cluster_with_voters({1, 2, 3, 4}, {1, 2, 3});
  c.add_drop_rule([](const Message& m) { return m.type == MessageType::kAppendResponse; });
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  ASSERT_EQ(c.raft(1).commit_index(), 0u);
  EXPECT_TRUE(refused_not_ready(change(c, 1, ConfChangeType::kAddLearner, 4)));
  c.heal();
  c.tick(1);
  c.deliver_all();
  ASSERT_EQ(c.raft(1).commit_index(), 1u);
  EXPECT_TRUE(change(c, 1, ConfChangeType::kAddLearner, 4).accepted());
}

// The leader-change bug of single-server changes (dissertation §4.1, its 2015 erratum): leader 1 of
// term 2 appends a configuration that only it holds; a leader of term 3 that never saw it must not
// base a change on the old configuration until its own term committed something, which cuts the
// stale configuration from every log (node 1 rolls back when its entry is replaced).
TEST(Membership, LeaderChangeBugScenarioAndATruncatedConfigurationEntry) {
  TestCluster c = cluster_with_voters({1, 2, 3, 4, 5}, {1, 2, 3, 4});
  elect_one(c);
  c.deliver_all();
  c.isolate(2);
  c.isolate(3);
  c.isolate(4);
  ASSERT_TRUE(change(c, 1, ConfChangeType::kAddLearner, 5).accepted());
  c.deliver_all();
  EXPECT_EQ(c.raft(1).conf(), (ConfState{{1, 2, 3, 4}, {5}}));
  const Index stale_index = c.raft(1).last_index();
  ASSERT_EQ(stale_index, 2u);

  // Node 1 is cut off; node 2 leads term 2 with 3 and 4, without the stale configuration.
  c.heal();
  c.isolate(1);
  c.add_drop_rule([](const Message& m) { return m.type == MessageType::kAppendResponse; });
  Message timeout_now;  // nodes 3 and 4 still follow node 1's lease: a transfer campaign ignores it
  timeout_now.type = MessageType::kTimeoutNow;
  timeout_now.from = 1;
  timeout_now.to = 2;
  timeout_now.term = 1;
  c.step(2, timeout_now);
  c.deliver_all();
  ASSERT_EQ(c.raft(2).role(), Role::kLeader);
  EXPECT_TRUE(refused_not_ready(change(c, 2, ConfChangeType::kRemoveNode, 4)));
  c.heal();
  c.isolate(1);
  c.tick(2);
  c.deliver_all();
  ASSERT_GE(c.raft(2).commit_index(), 2u) << "the new leader's no-op committed";
  ASSERT_TRUE(change(c, 2, ConfChangeType::kRemoveNode, 4).accepted());
  c.deliver_all();

  // Node 1 rejoins: its stale configuration entry is replaced, and its configuration rolls back past
  // it to the new leader's.
  c.heal();
  c.tick(2);
  c.deliver_all();
  EXPECT_EQ(c.raft(1).role(), Role::kFollower);
  EXPECT_EQ(c.raft(1).conf(), (ConfState{{1, 2, 3}}));
  EXPECT_NE(c.node(1).log.entry(stale_index).type, EntryType::kConfig);
  for (NodeId id : {2, 3}) EXPECT_EQ(c.raft(id).conf(), (ConfState{{1, 2, 3}})) << "node " << id;
}

// A configuration entry only some followers hold, cut by the next leader: those followers go back to
// the configuration before it.
TEST(Membership, TruncatedConfigurationEntryRollsBackAFollower) {
  TestCluster c = cluster_with_voters({1, 2, 3, 4}, {1, 2, 3});
  elect_one(c);
  // Only node 2 receives the change, and its acknowledgement is lost.
  c.isolate(3);
  c.add_drop_rule([](const Message& m) { return m.type == MessageType::kAppendResponse; });
  ASSERT_TRUE(change(c, 1, ConfChangeType::kAddLearner, 4).accepted());
  c.deliver_all();
  ASSERT_EQ(c.raft(2).conf(), (ConfState{{1, 2, 3}, {4}}));
  // Node 3 (which never saw the entry) won term 5 and replaces index 2 on node 2.
  c.heal();
  Message append;
  append.type = MessageType::kAppend;
  append.from = 3;
  append.to = 2;
  append.term = 5;
  append.index = 1;
  append.log_term = 1;
  append.entries = testing::make_entries(2, {5});
  append.commit = 1;
  c.step(2, append);
  EXPECT_EQ(c.raft(2).conf(), (ConfState{{1, 2, 3}})) << "rolled back to the bootstrap one";
  EXPECT_EQ(c.raft(2).conf_history().size(), 1u);
  EXPECT_EQ(c.node(2).log.entry(2).term, 5u);
}

TEST(Membership, RemovedLeaderStepsDownOnceCommittedAndHandsOver) {
  TestCluster c({1, 2, 3});
  elect_one(c);
  raftlog::testing::CapturedLog log(spdlog::level::info);  // TestCluster turned the log off
  const Term term = c.raft(1).term();
  ASSERT_TRUE(change(c, 1, ConfChangeType::kRemoveNode, 1).accepted());
  EXPECT_EQ(c.raft(1).role(), Role::kLeader) << "it leads until the change commits";
  c.deliver_all();
  EXPECT_EQ(c.raft(1).role(), Role::kFollower);
  EXPECT_EQ(sent_by(c, 1, MessageType::kTimeoutNow), 1u) << "handed over to a caught-up voter";
  const NodeId new_leader = c.leader();
  ASSERT_TRUE(new_leader == 2 || new_leader == 3) << new_leader;
  // The core says why it stepped down, and the replica's line says so (drills L2: it said "no
  // contact with a majority ... (check quorum)").
  EXPECT_EQ(c.raft(1).last_step_down(), (StepDown{StepDownReason::kRemoved, term, new_leader}));
  const std::string text = log.text();
  EXPECT_NE(text.find("node 1: role Leader -> Follower: stepping down: removed from the "
                      "configuration; handed leadership over to node " +
                      std::to_string(new_leader)),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("check quorum"), std::string::npos) << text;
  EXPECT_EQ(c.raft(new_leader).conf(), (ConfState{{2, 3}}));
  EXPECT_EQ(c.raft(new_leader).term(), 2u);
  // The new configuration commits without node 1, and node 1 never campaigns again.
  ASSERT_TRUE(c.propose(new_leader, {"x"}).proposed());
  c.isolate(1);
  c.deliver_all();
  EXPECT_EQ(c.raft(new_leader).commit_index(), c.raft(new_leader).last_index());
  const std::size_t pre_votes = sent_by(c, 1, MessageType::kPreVote);
  c.heal();
  for (int i = 0; i < 60; ++i) {
    c.tick(1);
    c.deliver_all();
  }
  EXPECT_EQ(sent_by(c, 1, MessageType::kPreVote), pre_votes);
  EXPECT_EQ(c.raft(1).role(), Role::kFollower);
}

// A leader removes itself, then loses its quorum before the change reaches anyone and steps down
// (check-quorum). The remaining voter's log is behind it and needs its vote: the removed node may
// still campaign while its removal is uncommitted, counting votes by its newest configuration
// (which excludes it), wins, commits its removal and hands over. Found by the simulator.
TEST(Membership, LeaderThatRemovedItselfAndLostItsQuorumStillLetsTheClusterRecover) {
  TestCluster c({1, 2});
  elect_one(c);
  c.isolate(2);
  ASSERT_TRUE(change(c, 1, ConfChangeType::kRemoveNode, 1).accepted());
  ASSERT_EQ(c.raft(1).conf(), (ConfState{{2}}));
  c.tick(1, 25);
  ASSERT_EQ(c.raft(1).role(), Role::kFollower) << "check-quorum: node 2 is unreachable";
  EXPECT_EQ(c.raft(1).last_step_down().reason, StepDownReason::kCheckQuorum)
      << "its removal did not commit: it lost its quorum";
  c.heal();
  for (int i = 0; i < 100 && !(c.raft(2).role() == Role::kLeader &&
                               c.raft(2).commit_index() == c.raft(2).last_index());
       ++i) {
    c.tick_all();
  }
  EXPECT_EQ(c.raft(2).role(), Role::kLeader);
  EXPECT_EQ(c.raft(2).conf(), (ConfState{{2}}));
  EXPECT_EQ(c.raft(2).commit_index(), c.raft(2).last_index());
  EXPECT_NE(c.raft(1).role(), Role::kLeader);
}

// A removed voter no longer counts. If it learned that its removal committed it never campaigns;
// if it did not (the commit index never reached it), it may pre-campaign, but cannot disturb the
// leader: no pre-vote is granted while the voters hear from their leader, so no real election starts.
TEST(Membership, RemovedVoterNoLongerCountsAndCannotDisturbTheLeader) {
  TestCluster c({1, 2, 3});
  elect_one(c);
  ASSERT_TRUE(change(c, 1, ConfChangeType::kRemoveNode, 3).accepted());
  c.deliver_all();
  EXPECT_EQ(c.raft(3).conf(), (ConfState{{1, 2}}));
  EXPECT_EQ(c.raft(1).progress().size(), 2u) << "the leader tracks members only";
  c.isolate(3);
  ASSERT_TRUE(c.propose(1, {"x"}).proposed());
  c.deliver_all();
  EXPECT_EQ(c.raft(1).commit_index(), 3u) << "voters {1, 2}";
  c.heal();
  const Term term = c.raft(1).term();
  c.tick_all(60);
  EXPECT_EQ(c.raft(1).role(), Role::kLeader);
  EXPECT_EQ(c.raft(1).term(), term);
  EXPECT_EQ(sent_by(c, 3, MessageType::kVote), 0u);
  if (c.raft(3).commit_index() >= 2) {
    EXPECT_EQ(sent_by(c, 3, MessageType::kPreVote), 0u) << "it knows it was removed";
  }
}

// The removal commits on node 2's acknowledgement before node 3's arrives: the leader has forgotten
// node 3 by then, and its last heartbeat could name only what node 3 had acknowledged before. The
// late acknowledgement is answered, so node 3 still learns that its removal committed and stops
// campaigning (it used to pre-campaign until stopped).
TEST(Membership, ARemovedNodeLearnsItsRemovalCommittedEvenWhenItsAcknowledgementComesLast) {
  TestCluster c({1, 2, 3});
  elect_one(c);
  ASSERT_TRUE(change(c, 1, ConfChangeType::kRemoveNode, 3).accepted());
  const auto held = [](const Message& m) {
    return m.from == 3 && m.to == 1 && m.type == MessageType::kAppendResponse;
  };
  // Everything but node 3's acknowledgements first (bounded: each step delivers one message).
  for (int step = 0; step < 10000; ++step) {
    std::optional<std::size_t> next;
    for (std::size_t i = 0; i < c.in_flight().size() && !next; ++i) {
      if (!held(c.in_flight()[i])) next = i;
    }
    if (!next) break;
    c.deliver_at(*next);
  }
  ASSERT_EQ(c.raft(1).commit_index(), 2u) << "voters {1, 2} committed the removal";
  ASSERT_GT(c.network_size(), 0u) << "node 3's acknowledgement is still held";
  ASSERT_LT(c.raft(3).commit_index(), 2u);
  c.deliver_all();
  EXPECT_EQ(c.raft(3).commit_index(), 2u) << "node 3 learned that its removal committed";
  EXPECT_EQ(c.raft(3).conf(), (ConfState{{1, 2}}));
  const std::size_t pre_votes = sent_by(c, 3, MessageType::kPreVote);
  for (int i = 0; i < 60; ++i) {
    c.tick(3);
    c.deliver_all();
  }
  EXPECT_EQ(sent_by(c, 3, MessageType::kPreVote), pre_votes) << "it never campaigns again";
  EXPECT_EQ(c.raft(1).role(), Role::kLeader);
}

// The peer transport now lets in any node that authenticates for the cluster (a node outside our
// configuration may be a newer leader: server/peer_admission.h), so what keeps a non-member from
// mattering is the core alone: a node that was removed, never learned that its removal committed,
// and hears everybody while the leader is gone cannot be elected (the voters that hold the removal
// refuse it: their logs are newer), and it is never counted again.
TEST(Membership, ARemovedNodeThatMissedItsRemovalIsNeverElectedWhenEveryoneHearsIt) {
  TestCluster c({1, 2, 3});
  elect_one(c);
  c.isolate(3);
  ASSERT_TRUE(change(c, 1, ConfChangeType::kRemoveNode, 3).accepted());
  c.deliver_all();
  ASSERT_EQ(c.raft(1).commit_index(), 2u) << "voters {1, 2}";
  ASSERT_EQ(c.raft(3).conf(), (ConfState{{1, 2, 3}})) << "node 3 never heard of its removal";
  // The leader goes; node 3 hears node 2 and node 2 hears node 3.
  c.heal();
  c.isolate(1);
  for (int i = 0; i < 200; ++i) {
    c.tick_all();
    ASSERT_NE(c.raft(3).role(), Role::kLeader) << "round " << i;
    ASSERT_NE(c.raft(2).role(), Role::kLeader) << "round " << i << ": node 1's vote is needed";
  }
  EXPECT_GT(sent_by(c, 3, MessageType::kPreVote), 0u) << "it did campaign";
  EXPECT_EQ(c.count_delivered([](const Message& m) {
    return m.from == 2 && m.to == 3 &&
           (m.type == MessageType::kPreVoteResponse || m.type == MessageType::kVoteResponse) &&
           !m.reject;
  }),
            0u)
      << "node 2 granted a vote to a removed node";
  // Node 1 comes back: {1, 2} elect a leader, node 3 stays outside.
  c.heal();
  NodeId leader = kNoNode;
  for (int i = 0; i < 200 && leader == kNoNode; ++i) {
    c.tick_all();
    if (c.raft(1).role() == Role::kLeader) leader = 1;
    if (c.raft(2).role() == Role::kLeader) leader = 2;
  }
  ASSERT_NE(leader, kNoNode);
  EXPECT_EQ(c.raft(leader).conf(), (ConfState{{1, 2}}));
  for (const PeerProgress& peer : c.raft(leader).progress()) {
    EXPECT_NE(peer.id, 3u) << "a removed node is not tracked";
  }
}

// Node 3 is down when its removal commits, so it never receives the entry. Started again, it
// pre-campaigns; the members know its id is retired and its log is behind theirs, so they say so
// (kRemovedContext) instead of answering the request: it reports removed, its campaigns (it still
// makes them: the answer is information only) never win, and no one's term moved.
TEST(Membership, ARemovedNodeThatWasDownLearnsItIsRemovedAndIsNeverElected) {
  TestCluster c({1, 2, 3});
  elect_one(c);
  c.isolate(3);
  ASSERT_TRUE(change(c, 1, ConfChangeType::kRemoveNode, 3).accepted());
  c.deliver_all();
  ASSERT_EQ(c.raft(1).commit_index(), 2u) << "voters {1, 2}";
  c.tick_all(3);  // node 2 hears the commit index
  EXPECT_EQ(c.raft(1).retired_ids(), (std::vector<NodeId>{3}));
  EXPECT_EQ(c.raft(2).retired_ids(), (std::vector<NodeId>{3}));
  c.crash_restart(3);
  c.heal();
  c.isolate(1);  // node 2 alone hears node 3 now: no lease keeps it from answering
  const Term term = c.raft(2).term();
  for (int i = 0; i < 100 && !c.raft(3).removed(); ++i) c.tick_all();
  ASSERT_TRUE(c.raft(3).removed()) << "node 3 never learned that it was removed";
  EXPECT_EQ(c.raft(3).conf(), (ConfState{{1, 2, 3}})) << "its log still lacks the removal";
  c.heal();
  c.tick_all(100);
  EXPECT_NE(c.raft(3).role(), Role::kLeader);
  EXPECT_EQ(c.raft(3).term(), term) << "a refused pre-vote never moves its term";
  EXPECT_TRUE(c.raft(3).removed());
  EXPECT_EQ(c.raft(1).role(), Role::kLeader);
  EXPECT_EQ(c.raft(2).term(), term) << "a removed node moved a member's term";
  EXPECT_FALSE(c.raft(1).removed());
  EXPECT_FALSE(c.raft(2).removed());
}

// The review's wedge: a voter told "removed" by a member that is behind (or by a forged answer)
// must not stop campaigning, or the cluster stays leaderless with a majority alive. Every voter is
// told so; then the leader dies: the other two still elect one of them.
TEST(Membership, AVoterToldRemovedByOnePeerStillCampaignsAndALeaderIsElected) {
  TestCluster c({1, 2, 3});
  elect_one(c);
  for (NodeId voter : {2, 3}) {
    Message stale;
    stale.type = MessageType::kPreVoteResponse;
    stale.from = 1;
    stale.to = voter;
    stale.term = c.raft(voter).term();
    stale.reject = true;
    stale.context = kRemovedContext;
    c.step(voter, stale);
    EXPECT_TRUE(c.raft(voter).removed()) << "node " << voter << ": shown in its status";
  }
  c.isolate(1);
  for (int i = 0; i < 200 && c.leader() == kNoNode; ++i) c.tick_all();
  const NodeId leader = c.leader();
  ASSERT_TRUE(leader == 2 || leader == 3) << "no leader with two of three voters up";
  EXPECT_FALSE(c.raft(leader).removed()) << "elected by a majority: not removed";
  ASSERT_TRUE(c.propose(leader, {"after"}).proposed());
  c.deliver_all();
  const NodeId follower = leader == 2 ? 3 : 2;
  EXPECT_FALSE(c.raft(follower).removed()) << "its leader replicates to it";
}

// A leader told "removed" keeps leading: the answer is one peer's word, not its configuration's.
TEST(Membership, ALeaderToldRemovedKeepsLeading) {
  TestCluster c({1, 2, 3});
  elect_one(c);
  c.step(1, removed_answer(2, 1, c.raft(1).term()));
  EXPECT_EQ(c.raft(1).role(), Role::kLeader);
  ASSERT_TRUE(c.propose(1, {"still leading"}).proposed());
  c.deliver_all();
  EXPECT_EQ(c.raft(1).commit_index(), 2u);
}

// Node 3 is retired on node 2, and its pre-vote shows a log ahead of node 2's. Until 2026-12-07 node
// 2 handled it by the ordinary rules (a grant), on the theory that node 3 might have been re-added
// by entries node 2 lacked; ids are never reused (ID_RETIRED), and that escape let retired founders
// restarted on lost disks, whose log looked ahead, move a member's term (drills7 H2, review of
// retired5 #4). Now it is answered "removed", naming node 2's committed configuration.
TEST(Membership, ARetiredIdIsAnsweredRemovedEvenWhenItsLogIsAhead) {
  TestCluster c({1, 2, 3});
  elect_one(c);
  c.isolate(3);
  ASSERT_TRUE(change(c, 1, ConfChangeType::kRemoveNode, 3).accepted());
  c.deliver_all();
  c.tick_all(3);
  ASSERT_EQ(c.raft(2).retired_ids(), (std::vector<NodeId>{3}));
  c.heal();
  c.isolate(1);
  c.tick(2, 25);  // node 2 forgets its leader (pre-votes to node 1 go nowhere; its term stays)
  ASSERT_EQ(c.raft(2).leader(), kNoNode);
  c.take_from_network([](const Message&) { return true; }, 1000);
  Message pre_vote;
  pre_vote.type = MessageType::kPreVote;
  pre_vote.from = 3;
  pre_vote.to = 2;
  pre_vote.term = c.raft(2).term() + 1;
  pre_vote.index = c.node(2).log.last_index() + 5;
  pre_vote.log_term = c.raft(2).term();
  c.step(2, pre_vote);
  const std::vector<Message> answers = c.take_from_network(
      [](const Message& m) { return m.from == 2 && m.to == 3; }, 10);
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].type, MessageType::kPreVoteResponse);
  EXPECT_EQ(answers[0].context, kRemovedContext);
  EXPECT_TRUE(answers[0].reject);
  EXPECT_EQ(answers[0].commit, c.raft(2).conf_history().front().index);
}

// Node 3's own log holds its removal, but the entry is not committed (node 2 never received it, and
// {1, 2} needs both): a new leader may still cut it, so node 3 is a member yet. Its status must not
// say removed (the operator is told to wipe a removed node), nor its id count as retired.
TEST(Membership, AnUncommittedSelfRemovalIsNotReportedAsRemoved) {
  TestCluster c({1, 2, 3});
  elect_one(c);
  c.add_drop_rule([](const Message& m) { return m.from == 1 && m.to == 2; });
  ASSERT_TRUE(change(c, 1, ConfChangeType::kRemoveNode, 3).accepted());
  c.deliver_all();
  c.tick_all(3);
  ASSERT_EQ(c.raft(3).conf(), (ConfState{{1, 2}})) << "the removal reached node 3";
  ASSERT_EQ(c.raft(1).commit_index(), 1u) << "and did not commit";
  EXPECT_FALSE(c.replica(3).status().removed);
  EXPECT_TRUE(c.replica(3).retired_ids().empty());
  EXPECT_TRUE(c.replica(1).retired_ids().empty()) << "a re-add would be refused as ID_RETIRED";
}

// A learner answers vote requests by the ordinary rules: it may have been promoted without knowing
// yet, and a candidate counts its vote only if the candidate's configuration lists it as a voter.
TEST(Membership, VotesCountOnlyFromVotersOfTheCandidatesConfiguration) {
  TestCluster c = cluster_with_voters({1, 2, 3, 4}, {1, 2, 3});
  elect_one(c);
  ASSERT_TRUE(change(c, 1, ConfChangeType::kAddLearner, 4).accepted());
  c.deliver_all();
  // The learner, out of its leader's lease, grants a vote to a candidate whose log is up to date.
  c.isolate(1);
  c.isolate(3);
  for (int i = 0; i < 12; ++i) c.tick(4);
  Message vote;
  vote.type = MessageType::kVote;
  vote.from = 2;
  vote.to = 4;
  vote.term = 5;
  vote.index = c.raft(2).last_index();
  vote.log_term = 1;
  c.step(4, vote);
  c.deliver_all();
  EXPECT_EQ(c.count_delivered([](const Message& m) {
    return m.from == 4 && m.type == MessageType::kVoteResponse && !m.reject;
  }),
            1u)
      << "the learner granted";
  // Node 2 campaigns with only the learner reachable: the learner's grant makes no majority.
  for (int i = 0; i < 40 && c.raft(2).role() == Role::kFollower; ++i) c.tick(2);
  ASSERT_EQ(c.raft(2).role(), Role::kPreCandidate);
  Message grant;
  grant.type = MessageType::kPreVoteResponse;
  grant.from = 4;
  grant.to = 2;
  grant.term = c.raft(2).term() + 1;
  c.step(2, grant);
  EXPECT_EQ(c.raft(2).role(), Role::kPreCandidate) << "a learner's vote counts for nothing";
}

TEST(Membership, ConfigurationSurvivesARestart) {
  TestCluster c = cluster_with_voters({1, 2, 3, 4}, {1, 2, 3});
  elect_one(c);
  ASSERT_TRUE(change(c, 1, ConfChangeType::kAddLearner, 4).accepted());
  c.deliver_all();
  c.crash_restart(2);
  EXPECT_EQ(c.raft(2).conf(), (ConfState{{1, 2, 3}, {4}}));
  c.crash_restart(4);
  EXPECT_EQ(c.raft(4).conf(), (ConfState{{1, 2, 3}, {4}}));
}

// Configuration entries from a peer are checked before they reach the log: garbage, an invalid
// configuration with a valid checksum, or a configuration more than one change away drops the append.
TEST(Membership, HostileConfigurationEntriesAreDropped) {
  TestCluster c = cluster_with_voters({1, 2, 3}, {1, 2, 3});
  elect_one(c);
  auto forged_append = [](std::string payload) {
    Message m;
    m.type = MessageType::kAppend;
    m.from = 1;
    m.to = 2;
    m.term = 1;
    m.index = 1;
    m.log_term = 1;
    m.commit = 1;
    Entry e;
    e.index = 2;
    e.term = 1;
    e.type = EntryType::kConfig;
    e.payload = std::move(payload);
    m.entries.push_back(e);
    return m;
  };
  std::string no_voters(1, '\x02');
  no_voters.append(8, '\0');  // 0 voters, 0 learners
  const std::uint32_t crc = util::crc32c::value(no_voters.data(), no_voters.size());
  for (int i = 0; i < 4; ++i) no_voters.push_back(static_cast<char>((crc >> (8 * i)) & 0xFF));
  for (const std::string& payload :
       {std::string("garbage"), no_voters, encode_config(ConfState{{1}}) /* two removals */,
        encode_config(ConfState{{1, 2, 3}, {4, 5}}) /* two additions */}) {
    const std::size_t before = c.network_size();
    c.step(2, forged_append(payload));
    EXPECT_EQ(c.node(2).log.last_index(), 1u);
    EXPECT_EQ(c.network_size(), before) << "dropped without an answer";
    EXPECT_EQ(c.raft(2).conf(), (ConfState{{1, 2, 3}}));
  }
  c.step(2, forged_append(encode_config(ConfState{{1, 2, 3}, {4}})));
  EXPECT_EQ(c.raft(2).conf(), (ConfState{{1, 2, 3}, {4}})) << "a single change is taken";
}

}  // namespace
}  // namespace raftlog::raft

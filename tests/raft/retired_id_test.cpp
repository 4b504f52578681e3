// Retired ids never lead a member (drills7 H2; docs/raft.md, "Membership changes"): an append,
// heartbeat or snapshot of a member's term or later from an id its committed configuration retired
// is answered "removed" (kRemovedContext, naming that configuration's position) instead of moving
// its term or making the sender its leader; the sender's word binds only if its log lacks that
// configuration, and then it stops leading and campaigning until its log holds it.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "test_cluster.h"

namespace raftlog::raft {
namespace {

using testing::removed_answer;
using testing::TestCluster;

TestCluster cluster_with_voters(const std::vector<NodeId>& ids, const std::vector<NodeId>& voters) {
  return TestCluster(ids, [voters](Config& config) { config.initial_conf = ConfState{voters}; });
}

bool change(TestCluster& c, NodeId leader, ConfChangeType type, NodeId node) {
  auto request = c.propose_conf_change(leader, ConfChange{type, node});
  for (int i = 0; i < 60 && !request.answered(); ++i) c.tick_all();
  return request.answered() && request.result().error.ok();
}

// Elects node 1 in {1, 2, 3}, removes node 3 while it is cut off (its log never holds the removal),
// and lets node 2 hear the commit: node 3 is retired on nodes 1 and 2.
void retire_three(TestCluster& c) {
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  c.isolate(3);
  ASSERT_TRUE(change(c, 1, ConfChangeType::kRemoveNode, 3));
  c.tick_all(3);
  ASSERT_EQ(c.raft(2).retired_ids(), (std::vector<NodeId>{3}));
  ASSERT_EQ(c.raft(2).conf_history().front().conf, (ConfState{{1, 2}}));
}

// retire_three, then node 2's binding word reaches node 3 (naming node 2's committed
// configuration, which node 3's log lacks). The word.
RemovedWord tell_three_it_is_retired(TestCluster& c) {
  retire_three(c);
  const RemovedWord word{2, c.raft(2).conf_history().front().index,
                         c.raft(2).conf_history().front().term};
  c.step(3, removed_answer(2, 3, c.raft(2).term(), word.conf_index, word.conf_term));
  return word;
}

// The brief's core case: node 3 (retired on node 2, its log lacking the removal) sends node 2 an
// append of a higher term, as a leader of its own would. Node 2 neither moves its term nor follows
// it, and answers "removed" naming its committed configuration; node 3, given the answer, knows it
// is retired and who said so. On main node 2 took term 9 and followed node 3.
TEST(RetiredId, AMemberNeitherMovesItsTermNorFollowsARetiredIdsAppend) {
  TestCluster c({1, 2, 3});
  retire_three(c);
  const Term term = c.raft(2).term();
  const Index conf_index = c.raft(2).conf_history().front().index;
  c.take_from_network([](const Message&) { return true; }, 100000);
  Message append;
  append.type = MessageType::kAppend;
  append.from = 3;
  append.to = 2;
  append.term = term + 8;
  append.index = 0;
  append.log_term = 0;
  Entry noop;
  noop.index = 1;
  noop.term = term + 8;
  noop.type = EntryType::kNoop;
  append.entries.push_back(noop);
  append.commit = 1;
  c.step(2, append);
  EXPECT_EQ(c.raft(2).term(), term) << "a retired id moved a member's term";
  EXPECT_NE(c.raft(2).leader(), 3u) << "a member follows a retired id";
  const std::vector<Message> answers =
      c.take_from_network([](const Message& m) { return m.from == 2 && m.to == 3; }, 10);
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].type, MessageType::kAppendResponse);
  EXPECT_TRUE(answers[0].reject);
  EXPECT_EQ(answers[0].context, kRemovedContext);
  EXPECT_EQ(answers[0].commit, conf_index) << "the answer names the configuration that retired it";
  EXPECT_EQ(answers[0].term, term) << "answered in our own term, unmoved";
  // The same from a heartbeat.
  Message heartbeat;
  heartbeat.type = MessageType::kHeartbeat;
  heartbeat.from = 3;
  heartbeat.to = 2;
  heartbeat.term = term + 9;
  c.step(2, heartbeat);
  EXPECT_EQ(c.raft(2).term(), term);
  // Nor a snapshot of a higher term above node 2's configuration (review of retired5 #2: it passed
  // by index and term alone).
  Message snapshot;
  snapshot.type = MessageType::kSnapshot;
  snapshot.from = 3;
  snapshot.to = 2;
  snapshot.term = term + 9;
  Snapshot& image = snapshot.snapshot.emplace();
  image.index = conf_index + 50;
  image.term = term + 9;
  image.conf = ConfState{{1, 2, 3}};
  c.step(2, snapshot);
  EXPECT_EQ(c.raft(2).term(), term) << "a retired id's snapshot moved a member's term";
  EXPECT_LT(c.raft(2).last_index(), conf_index + 50) << "a member installed a retired id's snapshot";
  // Nor does its TimeoutNow make node 2 campaign at a higher term.
  Message timeout_now;
  timeout_now.type = MessageType::kTimeoutNow;
  timeout_now.from = 3;
  timeout_now.to = 2;
  timeout_now.term = term;
  c.step(2, timeout_now);
  EXPECT_EQ(c.raft(2).term(), term) << "a retired id's TimeoutNow moved a member's term";
  EXPECT_EQ(c.raft(2).role(), Role::kFollower);
  // Node 3's log lacks node 2's committed configuration: the word binds.
  ASSERT_FALSE(c.raft(3).removed());
  c.step(3, answers[0]);
  EXPECT_TRUE(c.raft(3).removed());
  EXPECT_EQ(c.raft(3).removed_by(), 2u);
  EXPECT_TRUE(c.replica(3).status().removed);
  // The real leader and its follower go on.
  c.heal();
  c.isolate(3);
  ASSERT_TRUE(c.propose(1, {"after"}).proposed());
  c.deliver_all();
  EXPECT_EQ(c.raft(2).commit_index(), c.raft(1).last_index());
}

// drills7 H2 in the core: founders {1, 2, 3}; nodes 4 and 5 replace 1 and 2 (both retired); then
// 1 and 2 restart on empty disks with the founders' bootstrap configuration and elect each other.
// Node 3, a real member, must never follow them nor move its term for them, and they must learn
// that they are retired and stop leading and campaigning. On main node 3 followed their leader
// (its term moved) and the pair kept a leader of its own.
// push_term: the pair's term driven past the real cluster's (drills7 run 1); otherwise the pair
// stays in the real cluster's term and writes past the retiring configuration's index (every change
// in term 1: review of retired5 #1, where a same-term entry at that index passed for it).
void retired_founders_restarted_empty(bool push_term) {
  TestCluster c = cluster_with_voters({1, 2, 3, 4, 5}, {1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(3));
  c.deliver_all();
  for (NodeId node : {4, 5}) {
    ASSERT_TRUE(change(c, 3, ConfChangeType::kAddLearner, node));
    c.tick_all(5);
    ASSERT_TRUE(change(c, 3, ConfChangeType::kPromoteLearner, node));
  }
  ASSERT_TRUE(change(c, 3, ConfChangeType::kRemoveNode, 1));
  ASSERT_TRUE(change(c, 3, ConfChangeType::kRemoveNode, 2));
  c.tick_all(5);
  ASSERT_EQ(c.raft(3).conf(), (ConfState{{3, 4, 5}}));
  const std::vector<NodeId> retired = c.raft(3).retired_ids();
  ASSERT_EQ(retired, (std::vector<NodeId>{1, 2}));
  ASSERT_TRUE(c.propose(3, {"acknowledged"}).proposed());
  c.deliver_all();
  const Index real_last = c.raft(3).last_index();
  const Term real_term = c.raft(3).term();
  c.restart_wiped(1);
  c.restart_wiped(2);
  // Out of node 3's reach at first, the pair elects one of itself a few times (its leader
  // crash-restarted), so that its term passes the real cluster's, as in the drill's first run.
  auto apart = [](const Message& m) {
    const bool rogue_from = m.from == 1 || m.from == 2;
    const bool rogue_to = m.to == 1 || m.to == 2;
    return rogue_from != rogue_to;
  };
  c.add_drop_rule(apart);
  for (int round = 0; push_term && round < 6 &&
                      std::max(c.raft(1).term(), c.raft(2).term()) <= real_term + 1;
       ++round) {
    for (int i = 0; i < 100 && c.raft(1).role() != Role::kLeader &&
                    c.raft(2).role() != Role::kLeader;
         ++i) {
      c.tick_all();
    }
    c.crash_restart(c.raft(1).role() == Role::kLeader ? 1 : 2);
  }
  for (int i = 0; i < 100 && c.raft(1).role() != Role::kLeader && c.raft(2).role() != Role::kLeader;
       ++i) {
    c.tick_all();
  }
  if (push_term) {
    ASSERT_GT(std::max(c.raft(1).term(), c.raft(2).term()), real_term);
  } else {
    const NodeId rogue = c.raft(1).role() == Role::kLeader ? 1 : 2;
    ASSERT_EQ(c.raft(rogue).role(), Role::kLeader);
    ASSERT_EQ(c.raft(rogue).term(), real_term) << "the pair's first election is the real term";
    for (int i = 0; i < 12; ++i) ASSERT_TRUE(c.propose(rogue, {"rogue"}).proposed());
    c.deliver_all();
    ASSERT_GT(c.raft(rogue).last_index(), c.raft(3).conf_history().front().index);
  }
  ASSERT_EQ(c.raft(3).term(), real_term);
  c.heal();
  bool rogue_led_member = false;
  for (int i = 0; i < 300; ++i) {
    c.tick_all();
    rogue_led_member = rogue_led_member || c.raft(3).leader() == 1 || c.raft(3).leader() == 2;
  }
  EXPECT_FALSE(rogue_led_member) << "a retired founder led a member";
  EXPECT_EQ(c.raft(3).term(), real_term) << "retired founders moved a member's term";
  EXPECT_EQ(c.raft(3).role(), Role::kLeader);
  EXPECT_GE(c.raft(3).last_index(), real_last);
  for (NodeId rogue : {1, 2}) {
    EXPECT_TRUE(c.raft(rogue).removed()) << "node " << rogue << " was never told it is retired";
    EXPECT_NE(c.raft(rogue).role(), Role::kLeader) << "node " << rogue;
    EXPECT_TRUE(c.replica(rogue).status().removed) << "node " << rogue;
  }
  // Told, they stay quiet: no campaign for many election timeouts.
  const std::size_t campaigns = c.count_delivered([](const Message& m) {
    return (m.from == 1 || m.from == 2) &&
           (m.type == MessageType::kPreVote || m.type == MessageType::kVote);
  });
  c.tick_all(200);
  EXPECT_EQ(c.count_delivered([](const Message& m) {
              return (m.from == 1 || m.from == 2) &&
                     (m.type == MessageType::kPreVote || m.type == MessageType::kVote);
            }),
            campaigns)
      << "a node told it is retired went on campaigning";
  ASSERT_TRUE(c.propose(3, {"still"}).proposed());
  c.deliver_all();
  EXPECT_EQ(c.raft(4).commit_index(), c.raft(3).last_index());
}

TEST(RetiredId, RetiredFoundersRestartedEmptyNeverLeadAMemberAndStopCampaigning) {
  retired_founders_restarted_empty(/*push_term=*/true);
}

TEST(RetiredId, RetiredFoundersInTheRealTermPastTheRetiringIndexAreToldToo) {
  retired_founders_restarted_empty(/*push_term=*/false);
}

// A word is stale only where the node's history shows it: its log holds, at the named position, the
// configuration entry that retired it, and its configuration lists it again. An ordinary entry of the
// same term at that index (another history that reused the term: review of retired5 #1) does not
// make it stale, nor does a position beyond the log: both bind, the leader steps down and does not
// campaign while so told. On main neither bound.
TEST(RetiredId, AWordBindsUnlessTheLogHoldsTheRetiringConfiguration) {
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  ASSERT_TRUE(c.propose(1, {"x"}).proposed());
  c.deliver_all();
  const Index held = c.raft(1).last_index();  // an ordinary entry of the leader's term
  c.step(1, removed_answer(2, 1, c.raft(1).term(), held, c.raft(1).term()));
  EXPECT_TRUE(c.raft(1).removed()) << "a same-term ordinary entry passed for the configuration";
  EXPECT_EQ(c.raft(1).removed_by(), 2u);
  EXPECT_EQ(c.raft(1).role(), Role::kFollower);
  EXPECT_EQ(c.raft(1).last_step_down().reason, StepDownReason::kToldRemoved);
  EXPECT_EQ(c.raft(1).last_step_down().successor, 2u);
  c.isolate(2);
  c.isolate(3);
  auto campaigns = [&] {
    return c.count_delivered([](const Message& m) {
             return m.from == 1 && (m.type == MessageType::kPreVote || m.type == MessageType::kVote);
           }) +
           c.in_flight().size();
  };
  const std::size_t before = campaigns();
  for (int i = 0; i < 100; ++i) {
    c.tick(1);
    EXPECT_NE(c.raft(1).role(), Role::kPreCandidate) << "tick " << i;
  }
  EXPECT_EQ(campaigns(), before) << "a node told it is retired campaigned";
}

// The binding word survives a restart (DATA_DIR/REMOVED, replica/removed_word_record.h): node 3,
// told by node 2 that it is retired and then power-cut, comes back still told by node 2, and
// does not campaign. Before the record the restarted node had forgotten the word.
TEST(RetiredId, ABindingWordSurvivesARestart) {
  TestCluster c({1, 2, 3});
  const RemovedWord word = tell_three_it_is_retired(c);
  ASSERT_TRUE(c.raft(3).told_removed());
  c.crash_restart(3);
  EXPECT_TRUE(c.raft(3).told_removed()) << "the word was forgotten by the restart";
  EXPECT_EQ(c.raft(3).removed_by(), 2u);
  ASSERT_TRUE(c.raft(3).removed_word().has_value());
  EXPECT_EQ(*c.raft(3).removed_word(), word);
  c.isolate(1);
  c.isolate(2);
  const std::size_t before = c.in_flight().size();
  for (int i = 0; i < 100; ++i) {
    c.tick(3);
    EXPECT_NE(c.raft(3).role(), Role::kPreCandidate) << "tick " << i;
    EXPECT_NE(c.raft(3).role(), Role::kCandidate) << "tick " << i;
  }
  EXPECT_EQ(c.in_flight().size(), before) << "a restarted node told it is retired campaigned";
}

// Review of found6 L3: a word without a position (an older member's) arriving after a binding one
// neither loosens the node nor, through its driver, removes DATA_DIR/REMOVED. Before, it replaced
// the binding word: told_removed() turned false and the record was deleted at the round's end.
TEST(RetiredId, AnInformationOnlyWordDoesNotReplaceABindingOne) {
  TestCluster c({1, 2, 3});
  const RemovedWord word = tell_three_it_is_retired(c);
  ASSERT_TRUE(c.raft(3).told_removed());
  c.step(3, removed_answer(1, 3, c.raft(1).term()));  // no position
  EXPECT_TRUE(c.raft(3).told_removed());
  ASSERT_TRUE(c.raft(3).removed_word().has_value());
  EXPECT_EQ(*c.raft(3).removed_word(), word);
  c.crash_restart(3);
  EXPECT_TRUE(c.raft(3).told_removed()) << "the record was removed";
}

// A node told it is retired grants its (pre-)vote only to a candidate whose last entry is at or past
// the configuration the word named (a log that may hold it), not to another node of its own stale
// history (the retired pair of drills7 H2 re-electing each other). On main it granted both.
TEST(RetiredId, ANodeToldItIsRetiredGrantsOnlyACandidateThatMayHoldTheNamedConfiguration) {
  TestCluster c({1, 2, 3});
  const RemovedWord word = tell_three_it_is_retired(c);
  const Index conf_index = word.conf_index;
  const Term conf_term = word.conf_term;
  ASSERT_TRUE(c.raft(3).removed());
  c.tick(3, 30);  // out of any leader's lease
  c.take_from_network([](const Message&) { return true; }, 100000);
  auto ask = [&](Index last_index, Term last_term) {
    Message pre_vote;
    pre_vote.type = MessageType::kPreVote;
    pre_vote.from = 1;
    pre_vote.to = 3;
    pre_vote.term = c.raft(3).term() + 1;
    pre_vote.index = last_index;
    pre_vote.log_term = last_term;
    c.step(3, pre_vote);
    const std::vector<Message> answers =
        c.take_from_network([](const Message& m) { return m.from == 3 && m.to == 1; }, 10);
    return answers.size() == 1 && answers[0].type == MessageType::kPreVoteResponse &&
           !answers[0].reject;
  };
  EXPECT_FALSE(ask(conf_index - 1, conf_term + 5))
      << "granted a candidate whose log ends before the configuration that retired it";
  EXPECT_TRUE(ask(conf_index + 3, conf_term)) << "refused a candidate that may hold it";
}

// A word without a position (a node from before retired5) stays information only: the node keeps
// leading (the old contract, docs/raft.md).
TEST(RetiredId, AWordWithoutAPositionIsInformationOnly) {
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  c.step(1, removed_answer(2, 1, c.raft(1).term()));
  EXPECT_TRUE(c.raft(1).removed());
  EXPECT_EQ(c.raft(1).role(), Role::kLeader);
}

}  // namespace
}  // namespace raftlog::raft

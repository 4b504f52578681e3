// The operator's way out of the unvouched wedge (Config::unvouched_may_elect, raftlogd
// --unvouched-may-elect; outside test drills7 H4): two of three nodes lose only log/ while the third,
// which holds every acknowledged entry, has lost its leadership. The two unvouched nodes refuse it
// (a candidate with entries, and no leader's word since they restarted) and each other (empty, and
// they keep NOT_FOUNDER): nobody is ever elected. An operator who checked that node 1 holds the
// cluster's log restarts one of them naming node 1: it then grants node 1 by the ordinary up-to-date
// rule, and no other candidate it would not have granted anyway.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "shared/captured_log.h"
#include "test_cluster.h"
#include "unvouched_messages.h"

namespace raftlog::raft {
namespace {

using testing::TestCluster;
using namespace testing::unvouched;

NodeId leader_of(TestCluster& c) {
  for (NodeId id : c.ids()) {
    if (c.raft(id).role() == Role::kLeader) return id;
  }
  return kNoNode;
}

// drills7 d30b in the core: leader 1 commits 5 entries; cut off, it restarts (and so is no leader
// any more) while 2 and 3 lose their log/ and restart. Returns the last index node 1 holds.
Index wedge(TestCluster& c) {
  EXPECT_TRUE(c.campaign_until_leader(1));
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(c.propose(1, {"acknowledged-" + std::to_string(i)}).proposed());
    c.deliver_all();
  }
  const Index last = c.raft(1).last_index();
  EXPECT_EQ(c.raft(1).commit_index(), last);
  c.isolate(1);
  c.restart_log_wiped(2);
  c.restart_log_wiped(3);
  c.crash_restart(1);
  c.heal();
  for (NodeId id : {2, 3}) {
    EXPECT_TRUE(c.raft(id).unvouched()) << "node " << id;
    EXPECT_EQ(c.raft(id).last_index(), 0U) << "node " << id;
  }
  return last;
}

TEST(UnvouchedMayElect, WithoutItTwoNodesThatLostTheirLogsElectNobodyForGood) {
  TestCluster c({1, 2, 3});
  wedge(c);
  c.tick_all(300);  // many election timeouts (6 s of the cluster's clock)
  EXPECT_EQ(leader_of(c), kNoNode);
  EXPECT_TRUE(c.raft(2).unvouched());
  EXPECT_TRUE(c.raft(3).unvouched());
  // Not yet 10 s without a leader: the status says only why it is unvouched.
  EXPECT_EQ(c.replica(2).status().unvouched_hint, "");
  c.tick_all(300);  // 12 s
  EXPECT_EQ(leader_of(c), kNoNode);
  // Then the unvouched nodes say they may be waiting for an operator (drills7 H4: only "no leader
  // known" before), and the node holding the log, which is not unvouched, says nothing of it.
  for (NodeId id : {2, 3}) {
    const std::string hint = c.replica(id).status().unvouched_hint;
    EXPECT_NE(hint.find("nothing has moved for 1"), std::string::npos) << hint;
    EXPECT_NE(hint.find("waiting for an operator"), std::string::npos) << hint;
    EXPECT_NE(hint.find("--unvouched-may-elect"), std::string::npos) << hint;
  }
  EXPECT_EQ(c.replica(1).status().unvouched_hint, "");
}

// The hint's wait starts again whenever the catch-up moves: 8 s into the wedge, a leader of a later
// term than node 1's log (so node 1 still does not meet its word, and node 2 stays wedged) sends
// node 2 an entry and names commit 10. Four seconds later (12 s into the wedge) node 2 says
// nothing; ten seconds after the move it does, counting from the move.
TEST(UnvouchedMayElect, AMoveOfTheCatchUpRestartsTheHintsWait) {
  TestCluster c({1, 2, 3});
  wedge(c);
  c.tick_all(400);  // 8 s
  ASSERT_EQ(leader_of(c), kNoNode);
  ASSERT_EQ(c.replica(2).status().unvouched_hint, "");
  const Term later = c.raft(1).term() + 5;
  c.step(2, append_from(3, 2, later, 0, 0, 10, {entry_at(1, later)}));
  ASSERT_EQ(c.raft(2).vouching(), (std::pair<Term, Index>{later, 10}));
  c.tick_all(200);  // 12 s into the wedge, 4 s after the move
  ASSERT_EQ(leader_of(c), kNoNode);
  ASSERT_TRUE(c.raft(2).unvouched());
  EXPECT_EQ(c.replica(2).status().unvouched_hint, "") << "the move restarted the wait";
  c.tick_all(350);  // 11 s after the move
  ASSERT_EQ(leader_of(c), kNoNode);
  const std::string hint = c.replica(2).status().unvouched_hint;
  EXPECT_NE(hint.find("nothing has moved for 11 s"), std::string::npos) << hint;
}

TEST(UnvouchedMayElect, TheNamedCandidateIsGrantedByTheUpToDateRuleAndNoOtherOne) {
  TestCluster c({1, 2, 3});
  const Index last = wedge(c);
  const Term last_term = c.node(1).log.term_at(last).value_or(0);
  const Term term = c.raft(2).term();
  c.isolate(1);
  c.isolate(3);
  // Before: node 1's campaign is refused (entries, and no leader's word).
  EXPECT_EQ(answer_to(c, vote_request(1, 2, term + 1, last, last_term, /*pre_vote=*/true)), false);
  c.node(2).config.raft.unvouched_may_elect = 1;
  c.crash_restart(2);
  ASSERT_TRUE(c.raft(2).unvouched()) << "the flag vouches for nothing by itself";
  const Term after = c.raft(2).term();
  // Another candidate with entries, and the named one with an empty log (NOT_FOUNDER kept):
  // refused as before.
  EXPECT_EQ(answer_to(c, vote_request(3, 2, after + 1, last, last_term, /*pre_vote=*/true)), false);
  EXPECT_EQ(answer_to(c, vote_request(1, 2, after + 1, 0, 0, /*pre_vote=*/true)), false);
  // The named candidate with entries: granted, pre-vote and vote.
  EXPECT_EQ(answer_to(c, vote_request(1, 2, after + 1, last, last_term, /*pre_vote=*/true)), true);
  EXPECT_EQ(answer_to(c, vote_request(1, 2, after + 1, last, last_term, /*pre_vote=*/false)), true);
  // Not twice in one term: a second candidate of that term is refused (the ordinary vote rule).
  EXPECT_EQ(answer_to(c, vote_request(3, 2, after + 1, last + 1, last_term, /*pre_vote=*/false)), false);
}

TEST(UnvouchedMayElect, OneNodeRestartedNamingTheHolderEndsTheWedgeAndEveryEntryIsEverywhere) {
  TestCluster c({1, 2, 3});
  const Index last = wedge(c);
  c.tick_all(100);
  ASSERT_EQ(leader_of(c), kNoNode);
  c.node(2).config.raft.unvouched_may_elect = 1;
  c.crash_restart(2);
  for (int round = 0; round < 300 && leader_of(c) == kNoNode; ++round) c.tick_all();
  ASSERT_EQ(leader_of(c), 1U);
  c.tick_all(50);
  EXPECT_EQ(c.replica(3).status().unvouched_hint, "") << "a leader is known";
  ASSERT_TRUE(c.propose(1, {"after"}).proposed());
  c.deliver_all();
  for (NodeId id : {1, 2, 3}) {
    EXPECT_FALSE(c.raft(id).unvouched()) << "node " << id;
    ASSERT_GE(c.raft(id).commit_index(), last + 1) << "node " << id;
    for (Index index = 1; index <= last; ++index) {
      EXPECT_EQ(c.node(id).log.entry(index).payload.str(), c.node(1).log.entry(index).payload.str())
          << "node " << id << " index " << index;
    }
  }
}

// Review of bootstrap5 (M3, L5, L6): a node that crashed in the middle of its catch-up holds a
// leader's word (term 2, commit 5) and entries 1..3. The named candidate is still judged by the
// up-to-date rule against those entries; a named candidate whose log does not meet the word is
// granted by the operator's word, said `critical`; and one vote per term holds against a candidate
// that meets the word.
TEST(UnvouchedMayElect, WithALeadersWordTheRulesStillHoldAndAnOverrideIsSaidLoudly) {
  TestCluster c({1, 2, 3});
  c.isolate(1);
  c.isolate(3);
  c.step(2, append_from(1, 2, 2, 0, 0, 5, {entry_at(1, 2), entry_at(2, 2), entry_at(3, 2)}));
  ASSERT_EQ(c.raft(2).last_index(), 3U);
  ASSERT_TRUE(c.raft(2).unvouched());
  ASSERT_EQ(c.raft(2).vouching(), (std::pair<Term, Index>{2, 5}));
  c.node(2).config.raft.unvouched_may_elect = 3;
  c.crash_restart(2);
  ASSERT_TRUE(c.raft(2).unvouched());
  ASSERT_EQ(c.raft(2).vouching(), (std::pair<Term, Index>{2, 5}));
  const Term term = c.raft(2).term();
  raftlog::testing::CapturedLog log(spdlog::level::info);
  // Named, but behind this node's own entries: refused by the up-to-date rule.
  EXPECT_EQ(answer_to(c, vote_request(3, 2, term + 1, 2, 2, /*pre_vote=*/true)), false);
  // Named, ahead of this node's log but short of the word's commit 5: granted, said loudly (once
  // per 30 s: the request above said it already).
  EXPECT_EQ(answer_to(c, vote_request(3, 2, term + 1, 4, 2, /*pre_vote=*/false)), true);
  EXPECT_NE(log.text().find("but the leader of term 2 told this node that entries up to 5 are "
                            "committed"),
            std::string::npos)
      << log.text();
  // Node 1 meets the word (a grant without any flag), but node 2 voted for 3 in this term.
  EXPECT_EQ(answer_to(c, vote_request(1, 2, term + 1, 5, 2, /*pre_vote=*/false)), false);
  EXPECT_EQ(answer_to(c, vote_request(1, 2, term + 2, 5, 2, /*pre_vote=*/false)), true);
}

// The core's grant and the replica's warning judge a candidate's log against a leader's word by one
// rule (raft::rules::log_meets_vouching_word), so they cannot drift apart: over a table of
// candidate logs, node 2 (the word of a leader of term 3 naming commit 5; its own log 1..2 of term
// 1, which every case passes by the up-to-date rule) grants an unnamed candidate exactly when its
// log meets the word, and says loudly that --unvouched-may-elect grants the named one exactly when
// it does not.
TEST(UnvouchedMayElect, TheGrantAndTheOverrideWarningJudgeEveryLogAlike) {
  struct Case {
    Index last_index;
    Term last_term;
    bool meets_the_word;
  };
  const Case cases[] = {
      {2, 1, false}, {9, 1, false},  // below the word's term
      {1, 2, false}, {9, 2, false},  // likewise, however long
      {4, 3, false},                 // the word's term, short of its commit
      {5, 3, true},  {7, 3, true},   // the word's term, at or past its commit
      {1, 4, true},  {9, 4, true},   // above the word's term
  };
  for (const Case& k : cases) {
    SCOPED_TRACE("candidate log ending at index " + std::to_string(k.last_index) + " of term " +
                 std::to_string(k.last_term));
    TestCluster c({1, 2, 3});
    c.isolate(1);
    c.isolate(3);
    c.step(2, append_from(1, 2, 3, 0, 0, 5, {entry_at(1, 1), entry_at(2, 1)}));
    c.node(2).config.raft.unvouched_may_elect = 3;
    c.crash_restart(2);
    ASSERT_TRUE(c.raft(2).unvouched());
    ASSERT_EQ(c.raft(2).vouching(), (std::pair<Term, Index>{3, 5}));
    const Term term = c.raft(2).term();
    raftlog::testing::CapturedLog log(spdlog::level::info);
    EXPECT_EQ(answer_to(c, vote_request(3, 2, term + 1, k.last_index, k.last_term, true)), true)
        << "the named candidate: granted by the operator's word";
    const bool warned = log.text().find("asks for a vote with a log ending at index " +
                                        std::to_string(k.last_index)) != std::string::npos;
    const std::optional<bool> granted =
        answer_to(c, vote_request(1, 2, term + 1, k.last_index, k.last_term, true));
    EXPECT_EQ(granted, k.meets_the_word) << "the core's grant to an unnamed candidate";
    EXPECT_EQ(warned, !k.meets_the_word) << "the replica's warning: " << log.text();
  }
}

}  // namespace
}  // namespace raftlog::raft

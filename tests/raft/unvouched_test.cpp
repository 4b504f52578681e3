// Unvouched nodes (docs/raft.md, "Unvouched nodes"): a node that starts on an empty data directory in
// a configuration with other members cannot tell a brand-new cluster from one whose entries it
// acknowledged and then lost with its disk. Until a leader has caught it up it grants a vote only to
// a candidate whose log is empty too, and a leader's first contact makes it catch up (no votes, its
// acknowledgements not counted) until its durable log reaches the commit the leader named AND holds
// an entry of that leader's term. drills6 H1 lost an acknowledged append without this.
#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "test_cluster.h"
#include "unvouched_messages.h"

namespace raftlog::raft {
namespace {

using testing::TestCluster;
using namespace testing::unvouched;

// The answers `from` gave `to`'s vote requests so far (granted or not, in order), as its Ready
// batches handed them out (they may never be delivered: the tests isolate the candidates).
std::vector<bool> vote_answers(const TestCluster& c, NodeId from, NodeId to) {
  std::vector<bool> out;
  for (const Ready& ready : c.node(from).readies) {
    for (const std::vector<Message>* queue : {&ready.messages, &ready.messages_after_persist}) {
      for (const Message& m : *queue) {
        if (m.to == to &&
            (m.type == MessageType::kVoteResponse || m.type == MessageType::kPreVoteResponse)) {
          out.push_back(!m.reject);
        }
      }
    }
  }
  return out;
}

// A 3-node cluster with leader 1 and `count` committed client entries.
void elect_and_commit(TestCluster& c, int count) {
  ASSERT_TRUE(c.campaign_until_leader(1));
  for (int i = 0; i < count; ++i) {
    ASSERT_TRUE(c.propose(1, {"p" + std::to_string(i)}).proposed());
    c.deliver_all();
  }
}

TEST(Unvouched, EveryFounderStartsUnvouchedAndTheFirstLeaderVouchesForAll) {
  TestCluster c({1, 2, 3});
  for (NodeId id : {1, 2, 3}) EXPECT_TRUE(c.raft(id).unvouched()) << "node " << id;
  // Empty logs grant empty logs: a brand-new cluster elects its first leader as before.
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  for (NodeId id : {1, 2, 3}) {
    EXPECT_FALSE(c.raft(id).unvouched()) << "node " << id << " holds the leader's no-op";
    EXPECT_FALSE(c.raft(id).catching_up()) << "node " << id;
  }
}

TEST(Unvouched, ASingleMemberIsNeverUnvouched) {
  TestCluster c({1});
  EXPECT_FALSE(c.raft(1).unvouched());
}

TEST(Unvouched, RefusesACandidateWithEntriesAndGrantsOneWithAnEmptyLog) {
  TestCluster c({1, 2, 3});
  elect_and_commit(c, 3);
  c.restart_wiped(3);
  ASSERT_TRUE(c.raft(3).unvouched());
  c.node(3).readies.clear();  // its answers before it lost its disk
  c.isolate(1);
  c.isolate(2);
  const Term term = c.raft(3).term();
  // Node 2 holds entries: refused, pre-vote and vote alike.
  c.step(3, vote_request(2, 3, term + 1, 4, 1, /*pre_vote=*/true));
  c.step(3, vote_request(2, 3, term + 1, 4, 1, /*pre_vote=*/false));
  EXPECT_EQ(vote_answers(c, 3, 2), (std::vector<bool>{false, false}));
  // Node 1, as if its log were empty (a brand-new cluster's candidate): granted.
  c.step(3, vote_request(1, 3, term + 2, 0, 0, /*pre_vote=*/true));
  c.step(3, vote_request(1, 3, term + 2, 0, 0, /*pre_vote=*/false));
  EXPECT_EQ(vote_answers(c, 3, 1), (std::vector<bool>{true, true}));
}

TEST(Unvouched, NoLeaderWithoutTheWipedNodesVoteThenTheLeaderCatchesItUp) {
  TestCluster c({1, 2, 3});
  elect_and_commit(c, 3);
  const Index last = c.raft(1).last_index();
  c.restart_wiped(3);
  // Leader 1 away: node 2 holds everything, yet cannot win with the wiped node's vote.
  c.isolate(1);
  EXPECT_FALSE(c.campaign_until_leader(2, 100));
  EXPECT_TRUE(c.raft(3).unvouched());
  EXPECT_EQ(c.raft(3).role(), Role::kFollower) << "an unvouched node never campaigns with entries";
  c.heal();
  // Any leader of the three catches node 3 up, which then votes again.
  c.tick_all(60);
  const NodeId leader = c.leader();
  ASSERT_NE(leader, kNoNode);
  ASSERT_NE(leader, 3u);
  EXPECT_FALSE(c.raft(3).unvouched());
  EXPECT_FALSE(c.raft(3).catching_up());
  EXPECT_GE(c.raft(3).persisted_index(), last);
  EXPECT_EQ(c.node(3).log.entry(last).payload, c.node(leader).log.entry(last).payload);
}

// The rule's two halves, with a leader of term 5 that node 3 hears from alone (forged from id 1:
// the cluster's other nodes are away).
TEST(Unvouched, ReachingTheCommitIndexWithoutAnEntryOfTheLeadersTermIsNotEnough) {
  TestCluster c({1, 2, 3});
  c.isolate(1);
  c.isolate(2);
  c.step(3, heartbeat_from(1, 3, 5, /*commit=*/2));
  ASSERT_TRUE(c.raft(3).catching_up());
  EXPECT_EQ(c.raft(3).catching_up_to(), 2u);
  EXPECT_EQ(c.raft(3).catch_up_cause(), Raft::CatchUpCause::kUnvouched);
  // Entries of earlier terms up to and past the commit index: a leader's commit index may lag the
  // entries committed before its term, which come before its own entries in its log.
  c.step(3, append_from(1, 3, 5, 0, 0, 2, {entry_at(1, 1), entry_at(2, 1), entry_at(3, 4)}));
  ASSERT_EQ(c.raft(3).persisted_index(), 3u);
  EXPECT_TRUE(c.raft(3).unvouched()) << "no entry of term 5 yet";
  c.step(3, append_from(1, 3, 5, 3, 4, 2, {entry_at(4, 5)}));
  EXPECT_FALSE(c.raft(3).unvouched());
  EXPECT_FALSE(c.raft(3).catching_up());
}

// Node 3, cut off from nodes 1 and 2, hears leader 1 of term 5 name commit 4 and then gets only
// entries 1..2 of term 5 from it.
void node_3_short_of_leader_1s_commit(TestCluster& c) {
  c.isolate(1);
  c.isolate(2);
  c.step(3, heartbeat_from(1, 3, 5, /*commit=*/4));
  c.step(3, append_from(1, 3, 5, 0, 0, 4, {entry_at(1, 5), entry_at(2, 5)}));
}

TEST(Unvouched, AnEntryOfTheLeadersTermWithoutTheCommitIndexIsNotEnough) {
  TestCluster c({1, 2, 3});
  node_3_short_of_leader_1s_commit(c);
  ASSERT_EQ(c.raft(3).persisted_index(), 2u);
  EXPECT_TRUE(c.raft(3).unvouched()) << "the leader counted entries up to 4 committed";
  // It refuses votes meanwhile, even to an empty log, which is behind its own (asked once the
  // leader's lease ran out: inside it, vote requests are not answered at all).
  c.tick(3, 25);
  EXPECT_EQ(c.raft(3).role(), Role::kFollower) << "a catching-up node never campaigns";
  c.step(3, vote_request(2, 3, 6, 0, 0, /*pre_vote=*/true));
  EXPECT_EQ(vote_answers(c, 3, 2), (std::vector<bool>{false}));
  c.step(3, append_from(1, 3, 5, 2, 5, 4, {entry_at(3, 5), entry_at(4, 5)}));
  EXPECT_FALSE(c.raft(3).unvouched());
}

// What counts as a move of the catch-up (Raft::catch_up_moves, the unvouched hint's "nothing has
// moved"): not a (pre-)vote request, refused or granted; a raised leader's word alone (a heartbeat
// of the same leader and term whose clamped commit lies beyond the log: term, leader, log and
// commit stay); entries (review of tidy6, M1: the word clause had no test).
TEST(Unvouched, ARaisedWordAndEntriesAreMovesOfTheCatchUpAndVoteRequestsAreNot) {
  TestCluster c({1, 2, 3});
  node_3_short_of_leader_1s_commit(c);
  ASSERT_EQ(c.raft(3).vouching(), (std::pair<Term, Index>{5, 4}));
  c.tick(3, 25);  // past the leader's lease: vote requests are answered
  std::uint64_t seen = c.raft(3).catch_up_moves();
  c.node(3).readies.clear();
  c.step(3, vote_request(2, 3, 6, 3, 5, /*pre_vote=*/true));  // below the word: refused
  c.step(3, vote_request(2, 3, 6, 4, 5, /*pre_vote=*/true));  // meets it: granted
  ASSERT_EQ(vote_answers(c, 3, 2), (std::vector<bool>{false, true}));
  EXPECT_EQ(c.raft(3).catch_up_moves(), seen) << "vote requests move nothing";
  const Index commit = c.raft(3).commit_index();
  Message heartbeat = heartbeat_from(1, 3, 5, /*commit=*/9);
  heartbeat.commit = 9;  // clamped to what the leader believes this node holds: beyond its log
  c.step(3, heartbeat);
  ASSERT_EQ(c.raft(3).vouching(), (std::pair<Term, Index>{5, 9}));
  ASSERT_EQ(c.raft(3).term(), 5u);
  ASSERT_EQ(c.raft(3).leader(), 1u);
  ASSERT_EQ(c.raft(3).last_index(), 2u);
  ASSERT_EQ(c.raft(3).commit_index(), commit);
  EXPECT_GT(c.raft(3).catch_up_moves(), seen) << "the word rose";
  seen = c.raft(3).catch_up_moves();
  c.step(3, append_from(1, 3, 5, 2, 5, 9, {entry_at(3, 5)}));
  ASSERT_EQ(c.raft(3).last_index(), 3u);
  EXPECT_GT(c.raft(3).catch_up_moves(), seen) << "an entry";
}

// A brand-new cluster whose first leader dies before its first entry is durable anywhere: the others
// heard its heartbeat (catching up to its term) but hold nothing. They still elect a leader among
// empty logs: refusing every vote while catching up deadlocked the cluster for good.
TEST(Unvouched, ANewClusterWhoseFirstLeaderDiedBeforeItsNoopElectsAnother) {
  TestCluster c({1, 2, 3});
  // Node 1's appends never leave it; its heartbeats do.
  c.add_drop_rule([](const Message& m) { return m.type == MessageType::kAppend && m.from == 1; });
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.tick(1, 2);
  c.deliver_all();
  ASSERT_TRUE(c.raft(2).catching_up());
  ASSERT_EQ(c.raft(2).last_index(), 0u);
  c.isolate(1);
  c.tick_all(100);
  const NodeId leader = c.leader();
  ASSERT_TRUE(leader == 2 || leader == 3) << "no leader among the empty logs";
  EXPECT_FALSE(c.raft(2).unvouched());
  EXPECT_FALSE(c.raft(3).unvouched());
}

// Once a leader of term T named commit c, a candidate whose log would vouch for the node (last term
// above T, or T with last index >= c) holds everything that leader counted committed: granted. A
// voter added while empty whose leader died before catching it up otherwise blocked every election
// its vote was needed for (raftlog-sim --reconfigure, seeds 477 and 490 with 3 nodes).
TEST(Unvouched, AfterALeadersContactGrantsACandidateWhoseLogWouldVouchForIt) {
  TestCluster c({1, 2, 3});
  node_3_short_of_leader_1s_commit(c);
  ASSERT_TRUE(c.raft(3).unvouched());
  c.tick(3, 25);  // past the leader's lease: vote requests are answered
  c.node(3).readies.clear();
  c.step(3, vote_request(2, 3, 6, 3, 5, /*pre_vote=*/true));  // term 5, but below commit 4
  c.step(3, vote_request(2, 3, 6, 9, 4, /*pre_vote=*/true));  // longer, but of an older term
  c.step(3, vote_request(2, 3, 6, 4, 5, /*pre_vote=*/true));  // term 5 through commit 4
  c.step(3, vote_request(2, 3, 6, 3, 6, /*pre_vote=*/true));  // a later term
  EXPECT_EQ(vote_answers(c, 3, 2), (std::vector<bool>{false, false, true, true}));
}

// drills6 H1: five nodes; an append acknowledged by 3, 4, 5 while 1 and 2 are down; 4 and 5 go
// down; node 3 loses its data directory and restarts under its id; 1 and 2 come back. Before the
// guard, node 3 voted at once and node 1 won with {1, 2, 3}: the acknowledged entry's index was
// reused by a no-op. Now no leader arises until a holder is back, and the entry survives.
TEST(Unvouched, Drills6H1AnAcknowledgedEntrySurvivesAWipedHolder) {
  TestCluster c({1, 2, 3, 4, 5});
  ASSERT_TRUE(c.campaign_until_leader(4));
  c.deliver_all();
  c.isolate(1);
  c.isolate(2);
  const testing::Proposal acked = c.propose(4, {"AMNESIA-MARKER"});
  ASSERT_TRUE(acked.proposed());
  c.deliver_all();
  ASSERT_TRUE(acked.answer.answered());
  ASSERT_EQ(acked.answer.code(), replica::ErrorCode::kOk);
  const Index index = acked.placement.last;
  c.isolate(4);
  c.isolate(5);
  c.restart_wiped(3);
  c.heal();
  c.isolate(4);
  c.isolate(5);
  c.tick_all(300);
  const NodeId early = c.leader();
  if (early != kNoNode) {
    // No majority without an acknowledged-entry holder: 1 and 2 never held it, 3 lost it.
    ADD_FAILURE() << "node " << early << " leads term " << c.raft(early).term() << " with {1, 2, 3}";
    const std::optional<Term> term = c.node(early).log.term_at(index);
    EXPECT_TRUE(term.has_value() && c.node(early).log.entry(index).payload ==
                                        c.node(4).log.entry(index).payload)
        << "the acknowledged entry at " << index << " was replaced";
  }
  c.heal();
  c.isolate(4);  // one holder back (5) is enough
  c.tick_all(300);
  const NodeId leader = c.leader();
  ASSERT_NE(leader, kNoNode);
  ASSERT_GE(c.raft(leader).commit_index(), index);
  for (NodeId id : {1, 2, 3, 5}) {
    ASSERT_GE(c.node(id).log.durable_index(), index) << "node " << id;
    EXPECT_EQ(c.node(id).log.entry(index).payload, c.node(4).log.entry(index).payload)
        << "node " << id << " at " << index;
  }
}

TEST(CommittedConflict, AFollowerSaysSoWhenAnAppendContradictsItsCommittedEntry) {
  TestCluster c({1, 2, 3});
  c.isolate(1);
  c.isolate(2);
  // Node 3 catches up from a leader of term 2 (commit 3), then a leader of term 3 disagrees at 3.
  c.step(3, append_from(1, 3, 2, 0, 0, 3, {entry_at(1, 2), entry_at(2, 2), entry_at(3, 2)}));
  ASSERT_EQ(c.raft(3).commit_index(), 3u);
  EXPECT_EQ(c.raft(3).committed_conflict().count, 0u);
  c.step(3, append_from(2, 3, 3, 2, 2, 3, {entry_at(3, 3)}));
  const CommittedConflict& conflict = c.raft(3).committed_conflict();
  EXPECT_EQ(conflict.count, 1u);
  EXPECT_EQ(conflict.index, 3u);
  EXPECT_EQ(conflict.own_term, 2u);
  EXPECT_EQ(conflict.leader_term, 3u);
  EXPECT_EQ(conflict.leader, 2u);
  // The probe at the committed index itself (node 5 in drills6 H1) and one below it too.
  c.step(3, append_from(2, 3, 3, 3, 3, 3, {}));
  EXPECT_EQ(c.raft(3).committed_conflict().count, 2u);
  c.step(3, append_from(2, 3, 3, 1, 2, 3, {entry_at(2, 2), entry_at(3, 3)}));
  EXPECT_EQ(c.raft(3).committed_conflict().count, 3u);
  EXPECT_EQ(c.node(3).log.term_at(3), std::optional<Term>(2)) << "its committed entry is kept";
}

TEST(UnvouchedMarker, WrittenOnAnEmptyOpenNeverForASingleMember) {
  TestCluster three({1, 2, 3});
  for (NodeId id : {1, 2, 3}) EXPECT_TRUE(marker_exists(three, id)) << "node " << id;
  TestCluster one({1});
  EXPECT_FALSE(marker_exists(one, 1));
  // A directory with Raft state is not empty: no record (an upgrade from an older binary).
  one.crash_restart(1);
  EXPECT_FALSE(marker_exists(one, 1));
}

TEST(UnvouchedMarker, KeptAcrossACrashInTheMiddleOfTheCatchUpRemovedOnlyOnceVouched) {
  TestCluster c({1, 2, 3});
  c.isolate(1);
  c.isolate(2);
  c.step(3, heartbeat_from(1, 3, 5, /*commit=*/4));
  c.step(3, append_from(1, 3, 5, 0, 0, 4, {entry_at(1, 5), entry_at(2, 5)}));
  ASSERT_EQ(c.raft(3).persisted_index(), 2u);
  EXPECT_TRUE(marker_exists(c, 3)) << "removed before the node was caught up";
  c.crash_restart(3);
  ASSERT_EQ(c.raft(3).last_index(), 2u);
  EXPECT_TRUE(c.raft(3).unvouched()) << "the log is not empty any more, but the record says so";
  EXPECT_TRUE(c.replica(3).status().unvouched);
  // The first leader's word survived too: a candidate holding what it committed is granted
  // (raftlog-sim --retention --reconfigure seed 464: a needed voter restarted so elected nobody).
  EXPECT_EQ(c.raft(3).vouching(), (std::pair<Term, Index>{5, 4}));
  c.node(3).readies.clear();
  c.step(3, vote_request(2, 3, 7, 4, 5, /*pre_vote=*/true));
  c.step(3, vote_request(2, 3, 7, 3, 5, /*pre_vote=*/true));
  EXPECT_EQ(vote_answers(c, 3, 2), (std::vector<bool>{true, false}));
  // With entries, it does not campaign (its own vote could complete a majority without entries it
  // lost) and grants nothing to a candidate with entries.
  c.tick(3, 100);
  EXPECT_EQ(c.raft(3).role(), Role::kFollower);
  c.step(3, heartbeat_from(1, 3, 6, /*commit=*/4));
  c.step(3, append_from(1, 3, 6, 2, 5, 4, {entry_at(3, 5), entry_at(4, 6)}));
  EXPECT_FALSE(c.raft(3).unvouched());
  EXPECT_FALSE(marker_exists(c, 3));
  EXPECT_FALSE(c.replica(3).status().unvouched);
  c.crash_restart(3);
  EXPECT_FALSE(c.raft(3).unvouched());
}

TEST(UnvouchedMarker, ADamagedRecordCountsAsPresent) {
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  ASSERT_FALSE(marker_exists(c, 2));
  // A file that exists but holds no valid record (a torn creation, a stray copy, damage).
  const std::string path =
      c.node(2).config.data_dir + "/" + replica::UnvouchedMarker::kFileName;
  ASSERT_TRUE(c.node(2).env->write_file(path, std::string(100, 'z')).ok());
  ASSERT_TRUE(c.node(2).env->sync_dir(c.node(2).config.data_dir).ok());
  c.crash_restart(2);
  EXPECT_TRUE(c.raft(2).unvouched());
  c.tick_all(5);
  EXPECT_FALSE(c.raft(2).unvouched()) << "the leader caught it up again";
  EXPECT_FALSE(marker_exists(c, 2));
}

TEST(UnvouchedMarker, StatusSaysWhyTheNodeCatchesUp) {
  TestCluster c({1, 2, 3});
  elect_and_commit(c, 2);
  c.restart_wiped(3);
  EXPECT_TRUE(c.replica(3).status().unvouched);
  c.add_drop_rule([](const Message& m) { return m.type == MessageType::kAppend && m.to == 3; });
  c.tick_all(2);
  const replica::NodeStatus status = c.replica(3).status();
  EXPECT_TRUE(status.catching_up);
  EXPECT_EQ(status.storage_fault, replica::kUnvouchedReason);
}

// Status and health say what the open found (review amnesia2 L4): a whole directory lost, only
// log/ lost (HARDSTATE and CONFSTATE kept), or a restart before a leader caught the node up.
TEST(UnvouchedMarker, TheReasonSaysWhatTheNodeLost) {
  TestCluster c({1, 2, 3});
  elect_and_commit(c, 2);
  c.isolate(1);  // nobody catches the wiped nodes up
  c.restart_wiped(3);
  EXPECT_EQ(c.replica(3).status().unvouched_reason, replica::kUnvouchedReason);
  c.restart_log_wiped(2);
  EXPECT_EQ(c.replica(2).status().unvouched_reason, replica::kUnvouchedLogLostReason);
  c.crash_restart(3);
  EXPECT_EQ(c.replica(3).status().unvouched_reason, replica::kUnvouchedResumedReason);
  // A leader's word makes it catch up: the catch-up's reason is the same sentence.
  c.heal();
  c.add_drop_rule([](const Message& m) { return m.type == MessageType::kAppend && m.to == 2; });
  c.tick_all(2);
  const replica::NodeStatus status = c.replica(2).status();
  ASSERT_TRUE(status.catching_up);
  EXPECT_EQ(status.storage_fault, replica::kUnvouchedLogLostReason);
  EXPECT_TRUE(c.replica(1).status().unvouched_reason.empty());
}

// drills6 L1: a node that lost its log's tail but kept its directory's other files learns it from
// its leader's heartbeat; status used to show an empty reason.
TEST(UnvouchedMarker, ACatchUpFromTheLeadersHeartbeatSaysWhatWasFound) {
  TestCluster c({1, 2, 3});
  elect_and_commit(c, 6);
  c.restart_with_log_cut(2, 3);
  c.isolate(3);
  c.add_drop_rule([](const Message& m) { return m.type == MessageType::kAppend && m.to == 2; });
  c.tick(1, 2);
  c.deliver_all();
  const replica::NodeStatus status = c.replica(2).status();
  ASSERT_TRUE(status.catching_up);
  EXPECT_NE(status.storage_fault.find("lost entries it had acknowledged"), std::string::npos)
      << status.storage_fault;
}

}  // namespace
}  // namespace raftlog::raft

namespace raftlog::raft {
namespace {

// Review H1 (drills6 H1's second repro): only log/ lost, HARDSTATE (term 3) kept: unvouched too.
TEST(UnvouchedMarker, AnEmptyLogBesideAHardStateWithATermIsUnvouched) {
  Entry e;
  e.index = 1;
  e.term = 1;
  e.type = EntryType::kNoop;
  testing::TestCluster c({1, 2, 3}, {{e}, {e}, {}},
                         {HardState{1, 1, 1}, HardState{1, 1, 1}, HardState{3, 0, 0}}, {}, {});
  EXPECT_FALSE(c.raft(1).unvouched());
  EXPECT_TRUE(c.raft(3).unvouched());
  EXPECT_TRUE(c.node(3).env->exists(c.node(3).config.data_dir + "/UNVOUCHED"));
}

}  // namespace
}  // namespace raftlog::raft

namespace raftlog::raft {
namespace {

using testing::TestCluster;

// Review M1: once a leader named commit c > 0 to an unvouched node, entries 1..c are known to be
// committed and an empty log lacks them all: the node neither grants an empty candidate nor
// campaigns with its own empty log. Three nodes: leader 1 commits 1..7 with node 2; node 3, a founder
// that never received an entry, hears its heartbeat (commit 7); node 2 loses its disk; node 1 goes
// down. Granting empty logs, nodes 2 and 3 elected an empty leader and 1..7, acknowledged, were gone.
TEST(Unvouched, AfterALeaderNamedACommitAnEmptyCandidateIsRefused) {
  TestCluster c({1, 2, 3});
  c.isolate(3);
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(c.propose(1, {"m" + std::to_string(i)}).proposed());
    c.deliver_all();
  }
  ASSERT_EQ(c.raft(1).commit_index(), 7u);
  const Entry seventh = c.node(1).log.entry(7);
  c.heal();
  c.add_drop_rule([](const Message& m) {
    return m.from == 1 && m.to == 3 && m.type != MessageType::kHeartbeat;
  });
  c.tick(1);
  c.deliver_all();
  ASSERT_EQ(c.node(3).log.last_index(), 0u);
  ASSERT_EQ(c.raft(3).vouching(), (std::pair<Term, Index>{1, 7}));
  c.restart_wiped(2);
  c.heal();
  c.isolate(1);
  c.tick_all(300);
  EXPECT_EQ(c.leader(), kNoNode) << "node " << c.leader() << " leads term "
                                 << c.raft(c.leader() == kNoNode ? 2 : c.leader()).term()
                                 << " with an empty log";
  c.heal();
  c.tick_all(300);
  const NodeId leader = c.leader();
  ASSERT_NE(leader, kNoNode);
  for (NodeId id : {1, 2, 3}) {
    ASSERT_GE(c.node(id).log.durable_index(), 7u) << "node " << id;
    EXPECT_EQ(c.node(id).log.entry(7).payload, seventh.payload) << "node " << id;
    EXPECT_EQ(c.node(id).log.entry(7).term, seventh.term) << "node " << id;
  }
}

// Review amnesia2 H1: a first word naming commit 0 engages no catch-up, and the leader keeps the
// wiped node's match from before the wipe (the rejections of its appends fall at or below it and are
// dropped as stale), so it can commit entries counting the forgotten acknowledgements while the node
// hears nothing of them. Five nodes, leader 1 at commit 0: node 3 acknowledges 1..10, 2 and 5 hold
// 1..5, 4 holds 1..10 unacknowledged; node 3 is wiped and hears leader 1's heartbeat (commit 0); node
// 4's acknowledgement commits 10 with node 3's old one; 1 and 4 die. Granting by the word (T, 0),
// node 3 elected 2 or 5 with {2, 3, 5}, and 6..10, acknowledged, were overwritten.
TEST(Unvouched, TheWordCountsOnlyOnceAStaleMatchIsRuledOut) {
  TestCluster c({1, 2, 3, 4, 5});
  // Node 1 wins with its appends dropped, then replicates to node 3 alone: commit stays 0.
  c.add_drop_rule([](const Message& m) { return m.type == MessageType::kAppend && m.from == 1; });
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.heal();
  for (NodeId id : {2, 4, 5}) c.isolate(id);
  c.tick(1);
  c.deliver_all();
  for (int i = 0; i < 9; ++i) {
    ASSERT_TRUE(c.propose(1, {"e" + std::to_string(i + 2)}).proposed());
    c.deliver_all();
  }
  ASSERT_EQ(c.node(3).log.durable_index(), 10u);
  ASSERT_EQ(c.raft(1).commit_index(), 0u) << "only 1 and 3 hold anything";
  const Term term = c.raft(1).term();
  std::vector<Entry> first_five;
  for (Index i = 1; i <= 5; ++i) first_five.push_back(c.node(1).log.entry(i));
  // Nodes 2 and 5 receive 1..5; their acknowledgements never reach node 1 (isolated).
  for (NodeId id : {2, 5}) c.step(id, append_from(1, id, term, 0, 0, 0, first_five));
  ASSERT_EQ(c.node(2).log.durable_index(), 5u);
  const Entry tenth = c.node(1).log.entry(10);
  c.restart_wiped(3);
  c.tick(1);  // the heartbeat names commit 0 (its match for node 3 is 10, its commit 0)
  c.deliver_all();
  ASSERT_EQ(c.raft(3).vouching(), (std::pair<Term, Index>{})) << "a word, not yet counted";
  ASSERT_FALSE(c.raft(3).catching_up_to() > 0) << "commit 0 engages no storage-fault catch-up";
  // Nothing more of node 1 reaches node 3; node 4 catches up and commits 10 with node 3's old
  // acknowledgement.
  c.add_drop_rule([](const Message& m) { return m.from == 1 && m.to == 3; });
  c.heal();
  c.add_drop_rule([](const Message& m) { return m.from == 1 && m.to == 3; });
  for (NodeId id : {2, 5}) c.isolate(id);
  c.tick(1);
  c.deliver_all();
  c.tick(1);
  c.deliver_all();
  ASSERT_EQ(c.raft(1).commit_index(), 10u) << "1 and 4, with node 3's acknowledgement from before";
  c.heal();
  c.isolate(1);
  c.isolate(4);
  c.tick_all(300);
  const NodeId early = c.leader();
  EXPECT_EQ(early, kNoNode) << "node " << early << " leads without entries 6..10";
  c.heal();
  c.tick_all(300);
  ASSERT_NE(c.leader(), kNoNode);
  for (NodeId id : {1, 2, 3, 4, 5}) {
    ASSERT_GE(c.node(id).log.durable_index(), 10u) << "node " << id;
    EXPECT_EQ(c.node(id).log.entry(10).payload, tenth.payload) << "node " << id;
    EXPECT_EQ(c.node(id).log.entry(10).term, tenth.term) << "node " << id;
  }
}

// Review M4: one append contradicting a committed entry (a forged or stray message) must not take a
// node out of service for good: NOT_SERVING while such appends keep coming (a leader that cannot
// catch the node up probes it every heartbeat), SERVING again once they stopped; the counter stays.
TEST(CommittedConflict, TheStatusClearsOnceConflictsStopTheCounterStays) {
  TestCluster c({1, 2, 3});
  c.isolate(1);
  c.isolate(2);
  c.step(3, append_from(1, 3, 2, 0, 0, 3, {entry_at(1, 2), entry_at(2, 2), entry_at(3, 2)}));
  c.step(3, append_from(2, 3, 3, 2, 2, 3, {entry_at(3, 3)}));
  replica::NodeStatus status = c.replica(3).status();
  EXPECT_EQ(status.committed_conflicts, 1u);
  EXPECT_NE(status.committed_conflict.find("index 3"), std::string::npos) << status.committed_conflict;
  c.tick(3, 250);  // 5 s: still shown
  EXPECT_FALSE(c.replica(3).status().committed_conflict.empty());
  // A matching append of the same leader, then 12 s without a conflict.
  c.step(3, append_from(2, 3, 3, 3, 2, 3, {}));
  c.tick(3, 600);
  status = c.replica(3).status();
  EXPECT_EQ(status.committed_conflict, "") << "shown with no conflict for 12 s";
  EXPECT_EQ(status.committed_conflicts, 1u);
  // A new conflict shows it again.
  c.step(3, append_from(2, 3, 3, 2, 2, 3, {entry_at(3, 3)}));
  status = c.replica(3).status();
  EXPECT_EQ(status.committed_conflicts, 2u);
  EXPECT_FALSE(status.committed_conflict.empty());
}

}  // namespace
}  // namespace raftlog::raft

// A second leader of a term (docs/raft.md, "A second leader of a term"): a node remembers the leader
// it knows for its current term (it led it, or accepted that leader's append, heartbeat or
// snapshot), durably in HARDSTATE, and refuses a leader message of the same term from any other
// node: it takes none of its entries, its commit or its snapshot, and answers with a rejection
// naming the leader it knows. drills7 H3: two followers lost their disks, restarted at term 0 and
// elected one of themselves in term 1, the term the data node had led; the data node followed the
// second leader of term 1, and equal terms passed the log-matching check. Leadership nonces
// (LeadershipNonce.*, review oneterm5 H1): each leadership draws a random non-zero nonce carried on
// its leader messages and kept with the term's leader; the same id with another non-zero nonce is a
// second leadership (drills7 H3 with the leader in the wiped pair, elected again under its own id).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "bare_node.h"
#include "test_cluster.h"
#include "unvouched_messages.h"

namespace raftlog::raft {
namespace {

using testing::BareNode;
using testing::TestCluster;
using namespace testing::unvouched;

// Every kAppendResponse `from` handed out for `to` (either queue) in its Ready batches from
// `first_ready` on.
std::vector<Message> append_answers(const TestCluster& c, NodeId from, NodeId to,
                                    std::size_t first_ready = 0) {
  std::vector<Message> out;
  const std::vector<Ready>& readies = c.node(from).readies;
  for (std::size_t i = first_ready; i < readies.size(); ++i) {
    for (const std::vector<Message>* queue :
         {&readies[i].messages, &readies[i].messages_after_persist}) {
      for (const Message& m : *queue) {
        if (m.to == to && m.type == MessageType::kAppendResponse) out.push_back(m);
      }
    }
  }
  return out;
}

// Two entries of `term`, as a node that ran before holds them.
std::vector<Entry> entries_of_term(Term term) { return {entry_at(1, term), entry_at(2, term)}; }

// Node 3 of {1, 2, 3}, restarted at term 2 with two entries of it, knowing leader 1 of term 2 with
// `known_nonce` (0: a HARDSTATE of version 2, no nonce known).
testing::BareNode follower_knowing_leader_1(std::uint64_t known_nonce, bool snapshots = false) {
  Config config;
  config.id = 3;
  config.initial_conf.voters = {1, 2, 3};
  config.snapshots = snapshots;
  HardState hard{2, 1, 0};
  hard.leader = 1;
  hard.leader_nonce = known_nonce;
  return testing::BareNode(config, entries_of_term(2), 0, hard);
}

// Leader 1 of a 3-node cluster with `count` committed client entries, everyone caught up.
void elect_and_commit(TestCluster& c, int count) {
  ASSERT_TRUE(c.campaign_until_leader(1));
  for (int i = 0; i < count; ++i) {
    ASSERT_TRUE(c.propose(1, {"p" + std::to_string(i)}).proposed());
    c.deliver_all();
  }
}

// Every entry of `id`'s log.
std::vector<Entry> log_of(const TestCluster& c, NodeId id) {
  std::vector<Entry> out;
  for (Index i = 1; i <= c.raft(id).last_index(); ++i) out.push_back(c.node(id).log.entry(i));
  return out;
}

// The fork's leader `leader`, elected by a wiped pair, takes six client entries, which reach
// beyond the data node's log (`beyond`), then the network heals and time passes.
void fork_writes_then_heal(TestCluster& c, NodeId leader, Index beyond) {
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(c.propose(leader, {"fork" + std::to_string(i)}).proposed());
    c.deliver_all();
  }
  ASSERT_GT(c.raft(leader).last_index(), beyond) << "the fork's log reaches beyond the data node's";
  c.heal();
  c.tick_all(60);
}

// The data node `data` holds exactly `before`: none of the fork's entries.
void expect_log_kept(const TestCluster& c, NodeId data, const std::vector<Entry>& before) {
  EXPECT_EQ(c.raft(data).last_index(), before.size()) << "the data node took the fork's entries";
  for (const Entry& e : before) {
    EXPECT_EQ(c.node(data).log.entry(e.index).payload, e.payload) << "index " << e.index;
  }
}

// Node 2 claims the leadership of `term` towards `to`: an append after `to`'s last entry carrying
// one entry of its own and naming a commit beyond it, then a heartbeat.
void second_leader_writes(TestCluster& c, NodeId to, Term term) {
  const Index last = c.raft(to).last_index();
  const Term last_term = *c.node(to).log.term_at(last);
  Entry fork = entry_at(last + 1, term);
  fork.payload = Payload(std::string("fork"));
  c.step(to, append_from(2, to, term, last, last_term, last + 1, {fork}));
  c.step(to, heartbeat_from(2, to, term, last + 1));
}

// What a node answered a second leader: at least one answer, every one a rejection, none an
// acknowledgement of its entries.
void expect_only_rejections(const TestCluster& c, NodeId from, NodeId to, std::size_t first_ready) {
  const std::vector<Message> answers = append_answers(c, from, to, first_ready);
  ASSERT_FALSE(answers.empty()) << "node " << from << " did not answer node " << to;
  for (const Message& m : answers) EXPECT_TRUE(m.reject) << "node " << from << " acknowledged";
}

// ...and each answer says why: the leader of the term the refusing node knows.
void expect_refusals_name(const TestCluster& c, NodeId from, NodeId to, std::size_t first_ready,
                          NodeId known_leader) {
  for (const Message& m : append_answers(c, from, to, first_ready)) {
    EXPECT_EQ(m.context, kOtherLeaderContext);
    EXPECT_EQ(m.term_leader, known_leader);
  }
}

TEST(SecondLeader, AFollowerOfLeaderAOfATermRefusesBOfTheSameTerm) {
  TestCluster c({1, 2, 3});
  elect_and_commit(c, 3);
  const Term term = c.raft(3).term();
  const Index last = c.raft(3).last_index();
  const Index commit = c.raft(3).commit_index();
  ASSERT_EQ(c.raft(3).leader(), 1u);
  c.isolate(1);
  c.isolate(2);
  const std::size_t readies = c.node(3).readies.size();
  second_leader_writes(c, 3, term);
  EXPECT_EQ(c.raft(3).last_index(), last) << "it took the second leader's entry";
  EXPECT_EQ(c.raft(3).commit_index(), commit) << "it took the second leader's commit";
  EXPECT_EQ(c.raft(3).leader(), 1u) << "it follows the second leader of its term";
  expect_only_rejections(c, 3, 2, readies);
  expect_refusals_name(c, 3, 2, readies, 1);
  const TermLeaderClash& clash = c.raft(3).second_leader();
  EXPECT_EQ(clash.count, 2u) << "the append and the heartbeat";
  EXPECT_EQ(clash.term, term);
  EXPECT_EQ(clash.known_leader, 1u);
  EXPECT_EQ(clash.other_leader, 2u);
  EXPECT_EQ(clash.refused_by, 3u);
  // The real leader's messages are still taken.
  c.heal();
  ASSERT_TRUE(c.propose(1, {"after"}).proposed());
  c.deliver_all();
  EXPECT_EQ(c.raft(3).last_index(), last + 1);
  EXPECT_EQ(c.node(3).log.entry(last + 1).payload, Payload("after"));
  EXPECT_EQ(c.raft(3).second_leader().count, 2u);
}

// A snapshot of the second leader is refused like its appends: nothing installed. The bare core
// (the replica prepares a received snapshot's data before its core sees it), restarted from a hard
// state that names leader 1 of term 2.
TEST(SecondLeader, ASnapshotOfTheSecondLeaderIsNotInstalled) {
  testing::BareNode node = follower_knowing_leader_1(/*known_nonce=*/0, /*snapshots=*/true);
  EXPECT_EQ(node.raft->term_leader(), 1u);
  auto snapshot_from = [](NodeId from) {
    Message m;
    m.type = MessageType::kSnapshot;
    m.from = from;
    m.to = 3;
    m.term = 2;
    Snapshot& snapshot = m.snapshot.emplace();
    snapshot.index = 7;
    snapshot.term = 2;
    snapshot.conf.voters = {1, 2, 3};
    return m;
  };
  node.raft->step(snapshot_from(2));
  node.drain();
  EXPECT_TRUE(node.snapshots.empty()) << "installed the second leader's snapshot";
  EXPECT_EQ(node.raft->second_leader().count, 1u);
  const std::vector<Message> answers = node.take(MessageType::kAppendResponse, 2);
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_TRUE(answers[0].reject);
  EXPECT_EQ(answers[0].context, kOtherLeaderContext);
  EXPECT_EQ(answers[0].term_leader, 1u);
  // The known leader's snapshot is installed.
  node.raft->step(snapshot_from(1));
  node.drain();
  EXPECT_EQ(node.snapshots.size(), 1u);
}

// The refused leader learns it: a leader of the term records the refusal (and keeps leading); a
// node that did not lead the term ignores such an answer (stale or forged).
TEST(SecondLeader, TheRefusedLeaderIsToldAndKeepsLeading) {
  TestCluster c({1, 2, 3});
  elect_and_commit(c, 2);
  const Term term = c.raft(1).term();
  Message refusal;
  refusal.type = MessageType::kAppendResponse;
  refusal.from = 3;
  refusal.to = 1;
  refusal.term = term;
  refusal.reject = true;
  refusal.context = kOtherLeaderContext;
  refusal.term_leader = 2;
  c.step(1, refusal);
  EXPECT_EQ(c.raft(1).role(), Role::kLeader);
  const TermLeaderClash& told = c.raft(1).leadership_refused();
  EXPECT_EQ(told.count, 1u);
  EXPECT_EQ(told.term, term);
  EXPECT_EQ(told.known_leader, 2u);
  EXPECT_EQ(told.other_leader, 1u);
  EXPECT_EQ(told.refused_by, 3u);
  // A follower of the term took no part: the same answer is nothing to it.
  refusal.to = 2;
  c.step(2, refusal);
  EXPECT_EQ(c.raft(2).leadership_refused().count, 0u);
  EXPECT_EQ(c.raft(2).leader(), 1u);
  // The cluster goes on: the leader still commits with its followers.
  ASSERT_TRUE(c.propose(1, {"still"}).proposed());
  c.deliver_all();
  EXPECT_EQ(c.raft(3).commit_index(), c.raft(1).last_index());
}

TEST(SecondLeader, ALeaderRefusesAnAppendOfItsTermFromAnotherNode) {
  TestCluster c({1, 2, 3});
  elect_and_commit(c, 2);
  const Term term = c.raft(1).term();
  const Index last = c.raft(1).last_index();
  c.isolate(2);
  c.isolate(3);
  const std::size_t readies = c.node(1).readies.size();
  second_leader_writes(c, 1, term);
  EXPECT_EQ(c.raft(1).role(), Role::kLeader);
  EXPECT_EQ(c.raft(1).last_index(), last);
  // Told, not ignored: the second leader learns that a node knows another leader of its term.
  expect_only_rejections(c, 1, 2, readies);
  expect_refusals_name(c, 1, 2, readies, 1);
  EXPECT_EQ(c.raft(1).second_leader().count, 2u);
  EXPECT_EQ(c.raft(1).second_leader().known_leader, 1u);
  EXPECT_EQ(c.raft(1).second_leader().other_leader, 2u);
}

// Review L2: only the term's leader hands leadership over. A TimeoutNow of our term from another
// node is a second leader's: obeyed, it started a new term, whose leader would merge the two
// leaders' entries of this one silently.
TEST(SecondLeader, ATimeoutNowFromASecondLeaderIsNotObeyed) {
  TestCluster c({1, 2, 3});
  elect_and_commit(c, 2);
  const Term term = c.raft(3).term();
  c.isolate(1);
  c.isolate(2);
  Message timeout_now;
  timeout_now.type = MessageType::kTimeoutNow;
  timeout_now.from = 2;
  timeout_now.to = 3;
  timeout_now.term = term;
  c.step(3, timeout_now);
  EXPECT_EQ(c.raft(3).term(), term) << "it campaigned on a second leader's word";
  EXPECT_EQ(c.raft(3).role(), Role::kFollower);
  // The term's own leader is obeyed, as before.
  timeout_now.from = 1;
  c.step(3, timeout_now);
  EXPECT_EQ(c.raft(3).term(), term + 1);
}

TEST(SecondLeader, AFollowerRestartedFromItsDiskStillRefusesTheSecondLeader) {
  TestCluster c({1, 2, 3});
  elect_and_commit(c, 3);
  const Term term = c.raft(3).term();
  c.isolate(1);
  c.isolate(2);
  c.crash_restart(3);  // a power cut: only what it synced is left
  ASSERT_EQ(c.raft(3).term(), term);
  ASSERT_EQ(c.raft(3).leader(), kNoNode);
  const Index last = c.raft(3).last_index();
  const std::size_t readies = c.node(3).readies.size();
  second_leader_writes(c, 3, term);
  EXPECT_EQ(c.raft(3).last_index(), last) << "it took the second leader's entry after a restart";
  EXPECT_NE(c.raft(3).leader(), 2u);
  expect_only_rejections(c, 3, 2, readies);
  expect_refusals_name(c, 3, 2, readies, 1);
  EXPECT_EQ(c.raft(3).term_leader(), 1u) << "restored from HARDSTATE";
}

TEST(SecondLeader, ALeaderRestartedFromItsDiskRefusesAnotherLeaderOfTheTermItLed) {
  TestCluster c({1, 2, 3});
  elect_and_commit(c, 3);
  const Term term = c.raft(1).term();
  c.isolate(2);
  c.isolate(3);
  c.crash_restart(1);
  ASSERT_EQ(c.raft(1).role(), Role::kFollower);
  ASSERT_EQ(c.raft(1).term(), term);
  const Index last = c.raft(1).last_index();
  const std::size_t readies = c.node(1).readies.size();
  second_leader_writes(c, 1, term);
  EXPECT_EQ(c.raft(1).last_index(), last);
  EXPECT_NE(c.raft(1).leader(), 2u);
  expect_only_rejections(c, 1, 2, readies);
  expect_refusals_name(c, 1, 2, readies, 1);
}

// drills7 H3 in the core: leader 1 of term 1 holds every acknowledged entry; 2 and 3 lose their
// whole data directories and restart at term 0 while 1 is cut off (and steps down); they elect 2
// in term 1, the term 1 led. Node 1 keeps its log and follows nobody of term 1 but itself; node 3, which knows
// leader 2 of term 1, refuses node 1's messages in turn.
TEST(SecondLeader, TwoWipedNodesElectingALeaderOfTheDataNodesTermAreRefused) {
  TestCluster c({1, 2, 3});
  elect_and_commit(c, 4);
  ASSERT_EQ(c.raft(1).term(), 1u);
  const std::vector<Entry> before = log_of(c, 1);
  c.isolate(1);
  c.tick(1, 30);  // check-quorum: the data node steps down, still in term 1 (drills7's 1 s gap)
  ASSERT_NE(c.raft(1).role(), Role::kLeader);
  ASSERT_EQ(c.raft(1).term(), 1u);
  c.restart_wiped(2);
  c.restart_wiped(3);
  ASSERT_TRUE(c.campaign_until_leader(2));
  ASSERT_EQ(c.raft(2).term(), 1u) << "the wiped pair reuses term 1";
  fork_writes_then_heal(c, 2, before.size());
  EXPECT_NE(c.raft(1).leader(), 2u) << "the data node follows the second leader of term 1";
  expect_log_kept(c, 1, before);
  EXPECT_EQ(c.raft(3).leader(), 2u);
  // The data node and the second leader said so, naming each other.
  EXPECT_GT(c.raft(1).second_leader().count, 0u);
  EXPECT_EQ(c.raft(1).second_leader().known_leader, 1u);
  EXPECT_EQ(c.raft(1).second_leader().other_leader, 2u);
  EXPECT_GT(c.raft(2).leadership_refused().count, 0u);
  EXPECT_EQ(c.raft(2).leadership_refused().known_leader, 1u);
  // Health: the data node is NOT_SERVING while the second leader's messages keep coming.
  const replica::NodeStatus status = c.replica(1).status();
  EXPECT_NE(status.second_leader.find("term 1"), std::string::npos) << status.second_leader;
  EXPECT_GT(status.second_leader_messages, 0u);
  EXPECT_FALSE(c.replica(2).status().leadership_refused.empty());
}

// The term's leader is durable with the term: in the batch that first names it, with must_sync,
// before the acknowledgement to it; and only once per term (no sync per append).
TEST(SecondLeader, TheTermsLeaderIsSyncedOnceWhenFirstKnown) {
  TestCluster c({1, 2, 3});
  elect_and_commit(c, 3);
  std::size_t naming = 0;
  for (const Ready& ready : c.node(3).readies) {
    if (!ready.hard_state || ready.hard_state->leader == kNoNode) continue;
    if (naming++ == 0) {
      EXPECT_TRUE(ready.must_sync);
      EXPECT_EQ(ready.hard_state->leader, 1u);
    }
  }
  // The first batch naming leader 1, then commit-only changes (not synced for the leader).
  std::size_t synced_for_leader = 0;
  HardState previous;
  for (const Ready& ready : c.node(3).readies) {
    if (!ready.hard_state) continue;
    if (ready.hard_state->leader != previous.leader) ++synced_for_leader;
    previous = *ready.hard_state;
  }
  EXPECT_EQ(synced_for_leader, 1u);
  // A restart keeps it.
  c.crash_restart(3);
  EXPECT_EQ(c.raft(3).term_leader(), 1u);
  EXPECT_EQ(c.raft(3).hard_state().leader, 1u);
}

// A HARDSTATE of version 1 (an older binary) knows no leader: the first leader message of the
// term is accepted as before, and only a later second one is refused.
TEST(SecondLeader, ANodeRestoredWithoutTheTermsLeaderAcceptsTheFirstOneOnly) {
  TestCluster c({1, 2, 3}, {entries_of_term(2), entries_of_term(2), entries_of_term(2)},
                {HardState{2, 1, 0}, HardState{2, 1, 0}, HardState{2, 1, 0}});
  ASSERT_EQ(c.raft(3).term_leader(), kNoNode);
  c.isolate(1);
  c.isolate(2);
  c.step(3, append_from(1, 3, 2, 2, 2, 2, {}));
  EXPECT_EQ(c.raft(3).leader(), 1u);
  EXPECT_EQ(c.raft(3).term_leader(), 1u);
  c.step(3, append_from(2, 3, 2, 2, 2, 2, {}));
  EXPECT_EQ(c.raft(3).second_leader().count, 1u);
  EXPECT_EQ(c.raft(3).leader(), 1u);
}

// Leadership nonces on the bare core (review oneterm5 H1; docs/raft.md, "A second leader of a term").
constexpr std::uint64_t kKnownNonce = 0xA11CE;
constexpr std::uint64_t kOtherNonce = 0xB0B;

Message with_nonce(Message m, std::uint64_t nonce) {
  m.leader_nonce = nonce;
  return m;
}

// An append of leader 1 in term 2 after node 3's log, carrying one entry of its own.
Message append_of_1(std::uint64_t nonce) {
  Entry e = entry_at(3, 2);
  e.payload = Payload(std::string("from 1"));
  return with_nonce(append_from(1, 3, 2, 2, 2, 3, {e}), nonce);
}

TEST(LeadershipNonce, TheKnownLeadersIdWithAnotherNonceIsRefused) {
  BareNode node = follower_knowing_leader_1(kKnownNonce);
  node.raft->step(append_of_1(kOtherNonce));
  node.raft->step(with_nonce(heartbeat_from(1, 3, 2, 3), kOtherNonce));
  node.drain();
  EXPECT_EQ(node.raft->last_index(), 2u) << "it took the second leadership's entry";
  EXPECT_EQ(node.raft->commit_index(), 0u) << "it took the second leadership's commit";
  EXPECT_EQ(node.raft->leader(), kNoNode) << "it follows the second leadership";
  const std::vector<Message> answers = node.take(MessageType::kAppendResponse, 1);
  ASSERT_EQ(answers.size(), 2u);
  for (const Message& m : answers) {
    EXPECT_TRUE(m.reject);
    EXPECT_EQ(m.context, kOtherLeaderContext);
    EXPECT_EQ(m.term_leader, 1u);
    EXPECT_EQ(m.leader_nonce, kKnownNonce) << "the refusal names the leadership it knows";
  }
  const TermLeaderClash& clash = node.raft->second_leader();
  EXPECT_EQ(clash.count, 2u);
  EXPECT_EQ(clash.term, 2u);
  EXPECT_EQ(clash.known_leader, 1u);
  EXPECT_EQ(clash.other_leader, 1u);
  EXPECT_EQ(clash.known_nonce, kKnownNonce);
  EXPECT_EQ(clash.other_nonce, kOtherNonce);
  // The known leadership is still followed, and nothing of the term's leader changed.
  node.raft->step(append_of_1(kKnownNonce));
  node.drain();
  EXPECT_EQ(node.raft->last_index(), 3u);
  EXPECT_EQ(node.raft->leader(), 1u);
  EXPECT_EQ(node.raft->hard_state().leader_nonce, kKnownNonce);
  EXPECT_EQ(node.raft->second_leader().count, 2u);
}

// Review of nonce6, L2: a follower that still followed the first leadership when the second one
// of the same id arrives names no leader any more (its status, its clients' redirects): the first
// leadership is gone, its node runs the second.
TEST(LeadershipNonce, AFollowerOfTheFirstLeadershipNamesNoLeaderOnceTheSecondArrives) {
  BareNode node = follower_knowing_leader_1(kKnownNonce);
  node.raft->step(append_of_1(kKnownNonce));
  node.drain();
  ASSERT_EQ(node.raft->leader(), 1u);
  node.raft->step(with_nonce(heartbeat_from(1, 3, 2, 3), kOtherNonce));
  node.drain();
  EXPECT_EQ(node.raft->second_leader().count, 1u);
  EXPECT_EQ(node.raft->leader(), kNoNode) << "it still names the fork's id as its leader";
  EXPECT_EQ(node.raft->term_leader(), 1u);
  EXPECT_EQ(node.raft->term_leader_nonce(), kKnownNonce);
}

// Nonce 0 is an older sender's (or a leader learnt from one): ids only, as before nonces.
TEST(LeadershipNonce, NonceZeroOnEitherSideComparesIdsOnly) {
  {
    BareNode node = follower_knowing_leader_1(kKnownNonce);
    node.raft->step(append_of_1(0));
    node.drain();
    EXPECT_EQ(node.raft->last_index(), 3u) << "an older leader's append was refused";
    EXPECT_EQ(node.raft->second_leader().count, 0u);
  }
  {
    BareNode node = follower_knowing_leader_1(0);  // a HARDSTATE of version 2
    node.raft->step(append_of_1(kOtherNonce));
    node.drain();
    EXPECT_EQ(node.raft->last_index(), 3u);
    EXPECT_EQ(node.raft->second_leader().count, 0u);
    // Not learnt later: only the term's first leader message names it (no sync per message).
    EXPECT_EQ(node.raft->hard_state().leader_nonce, 0u);
    // Another id is refused as before.
    node.raft->step(with_nonce(heartbeat_from(2, 3, 2, 3), kOtherNonce));
    node.drain();
    EXPECT_EQ(node.raft->second_leader().count, 1u);
  }
}

TEST(LeadershipNonce, ATimeoutNowAndASnapshotOfAnotherNonceAreNotTaken) {
  {
    BareNode node = follower_knowing_leader_1(kKnownNonce);
    Message timeout_now = testing::response(MessageType::kTimeoutNow, 1, 3, 2);
    node.raft->step(with_nonce(timeout_now, kOtherNonce));
    node.drain();
    EXPECT_EQ(node.raft->term(), 2u) << "it campaigned on a second leadership's word";
    EXPECT_TRUE(node.raft->is_second_leader_message(with_nonce(timeout_now, kOtherNonce)));
    node.raft->step(with_nonce(timeout_now, kKnownNonce));
    node.drain();
    EXPECT_EQ(node.raft->term(), 3u) << "the known leadership's TimeoutNow is obeyed";
  }
  BareNode node = follower_knowing_leader_1(kKnownNonce, /*snapshots=*/true);
  Message snapshot = testing::response(MessageType::kSnapshot, 1, 3, 2);
  Snapshot& s = snapshot.snapshot.emplace();
  s.index = 7;
  s.term = 2;
  s.conf.voters = {1, 2, 3};
  // What the replica asks before it prepares a snapshot's data (replica_snapshot_receive.cpp).
  EXPECT_TRUE(node.raft->is_second_leader_message(with_nonce(snapshot, kOtherNonce)));
  EXPECT_FALSE(node.raft->is_second_leader_message(with_nonce(snapshot, kKnownNonce)));
  node.raft->step(with_nonce(snapshot, kOtherNonce));
  node.drain();
  EXPECT_TRUE(node.snapshots.empty()) << "installed the second leadership's snapshot";
  node.raft->step(with_nonce(snapshot, kKnownNonce));
  node.drain();
  EXPECT_EQ(node.snapshots.size(), 1u);
}

// The nonce is learnt with the term's leader, in the Ready that names it, synced (one HARDSTATE
// write per term, as before nonces).
TEST(LeadershipNonce, LearntWithTheTermsLeaderInOneSyncedWrite) {
  Config config;
  config.id = 3;
  config.initial_conf.voters = {1, 2, 3};
  BareNode node(config, {entry_at(1, 2), entry_at(2, 2)}, 0, HardState{2, 1, 0});
  node.raft->step(append_of_1(kKnownNonce));
  ASSERT_TRUE(node.raft->has_ready());
  Ready rd = node.raft->ready();
  ASSERT_TRUE(rd.hard_state.has_value());
  EXPECT_EQ(rd.hard_state->leader, 1u);
  EXPECT_EQ(rd.hard_state->leader_nonce, kKnownNonce);
  EXPECT_TRUE(rd.must_sync);
  node.log.apply(rd);
  node.raft->on_persisted(3, 2);
  for (int i = 0; i < 5; ++i) node.raft->step(with_nonce(heartbeat_from(1, 3, 2, 3), kKnownNonce));
  const Ready later = node.raft->ready();
  EXPECT_TRUE(!later.hard_state || later.hard_state->leader_nonce == kKnownNonce);
  EXPECT_EQ(node.raft->term_leader_nonce(), kKnownNonce);
}

// The driver's seed draws the nonces; none is 0 and another seed draws others. (That drawing them
// moves no election timeout is shown by the simulator: its RESULT lines equal main's.)
TEST(LeadershipNonce, EachStartsSeedDrawsItsOwnNonces) {
  auto first_leadership_nonce = [](std::uint64_t nonce_seed, std::uint64_t random_seed,
                                   int* ticks_to_lead) {
    Config config;
    config.id = 1;
    config.initial_conf.voters = {1};
    config.random_seed = random_seed;
    config.leadership_nonce_seed = nonce_seed;
    BareNode node(config, {}, 0, HardState{});
    *ticks_to_lead = 0;
    while (node.raft->role() != Role::kLeader && *ticks_to_lead < 100) {
      node.raft->tick();
      node.drain();
      ++*ticks_to_lead;
    }
    EXPECT_EQ(node.raft->role(), Role::kLeader);
    // Its own messages would carry it; its HARDSTATE names it.
    EXPECT_EQ(node.raft->hard_state().leader, 1u);
    return node.raft->term_leader_nonce();
  };
  std::set<std::uint64_t> nonces;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    int ticks_to_lead = 0;
    const std::uint64_t nonce = first_leadership_nonce(seed, 7, &ticks_to_lead);
    EXPECT_NE(nonce, 0u);
    nonces.insert(nonce);
    int again = 0;
    EXPECT_EQ(first_leadership_nonce(seed, 7, &again), nonce) << "not deterministic";
  }
  EXPECT_EQ(nonces.size(), 20u) << "two seeds drew the same nonce";
  // Seed 0: derived from random_seed, which the simulator draws afresh at each start.
  int ticks_to_lead = 0;
  EXPECT_NE(first_leadership_nonce(0, 7, &ticks_to_lead),
            first_leadership_nonce(0, 8, &ticks_to_lead));
}

// Leadership nonces through production replicas.
// A correct leadership is never refused: many appends and heartbeats over a term, through a
// follower's restart (its nonce restored from HARDSTATE) and the leader's own.
TEST(LeadershipNonce, ACorrectLeadersMessagesAreNeverRefused) {
  TestCluster c({1, 2, 3});
  elect_and_commit(c, 5);
  const std::uint64_t nonce = c.raft(1).term_leader_nonce();
  ASSERT_NE(nonce, 0u);
  c.crash_restart(3);
  EXPECT_EQ(c.raft(3).term_leader(), 1u);
  EXPECT_EQ(c.raft(3).term_leader_nonce(), nonce) << "not restored from HARDSTATE";
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(c.propose(1, {"q" + std::to_string(i)}).proposed());
    c.tick_all(3);
  }
  const Term term = c.raft(1).term();
  c.crash_restart(2);
  c.tick_all(30);
  // The leader restarted keeps its disk: a follower of its term that cannot lead it again.
  c.crash_restart(1);
  EXPECT_EQ(c.raft(1).term_leader_nonce(), nonce);
  c.tick_all(100);
  for (NodeId id : {1, 2, 3}) {
    EXPECT_EQ(c.raft(id).second_leader().count, 0u) << "node " << id;
    EXPECT_EQ(c.raft(id).leadership_refused().count, 0u) << "node " << id;
  }
  const NodeId leader = c.raft(2).leader();
  ASSERT_NE(leader, kNoNode);
  EXPECT_GT(c.raft(leader).term(), term);
  EXPECT_NE(c.raft(leader).term_leader_nonce(), 0u);
}

// drills7 H3 with the leader in the wiped pair (review oneterm5 H1).
TEST(LeadershipNonce, AWipedLeaderElectedAgainInItsTermIsRefused) {
  TestCluster c({1, 2, 3});
  elect_and_commit(c, 4);
  ASSERT_EQ(c.raft(3).term(), 1u);
  ASSERT_EQ(c.raft(3).leader(), 1u);
  const std::vector<Entry> before = log_of(c, 3);
  const std::uint64_t first_nonce = c.raft(3).term_leader_nonce();
  // Node 3 is kept away while the pair elects: a pre-vote it rejected would tell them term 1,
  // and they would elect in term 2 (the committed-conflict case, not this one).
  c.isolate(3);
  c.restart_wiped(1);
  c.restart_wiped(2);
  c.crash_restart(3);  // and it restarts from its disk meanwhile
  ASSERT_TRUE(c.campaign_until_leader(1));
  ASSERT_EQ(c.raft(1).term(), 1u) << "the wiped pair reuses term 1";
  ASSERT_NE(c.raft(1).term_leader_nonce(), first_nonce);
  fork_writes_then_heal(c, 1, before.size());
  expect_log_kept(c, 3, before);
  EXPECT_EQ(c.raft(3).term(), 1u);
  EXPECT_EQ(c.raft(3).term_leader_nonce(), first_nonce);
  const TermLeaderClash& clash = c.raft(3).second_leader();
  EXPECT_GT(clash.count, 0u);
  EXPECT_EQ(clash.known_leader, 1u);
  EXPECT_EQ(clash.other_leader, 1u);
  EXPECT_EQ(clash.known_nonce, first_nonce);
  // The wiped leader is told, and keeps leading.
  const TermLeaderClash& told = c.raft(1).leadership_refused();
  EXPECT_GT(told.count, 0u);
  EXPECT_EQ(told.known_leader, 1u);
  EXPECT_EQ(told.known_nonce, first_nonce);
  EXPECT_EQ(c.raft(1).role(), Role::kLeader);
  // Both drivers say it was the same id with another nonce.
  const replica::NodeStatus status = c.replica(3).status();
  EXPECT_NE(status.second_leader.find("another leadership nonce"), std::string::npos)
      << status.second_leader;
  EXPECT_NE(c.replica(1).status().leadership_refused.find("another leadership of this node's id"),
            std::string::npos)
      << c.replica(1).status().leadership_refused;
  EXPECT_TRUE(c.replica(1).status().leads_term_twice) << "the fork does not know it is one";
  EXPECT_FALSE(status.leads_term_twice);
}

}  // namespace
}  // namespace raftlog::raft

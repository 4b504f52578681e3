// A follower that needs entries its leader trimmed (retention; there are no snapshots) cannot catch
// up by replication. The leader's heartbeats name its first retained index, so the follower knows it
// is stranded (Raft::stranded_below), whether its log simply ends before that index or holds a
// divergent entry just below it, and the node reports NOT_SERVING until it is rebuilt.
#include <gtest/gtest.h>

#include <memory>

#include "bare_node.h"
#include "test_cluster.h"

namespace raftlog::raft {
namespace {

using testing::BareNode;
using testing::make_entries;
using testing::response;
using testing::TestCluster;

// The store trims whole segments only: each payload fills most of a (minimum-size) segment, so that
// every entry has a segment of its own and a trim lands exactly where the test asks.
std::string segment_filling_payload(Index index) {
  return "e" + std::to_string(index) + std::string(40 << 10, '.');
}

// Proposes one segment-filling entry for each index in [first, last] at `leader`.
void propose_filling(TestCluster& c, NodeId leader, Index first, Index last) {
  for (Index i = first; i <= last; ++i) {
    ASSERT_TRUE(c.propose(leader, {segment_filling_payload(i)}).proposed()) << "index " << i;
  }
}

// The leader's retention waits for a follower silent for less than 5 ticks only.
void short_follower_grace(replica::ReplicaConfig& config) {
  config.retention_follower_grace_ms = 5 * config.tick_ms;
}

// Lets the leader's follower grace pass for an isolated node, then trims the leader below `before`.
void trim_leader(TestCluster& c, NodeId leader, Index before) {
  for (int i = 0; i < 6; ++i) {
    c.tick(leader);
    c.deliver_all();
  }
  const replica::TrimResult trimmed = c.trim(leader, before);
  ASSERT_TRUE(trimmed.error.ok()) << trimmed.error.message;
  ASSERT_EQ(c.node(leader).log.first_index(), before);
}

TEST(Stranded, AFollowerWhoseLogEndsBeforeTheLeadersFirstIndexKnowsItUntilRebuilt) {
  TestCluster c({1, 2, 3}, {}, short_follower_grace);
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.isolate(3);
  ASSERT_NO_FATAL_FAILURE(propose_filling(c, 1, 2, 21));
  c.deliver_all();
  const Index last = c.raft(1).commit_index();
  ASSERT_EQ(last, 21u);
  c.tick_all(3);
  EXPECT_EQ(c.raft(2).stranded_below(), 0u) << "a leader that never trimmed strands nobody";
  // Retention on the leader: everything below 15 goes; node 3 holds only the first no-op.
  trim_leader(c, 1, 15);
  c.heal();
  c.tick_all(5);
  EXPECT_EQ(c.raft(3).stranded_below(), 15u);
  EXPECT_EQ(c.raft(2).stranded_below(), 0u) << "a caught-up follower is not stranded";
  EXPECT_EQ(c.raft(1).stranded_below(), 0u) << "a leader is never stranded";
  EXPECT_EQ(c.replica(3).status().stranded_below_index, 15u);

  // Rebuilt from node 2's log (docs/operations.md, "Retention") and restarted: it catches up and is
  // no longer stranded.
  c.restart_from_copy_of(3, 2);
  c.tick_all(5);
  EXPECT_EQ(c.node(3).log.last_index(), last);
  EXPECT_EQ(c.raft(3).stranded_below(), 0u);
  EXPECT_EQ(c.replica(3).status().stranded_below_index, 0u);
}

// Stranded is what this leader says: a new leader that still holds what the node needs (node 2
// never trimmed) clears it, and the node catches up from it.
TEST(Stranded, ANewLeaderThatHoldsTheEntriesClearsIt) {
  TestCluster c({1, 2, 3}, {}, short_follower_grace);
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.isolate(3);
  ASSERT_NO_FATAL_FAILURE(propose_filling(c, 1, 2, 21));
  c.deliver_all();
  trim_leader(c, 1, 15);
  c.heal();
  c.tick_all(5);
  ASSERT_EQ(c.raft(3).stranded_below(), 15u);
  ASSERT_FALSE(c.transfer_leadership(1, 2).answered());
  c.tick_all(10);
  ASSERT_EQ(c.leader(), 2u);
  EXPECT_EQ(c.raft(3).stranded_below(), 0u);
  EXPECT_EQ(c.node(3).log.last_index(), c.raft(2).last_index()) << "caught up from node 2";
}

// A follower whose log ends exactly where the leader's first index begins (last = first - 1) is not
// stranded: the leader's probe at its first index matches and it catches up. Neither is one that
// hears heartbeats naming first index 0, as a leader that never trimmed (or predates the field)
// sends.
TEST(Stranded, ALogEndingJustBeforeTheFirstIndexOrAHeartbeatWithoutOneStrandsNobody) {
  TestCluster c({1, 2, 3}, {}, short_follower_grace);
  ASSERT_TRUE(c.campaign_until_leader(1));
  ASSERT_NO_FATAL_FAILURE(propose_filling(c, 1, 2, 14));
  c.deliver_all();
  c.isolate(3);
  ASSERT_NO_FATAL_FAILURE(propose_filling(c, 1, 15, 21));
  c.deliver_all();
  ASSERT_EQ(c.node(3).log.last_index(), 14u);
  trim_leader(c, 1, 15);
  c.heal();
  c.tick_all(5);
  EXPECT_EQ(c.raft(3).stranded_below(), 0u);
  EXPECT_EQ(c.node(3).log.last_index(), 21u) << "caught up from the first retained index";

  Message heartbeat;  // first index 0: "I hold everything from index 1"
  heartbeat.type = MessageType::kHeartbeat;
  heartbeat.from = 1;
  heartbeat.to = 2;
  heartbeat.term = c.raft(1).term();
  heartbeat.index = 0;
  c.step(2, heartbeat);
  EXPECT_EQ(c.raft(2).stranded_below(), 0u);
}

// The follower's log reaches the leader's first index - 1, but its entry there is a deposed
// leader's: the leader's probe at its first index fails, and it cannot go lower.
TEST(Stranded, AFollowerWithADivergentEntryBelowTheLeadersFirstIndexKnowsIt) {
  std::vector<Entry> quorum_log = make_entries(1, std::vector<Term>(13, 1));
  for (const Entry& e : make_entries(14, std::vector<Term>(7, 3))) quorum_log.push_back(e);
  for (Entry& e : quorum_log) e.payload = segment_filling_payload(e.index);
  std::vector<Entry> divergent_log(quorum_log.begin(), quorum_log.begin() + 13);
  divergent_log.push_back(make_entries(14, {2})[0]);
  const HardState quorum_state{3, 1, 20};
  const HardState divergent_state{3, kNoNode, 13};
  TestCluster c({1, 2, 3}, {quorum_log, quorum_log, divergent_log},
                {quorum_state, quorum_state, divergent_state}, {}, short_follower_grace);
  c.isolate(3);
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  trim_leader(c, 1, 15);  // the leader still knows entry 14's term (3), not its bytes
  c.heal();
  c.tick_all(10);
  EXPECT_EQ(c.node(3).log.term_at(14), 2u) << "the divergent entry is never overwritten";
  EXPECT_EQ(c.raft(3).stranded_below(), 15u);
  EXPECT_EQ(c.raft(2).stranded_below(), 0u);
}

PeerProgress progress_of(const TestCluster& c, NodeId leader, NodeId peer) {
  for (const PeerProgress& p : c.raft(leader).progress()) {
    if (p.id == peer) return p;
  }
  return {};
}

// Failover review L-1: node 3's log reaches past the leader's first index (15) but is a deposed
// leader's from 14 on. A new leader's probes walk back below its first index (the reject's hint
// skips the term-2 entries) and it sends a snapshot, which it first has to encode. Node 3's own
// log shows no gap and the leader's first-index probe came before any heartbeat of this term, so
// only the leader's word says it is stranded: it reported not stranded (health SERVING) from the
// leader's first heartbeat until the snapshot arrived. Now: stranded from the heartbeat the leader
// sends with its decision, through its regular heartbeats, until the install.
// Nodes 1 and 2 hold 1..13 of term 1 and 14..20 of term 3, node 3 the same 1..13 and a deposed
// leader's 14..20 of term 2; node 1 trimmed below 15, its snapshot encoding held off the loop
// (finish_off_loop), and is elected: it decides on a snapshot for node 3.
std::unique_ptr<TestCluster> leader_1_decides_on_a_snapshot_for_3() {
  std::vector<Entry> quorum_log = make_entries(1, std::vector<Term>(13, 1));
  for (const Entry& e : make_entries(14, std::vector<Term>(7, 3))) quorum_log.push_back(e);
  for (Entry& e : quorum_log) e.payload = segment_filling_payload(e.index);
  std::vector<Entry> divergent_log(quorum_log.begin(), quorum_log.begin() + 13);
  for (const Entry& e : make_entries(14, std::vector<Term>(7, 2))) divergent_log.push_back(e);
  for (Entry& e : divergent_log) e.payload = segment_filling_payload(e.index);
  const HardState quorum_state{3, 1, 20};
  const HardState divergent_state{3, kNoNode, 13};
  auto c = std::make_unique<TestCluster>(
      std::vector<NodeId>{1, 2, 3},
      std::vector<std::vector<Entry>>{quorum_log, quorum_log, divergent_log},
      std::vector<HardState>{quorum_state, quorum_state, divergent_state},
      [](Config& config) { config.snapshots = true; }, short_follower_grace);
  const replica::TrimResult trimmed = c->trim(1, 15);
  EXPECT_TRUE(trimmed.error.ok()) << trimmed.error.message;
  EXPECT_EQ(c->node(1).log.first_index(), 15u);
  c->node(1).hold_off_loop = true;
  EXPECT_TRUE(c->campaign_until_leader(1));
  c->deliver_all();
  return c;
}

TEST(Stranded, AFollowerTheLeaderSendsASnapshotToIsStrandedUntilItInstallsIt) {
  const std::unique_ptr<TestCluster> cluster = leader_1_decides_on_a_snapshot_for_3();
  ASSERT_FALSE(::testing::Test::HasFailure());
  TestCluster& c = *cluster;
  ASSERT_EQ(progress_of(c, 1, 3).snapshot_index, 14u) << "the leader decided on a snapshot";
  ASSERT_EQ(c.replica(1).snapshot_stats().sent, 0u) << "still encoding";
  ASSERT_EQ(c.node(3).log.last_index(), 20u);
  EXPECT_EQ(c.raft(3).stranded_below(), 15u) << "told with the leader's decision";
  EXPECT_EQ(c.replica(3).status().stranded_below_index, 15u);
  c.tick_all(3);  // the leader's heartbeats while its snapshot is encoded
  ASSERT_EQ(progress_of(c, 1, 3).snapshot_index, 14u);
  EXPECT_EQ(c.replica(3).status().stranded_below_index, 15u) << "after the leader's heartbeats";
  c.finish_off_loop(1);
  c.tick_all(3);
  EXPECT_EQ(c.replica(3).snapshot_stats().installed, 1u);
  EXPECT_EQ(c.replica(3).status().stranded_below_index, 0u) << "installed";
  EXPECT_EQ(c.node(3).log.last_index(), c.raft(1).last_index()) << "caught up after it";
}

// Review of mend2, L1: the leader's heartbeats say sending_snapshot until it processes the install's
// answer; one that arrives after the install (or all of them, for snapshot_retry_ticks, when the
// answer is lost) must not strand the node again: what it holds reaches the leader's first index.
TEST(Stranded, AHeartbeatSentBeforeTheLeaderHeardOfTheInstallDoesNotStrandTheNodeAgain) {
  const std::unique_ptr<TestCluster> cluster = leader_1_decides_on_a_snapshot_for_3();
  ASSERT_FALSE(::testing::Test::HasFailure());
  TestCluster& c = *cluster;
  ASSERT_EQ(progress_of(c, 1, 3).snapshot_index, 14u);
  c.add_drop_rule(
      [](const Message& m) { return m.type == MessageType::kAppendResponse && m.from == 3; });
  c.finish_off_loop(1);
  c.tick_all(3);
  ASSERT_EQ(c.replica(3).snapshot_stats().installed, 1u);
  ASSERT_EQ(progress_of(c, 1, 3).snapshot_index, 14u) << "the install's answer is lost";
  EXPECT_EQ(c.raft(3).stranded_below(), 0u) << "stranded again by the leader's heartbeats";
  EXPECT_EQ(c.replica(3).status().stranded_below_index, 0u);
  // Answers get through again; the leader, still in snapshot state, sends another snapshot after
  // its retry timeout, which node 3 answers from what it holds. Never stranded meanwhile.
  c.heal();
  const int retry_ticks = static_cast<int>(c.replica(1).config().raft.snapshot_retry_ticks);
  for (int i = 0; i < retry_ticks + 10 && progress_of(c, 1, 3).snapshot_index != 0; ++i) {
    c.tick_all(1);
    ASSERT_EQ(c.replica(3).status().stranded_below_index, 0u) << "tick " << i;
  }
  EXPECT_EQ(progress_of(c, 1, 3).snapshot_index, 0u);
  c.tick_all(3);
  EXPECT_EQ(c.node(3).log.last_index(), c.raft(1).last_index()) << "caught up after it";
  EXPECT_EQ(c.replica(3).snapshot_stats().installed, 1u) << "installed once";
}

// An append from `leader` in `term` probing at index 20 (term 2), which node 3's log does not hold.
Message probe_from(NodeId leader, Term term) {
  Message m = response(MessageType::kAppend, leader, 3, term);
  m.index = 20;
  m.log_term = 2;
  return m;
}

// drills4 L5: a stranded follower stays stranded across a leader change until the new leader's
// word: its first append does not say where its log starts, so clearing the old leader's word on
// the change read as "not stranded" (health SERVING for ~100 ms) until the first heartbeat.
TEST(Stranded, AFollowerStaysStrandedAcrossALeaderChangeUntilTheNewLeadersHeartbeat) {
  Config config;
  config.id = 3;
  config.initial_conf.voters = {1, 2, 3};
  BareNode follower(config, make_entries(1, std::vector<Term>(5, 1)), 1, HardState{1, kNoNode, 5});
  // Leader 1 of term 2 trimmed below 15: its heartbeat strands node 3.
  Message heartbeat = response(MessageType::kHeartbeat, 1, 3, 2);
  heartbeat.index = 15;
  follower.raft->step(heartbeat);
  follower.drain();
  ASSERT_EQ(follower.raft->stranded_below(), 15u);
  // Leader 2 of term 3: its first append (a probe at its log's end) does not connect.
  Message probe = response(MessageType::kAppend, 2, 3, 3);
  probe.index = 20;
  probe.log_term = 2;
  follower.raft->step(probe);
  follower.drain();
  ASSERT_EQ(follower.raft->leader(), 2u);
  EXPECT_EQ(follower.raft->stranded_below(), 15u) << "still stranded until leader 2 says otherwise";
  // Leader 2's heartbeat names its first index 18: stranded below 18.
  Message trimmed = response(MessageType::kHeartbeat, 2, 3, 3);
  trimmed.index = 18;
  follower.raft->step(trimmed);
  follower.drain();
  EXPECT_EQ(follower.raft->stranded_below(), 18u);
  // Leader 1 again in term 4, holding everything (first index 0 in its heartbeat): not stranded.
  follower.raft->step(probe_from(1, 4));
  follower.drain();
  EXPECT_EQ(follower.raft->stranded_below(), 18u) << "term 4's append says nothing yet";
  follower.raft->step(response(MessageType::kHeartbeat, 1, 3, 4));
  follower.drain();
  EXPECT_EQ(follower.raft->stranded_below(), 0u);
}

}  // namespace
}  // namespace raftlog::raft

// Review amnesia H2: what an unvouched node must hold before it is vouched rises with every commit
// its leader names after the first word (rules::later_commits_raise_the_vouch_index).
//
// Compiled twice: into raft_core_test against raftlog_raft, and into raft_broken_vouch_seam_test
// against raftlog_raft_broken_vouch with RAFTLOG_EXPECT_BROKEN_VOUCH defined (the node is then
// vouched at the first word's commit), proving that these tests can fail and that the link-time
// seam swaps the rule.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "test_cluster.h"
#include "unvouched_messages.h"

namespace raftlog::raft {
namespace {

using testing::TestCluster;
using namespace testing::unvouched;

#ifdef RAFTLOG_EXPECT_BROKEN_VOUCH
constexpr bool kBrokenVouchRule = true;
#else
constexpr bool kBrokenVouchRule = false;
#endif

Index match_of(const TestCluster& c, NodeId leader, NodeId peer) {
  for (const PeerProgress& p : c.raft(leader).progress()) {
    if (p.id == peer) return p.match_index;
  }
  return 0;
}

// Delivers (stepping each into its addressee) the queued messages that `match`, oldest first.
void deliver_matching(TestCluster& c, const std::function<bool(const Message&)>& match) {
  for (Message& m : c.take_from_network(match, 64)) {
    const NodeId to = m.to;
    c.step(to, std::move(m));
  }
}

// Review H2: a leader keeps a wiped node's match from before the wipe until the node's answer lowers
// it, and may meanwhile commit entries counting those forgotten acknowledgements, after its first
// contact named a lower commit. The node must hold every commit that leader names before it is
// vouched, not only the first one: vouched at 8 it would lack 10, which {1, 3, 4} "acknowledged".
TEST(Unvouched, TheSameLeadersLaterCommitsRaiseWhatTheWipedNodeMustHold) {
  TestCluster c({1, 2, 3, 4, 5}, [](Config& config) { config.max_entries_per_message = 4; });
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  for (int i = 0; i < 7; ++i) {
    ASSERT_TRUE(c.propose(1, {"p" + std::to_string(i)}).proposed());
    c.deliver_all();
  }
  ASSERT_EQ(c.raft(1).commit_index(), 8u);
  // 9 and 10 reach every follower, but only node 3 makes them durable and acknowledges them.
  for (NodeId id : {2, 4, 5}) c.node(id).hold_persistence = true;
  ASSERT_TRUE(c.propose(1, {"p9", "p10"}).proposed());
  c.deliver_all();
  ASSERT_EQ(c.raft(1).commit_index(), 8u);
  ASSERT_EQ(match_of(c, 1, 3), 10u);
  c.restart_wiped(3);
  // The leader's heartbeat names commit 8 (its commit, below node 3's old match); node 3's answer
  // (a rejection: its log is empty) is held back.
  c.tick(1);
  deliver_matching(c, [](const Message& m) { return m.type == MessageType::kHeartbeat && m.to == 3; });
  // The word (1, 8): not reported (nor recorded) until a stale match is ruled out.
  ASSERT_EQ(c.raft(3).catching_up_to(), 8u);
  std::vector<Message> answer = c.take_from_network(
      [](const Message& m) { return m.from == 3 && m.type == MessageType::kHeartbeatResponse; }, 8);
  ASSERT_EQ(answer.size(), 1u);
  // Node 4 makes 9 and 10 durable: with node 3's forgotten acknowledgement, 10 commits.
  c.node(4).hold_persistence = false;
  c.persist_all(4);
  c.deliver_all();
  ASSERT_EQ(c.raft(1).commit_index(), 10u) << "the leader counted node 3's old acknowledgement";
  // Node 3's answer arrives: the leader probes it from its real end, 4 entries per append, and the
  // append carrying 9 and 10 is lost.
  c.add_drop_rule([](const Message& m) {
    return m.type == MessageType::kAppend && m.to == 3 && m.index >= 8;
  });
  c.step(1, std::move(answer.front()));
  c.deliver_all();
  ASSERT_EQ(c.node(3).log.durable_index(), 8u);
  EXPECT_EQ(c.raft(3).unvouched(), !kBrokenVouchRule)
      << "vouched at the first contact's commit 8; 10 is committed";
  EXPECT_EQ(marker_exists(c, 3), !kBrokenVouchRule);
  if (kBrokenVouchRule) return;
  EXPECT_EQ(c.raft(3).catching_up_to(), 10u);
  c.heal();
  for (NodeId id : {2, 5}) c.node(id).hold_persistence = false;
  ASSERT_TRUE(c.propose(1, {"p11"}).proposed());
  c.tick_all(5);
  EXPECT_GE(c.node(3).log.durable_index(), 10u);
  EXPECT_FALSE(c.raft(3).unvouched());
  EXPECT_FALSE(marker_exists(c, 3));
  EXPECT_EQ(c.node(3).log.entry(10).payload, c.node(1).log.entry(10).payload);
}

// Review H2 (b): a heartbeat of the same leader may name a commit beyond the node's log after its
// first word (its match for the node was stale): that storage-fault catch-up must finish before the
// node counts as vouched, or the marker is removed with the catch-up unfinished (and a crash then
// restarts the node vouched, its promise forgotten: the promise is not persisted). It passes without
// the `!fault_catch_up_` condition of the vouch rule too (the folded c = 4 keeps the node unvouched
// by itself): that condition is a second guard no test covers on its own (review amnesia2).
TEST(UnvouchedMarker, KeptWhileAStorageFaultCatchUpFromTheSameLeaderIsPending) {
  TestCluster c({1, 2, 3});
  c.isolate(1);
  c.isolate(2);
  c.step(3, heartbeat_from(1, 3, 5, /*commit=*/2));  // the first word: commit 2
  Message stale = heartbeat_from(1, 3, 5, /*commit=*/4);
  stale.commit = 4;  // the leader believes node 3 holds 4
  c.step(3, std::move(stale));
  ASSERT_EQ(c.raft(3).catch_up_cause(), Raft::CatchUpCause::kUnvouched);
  c.step(3, append_from(1, 3, 5, 0, 0, 2, {entry_at(1, 5), entry_at(2, 5)}));
  ASSERT_EQ(c.raft(3).persisted_index(), 2u);
  EXPECT_TRUE(c.raft(3).unvouched()) << "the leader said commit 4 is ours: it is not durable here";
  EXPECT_TRUE(marker_exists(c, 3));
  EXPECT_EQ(c.raft(3).catching_up_to(), 4u);
  c.crash_restart(3);
  EXPECT_EQ(c.raft(3).unvouched(), !kBrokenVouchRule)
      << "vouched at open: the word recorded only the first commit (2), the promise (4) was lost";
  if (kBrokenVouchRule) return;
  c.step(3, heartbeat_from(1, 3, 5, /*commit=*/4));
  c.step(3, append_from(1, 3, 5, 0, 0, 4,
                        {entry_at(1, 5), entry_at(2, 5), entry_at(3, 5), entry_at(4, 5)}));
  EXPECT_FALSE(c.raft(3).unvouched());
  EXPECT_FALSE(c.raft(3).catching_up());
  EXPECT_FALSE(marker_exists(c, 3));
}

}  // namespace
}  // namespace raftlog::raft

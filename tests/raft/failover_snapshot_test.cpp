// A failover alone sends no snapshot (docs/operations.md, "Catching up from a snapshot"): a new
// leader decides that a follower needs entries it trimmed only once the follower's own answer to an
// append shows its log ends (or matches) below the leader's first index. Checked on bare cores
// exchanging real messages: the deposed leader (node 1, holding the retained log and an
// uncommitted tail of its own term) and the new leader (node 2); node 3 is played by the test
// (its votes elect node 2).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include "bare_node.h"
#include "test_cluster.h"

namespace raftlog::raft {
namespace {

using testing::BareNode;
using testing::make_entries;
using testing::response;

constexpr Index kFirstIndex = 15;  // every node trimmed its log below 15

Config failover_config(NodeId id) {
  Config config;
  config.id = id;
  config.initial_conf.voters = {1, 2, 3};
  config.snapshots = true;
  config.snapshot_retry_ticks = 30;
  return config;
}

// Entries 1..20 of term 1 (committed everywhere), then `tail_terms` from 21 on.
std::vector<Entry> log_with_tail(const std::vector<Term>& tail_terms) {
  std::vector<Term> terms(20, 1);
  terms.insert(terms.end(), tail_terms.begin(), tail_terms.end());
  return make_entries(1, terms);
}

// Ticks `node` until it campaigns and grants it node 3's pre-vote and vote: it leads its next term.
void elect_with_node3(BareNode& node) {
  for (int i = 0; i < 200 && node.raft->role() == Role::kFollower; ++i) node.raft->tick();
  node.drain();
  for (MessageType type : {MessageType::kPreVoteResponse, MessageType::kVoteResponse}) {
    for (const Message& request : node.take(MessageType::kPreVote, 3)) {
      node.raft->step(response(type, 3, node.raft->id(), request.term));
    }
    for (const Message& request : node.take(MessageType::kVote, 3)) {
      node.raft->step(response(type, 3, node.raft->id(), request.term));
    }
    node.drain();
  }
  ASSERT_EQ(node.raft->role(), Role::kLeader);
}

PeerProgress progress_of(const BareNode& leader, NodeId id) {
  for (const PeerProgress& p : leader.raft->progress()) {
    if (p.id == id) return p;
  }
  return PeerProgress{};
}

// Nodes 1 and 2 exchange every message until neither sends one more (bounded); messages to node 3
// are dropped. Counts the snapshots node 2 sends node 1, and whether node 2 ever counted node 1 as
// needing trimmed entries.
struct Exchange {
  int snapshots_to_1 = 0;
  int rejects_from_1 = 0;
  bool ever_behind = false;
};
Exchange exchange(BareNode& deposed, BareNode& leader) {
  Exchange seen;
  const auto check = [&] {
    if (progress_of(leader, 1).needs_trimmed_entries(leader.log.first_index())) {
      seen.ever_behind = true;
    }
  };
  for (int round = 0; round < 50; ++round) {
    deposed.drain();
    leader.drain();
    std::vector<Message> to_leader = deposed.take_all_to(2);
    std::vector<Message> to_deposed = leader.take_all_to(1);
    leader.take_all_to(3);
    if (to_leader.empty() && to_deposed.empty()) break;
    for (Message& m : to_deposed) {
      if (m.type == MessageType::kSnapshot) ++seen.snapshots_to_1;
      deposed.raft->step(std::move(m));
    }
    for (Message& m : to_leader) {
      if (m.type == MessageType::kAppendResponse && m.reject) ++seen.rejects_from_1;
      leader.raft->step(std::move(m));
      leader.drain();
      check();
    }
  }
  return seen;
}

// The deposed leader 1 led term 2 and wrote its no-op and three entries (21..24) that reached no
// one; node 2 (log 1..20) is elected in term 3 and probes it: the tail conflicts with node 2's
// no-op, node 1 rejects, and the probe walks back to 20, which both hold. Node 1 holds everything
// node 2 retains: no snapshot, never counted behind, and its log ends as node 2's.
void expect_the_deposed_leader_catches_up_by_appends(Index deposed_first_index) {
  BareNode deposed(failover_config(1), log_with_tail({2, 2, 2, 2}), deposed_first_index,
                   HardState{2, 1, 20});
  BareNode leader(failover_config(2), log_with_tail({}), kFirstIndex, HardState{2, 1, 20});
  elect_with_node3(leader);
  ASSERT_EQ(leader.raft->term(), 3u);
  const Exchange seen = exchange(deposed, leader);
  EXPECT_EQ(seen.snapshots_to_1, 0) << "node 1 held everything node 2 retains";
  EXPECT_FALSE(seen.ever_behind) << "node 2 took node 1 for a stranded follower";
  EXPECT_TRUE(deposed.snapshots.empty());
  EXPECT_EQ(deposed.log.first_index(), deposed_first_index);
  EXPECT_EQ(deposed.log.last_index(), leader.log.last_index());
  EXPECT_EQ(deposed.log.term_at(21), std::optional<Term>(3)) << "its tail was replaced";
  EXPECT_EQ(progress_of(leader, 1).match_index, leader.log.last_index());
}

TEST(FailoverSnapshot, TheDeposedLeaderWithAConflictingUncommittedTailGetsNoSnapshot) {
  expect_the_deposed_leader_catches_up_by_appends(kFirstIndex);
}

TEST(FailoverSnapshot, ADeposedLeaderTrimmedUpToItsConflictGetsNoSnapshot) {
  // Its first retained index (21) is the first entry of its own tail: the conflict.
  expect_the_deposed_leader_catches_up_by_appends(21);
}

// The reject path (review M-1): node 2 holds 21..22 of term 1 (written by the term-1 leader, they
// never reached node 1) and, after its no-op at 23, probes node 1 there; node 1's 21..22 are of
// term 2, so it rejects, and the probe walks back to 20, which both hold. The walk stays at or above
// node 2's first index - 1: no snapshot, never counted behind; node 1's tail is replaced. Also with
// node 1 trimmed up to its conflict (first index 21).
TEST(FailoverSnapshot, ARejectOfTheDeposedLeadersConflictingTailWalksBackWithoutASnapshot) {
  for (const Index deposed_first_index : {kFirstIndex, Index{21}}) {
    SCOPED_TRACE(deposed_first_index);
    BareNode deposed(failover_config(1), log_with_tail({2, 2, 2, 2}), deposed_first_index,
                     HardState{2, 1, 20});
    BareNode leader(failover_config(2), log_with_tail({1, 1}), kFirstIndex, HardState{2, 1, 20});
    elect_with_node3(leader);
    ASSERT_EQ(leader.raft->term(), 3u);
    const Exchange seen = exchange(deposed, leader);
    EXPECT_GT(seen.rejects_from_1, 0) << "node 1 must have rejected the probe at its conflict";
    EXPECT_EQ(seen.snapshots_to_1, 0) << "node 1 held everything node 2 retains up to 20";
    EXPECT_FALSE(seen.ever_behind);
    EXPECT_TRUE(deposed.snapshots.empty());
    EXPECT_EQ(deposed.log.last_index(), leader.log.last_index());
    EXPECT_EQ(deposed.log.term_at(21), std::optional<Term>(1)) << "its tail was replaced";
    EXPECT_EQ(progress_of(leader, 1).match_index, leader.log.last_index());
  }
}

// Node 2 led term 3 while node 1 was frozen, lost leadership and was elected again in term 4.
// Node 1 wakes and hears term 4 first, then node 2's late term-3 messages: as a node of term 4 it
// answers those with an empty acknowledgement (index 0), which says nothing about its log. Taken as
// an acknowledgement of index 0 it turned node 2's probe into replicate state at next index 1 and
// node 1 got a snapshot it did not need (drills4 M3).
TEST(FailoverSnapshot, AnEmptyAnswerToALateMessageOfAnEarlierTermIsNoAcknowledgement) {
  BareNode deposed(failover_config(1), log_with_tail({2, 2, 2, 2}), kFirstIndex,
                   HardState{2, 1, 20});
  BareNode leader(failover_config(2), log_with_tail({}), kFirstIndex, HardState{2, 1, 20});
  elect_with_node3(leader);
  ASSERT_EQ(leader.raft->term(), 3u);
  // Term 3: node 1 is frozen; node 2 gets no answer, steps down (check quorum), is elected again.
  for (int i = 0; i < 100 && leader.raft->role() == Role::kLeader; ++i) {
    leader.raft->tick();
    leader.drain();
  }
  ASSERT_EQ(leader.raft->role(), Role::kFollower);
  std::vector<Message> late = leader.take_all_to(1);
  ASSERT_FALSE(late.empty());
  leader.sent.clear();
  elect_with_node3(leader);
  ASSERT_EQ(leader.raft->term(), 4u);
  // Node 1 wakes: term 4 first, then the late term-3 messages; its answers reach node 2 in order.
  for (Message& m : leader.take_all_to(1)) deposed.raft->step(std::move(m));
  deposed.drain();
  ASSERT_EQ(deposed.raft->term(), 4u);
  for (Message& m : late) deposed.raft->step(std::move(m));
  deposed.drain();
  std::vector<Message> answers = deposed.take_all_to(2);
  ASSERT_TRUE(std::any_of(answers.begin(), answers.end(), [](const Message& m) {
    return m.type == MessageType::kAppendResponse && !m.reject && m.index == 0;
  })) << "node 1 answers a late message of term 3 with an empty acknowledgement";
  for (Message& m : answers) leader.raft->step(std::move(m));
  leader.drain();
  EXPECT_TRUE(leader.take(MessageType::kSnapshot, 1).empty()) << "node 1 needs no snapshot";
  EXPECT_FALSE(progress_of(leader, 1).needs_trimmed_entries(kFirstIndex));
  const Exchange seen = exchange(deposed, leader);
  EXPECT_EQ(seen.snapshots_to_1, 0);
  EXPECT_FALSE(seen.ever_behind);
  EXPECT_EQ(deposed.log.last_index(), leader.log.last_index());
  EXPECT_EQ(progress_of(leader, 1).match_index, leader.log.last_index());
}

// Node 2's probe to node 1 was lost; node 1 answers only heartbeats. A heartbeat answer says
// nothing about where its log ends: node 2 must not count it behind its first index (status, the
// behind-first-index metric, the log line), and probes it again rather than sending a snapshot.
TEST(FailoverSnapshot, AFollowerThatAnsweredOnlyHeartbeatsIsNotCountedBehind) {
  BareNode deposed(failover_config(1), log_with_tail({2, 2}), kFirstIndex, HardState{2, 1, 20});
  BareNode leader(failover_config(2), log_with_tail({}), kFirstIndex, HardState{2, 1, 20});
  elect_with_node3(leader);
  ASSERT_FALSE(leader.take(MessageType::kAppend, 1).empty()) << "the probe, lost";
  leader.sent.clear();
  for (int i = 0; i < 3; ++i) {
    leader.raft->tick();
    leader.drain();
    for (Message& m : leader.take(MessageType::kHeartbeat, 1)) deposed.raft->step(std::move(m));
    leader.sent.clear();
    deposed.drain();
    for (Message& m : deposed.take(MessageType::kHeartbeatResponse, 2)) {
      leader.raft->step(std::move(m));
    }
    deposed.sent.clear();
    leader.drain();
    const PeerProgress peer = progress_of(leader, 1);
    EXPECT_TRUE(peer.heard_this_term);
    EXPECT_FALSE(peer.needs_trimmed_entries(kFirstIndex)) << "after heartbeat answer " << i;
    EXPECT_TRUE(leader.take(MessageType::kSnapshot, 1).empty());
  }
  // The probe sent again after a heartbeat answer settles it: no snapshot ever.
  const Exchange seen = exchange(deposed, leader);
  EXPECT_EQ(seen.snapshots_to_1, 0);
  EXPECT_FALSE(seen.ever_behind);
  EXPECT_EQ(deposed.log.last_index(), leader.log.last_index());
}

// The rule still sends a snapshot when the follower's own answer shows it: node 1's log ends at 5,
// below node 2's first index 15. Its rejection's hint is below the first index: counted behind,
// one snapshot of the trim point, and once installed it catches up by appends.
TEST(FailoverSnapshot, AFollowerWhoseAnswerShowsItsLogEndsBelowTheFirstIndexGetsASnapshot) {
  BareNode behind(failover_config(1), make_entries(1, std::vector<Term>(5, 1)), 1,
                  HardState{1, kNoNode, 5});
  BareNode leader(failover_config(2), log_with_tail({}), kFirstIndex, HardState{2, 1, 20});
  elect_with_node3(leader);
  behind.drain();
  for (Message& m : leader.take_all_to(1)) behind.raft->step(std::move(m));
  behind.drain();
  for (Message& m : behind.take_all_to(2)) leader.raft->step(std::move(m));
  leader.drain();
  const PeerProgress peer = progress_of(leader, 1);
  EXPECT_TRUE(peer.needs_trimmed_entries(kFirstIndex));
  EXPECT_EQ(peer.snapshot_index, kFirstIndex - 1);
  std::vector<Message> snapshots = leader.take(MessageType::kSnapshot, 1);
  ASSERT_EQ(snapshots.size(), 1u);
  for (Message& m : snapshots) behind.raft->step(std::move(m));
  const Exchange seen = exchange(behind, leader);
  EXPECT_EQ(seen.snapshots_to_1, 0) << "one snapshot only";
  EXPECT_EQ(behind.log.first_index(), kFirstIndex);
  EXPECT_EQ(behind.log.last_index(), leader.log.last_index());
  EXPECT_FALSE(progress_of(leader, 1).needs_trimmed_entries(kFirstIndex));
}

}  // namespace
}  // namespace raftlog::raft

// The driver's durability rules, seen from the cluster: a leader counts its own entries toward commit
// only once flushed, and a follower's acknowledgement leaves only once its entries are flushed.
//
// This file is compiled three times: into raft_core_test (the production replica: the test asserts
// the rules), and against the replica's broken durability seams (src/replica/durability_rules.h) with
// RAFTLOG_EXPECT_BROKEN_ACK (raftlog_replica_broken_ack: own entries counted before their flush) or
// RAFTLOG_EXPECT_BROKEN_HELD (raftlog_replica_broken_held: acknowledgements sent before the flush),
// where the same scenario shows the early commit. So the core tests, which run the production
// driver, catch a driver bug too.
#include <gtest/gtest.h>

#include "test_cluster.h"

namespace raftlog::raft {
namespace {

using testing::TestCluster;

#ifdef RAFTLOG_EXPECT_BROKEN_ACK
constexpr bool kBrokenAck = true;
#else
constexpr bool kBrokenAck = false;
#endif
#ifdef RAFTLOG_EXPECT_BROKEN_HELD
constexpr bool kBrokenHeld = true;
#else
constexpr bool kBrokenHeld = false;
#endif

TEST(Replication, LeadersOwnUnpersistedEntriesDoNotCountTowardQuorum) {
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.isolate(3);
  c.node(1).hold_persistence = true;
  const testing::Proposal proposal = c.propose(1, {"a"});
  ASSERT_TRUE(proposal.proposed());
  c.deliver_all();
  // Node 2 acknowledged index 2, but the leader itself has not made it durable: 1 of 3 is no majority.
  EXPECT_EQ(c.raft(1).progress()[1].match_index, 2u);
  EXPECT_EQ(c.node(1).log.durable_index(), 1u);
  if (kBrokenAck) {
    EXPECT_EQ(c.raft(1).commit_index(), 2u)
        << "the broken rule counts the leader's unflushed entry";
    EXPECT_TRUE(proposal.answer.answered()) << "and acknowledges it before the leader's flush";
    return;
  }
  EXPECT_EQ(c.raft(1).persisted_index(), 1u);
  EXPECT_EQ(c.raft(1).commit_index(), 1u);
  EXPECT_FALSE(proposal.answer.answered()) << "acknowledged before the leader's own flush";
  c.node(1).hold_persistence = false;
  c.persist_all(1);
  c.deliver_all();
  EXPECT_EQ(c.raft(1).commit_index(), 2u);
  EXPECT_TRUE(proposal.answer.answered());
}

#ifndef RAFTLOG_EXPECT_BROKEN_ACK  // the broken ack rule releases the acknowledgements too

TEST(Replication, FollowerAcksOnlyAfterPersisting) {
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.node(2).hold_persistence = true;
  c.node(3).hold_persistence = true;
  ASSERT_TRUE(c.propose(1, {"a"}).proposed());
  c.deliver_all();
  EXPECT_EQ(c.node(2).log.last_index(), 2u) << "the entry was handed out and appended";
  EXPECT_EQ(c.node(2).log.durable_index(), 1u) << "and not flushed";
  if (kBrokenHeld) {
    EXPECT_EQ(c.raft(1).commit_index(), 2u)
        << "the broken rule lets the followers acknowledge unflushed entries";
    return;
  }
  EXPECT_EQ(c.raft(1).commit_index(), 1u) << "followers hold their acks until durable";
  c.persist_all(2);
  c.deliver_all();
  EXPECT_EQ(c.raft(1).commit_index(), 2u);
}

#endif  // RAFTLOG_EXPECT_BROKEN_ACK

}  // namespace
}  // namespace raftlog::raft

// The Raft paper's Figure 8: a leader must not commit an entry of an earlier term by counting replicas.
//
// This file is compiled twice: against raftlog_raft (production rules: the test asserts safety) and
// against raftlog_raft_broken_commit with RAFTLOG_EXPECT_BROKEN_COMMIT defined (the same scenario then
// shows the unsafe commit), proving the test can fail and that the link-time seam swaps the rule.
#include <gtest/gtest.h>

#include <set>

#include "test_cluster.h"

namespace raftlog::raft {
namespace {

using testing::make_entries;
using testing::TestCluster;

#ifdef RAFTLOG_EXPECT_BROKEN_COMMIT
constexpr bool kBrokenCommitRule = true;
#else
constexpr bool kBrokenCommitRule = false;
#endif

bool carries_index(const Message& m, Index index) {
  for (const Entry& e : m.entries) {
    if (e.index == index) return true;
  }
  return false;
}

TEST(Figure8, LeaderDoesNotCommitAPreviousTermEntryByCounting) {
  // (b): S1 led term 2 and wrote index 2 only on itself; S5 led term 3 and wrote its own index 2.
  // Everyone is at term 3; index 1 (term 1) is committed everywhere.
  const std::vector<NodeId> ids{1, 2, 3, 4, 5};
  TestCluster c(ids,
                {make_entries(1, {1, 2}), make_entries(1, {1}), make_entries(1, {1}),
                 make_entries(1, {1}), make_entries(1, {1, 3})},
                std::vector<HardState>(5, HardState{3, 0, 1}), [](Config& config) {
                  config.check_quorum = false;  // keep the scenario about the commit rule alone
                  config.max_entries_per_message = 1;
                });
  // (c): S1 wins term 4 with S2 and S3 (S4 and S5 cannot hear it) and copies index 2 (term 2) to them,
  // but its own no-op (index 3, term 4) never lands on them: an append carrying index 3 is dropped once
  // the receiver holds index 2 (before that it is a harmless probe that the receiver rejects).
  c.add_drop_rule([&c](const Message& m) {
    return m.from == 1 && m.type == MessageType::kAppend && carries_index(m, 3) &&
           c.node(m.to).log.last_index() >= 2;
  });
  c.isolate(4);
  c.isolate(5);
  ASSERT_TRUE(c.campaign_until_leader(1));
  EXPECT_EQ(c.raft(1).term(), 4u);
  c.tick(1, 3);
  c.deliver_all();
  // Index 2 (term 2) is now on S1, S2 and S3: a majority of five.
  for (NodeId id : {1, 2, 3}) ASSERT_EQ(c.node(id).log.term_at(2), Term{2}) << "node " << id;
  for (NodeId id : {2, 3})
    ASSERT_EQ(c.node(id).log.last_index(), 2u) << "the no-op must not reach node " << id;

  if (kBrokenCommitRule) {
    EXPECT_EQ(c.raft(1).commit_index(), 2u) << "the broken rule commits a term-2 entry by counting";
  } else {
    EXPECT_EQ(c.raft(1).commit_index(), 1u)
        << "a term-2 entry must not commit by counting in term 4";
  }

  // (d): S1 goes away; S5 (last term 3) wins with S2, S3 and S4 and replaces index 2.
  c.heal();
  c.isolate(1);
  ASSERT_TRUE(c.campaign_until_leader(5));
  if (!kBrokenCommitRule) {
    c.tick(5, 3);
    c.deliver_all();
    for (NodeId id : {2, 3, 4, 5}) EXPECT_EQ(c.node(id).log.term_at(2), Term{3}) << "node " << id;
    EXPECT_GE(c.raft(5).commit_index(), 3u);
  }
  // State machine safety: every node that delivered index 2 as committed delivered the same entry.
  std::set<Term> committed_terms_at_2;
  for (NodeId id : ids) {
    if (c.node(id).delivered_commit >= 2) committed_terms_at_2.insert(*c.node(id).log.term_at(2));
  }
  EXPECT_FALSE(committed_terms_at_2.empty());
  EXPECT_EQ(committed_terms_at_2.size() == 1, !kBrokenCommitRule)
      << "with the broken rule S1 committed (2, term 2) and S5 committed (2, term 3)";
}

TEST(Figure8, OwnTermEntryCommitsEarlierEntriesIndirectly) {
  // (e): S1 gets its term-4 no-op onto a majority; index 2 (term 2) then commits with it, and S5 can
  // no longer win an election.
  const std::vector<NodeId> ids{1, 2, 3, 4, 5};
  TestCluster c(ids,
                {make_entries(1, {1, 2}), make_entries(1, {1, 2}), make_entries(1, {1}),
                 make_entries(1, {1}), make_entries(1, {1, 3})},
                std::vector<HardState>(5, HardState{3, 0, 1}),
                [](Config& config) { config.check_quorum = false; });
  c.isolate(4);
  c.isolate(5);
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  EXPECT_EQ(c.raft(1).commit_index(), 3u);
  c.heal();
  c.isolate(1);
  EXPECT_FALSE(c.campaign_until_leader(5, 100))
      << "S5's log lacks committed entries: it must not win";
}

}  // namespace
}  // namespace raftlog::raft

// A proposal (one client Append of several entries) commits whole or not at all, however its entries
// are split across messages and whoever leads next. Also linked against the broken-atomicity seam
// (RAFTLOG_EXPECT_BROKEN_ATOMICITY), where the commit-point test must see the rule broken.
#include <gtest/gtest.h>

#include <algorithm>

#include "test_cluster.h"

namespace raftlog::raft {
namespace {

using testing::make_entries;
using testing::TestCluster;

TEST(ProposalAtomicity, EveryEntryButAProposalsLastSaysItContinues) {
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  ASSERT_TRUE(c.propose(1, {"a", "b", "c"}).proposed());
  ASSERT_TRUE(c.propose(1, {"d"}).proposed());
  c.deliver_all();
  for (NodeId id : c.ids()) {
    const testing::NodeLog& log = c.node(id).log;
    ASSERT_EQ(log.last_index(), 5u) << "node " << id;
    EXPECT_FALSE(log.entry(1).proposal_continues) << "the no-op is a proposal of its own";
    EXPECT_TRUE(log.entry(2).proposal_continues);
    EXPECT_TRUE(log.entry(3).proposal_continues);
    EXPECT_FALSE(log.entry(4).proposal_continues) << "a proposal's last entry ends it";
    EXPECT_FALSE(log.entry(5).proposal_continues);
    EXPECT_EQ(c.raft(id).commit_index(), 5u);
  }
}

// The followers' acknowledgements cover only the first two entries of a three-entry proposal, as
// when the leader's message ended inside it (its bounds cut wherever they fall).
TEST(ProposalAtomicity, AQuorumInsideAProposalCommitsNothingOfIt) {
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  ASSERT_EQ(c.raft(1).commit_index(), 1u);
  c.set_mutator([](Message& m) {
    if (m.type == MessageType::kAppendResponse && !m.reject) m.index = std::min<Index>(m.index, 3);
  });
  const testing::Proposal result = c.propose(1, {"a", "b", "c"});
  ASSERT_TRUE(result.proposed());
  ASSERT_EQ(result.placement.last, 4u);
  c.deliver_all();
  EXPECT_EQ(c.raft(1).progress()[1].match_index, 3u);
#ifdef RAFTLOG_EXPECT_BROKEN_ATOMICITY
  EXPECT_EQ(c.raft(1).commit_index(), 3u)
      << "the broken seam lets the commit stop inside the proposal";
#else
  EXPECT_EQ(c.raft(1).commit_index(), 1u)
      << "two of three entries committed: the append would be cut";
  // The rest of the acknowledgements arrive: all three commit together.
  c.set_mutator({});
  c.tick(1, 2);
  c.deliver_all();
  EXPECT_EQ(c.raft(1).commit_index(), 4u);
#endif
}

#ifndef RAFTLOG_EXPECT_BROKEN_ATOMICITY

// Node 2 holds the first two entries of a four-entry proposal of term 1 (index 3 says more follows);
// the leader that had the rest is gone. Node 2 wins term 2: its no-op takes index 2's place, so the
// partial append never commits, and the followers' copies of it are overwritten.
TEST(ProposalAtomicity, ANewLeaderDropsTheUnfinishedProposalAtItsLogsEnd) {
  std::vector<Entry> partial = make_entries(1, {1, 1, 1});
  partial[1].proposal_continues = true;
  partial[2].proposal_continues = true;
  TestCluster c({1, 2, 3}, {make_entries(1, {1}), partial, partial},
                {HardState{1, 0, 1}, HardState{1, 0, 1}, HardState{1, 0, 1}});
  c.isolate(1);
  ASSERT_TRUE(c.campaign_until_leader(2));
  c.deliver_all();
  for (NodeId id : {NodeId{2}, NodeId{3}}) {
    const testing::NodeLog& log = c.node(id).log;
    ASSERT_EQ(log.last_index(), 2u) << "node " << id;
    EXPECT_EQ(log.entry(2).type, EntryType::kNoop) << "node " << id;
    EXPECT_EQ(log.entry(2).term, c.raft(2).term());
    EXPECT_EQ(c.raft(id).commit_index(), 2u);
  }
  c.heal();
  c.tick(2, 2);
  c.deliver_all();
  EXPECT_EQ(c.node(1).log.last_index(), 2u);
  EXPECT_EQ(c.raft(1).commit_index(), 2u);
}

// A finished proposal of an earlier term at the log's end is kept and commits through the no-op.
TEST(ProposalAtomicity, ANewLeaderKeepsAFinishedProposalOfAnEarlierTerm) {
  std::vector<Entry> finished = make_entries(1, {1, 1, 1});
  finished[1].proposal_continues = true;  // [2, 3] is one proposal, ended at 3
  TestCluster c({1, 2, 3}, {make_entries(1, {1}), finished, finished},
                {HardState{1, 0, 1}, HardState{1, 0, 1}, HardState{1, 0, 1}});
  c.isolate(1);
  ASSERT_TRUE(c.campaign_until_leader(2));
  c.deliver_all();
  EXPECT_EQ(c.node(2).log.last_index(), 4u);
  EXPECT_EQ(c.node(2).log.entry(3).payload, finished[2].payload);
  EXPECT_EQ(c.raft(2).commit_index(), 4u);
}

// Nothing at or below the commit index is ever dropped, whatever the entries say.
TEST(ProposalAtomicity, CommittedEntriesStayEvenWhenTheySayMoreFollows) {
  std::vector<Entry> log = make_entries(1, {1, 1, 1});
  log[1].proposal_continues = true;
  log[2].proposal_continues = true;
  TestCluster c({1, 2, 3}, {log, log, log},
                {HardState{1, 0, 3}, HardState{1, 0, 3}, HardState{1, 0, 3}});
  ASSERT_TRUE(c.campaign_until_leader(2));
  c.deliver_all();
  EXPECT_EQ(c.node(2).log.last_index(), 4u);
  EXPECT_EQ(c.node(2).log.entry(3).payload, log[2].payload);
  EXPECT_EQ(c.node(2).log.entry(4).type, EntryType::kNoop);
}

// A proposal larger than this node's own max_entries_per_message (another node proposed it with a
// larger bound) is still found whole and dropped: the look-back is kMaxProposalEntries, not the
// local bound.
TEST(ProposalAtomicity, AnUnfinishedProposalLargerThanTheLocalBoundIsDroppedWhole) {
  std::vector<Entry> log = make_entries(1, std::vector<Term>(20, 1));
  for (std::size_t i = 1; i < log.size(); ++i) log[i].proposal_continues = true;
  const auto small_messages = [](Config& config) { config.max_entries_per_message = 4; };
  TestCluster c({1, 2, 3}, {make_entries(1, {1}), log, log},
                {HardState{1, 0, 1}, HardState{1, 0, 1}, HardState{1, 0, 1}}, small_messages);
  c.isolate(1);
  ASSERT_TRUE(c.campaign_until_leader(2));
  c.deliver_all();
  EXPECT_EQ(c.node(2).log.last_index(), 2u) << "entries 2..20 replaced by the no-op at 2";
  EXPECT_EQ(c.node(2).log.entry(2).type, EntryType::kNoop);
  EXPECT_EQ(c.raft(2).commit_index(), 2u);
}

#endif  // RAFTLOG_EXPECT_BROKEN_ATOMICITY

}  // namespace
}  // namespace raftlog::raft

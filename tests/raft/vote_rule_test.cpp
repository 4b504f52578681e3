// The election restriction (Raft §5.4.1): a vote needs a log at least as up to date as the voter's.
//
// Compiled twice: against raftlog_raft (the voter refuses) and against raftlog_raft_broken_vote with
// RAFTLOG_EXPECT_BROKEN_VOTE defined (the same requests are granted), proving the test can fail and that
// the link-time seam swaps the rule.
#include <gtest/gtest.h>

#include "test_cluster.h"
#include "unvouched_messages.h"

namespace raftlog::raft {
namespace {

using testing::make_entries;
using testing::TestCluster;

#ifdef RAFTLOG_EXPECT_BROKEN_VOTE
constexpr bool kBrokenVoteRule = true;
#else
constexpr bool kBrokenVoteRule = false;
#endif

// A vote request (unvouched_messages.h's forged-message helpers, shared with the unvouched tests).
Message vote_request(NodeId from, NodeId to, Term term, Index last_index, Term last_term) {
  return testing::unvouched::vote_request(from, to, term, last_index, last_term, /*pre_vote=*/false);
}

// Steps `vote` into its receiver; true when the Ready it caused grants it (the answer waits for the
// vote's persistence: messages_after_persist).
bool granted(TestCluster& c, const Message& vote) {
  const std::size_t mark = c.node(vote.to).readies.size();
  c.step(vote.to, vote);
  if (c.node(vote.to).readies.size() <= mark) {
    ADD_FAILURE() << "node " << vote.to << " did not answer";
    return false;
  }
  const Ready& rd = c.node(vote.to).readies[mark];
  EXPECT_EQ(rd.messages_after_persist.size(), 1u);
  return !rd.messages_after_persist.empty() && !rd.messages_after_persist[0].reject;
}

TEST(VoteRule, LogUpToDateCheck) {
  // Node 2 ends at term 2; node 1's log is longer but ends at term 1; node 3 holds only index 1.
  TestCluster c({1, 2, 3},
                {make_entries(1, {1, 1, 1}), make_entries(1, {1, 2}), make_entries(1, {1})},
                {HardState{2, 0, 0}, HardState{2, 0, 0}, HardState{2, 0, 0}},
                [](Config& config) { config.pre_vote = false; });
  EXPECT_EQ(granted(c, vote_request(1, 2, 3, 3, 1)), kBrokenVoteRule)
      << "a lower last term loses despite the longer log";
  EXPECT_EQ(c.raft(2).hard_state().vote, kBrokenVoteRule ? 1u : kNoNode);

  EXPECT_TRUE(granted(c, vote_request(1, 3, 3, 3, 1))) << "same last term, longer log: up to date";

  EXPECT_EQ(granted(c, vote_request(3, 1, 3, 2, 1)), kBrokenVoteRule)
      << "same last term, shorter log: not up to date";
}

TEST(VoteRule, PreVoteAppliesTheSameCheck) {
  TestCluster c({1, 2, 3}, {make_entries(1, {1}), make_entries(1, {1, 2}), make_entries(1, {1})},
                {HardState{2, 0, 0}, HardState{2, 0, 0}, HardState{2, 0, 0}});
  Message pre_vote = vote_request(1, 2, 3, 1, 1);
  pre_vote.type = MessageType::kPreVote;
  c.step(2, pre_vote);
  ASSERT_EQ(c.node(2).readies.size(), 1u);
  const Ready& rd = c.node(2).readies[0];
  ASSERT_EQ(rd.messages.size(), 1u);
  EXPECT_EQ(rd.messages[0].type, MessageType::kPreVoteResponse);
  EXPECT_EQ(!rd.messages[0].reject, kBrokenVoteRule);
  EXPECT_EQ(c.raft(2).term(), 2u) << "a pre-vote never changes the voter's term";
}

}  // namespace
}  // namespace raftlog::raft

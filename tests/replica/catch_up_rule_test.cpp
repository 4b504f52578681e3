// The readiness rule of a follower far behind its leader (replica/catch_up_rule.h): one rule for
// voters and learners, with hysteresis between "more than N entries behind" and "reached the
// commit index", so that a healthy follower a few batches behind never flaps (drills7 L1).
#include <gtest/gtest.h>

#include <cstdint>

#include "replica/catch_up_rule.h"

namespace raftlog::replica {
namespace {

using Seat = CatchUpRule::Seat;
using Change = CatchUpRule::Change;

// Behind by `gap` entries of a leader's commit `commit` (what raft::Raft::behind_leader_commit
// reports: the commit when the log does not reach it, else 0).
Change follow(CatchUpRule& rule, std::uint64_t commit, std::uint64_t last) {
  return rule.observe(Seat::kFollowerOfLeader, commit > last ? commit : 0, last);
}

TEST(CatchUpRule, ANodeThatStartsBehindItsLeaderIsCatchingUpUntilItReachesTheCommitIndex) {
  CatchUpRule rule(1000);
  EXPECT_EQ(rule.observe(Seat::kNoLeader, 0, 37), Change::kNone);
  EXPECT_EQ(rule.catching_up_to(), 0u) << "no leader: health says so on its own";
  // drills7 L1: restarted at 37 against the leader's 15,189.
  EXPECT_EQ(follow(rule, 15189, 37), Change::kBehind);
  EXPECT_EQ(rule.catching_up_to(), 15189u);
  EXPECT_EQ(rule.gap(), 15152u);
  // Far less than the threshold behind, but not there yet: still catching up (hysteresis).
  EXPECT_EQ(follow(rule, 15300, 15290), Change::kNone);
  EXPECT_EQ(rule.catching_up_to(), 15300u);
  EXPECT_EQ(rule.gap(), 10u);
  EXPECT_EQ(follow(rule, 15300, 15300), Change::kCaughtUp);
  EXPECT_EQ(rule.catching_up_to(), 0u);
  EXPECT_EQ(rule.gap(), 0u);
}

TEST(CatchUpRule, ANodeThatStartsCaughtUpIsNeverCatchingUp) {
  CatchUpRule rule(1000);
  EXPECT_EQ(follow(rule, 40, 40), Change::kNone);
  EXPECT_EQ(rule.catching_up_to(), 0u);
}

// A healthy loaded follower: its log trails the leader's commit by a few batches, up to the
// threshold, and reaches it now and then; never catching up, never a change.
TEST(CatchUpRule, AFollowerUpToTheThresholdBehindStaysCaughtUp) {
  CatchUpRule rule(1000);
  ASSERT_EQ(follow(rule, 10, 10), Change::kNone);
  std::uint64_t commit = 10;
  for (std::uint64_t round = 0; round < 1000; ++round) {
    commit += 256;
    const std::uint64_t lag = (round * 97) % 1001;  // 0 .. 1000, the threshold itself included
    EXPECT_EQ(follow(rule, commit, commit - lag), Change::kNone) << round;
    EXPECT_EQ(rule.catching_up_to(), 0u) << round;
    EXPECT_EQ(rule.gap(), lag) << round;
  }
  EXPECT_EQ(follow(rule, commit + 1001, commit), Change::kBehind) << "one past the threshold";
  EXPECT_EQ(rule.catching_up_to(), commit + 1001);
  EXPECT_EQ(rule.gap(), 1001u);
}

// Hysteresis: a follower that fell behind stays catching up across gaps under the threshold and
// is caught up only at gap 0; then it stays caught up across gaps up to the threshold.
TEST(CatchUpRule, FallingBehindAndCatchingUpHaveDifferentBounds) {
  CatchUpRule rule(100);
  ASSERT_EQ(follow(rule, 5, 5), Change::kNone);
  EXPECT_EQ(follow(rule, 500, 300), Change::kBehind);
  for (std::uint64_t last = 301; last < 500; ++last) {
    EXPECT_EQ(follow(rule, 500, last), Change::kNone);
    EXPECT_EQ(rule.catching_up_to(), 500u);
  }
  EXPECT_EQ(follow(rule, 500, 500), Change::kCaughtUp);
  EXPECT_EQ(follow(rule, 600, 500), Change::kNone);
  EXPECT_EQ(rule.catching_up_to(), 0u);
}

// Cut off long enough to lose its leader (its election timer fired), a follower must show again
// that it holds what the leader committed meanwhile, however small the threshold's promise.
TEST(CatchUpRule, AFollowerThatLostItsLeaderMustReachTheCommitIndexAgain) {
  CatchUpRule rule(1'000'000);
  ASSERT_EQ(follow(rule, 50, 50), Change::kNone);
  EXPECT_EQ(rule.observe(Seat::kNoLeader, 0, 50), Change::kNone);
  EXPECT_EQ(rule.catching_up_to(), 0u);
  EXPECT_EQ(rule.gap(), 0u);
  EXPECT_EQ(follow(rule, 90, 50), Change::kBehind) << "40 behind, far under the threshold";
  EXPECT_EQ(rule.catching_up_to(), 90u);
  EXPECT_EQ(follow(rule, 90, 90), Change::kCaughtUp);
}

TEST(CatchUpRule, ALeaderIsCaughtUpAndStaysSoWhenItStepsDown) {
  CatchUpRule rule(100);
  EXPECT_EQ(rule.observe(Seat::kLeader, 0, 70), Change::kNone);
  EXPECT_EQ(rule.catching_up_to(), 0u);
  // Stepped down to follow a new leader that names a commit within the threshold.
  EXPECT_EQ(follow(rule, 80, 70), Change::kNone);
  EXPECT_EQ(rule.catching_up_to(), 0u);
}

TEST(CatchUpRule, TheDefaultThresholdIsWithinItsBounds) {
  EXPECT_GE(kDefaultServingLagEntries, kMinServingLagEntries);
  EXPECT_LE(kDefaultServingLagEntries, kMaxServingLagEntries);
}

}  // namespace
}  // namespace raftlog::replica

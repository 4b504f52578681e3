// A loop round long enough to cost leadership says what it did: RoundProfile charges each part its
// own time, and the replica's end_round() logs a slow round's parts, rate-limited.
#include "replica/round_profile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>

#include "node/temp_dir.h"
#include "replica/hooked_env.h"
#include "replica/replica.h"
#include "shared/captured_log.h"
#include "single_node_leader.h"
#include "stepped_follower_config.h"

namespace raftlog::replica {
namespace {

using namespace std::chrono_literals;
using Scope = RoundProfile::Scope;

TEST(RoundProfileTest, EachPartIsChargedItsOwnTimeAndThePartsAddUpToTheRound) {
  Clock::time_point now{};
  int clock_reads = 0;
  const std::function<Clock::time_point()> clock = [&] {
    ++clock_reads;
    return now;
  };
  RoundProfile profile(&clock);
  {
    Scope outside(profile, RoundPart::kSend);  // no round: nothing timed, no clock read
    now += 5ms;
  }
  EXPECT_EQ(clock_reads, 0);

  profile.begin();
  now += 1ms;  // outside every part
  {
    Scope request(profile, RoundPart::kClientRequests);
    now += 2ms;
    {
      Scope unlink(profile, RoundPart::kTrimUnlink);  // nested: not the request's time
      now += 40ms;
    }
    now += 3ms;
  }
  {
    Scope step(profile, RoundPart::kStepMessages);
    now += 1ms;
  }
  {
    Scope step(profile, RoundPart::kStepMessages);
    now += 1ms;
  }
  EXPECT_EQ(profile.end(), 48ms);
  EXPECT_EQ(profile.spent(RoundPart::kTrimUnlink), 40ms);
  EXPECT_EQ(profile.spent(RoundPart::kClientRequests), 5ms);
  EXPECT_EQ(profile.spent(RoundPart::kStepMessages), 2ms);
  EXPECT_EQ(profile.spent(RoundPart::kOther), 1ms);
  EXPECT_EQ(profile.entered(RoundPart::kStepMessages), 2U);
  EXPECT_EQ(profile.describe(2ms),
            "trim.unlink 40.0 ms (1), client_requests 5.0 ms (1), step 2.0 ms (2)");
  // The longest part is always named, however short.
  EXPECT_EQ(profile.describe(1h), "trim.unlink 40.0 ms (1)");

  profile.begin();  // a new round starts from zero
  EXPECT_EQ(profile.end(), 0ms);
  EXPECT_EQ(profile.spent(RoundPart::kTrimUnlink), 0ms);
}

// A single-voter replica on 64 KiB segments whose clock the test moves; a segment file's unlink
// takes unlink_cost_ of that clock.
class SlowRoundTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_.before = [this](testing::HookedEnv::Op op, const std::string& path) {
      if (op == testing::HookedEnv::Op::kRemove && testing::is_segment_file(path)) {
        now_ += unlink_cost_;
      }
      if (op == testing::HookedEnv::Op::kWriteFile &&
          path.find("TOPICSTATE") != std::string::npos) {
        now_ += topic_state_cost_;
      }
    };
  }
  void open(std::uint32_t trim_round_budget_ms, std::size_t trim_segments_per_round = 16) {
    ReplicaConfig c = testing::single_node_leader_config(
        dir_.path(), &env_, store::Options::kMinSegmentSizeBytes, 16 << 10);
    c.trim_round_budget_ms = trim_round_budget_ms;
    c.trim_segments_per_round = trim_segments_per_round;
    ReplicaDeps deps;
    deps.sender = &sender_;
    deps.disk = &disk_;
    deps.clock = [this] { return now_; };
    ASSERT_NO_FATAL_FAILURE(
        testing::open_single_node_leader(std::move(c), std::move(deps), &replica_));
  }
  // `segments` sealed segments' worth of 8 KiB entries (7 to a 64 KiB segment), committed, then
  // flushed, as the store's flusher does within milliseconds (a trim waits for it).
  void fill(int segments) {
    for (int i = 0; i < segments; ++i) {
      ASSERT_NO_FATAL_FAILURE(testing::append_and_wait(
          *replica_, std::vector<std::string>(7, std::string(8 << 10, 'x')), false, now_ + 1h));
    }
    ASSERT_TRUE(replica_->log().flush().ok());
    ASSERT_NO_FATAL_FAILURE(testing::checkpoint_by_the_flusher(*replica_, sealed_end()));
  }
  std::uint64_t sealed_end() const { return testing::sealed_end(*replica_); }
  // One round of the caller's loop that only holds it for `took` in `part`.
  Clock::duration round_of(RoundPart part, Clock::duration took) {
    replica_->begin_round();
    {
      Scope scope(replica_->round_profile(), part);
      now_ += took;
    }
    return replica_->end_round(100ms);
  }

  Clock::time_point now_ = Clock::time_point() + 1h;
  Clock::duration unlink_cost_ = 20ms;
  Clock::duration topic_state_cost_ = 0ms;
  server::testing::TempDir dir_;
  testing::HookedEnv env_;
  testing::NullSender sender_;
  testing::RoomyDisk disk_;
  std::unique_ptr<Replica> replica_;
};

TEST_F(SlowRoundTest, ARoundWithASlowTrimDeletionNamesTheUnlinksAndTheirMilliseconds) {
  open(/*trim_round_budget_ms=*/600000, /*trim_segments_per_round=*/0);  // all in one round
  fill(12);
  const std::uint64_t before = sealed_end();
  ASSERT_GE(replica_->log().disk_usage().segments, 10U);
  raftlog::testing::CapturedLog log;
  replica_->begin_round();
  {
    Scope request(replica_->round_profile(), RoundPart::kClientRequests);  // as the node marks it
    ASSERT_TRUE(replica_->trim(before, "test:").error.ok());
  }
  const Clock::duration took = replica_->end_round(100ms);
  ASSERT_EQ(replica_->log().first_index(), before);
  // At least 10 segments of two files, each unlink 20 ms on this clock.
  EXPECT_GE(took, 400ms);
  EXPECT_EQ(replica_->round_profile().spent(RoundPart::kTrimUnlink), took);
  const std::string text = log.text();
  EXPECT_NE(text.find("a loop round took " +
                      std::to_string(
                          std::chrono::duration_cast<std::chrono::milliseconds>(took).count()) +
                      " ms (slow-round threshold 100 ms): trim.unlink "),
            std::string::npos)
      << text;
}

// A trim's deletion of many segments on a disk whose unlinks are slow: before, the deletion
// (SNAPSHOT.next, every unlink, SNAPSHOT) ran in one round (here 12+ segments x 40 ms); now each
// round stops unlinking once the trim's work in it reached trim_round_budget_ms, so no round holds
// the loop longer than the budget plus one segment's unlinks, and the trim still finishes, with the
// tables of its point and SNAPSHOT naming it.
TEST_F(SlowRoundTest, NoTrimRoundHoldsTheLoopLongerThanTheBudgetPlusOneSegment) {
  open(/*trim_round_budget_ms=*/50);
  fill(12);
  const std::uint64_t before = sealed_end();
  const std::uint64_t segments = replica_->log().disk_usage().segments;
  ASSERT_GE(segments, 10U);
  const Clock::duration one_segment = 2 * unlink_cost_;  // its data and index files
  std::vector<Clock::duration> rounds;
  for (int round = 0; round < 200 && (round == 0 || replica_->log().first_index() < before ||
                                      env_.exists(dir_.path() + "/SNAPSHOT.next"));
       ++round) {
    replica_->begin_round();
    // A request in every round (an operator asking again), and the loop's continuation of the
    // pending trim in the same round: the deletion advances once per round, not once per call.
    ASSERT_TRUE(replica_->trim(before, "test:").error.ok());
    replica_->apply_retention(now_);
    rounds.push_back(replica_->end_round(0ms));
  }
  ASSERT_EQ(replica_->log().first_index(), before) << rounds.size() << " rounds";
  Clock::duration longest{};
  for (std::size_t round = 0; round < rounds.size(); ++round) {
    EXPECT_LE(rounds[round], 50ms + one_segment) << "round " << round;
    longest = std::max(longest, rounds[round]);
  }
  EXPECT_GE(rounds.size(), (segments - 1) * one_segment / (50ms + one_segment));
  std::printf("%zu segment(s) deleted in %zu round(s), the longest %lld ms\n",
              static_cast<std::size_t>(segments - replica_->log().disk_usage().segments),
              rounds.size(),
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(longest).count()));
  EXPECT_TRUE(replica_->knows_first_index_topics());
  EXPECT_FALSE(env_.exists(dir_.path() + "/SNAPSHOT.next"));
  auto current = read_snapshot_file(&env_, dir_.path());
  ASSERT_TRUE(current.ok() && current->has_value());
  EXPECT_EQ((*current)->index + 1, before);
  // A restart finds the same log start and knows its table.
  replica_.reset();
  open(50);
  EXPECT_EQ(replica_->log().first_index(), before);
  EXPECT_TRUE(replica_->knows_first_index_topics());
}

// drills5 M2: rounds ran several trim steps (a scan slice and SNAPSHOT.next, two slices), each
// trim() call of the round starting with a fresh budget. The budget is the round's: once a step of
// one call spent it, a later call in the same round (the loop's continuation of the pending trim)
// runs nothing; the next round goes on.
TEST_F(SlowRoundTest, ASecondTrimCallInARoundWhoseBudgetIsSpentRunsNoStep) {
  open(/*trim_round_budget_ms=*/50);
  fill(12);
  const std::uint64_t before = sealed_end();
  topic_state_cost_ = 60ms;  // TOPICSTATE (written on the loop here: no executor) spends it
  replica_->begin_round();
  ASSERT_TRUE(replica_->trim(before, "test:").error.ok());
  replica_->apply_retention(now_);  // the continuation, in the same round
  const Clock::duration took = replica_->end_round(0ms);
  EXPECT_EQ(replica_->round_profile().entered(RoundPart::kTrimScan), 0U)
      << "a scan slice ran after the round's budget was spent";
  EXPECT_EQ(replica_->round_profile().entered(RoundPart::kTrimSnapshotNext), 0U);
  EXPECT_EQ(replica_->log().first_index(), 1U);
  EXPECT_FALSE(env_.exists(dir_.path() + "/SNAPSHOT.next"));
  EXPECT_LT(took, 100ms);
  // The next rounds go on to the trim's point.
  topic_state_cost_ = 0ms;
  for (int round = 0; round < 200 && (replica_->log().first_index() < before ||
                                      env_.exists(dir_.path() + "/SNAPSHOT.next"));
       ++round) {
    replica_->begin_round();
    replica_->apply_retention(now_);
    replica_->end_round(0ms);
  }
  EXPECT_EQ(replica_->log().first_index(), before);
}

// drills4 M4: a burst of slow rounds showed only its first, not its worst. The first slow round is
// logged at once; of the ones in the kSlowRoundLogInterval after it, the longest is logged when the
// window closes, with how many there were.
TEST_F(SlowRoundTest, AShortRoundLogsNothingAndAWindowLogsItsLongestSlowRound) {
  open(50);
  raftlog::testing::CapturedLog log;
  EXPECT_EQ(round_of(RoundPart::kHardState, 99ms), 99ms);
  EXPECT_EQ(log.text().find("a loop round took"), std::string::npos) << log.text();

  round_of(RoundPart::kHardState, 150ms);
  EXPECT_NE(log.text().find("took 150 ms (slow-round threshold 100 ms): ready.hard_state 150.0 ms"),
            std::string::npos)
      << log.text();
  // Within the window: counted, not logged yet.
  round_of(RoundPart::kLogAppend, 120ms);
  round_of(RoundPart::kSend, 400ms);
  round_of(RoundPart::kLogAppend, 130ms);
  EXPECT_EQ(log.text().find("ready.append"), std::string::npos) << log.text();
  EXPECT_EQ(log.text().find("ready.send"), std::string::npos) << log.text();
  now_ += Replica::kSlowRoundLogInterval;
  round_of(RoundPart::kTicks, 1ms);  // the first round after the window closes it
  EXPECT_NE(log.text().find("took 400 ms (slow-round threshold 100 ms): ready.send 400.0 ms (1); "
                            "the longest of 3 more slow round(s) in the 10 s"),
            std::string::npos)
      << log.text();
  EXPECT_EQ(log.text().find("ready.append"), std::string::npos)
      << "only the window's longest round is logged: " << log.text();
  // The next slow round opens a new window: logged at once.
  round_of(RoundPart::kLogAppend, 200ms);
  EXPECT_NE(log.text().find("took 200 ms (slow-round threshold 100 ms): ready.append 200.0 ms"),
            std::string::npos)
      << log.text();
  // A window still open when the node stops: its longest round is logged by the stop.
  round_of(RoundPart::kStepMessages, 300ms);
  EXPECT_EQ(log.text().find("step 300.0 ms"), std::string::npos) << log.text();
  replica_.reset();
  EXPECT_NE(log.text().find("took 300 ms (slow-round threshold 100 ms): step 300.0 ms (1); the "
                            "longest of 1 more slow round(s)"),
            std::string::npos)
      << log.text();
}

}  // namespace
}  // namespace raftlog::replica

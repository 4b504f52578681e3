// A truncate_suffix() while sync appends or flush() wait: an append whose entries the truncation
// removed fails with kTruncated (never OK because a later entry at the same index became durable),
// an append below the cut still succeeds, and flush() does not wait for an index that is gone.
// Each test holds the flusher (FlusherGate) so that the waits are still pending at the truncation.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "flusher_gate.h"
#include "store/truncation_history.h"
#include "test_util.h"

namespace raftlog::store {
namespace {

using namespace std::chrono_literals;
using testing::expect_entries;
using testing::FlusherGate;
using testing::make_batch;
using testing::open_ok;
using testing::small_options;

constexpr std::size_t kPayloadBytes = 100;

TEST(TruncationHistory, OnlyACutAtOrBelowTheLastIndexSinceTheCountSeenCounts) {
  TruncationHistory history;
  EXPECT_TRUE(history.check(0, 10).ok());
  history.record(20);  // above 10: entries up to 10 stay
  EXPECT_EQ(history.count(), 1U);
  EXPECT_TRUE(history.check(0, 10).ok());
  EXPECT_EQ(history.check(0, 20).code(), StatusCode::kTruncated);  // 20 itself was cut
  history.record(5);
  const Status cut = history.check(0, 10);
  EXPECT_EQ(cut.code(), StatusCode::kTruncated);
  EXPECT_NE(cut.message().find("truncate_suffix(5)"), std::string::npos) << cut.message();
  EXPECT_TRUE(history.check(2, 10).ok());  // written after both truncations: untouched by them
}

TEST(TruncationHistory, MoreTruncationsThanItRemembersAreAnUnknownOutcome) {
  TruncationHistory history;
  for (std::uint64_t i = 0; i <= TruncationHistory::kRememberedTruncations; ++i)
    history.record(1000 + i);
  // Every remembered cut is above 10, but the first one is forgotten: it may have been anything.
  const Status unknown = history.check(0, 10);
  EXPECT_EQ(unknown.code(), StatusCode::kTruncated);
  EXPECT_NE(unknown.message().find("unknown"), std::string::npos) << unknown.message();
  EXPECT_TRUE(history.check(1, 10).ok());  // exactly kRemembered since: all known, all above
}

// A sync log whose flusher is held (FlusherGate) after entry 1 became durable.
class TruncationWait : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(env_.create_dir("/log").ok());
    options_ = small_options(&env_, FlushMode::kSync);
    log_ = open_ok("/log", options_);
    ASSERT_TRUE(log_);
    gate_.attach(*log_);
    auto first = make_batch(1, 1, 1, kPayloadBytes);
    ASSERT_TRUE(log_->append(first.span()).ok());
    ASSERT_TRUE(gate_.wait_held());  // from here on nothing more becomes durable until release()
  }
  void TearDown() override { gate_.release(); }

  MemoryEnv env_;
  Options options_;
  std::unique_ptr<CommitLog> log_;
  FlusherGate gate_;
};

class TruncationWaitTest : public TruncationWait, public ::testing::WithParamInterface<bool> {
 protected:
  // A sync append of `count` entries at index 2 (or, with GetParam(), at index 0: the append group
  // assigns it) from another thread; returns once its entries are in the log, waiting.
  std::future<Result<IndexRange>> start_waiting_append(std::size_t count) {
    auto batch = std::make_shared<testing::Batch>(make_batch(2, count, 1, kPayloadBytes));
    if (GetParam()) {
      for (EntryToAppend& entry : batch->entries) entry.meta.index = 0;
    }
    auto pending =
        std::async(std::launch::async, [this, batch] { return log_->append(batch->span()); });
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (log_->last_index() < 1 + count && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(1ms);
    }
    EXPECT_EQ(log_->last_index(), 1 + count);
    EXPECT_EQ(pending.wait_for(0ms), std::future_status::timeout) << "the append did not wait";
    return pending;
  }
};

TEST_P(TruncationWaitTest,
       ASyncAppendWhoseEntriesAreTruncatedFailsEvenWhenTheirIndexesBecomeDurable) {
  auto pending = start_waiting_append(2);  // entries 2 and 3, term 1
  ASSERT_TRUE(log_->truncate_suffix(3).ok());
  // New entries (term 2) at indexes 3 and 4; once flushed, index 3 is durable, but not as ours.
  auto replacement = make_batch(3, 2, 2, kPayloadBytes);
  ASSERT_TRUE(log_->append_no_wait(replacement.span()).ok());
  gate_.release();
  ASSERT_EQ(pending.wait_for(10s), std::future_status::ready);
  const Result<IndexRange> appended = pending.get();
  ASSERT_FALSE(appended.ok()) << "acknowledged entries that were truncated";
  EXPECT_EQ(appended.status().code(), StatusCode::kTruncated) << appended.status().to_string();
  ASSERT_TRUE(log_->wait_flushed(4).ok());
  expect_entries(*log_, 2, 2, 1, kPayloadBytes);  // the part below the cut stays
  expect_entries(*log_, 3, 4, 2, kPayloadBytes);
}

TEST_P(TruncationWaitTest, ASyncAppendWhoseEntriesAreTruncatedIsWokenAtOnceWithoutAnotherFlush) {
  auto pending = start_waiting_append(3);  // entries 2 to 4
  ASSERT_TRUE(log_->truncate_suffix(2).ok());
  // The flusher is still held (up to 10 s) and nothing is appended: only the truncation can wake
  // the append within 5 s.
  const bool returned = pending.wait_for(5s) == std::future_status::ready;
  if (!returned) (void)log_->close();  // wakes it (kClosed), so that a failing test does not hang
  ASSERT_TRUE(returned) << "the truncated append still waits";
  EXPECT_EQ(pending.get().status().code(), StatusCode::kTruncated);
  EXPECT_EQ(log_->last_index(), 1U);
}

TEST_P(TruncationWaitTest, ATruncationAboveTheWaitingEntriesLeavesTheirAppendSucceeding) {
  auto pending = start_waiting_append(2);  // entries 2 and 3
  auto more = make_batch(4, 3, 1, kPayloadBytes);
  ASSERT_TRUE(log_->append_no_wait(more.span()).ok());
  ASSERT_TRUE(log_->truncate_suffix(5).ok());  // removes 5 and 6 only
  gate_.release();
  ASSERT_EQ(pending.wait_for(10s), std::future_status::ready);
  const Result<IndexRange> appended = pending.get();
  ASSERT_TRUE(appended.ok()) << appended.status().to_string();
  EXPECT_EQ(appended->first, 2U);
  EXPECT_EQ(appended->last, 3U);
  EXPECT_GE(log_->flushed_index(), 3U);
  EXPECT_EQ(log_->last_index(), 4U);
}

INSTANTIATE_TEST_SUITE_P(ExplicitAndGroupedIndexes, TruncationWaitTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& param_info) {
                           return param_info.param ? "grouped" : "explicit";
                         });

TEST_F(TruncationWait, FlushReturnsWhenATruncationRemovedTheIndexItWaitedFor) {
  auto unflushed = make_batch(2, 9, 1, kPayloadBytes);
  ASSERT_TRUE(log_->append_no_wait(unflushed.span()).ok());
  auto flushing = std::async(std::launch::async, [&] { return log_->flush(); });  // waits for 10
  std::this_thread::sleep_for(20ms);  // let it start waiting (it must also work if it has not)
  ASSERT_TRUE(log_->truncate_suffix(5).ok());  // index 10 is gone, and nothing appends again
  gate_.release();
  const bool returned = flushing.wait_for(10s) == std::future_status::ready;
  if (!returned) (void)log_->close();  // wakes it (kClosed), so that a failing test does not hang
  ASSERT_TRUE(returned) << "flush() waited for a removed index";
  EXPECT_TRUE(flushing.get().ok());
  EXPECT_EQ(log_->flushed_index(), 4U);
  EXPECT_EQ(log_->last_index(), 4U);
}

}  // namespace
}  // namespace raftlog::store

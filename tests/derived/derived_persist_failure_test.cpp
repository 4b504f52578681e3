// A persist of the derived indexes that fails part-way (a sync error, a full disk) makes them fail
// for good, as the store does on its first sync error: no later persist or trim retries the failed
// step without rewriting, and no cursor is written over records that may not be durable. After a
// power cut the indexes reopen at the previous cursor and replay the rest from the log.
#include <gtest/gtest.h>

#include <string>

#include "derived_test_support.h"

namespace raftlog::derived {
namespace {

using namespace raftlog::derived::testing;

constexpr int kTopics = 12;

// Entries in kTopics topics, a key each: a persist of them is kTopics file syncs and more.
FakeLog topics_log(int rounds) {
  FakeLog log;
  for (int i = 0; i < rounds * kTopics; ++i) {
    log.add(1, "topic-" + std::to_string(i % kTopics), {"key-" + std::to_string(i)},
            1'000'000 + static_cast<std::uint64_t>(i));
  }
  return log;
}

// Applies log's entries up to `last` and persists them whole: the cursor "before" the failure.
void persist_through(DerivedIndexes& indexes, const FakeLog& log, std::uint64_t last) {
  FakeLog prefix = log;
  prefix.truncate_from(last + 1);
  replay(indexes, prefix);
  bool finished = false;
  const store::Status persisted = indexes.persist(nullptr, &finished);
  ASSERT_TRUE(persisted.ok()) << persisted.to_string();
  ASSERT_TRUE(finished);
}

// After a power cut the indexes resume at `boundary` (the cursor before the failure, not one
// written over records the failure may have lost) and, replayed, equal a rebuild from scratch.
void expect_previous_cursor_after_power_cut(store::MemoryEnv& env, const FakeLog& log,
                                            std::uint64_t boundary) {
  env.crash();
  env.restart(store::CrashOptions{store::CrashMode::kLoseUnflushed, 5});
  OpenReport report;
  auto reopened = open_indexes(env, log, &report);
  ASSERT_NE(reopened, nullptr);
  EXPECT_EQ(report.mode, OpenMode::kResumed) << report.reason;
  EXPECT_EQ(reopened->boundary(), boundary)
      << "a cursor was written after the failed persist step";
  replay(*reopened, log);
  EXPECT_EQ(describe(*reopened, log), describe_from_scratch(log));
}

// The set-up both cases share: every topic's first record durable under a cursor at kBefore, the
// rest of the log applied (the next persist grows each topic's file by two records, and syncs it).
class DerivedPersistFailure : public ::testing::Test {
 protected:
  static constexpr std::uint64_t kBefore = kTopics + 1;

  void SetUp() override {
    OpenReport report;
    indexes_ = open_indexes(env_, log_, &report);
    ASSERT_NE(indexes_, nullptr);
    ASSERT_NO_FATAL_FAILURE(persist_through(*indexes_, log_, kBefore - 1));
    replay(*indexes_, log_);
  }

  // After the failed step: every later one refuses (a trim, the dispatcher's in the same round; a
  // continue; a whole persist; a begin), and after a power cut the cursor is the one before it.
  void expect_failed_for_good() {
    bool finished = false;
    EXPECT_FALSE(indexes_->trim_below(2).ok());
    EXPECT_FALSE(indexes_->continue_persist(nullptr, &finished).ok());
    EXPECT_FALSE(finished);
    EXPECT_FALSE(indexes_->persist().ok());
    EXPECT_FALSE(indexes_->begin_persist().ok());
    indexes_.reset();
    expect_previous_cursor_after_power_cut(env_, log_, kBefore);
  }

  const FakeLog log_ = topics_log(3);
  store::MemoryEnv env_;
  std::unique_ptr<DerivedIndexes> indexes_;
};

// Review of dispatch, H1: an fdatasync failed inside a sliced persist; the dispatcher's trim of the
// same round then resumed that persist, ran the failed sync again (which on Linux reports success
// with the dirty pages already dropped) and wrote the pending cursor over the lost records.
TEST_F(DerivedPersistFailure, AFailedSyncStepIsNeverRetriedNorCoveredByACursor) {
  ASSERT_TRUE(indexes_->begin_persist().ok());
  bool finished = false;
  int steps = 0;
  ASSERT_TRUE(indexes_->continue_persist([&] { return ++steps <= 3; }, &finished).ok());
  ASSERT_FALSE(finished);
  env_.fail_next_syncs(1);
  EXPECT_FALSE(indexes_->continue_persist(nullptr, &finished).ok());
  EXPECT_FALSE(finished);
  expect_failed_for_good();
}

// The variant without a sync error: a full disk fails a persist's writes part-way (the files of
// the first topics written to the page cache, their syncs never run). A later persist must not
// write a cursor covering them. (The writes were the begin's until 2026-12-07; the begin now only
// captures the records, and the writes are the slices' first steps.)
TEST_F(DerivedPersistFailure, WritesThatFailedPartWayAreNeverCoveredByACursor) {
  // Room for the first few topics' growth only: the writes fail on a later topic's file.
  env_.set_capacity_bytes(env_.used_bytes() + 4 * 2 * kRecordBytes);
  ASSERT_TRUE(indexes_->begin_persist().ok()) << "a begin writes nothing";
  bool finished = false;
  EXPECT_FALSE(indexes_->continue_persist(nullptr, &finished).ok());
  EXPECT_FALSE(finished);
  env_.set_capacity_bytes(0);  // space again: still nothing may vouch for the unsynced writes
  expect_failed_for_good();
}

}  // namespace
}  // namespace raftlog::derived

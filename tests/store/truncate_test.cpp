// truncate_suffix / truncate_prefix, including crashes at every step of a truncation.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "store/segment_format.h"
#include "test_util.h"

namespace raftlog::store {
namespace {

using testing::crash_test_options;
using testing::fill_log;
using testing::make_batch;
using testing::open_ok;
using testing::payload_for;
using testing::small_options;

std::size_t count_segments(MemoryEnv& env) {
  auto names = env.list_dir("/log");
  if (!names.ok()) return 0;
  return static_cast<std::size_t>(std::count_if(
      names->begin(), names->end(),
      [](const std::string& n) { return segment_format::parse_segment_file_name(n).has_value(); }));
}

class TruncateTest : public testing::MemoryLogDirTest {};

TEST_F(TruncateTest, SuffixAcrossSegmentsThenAppendNewTerm) {
  auto log = open_ok("/log", small_options(&env_));
  ASSERT_TRUE(log);
  fill_log(*log);
  const std::size_t segments_before = count_segments(env_);
  ASSERT_TRUE(log->truncate_suffix(50).ok());
  EXPECT_EQ(log->last_index(), 49U);
  EXPECT_LE(log->flushed_index(), 49U);
  EXPECT_LT(count_segments(env_), segments_before);
  EXPECT_EQ(log->read(50, 1, 1).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(*log->term_at(49), 1U);
  auto skip = make_batch(51, 1, 2, 10);
  EXPECT_EQ(log->append(skip.span()).status().code(), StatusCode::kInvalidArgument);
  for (std::uint64_t i = 50; i <= 150; i += 10) {
    auto batch = make_batch(i, 10, 2, 700);
    ASSERT_TRUE(log->append(batch.span()).ok());
  }
  testing::expect_entries(*log, 1, 49, 1, 1000);
  testing::expect_entries(*log, 50, 159, 2, 700);
  ASSERT_TRUE(log->close().ok());
  auto reopened = open_ok("/log", small_options(&env_));
  ASSERT_TRUE(reopened);
  EXPECT_EQ(reopened->last_index(), 159U);
  testing::expect_entries(*reopened, 1, 49, 1, 1000);
  testing::expect_entries(*reopened, 50, 159, 2, 700);
  auto report = verify_log_directory("/log", &env_);
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok) << report->problem;
  EXPECT_EQ(report->last_index, 159U);
}

TEST_F(TruncateTest, SuffixBoundsAndCommitGuard) {
  auto log = open_ok("/log", small_options(&env_));
  ASSERT_TRUE(log);
  fill_log(*log, 100);
  ASSERT_TRUE(log->set_commit_index(60).ok());
  EXPECT_EQ(log->set_commit_index(50).code(), StatusCode::kInvalidArgument);  // never decreases
  EXPECT_EQ(log->set_commit_index(101).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(log->truncate_suffix(60).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(log->truncate_suffix(102).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(log->truncate_suffix(0).code(), StatusCode::kOutOfRange);
  EXPECT_TRUE(log->truncate_suffix(101).ok());  // no-op
  EXPECT_EQ(log->last_index(), 100U);
  EXPECT_TRUE(log->truncate_suffix(61).ok());
  EXPECT_EQ(log->last_index(), 60U);
  EXPECT_TRUE(log->truncate_suffix(30, /*force=*/true).ok());
  EXPECT_EQ(log->last_index(), 29U);
  EXPECT_EQ(log->commit_index(), 29U);
}

TEST_F(TruncateTest, SuffixToEmptyKeepsNextIndexAndPrevTerm) {
  auto log = open_ok("/log", small_options(&env_));
  ASSERT_TRUE(log);
  auto batch = make_batch(10, 5, 3, 10);
  ASSERT_TRUE(log->append(batch.span()).ok());
  ASSERT_TRUE(log->truncate_suffix(10).ok());
  EXPECT_EQ(log->first_index(), 10U);
  EXPECT_EQ(log->last_index(), 9U);
  auto wrong = make_batch(11, 1, 3, 10);
  EXPECT_FALSE(log->append(wrong.span()).ok());
  auto again = make_batch(10, 2, 4, 10);
  ASSERT_TRUE(log->append(again.span()).ok());
  EXPECT_EQ(*log->term_at(11), 4U);
  ASSERT_TRUE(log->close().ok());
  auto reopened = open_ok("/log", small_options(&env_));
  ASSERT_TRUE(reopened);
  EXPECT_EQ(reopened->first_index(), 10U);
  EXPECT_EQ(reopened->last_index(), 11U);
}

TEST_F(TruncateTest, ACorruptIndexRecordMetAfterTheIntentFailsTheLogAndTheNextOpenFinishesTheCut) {
  // Async, and no flush but the explicit one: entries 4 to 10 stay unflushed, so the intent's
  // checkpoint (for flushed index 3) does not read entry 5's index record; truncate_suffix(6) reads
  // it only after the intent is durable.
  Options options = small_options(&env_, FlushMode::kAsync);
  options.flush_interval_ms = 60000;
  options.checkpoint_interval_ms = 60000;
  auto log = open_ok("/log", options);
  ASSERT_TRUE(log);
  auto flushed = make_batch(1, 3, 1, 100);
  ASSERT_TRUE(log->append(flushed.span()).ok());
  ASSERT_TRUE(log->flush().ok());
  auto unflushed = make_batch(4, 7, 1, 100);
  ASSERT_TRUE(log->append(unflushed.span()).ok());
  ASSERT_EQ(log->flushed_index(), 3U);
  const std::string index_path = "/log/" + segment_format::index_file_name(1);
  ASSERT_TRUE(env_.corrupt_byte(index_path, segment_format::kIndexHeaderBytes +
                                                4 * segment_format::kIndexRecordBytes + 3)
                  .ok());
  const Status truncated = log->truncate_suffix(6);
  EXPECT_EQ(truncated.code(), StatusCode::kCorruption) << truncated.to_string();
  // The next open completes the cut at 6, so an append now (at 11) would be lost: refused instead.
  auto later = make_batch(11, 1, 1, 100);
  EXPECT_FALSE(log->append(later.span()).ok());
  log.reset();
  auto reopened = open_ok("/log", options);
  ASSERT_TRUE(reopened);
  EXPECT_TRUE(reopened->recovery_report().truncation_intent_completed)
      << reopened->recovery_report().to_string();
  EXPECT_EQ(reopened->last_index(), 5U);
  testing::expect_entries(*reopened, 1, 5, 1, 100);
}

TEST_F(TruncateTest, PrefixDeletesWholeSegmentsAndKeepsPrevTerm) {
  auto log = open_ok("/log", small_options(&env_));
  ASSERT_TRUE(log);
  for (std::uint64_t i = 1; i <= 200; i += 10) {
    auto batch = make_batch(i, 10, i / 10 + 1, 1000);  // the term grows every 10 entries
    ASSERT_TRUE(log->append(batch.span()).ok());
  }
  const std::size_t segments_before = count_segments(env_);
  ASSERT_TRUE(log->truncate_prefix(130).ok());
  const std::uint64_t first = log->first_index();
  EXPECT_GT(first, 1U);
  EXPECT_LE(first, 130U);
  EXPECT_LT(count_segments(env_), segments_before);
  // term_at(first - 1) is still known: the first segment's header records it.
  EXPECT_EQ(*log->term_at(first - 1), (first - 2) / 10 + 1);
  EXPECT_EQ(log->term_at(first - 2).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(log->read(first - 1, 1, 1).status().code(), StatusCode::kOutOfRange);
  // The active segment is never deleted, even when everything is below the point.
  ASSERT_TRUE(log->truncate_prefix(1000).ok());
  EXPECT_GE(count_segments(env_), 1U);
  EXPECT_EQ(log->last_index(), 200U);
  const std::uint64_t first_after = log->first_index();
  ASSERT_TRUE(log->close().ok());
  auto reopened = open_ok("/log", small_options(&env_));
  ASSERT_TRUE(reopened);
  EXPECT_EQ(reopened->first_index(), first_after);
  EXPECT_EQ(*reopened->term_at(first_after - 1), (first_after - 2) / 10 + 1);
  EXPECT_EQ(reopened->last_index(), 200U);
}

// A caller spreads a long prefix deletion over calls: each stops where `more` says, oldest first,
// and leaves a valid shorter log (the same after a reopen).
TEST_F(TruncateTest, PrefixStopsWhereTheCallerSaysAndAnotherCallGoesOn) {
  auto log = open_ok("/log", small_options(&env_));
  ASSERT_TRUE(log);
  for (std::uint64_t i = 1; i <= 200; i += 10) {
    auto batch = make_batch(i, 10, 1, 1000);
    ASSERT_TRUE(log->append(batch.span()).ok());
  }
  const std::vector<CommitLog::SegmentInfo> segments = log->segments();
  ASSERT_GE(segments.size(), 4U);
  const std::uint64_t before = segments[3].base_index;  // three segments to delete
  std::vector<std::size_t> asked;
  ASSERT_TRUE(log->truncate_prefix(before,
                                   [&](std::size_t deleted) {
                                     asked.push_back(deleted);
                                     return deleted < 2;
                                   })
                  .ok());
  EXPECT_EQ(asked, (std::vector<std::size_t>{1, 2}));
  EXPECT_EQ(log->first_index(), segments[2].base_index);  // the two oldest went
  EXPECT_EQ(count_segments(env_), segments.size() - 2);
  ASSERT_TRUE(log->close().ok());
  log = open_ok("/log", small_options(&env_));
  ASSERT_TRUE(log);
  EXPECT_EQ(log->first_index(), segments[2].base_index);
  ASSERT_TRUE(log->truncate_prefix(before, [](std::size_t) { return true; }).ok());
  EXPECT_EQ(log->first_index(), before);
  testing::expect_entries(*log, before, 200, 1, 1000);
}

// Review offloop L6: a caller that must not pay a truncation's checkpoint itself (the replica's
// loop) asks the flusher for it: the flusher writes one at its next wake-up though the periodic
// one is an hour away, and prefix_checkpointed() then says the truncation needs none of its own.
TEST_F(TruncateTest, TheFlusherWritesAnAskedCheckpointWhateverItsInterval) {
  Options options = small_options(&env_, FlushMode::kAsync);
  options.checkpoint_interval_ms = 3600 * 1000;
  auto log = open_ok("/log", options);
  ASSERT_TRUE(log);
  fill_log(*log);
  ASSERT_TRUE(log->set_commit_index(200).ok());
  ASSERT_TRUE(log->flush().ok());
  EXPECT_FALSE(log->prefix_checkpointed(150)) << "only the open's checkpoint so far";
  const std::uint64_t checkpoints = log->stats().checkpoints_written;
  log->request_checkpoint();
  for (int wait = 0; wait < 5000 && !log->prefix_checkpointed(150); ++wait) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(log->prefix_checkpointed(150));
  EXPECT_GT(log->stats().checkpoints_written, checkpoints);
  const std::uint64_t asked = log->stats().checkpoints_written;
  ASSERT_TRUE(log->truncate_prefix(150).ok());
  EXPECT_GT(log->first_index(), 1U);
  EXPECT_EQ(log->stats().checkpoints_written, asked) << "the truncation checkpointed again";
}

// Crash at every durable step of truncate_suffix: recovery yields exactly "before" or "after".
TEST(TruncateCrash, SuffixRecoversToBeforeOrAfter) {
  int saw_before = 0;
  int saw_after = 0;
  for (std::uint64_t step = 0; step < 40; ++step) {
    MemoryEnv env;
    testing::Cut cut;
    ASSERT_NO_FATAL_FAILURE(testing::cut_by_a_crash(
        env, step, [](CommitLog& log) { return log.truncate_suffix(120); },
        {static_cast<CrashMode>(step % 5), step + 1}, &cut));
    if (!cut.crashed) {
      ASSERT_TRUE(cut.status.ok()) << cut.status.to_string();
      if (step > 3) break;  // the truncation completed before the armed crash: all steps covered
    }
    auto reopened = open_ok("/log", crash_test_options(&env));
    ASSERT_TRUE(reopened) << "step " << step;
    const std::uint64_t last = reopened->last_index();
    ASSERT_TRUE(last == 200 || last == 119) << "step " << step << " last " << last;
    (last == 200 ? saw_before : saw_after)++;
    testing::expect_entries(*reopened, 1, last, 1, 1000);
    auto report = verify_log_directory("/log", &env);
    ASSERT_TRUE(report.ok());
    EXPECT_TRUE(report->ok) << report->problem;
    EXPECT_EQ(report->last_index, last);
    // And the log keeps working: the next append continues it.
    auto next = make_batch(last + 1, 3, 2, 50);
    ASSERT_TRUE(reopened->append(next.span()).ok());
  }
  EXPECT_GT(saw_before, 0);
  EXPECT_GT(saw_after, 0);
}

TEST(TruncateCrash, PrefixLeavesAValidSuffix) {
  for (std::uint64_t step = 0; step < 20; ++step) {
    MemoryEnv env;
    testing::Cut cut;
    ASSERT_NO_FATAL_FAILURE(testing::cut_by_a_crash(
        env, step, [](CommitLog& log) { return log.truncate_prefix(190); },
        {CrashMode::kLoseUnflushed, step}, &cut));
    auto reopened = open_ok("/log", crash_test_options(&env));
    ASSERT_TRUE(reopened) << "step " << step;
    EXPECT_EQ(reopened->last_index(), 200U);
    testing::expect_entries(*reopened, reopened->first_index(), 200, 1, 1000);
    if (!cut.crashed && step > 3) break;
  }
}

}  // namespace
}  // namespace raftlog::store

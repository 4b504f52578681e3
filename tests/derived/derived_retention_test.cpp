// Retention as the dispatcher drives it (DerivedIndexes::retain_from): the whole record segments
// below the log's first index leave memory at the next persist's begin and disk once that
// persist's cursor is durable, with the persist's syncs run in slices like any other. A persist
// begun before the trim unlinks nothing; a power cut at any sync keeps the topics' offsets.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "derived_test_support.h"

namespace raftlog::derived {
namespace {

using namespace raftlog::derived::testing;

constexpr const char* kFirstQueueSegment = "/derived/topics/t/00000000000000000000.rec";
constexpr const char* kFirstKeySegment = "/derived/keys/00000000000000000000.rec";

// A segment and a bit of topic "t", key and time records: the first segment of each can go.
FakeLog long_log() {
  FakeLog log;
  const std::uint64_t count = kRecordsPerSegment + 200;
  for (std::uint64_t i = 0; i < count; ++i) {
    log.add(1, "t", {"k" + std::to_string(i % 7)}, 1'000'000 + i);
  }
  return log;
}

// Runs the pending persist's syncs one slice (one sync) at a time until its cursor is written.
void finish_in_slices(DerivedIndexes& indexes) {
  bool finished = false;
  for (int slices = 0; !finished && slices < 1000; ++slices) {
    bool ran = false;
    const store::Status s = indexes.continue_persist(
        [&] { return !std::exchange(ran, true); }, &finished);
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
  ASSERT_TRUE(finished);
}

TEST(DerivedRetention, SegmentsGoWithTheFirstPersistBegunAfterTheTrimAndNotBefore) {
  FakeLog log = long_log();
  const FakeLog full = log;
  store::MemoryEnv env;
  OpenReport report;
  auto indexes = open_indexes(env, log, &report);
  ASSERT_NE(indexes, nullptr);
  replay(*indexes, log, 4096);
  ASSERT_TRUE(indexes->begin_persist().ok());
  const std::uint64_t new_first = kRecordsPerSegment + 100;
  log.trim_to(new_first);
  EXPECT_TRUE(indexes->retain_from(new_first)) << "a segment of each log is wholly below";
  // The persist begun before the trim names the first segments: they stay (memory and disk).
  ASSERT_NO_FATAL_FAILURE(finish_in_slices(*indexes));
  EXPECT_TRUE(env.exists(kFirstQueueSegment));
  EXPECT_TRUE(env.exists(kFirstKeySegment));
  EXPECT_EQ(indexes->list_topics(log.last_index(), log.first).at(0).first_offset, new_first - 1)
      << "queries answer from the log's first index whatever memory still holds";
  // The next persist forgets them at its begin; their files go only once its cursor is written.
  ASSERT_TRUE(indexes->begin_persist().ok());
  EXPECT_TRUE(env.exists(kFirstQueueSegment));
  ASSERT_NO_FATAL_FAILURE(finish_in_slices(*indexes));
  EXPECT_FALSE(env.exists(kFirstQueueSegment));
  EXPECT_FALSE(env.exists(kFirstKeySegment));
  EXPECT_FALSE(indexes->retain_from(new_first)) << "nothing left to drop";
  // Restarted: resumed at the new first records, the offsets and answers unchanged.
  indexes.reset();
  indexes = open_indexes(env, log, &report);
  ASSERT_NE(indexes, nullptr);
  EXPECT_EQ(report.mode, OpenMode::kResumed) << report.reason;
  const TopicInfo topic = indexes->list_topics(log.last_index(), log.first).at(0);
  EXPECT_EQ(topic.first_offset, new_first - 1);
  EXPECT_EQ(topic.end_offset, full.last_index());
  EXPECT_EQ(indexes->read_topic("t", new_first - 1, 1, log.last_index(), log.first).records.at(0).index,
            new_first);
  EXPECT_EQ(indexes->lookup_key("k3", 1, log.last_index(), log.first).size(), 1U);
}

// A power cut at each sync of the trim's persist (sliced, with entries applied between its
// slices): the reopened indexes are never rebuilt (no cursor names a removed file) and keep the
// topic's offsets; caught up, they equal an index rebuilt from scratch from the trimmed log.
TEST(DerivedRetention, APowerCutAtAnySyncOfTheTrimsPersistKeepsTheOffsets) {
  const FakeLog full = long_log();
  const std::uint64_t new_first = kRecordsPerSegment + 100;
  FakeLog trimmed = full;
  trimmed.trim_to(new_first);
  const std::string expected = describe_from_scratch(trimmed);
  FakeLog persisted = full;  // persisted before the trim
  persisted.truncate_from(full.last_index() - 20);
  FakeLog written = full;  // written by the trim's persist's begin; the rest between its slices
  written.truncate_from(full.last_index() - 10);
  const store::CrashMode modes[] = {store::CrashMode::kLoseUnflushed, store::CrashMode::kTornWrite,
                                    store::CrashMode::kKeepAll};
  bool cut_after_the_cursor = false;
  for (std::uint64_t syncs = 0; syncs < 40 && !cut_after_the_cursor; ++syncs) {
    SCOPED_TRACE("power cut after " + std::to_string(syncs) + " syncs");
    store::MemoryEnv env;
    OpenReport report;
    auto indexes = open_indexes(env, full, &report);
    ASSERT_NE(indexes, nullptr);
    replay(*indexes, persisted, 4096);
    ASSERT_TRUE(indexes->persist().ok());
    replay(*indexes, written);
    env.crash_after_syncs(syncs);
    ASSERT_TRUE(indexes->retain_from(new_first));
    if (indexes->begin_persist().ok()) {
      replay(*indexes, full, 2);  // applied between the slices
      bool finished = false;
      while (!finished && !env.crashed()) {
        bool ran = false;
        if (!indexes->continue_persist([&] { return !std::exchange(ran, true); }, &finished).ok())
          break;
      }
      cut_after_the_cursor = finished && !env.crashed();
    }
    indexes.reset();
    if (!env.crashed()) env.crash();
    env.restart(store::CrashOptions{modes[syncs % 3], syncs + 1});
    indexes = open_indexes(env, trimmed, &report);
    ASSERT_NE(indexes, nullptr);
    EXPECT_NE(report.mode, OpenMode::kRebuilt) << report.reason;
    replay(*indexes, trimmed, 4096);
    EXPECT_EQ(describe(*indexes, trimmed), expected) << to_string(report.mode);
    EXPECT_EQ(indexes->list_topics(trimmed.last_index(), trimmed.first).at(0).first_offset,
              new_first - 1);
  }
  EXPECT_TRUE(cut_after_the_cursor) << "no run reached the trim's cursor: raise the sync bound";
}

// Review of dispatch2, L3: a queue renumbered past its end between a persist's begin and its
// cursor (the first entry after a skip carries a higher offset) forgot which segments that begin
// had released, so their files stayed until the next open swept them.
TEST(DerivedRetention, ARenumberingBetweenBeginAndCursorStillUnlinksTheReleasedSegments) {
  FakeLog log;
  for (std::uint64_t i = 0; i < 40; ++i) log.add(1, "t", {}, 1'000'000 + i);
  store::MemoryEnv env;
  OpenReport report;
  auto indexes = open_indexes(env, log, &report, LogIdentity{"c", 1}, /*records_per_segment=*/16);
  ASSERT_NE(indexes, nullptr);
  FakeLog prefix = log;
  prefix.truncate_from(36);  // offsets 0..34: segments 0 and 16 full, 32 begun
  replay(*indexes, prefix);
  ASSERT_TRUE(indexes->persist().ok());
  ASSERT_TRUE(indexes->retain_from(20)) << "segment 0 points only below 20";
  ASSERT_TRUE(indexes->begin_persist().ok());  // forgets segment 0
  // Retention took 36 and 37 before they were indexed: 38 (offset 37) renumbers the queue.
  log.trim_to(38);
  indexes->skip_to(38);
  replay(*indexes, log);
  ASSERT_GT(indexes->renumbered_entries(), 0U);
  ASSERT_NO_FATAL_FAILURE(finish_in_slices(*indexes));
  EXPECT_FALSE(env.exists("/derived/topics/t/00000000000000000000.rec"))
      << "the segment the begin released was left behind";
}

}  // namespace
}  // namespace raftlog::derived

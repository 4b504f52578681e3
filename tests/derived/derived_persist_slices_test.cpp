// A persist's begin writes no file: it captures the records applied so far in memory, and its
// writes run in the slices, one segment file a step, with entries applied between them, like its
// syncs (DerivedIndexes::begin_persist). Until 2026-12-07 the begin wrote every record log at once
// (with thousands of new topics a directory and a file created per topic: seconds on a loaded disk,
// with dispatch waiting and a stop's 1 s bound passed).
#include <gtest/gtest.h>

#include <string>

#include "derived_test_support.h"

namespace raftlog::derived {
namespace {

using namespace raftlog::derived::testing;

// Topic directories on disk (a record log's first write creates its directory and file).
std::size_t topic_dirs(store::MemoryEnv& env) {
  if (!env.exists("/derived/topics")) return 0;
  auto names = env.list_dir("/derived/topics");
  EXPECT_TRUE(names.ok());
  return names.ok() ? names->size() : 0;
}

TEST(DerivedPersistSlices, ABeginWritesNoFileAndEachSliceWritesBoundedWork) {
  constexpr int kTopics = 40;
  FakeLog log;
  for (int i = 0; i < kTopics; ++i) {
    log.add(1, "topic-" + std::to_string(i), {"key-" + std::to_string(i)},
            1'000'000 + static_cast<std::uint64_t>(i));
  }
  const std::uint64_t begun_at = log.last_index() + 1;
  // Entries committed while the persist runs: 10 more new topics, and the old ones again.
  for (int i = 0; i < kTopics + 10; ++i) {
    log.add(1, "topic-" + std::to_string(i), {}, 2'000'000 + static_cast<std::uint64_t>(i));
  }
  store::MemoryEnv env;
  OpenReport report;
  auto indexes = open_indexes(env, log, &report);
  ASSERT_NE(indexes, nullptr);
  FakeLog first_part = log;
  first_part.truncate_from(begun_at);
  replay(*indexes, first_part);

  ASSERT_TRUE(indexes->begin_persist().ok());
  EXPECT_EQ(topic_dirs(env), 0U) << "the begin wrote record logs (dispatch waited for them)";
  bool finished = false;
  int allowed = 1;
  auto slice = [&] { return allowed-- > 0; };
  // The first step of a data directory's first persist with topics creates topics/ (and syncs
  // derived/), counted like any sync (review of dispatch3, L4: it ran before the first keep_going).
  const std::uint64_t syncs_before = indexes->persist_syncs();
  ASSERT_TRUE(indexes->continue_persist([] { return false; }, &finished).ok());
  EXPECT_FALSE(env.exists("/derived/topics")) << "created with no step allowed";
  ASSERT_TRUE(indexes->continue_persist(slice, &finished).ok());
  EXPECT_TRUE(env.exists("/derived/topics"));
  EXPECT_EQ(topic_dirs(env), 0U) << "the directory's step is one of its own";
  EXPECT_EQ(indexes->persist_syncs(), syncs_before + 1) << "its sync is counted";
  allowed = 1;
  ASSERT_TRUE(indexes->continue_persist(slice, &finished).ok());
  EXPECT_FALSE(finished);
  EXPECT_EQ(topic_dirs(env), 1U) << "one step is one record log's write";

  // Dispatch between the slices: what it applies is the next persist's, never written by this one.
  std::size_t applied = 0;
  std::size_t slices = 0;
  while (!finished) {
    if (indexes->boundary() <= log.last_index()) {
      ASSERT_TRUE(indexes->apply({log.entries[indexes->boundary() - log.first]}));
      ++applied;
    }
    const std::size_t dirs_before = topic_dirs(env);
    allowed = 3;
    ASSERT_TRUE(indexes->continue_persist(slice, &finished).ok());
    EXPECT_LE(topic_dirs(env), dirs_before + 3) << "a slice of 3 steps wrote more record logs";
    ASSERT_LT(++slices, 200U) << "the persist does not end";
  }
  EXPECT_GT(applied, 10U) << "dispatch went on between the slices";
  EXPECT_EQ(topic_dirs(env), static_cast<std::size_t>(kTopics))
      << "the topics applied after the begin are the next persist's";

  // A power cut now: the cursor of the begin, and what it vouches for, is durable.
  env.crash();
  env.restart(store::CrashOptions{store::CrashMode::kLoseUnflushed, 7});
  auto reopened = open_indexes(env, log, &report);
  ASSERT_NE(reopened, nullptr);
  EXPECT_EQ(report.mode, OpenMode::kResumed) << report.reason;
  EXPECT_EQ(reopened->boundary(), begun_at);
  replay(*reopened, log);
  EXPECT_EQ(describe(*reopened, log), describe_from_scratch(log));
}

// Review of dispatch3, L1: a step was a whole record log, and the keys and time logs' captures
// hold everything applied since the last persist began (150,000 key records, 3 segment files, in
// one step after a 3 s persist). A step is one segment file now.
TEST(DerivedPersistSlices, AStepWritesOneSegmentFileOfARecordLog) {
  FakeLog log;
  for (int i = 0; i < 40; ++i) log.add(1, "t", {}, 1'000'000 + static_cast<std::uint64_t>(i));
  store::MemoryEnv env;
  OpenReport report;
  auto indexes = open_indexes(env, log, &report, LogIdentity{"c", 1}, /*records_per_segment=*/8);
  ASSERT_NE(indexes, nullptr);
  replay(*indexes, log);
  ASSERT_TRUE(indexes->begin_persist().ok());
  auto segment_files = [&] {
    auto names = env.list_dir("/derived/topics/t");
    return names.ok() ? names->size() : 0;
  };
  bool finished = false;
  int first_step = 1;  // the data directory's first persist creates topics/ in a step of its own
  ASSERT_TRUE(indexes->continue_persist([&] { return first_step-- > 0; }, &finished).ok());
  EXPECT_EQ(segment_files(), 0U);
  for (std::size_t steps = 1; steps <= 5; ++steps) {
    int allowed = 1;
    ASSERT_TRUE(indexes->continue_persist([&] { return allowed-- > 0; }, &finished).ok());
    EXPECT_EQ(segment_files(), steps) << "one step wrote more than one of the queue's 5 segments";
  }
  ASSERT_TRUE(indexes->continue_persist(nullptr, &finished).ok());
  EXPECT_TRUE(finished);
  indexes.reset();
  auto reopened = open_indexes(env, log, &report, LogIdentity{"c", 1}, 8);
  ASSERT_NE(reopened, nullptr);
  EXPECT_EQ(report.mode, OpenMode::kResumed) << report.reason;
  EXPECT_EQ(describe(*reopened, log), describe_from_scratch(log));
}

}  // namespace
}  // namespace raftlog::derived

// DerivedIndexes: queries, persistence, and recovery against the log at open (torn tail, flipped
// byte, deleted file, cursor ahead/behind/foreign), each compared with an index rebuilt from
// scratch from the same log.
#include "derived/derived_indexes.h"

#include <gtest/gtest.h>

#include <map>

#include "derived_test_support.h"

namespace raftlog::derived {
namespace {

using namespace raftlog::derived::testing;

TEST(DerivedIndexes, TopicsKeysAndTimeAnswerFromTheLog) {
  FakeLog log;
  log.add(1, "orders", {"order-1"}, 100);
  log.add_plain(1);
  log.add(1, "payments", {"order-1", "pay-7"}, 100);
  log.add(2, "orders", {}, 105);
  log.add(2, "", {"order-2"}, 103);  // a slower clock: indexed as 105
  store::MemoryEnv env;
  OpenReport report;
  auto indexes = open_indexes(env, log, &report);
  ASSERT_NE(indexes, nullptr);
  EXPECT_EQ(report.mode, OpenMode::kFresh);
  replay(*indexes, log, 2);
  EXPECT_EQ(indexes->boundary(), 6U);

  const std::vector<TopicInfo> topics = indexes->list_topics(5, 1);
  ASSERT_EQ(topics.size(), 2U);
  EXPECT_EQ(topics[0].topic, "orders");
  EXPECT_EQ(topics[0].end_offset, 2U);
  EXPECT_EQ(topics[1].topic, "payments");
  EXPECT_EQ(topics[1].end_offset, 1U);
  const TopicRead orders = indexes->read_topic("orders", 0, 10, 5, 1);
  ASSERT_EQ(orders.records.size(), 2U);
  EXPECT_EQ(orders.records[0].index, 1U);
  EXPECT_EQ(orders.records[1].index, 4U);
  EXPECT_EQ(orders.records[1].offset, 1U);
  EXPECT_EQ(indexes->read_topic("orders", 1, 10, 5, 1).records.size(), 1U);
  EXPECT_EQ(indexes->read_topic("nope", 0, 10, 5, 1).status, TopicReadStatus::kUnknownTopic);

  EXPECT_EQ(indexes->lookup_key("order-1", 10, 5, 1), (std::vector<std::uint64_t>{1, 3}));
  EXPECT_EQ(indexes->lookup_key("order-2", 10, 5, 1), (std::vector<std::uint64_t>{5}));
  EXPECT_TRUE(indexes->lookup_key("missing", 10, 5, 1).empty());

  EXPECT_EQ(indexes->find_by_time(0, 5, 1), 1U);
  EXPECT_EQ(indexes->find_by_time(101, 5, 1), 4U);
  EXPECT_EQ(indexes->find_by_time(105, 5, 1), 4U);
  EXPECT_EQ(indexes->find_by_time(106, 5, 1), 0U);
  EXPECT_EQ(indexes->find_topic_offset_by_time("orders", 101, 5, 1), 1U);
  EXPECT_EQ(indexes->find_topic_offset_by_time("orders", 200, 5, 1), 2U);
  // Never an offset retention removed (entry 1, offset 0, is below the log's first index 2).
  EXPECT_EQ(indexes->find_topic_offset_by_time("orders", 0, 5, 2), 1U);

  // Nothing past the visible bound (the commit index), whatever the index holds.
  EXPECT_EQ(indexes->list_topics(3, 1)[0].end_offset, 1U);
  EXPECT_EQ(indexes->read_topic("orders", 0, 10, 3, 1).records.size(), 1U);
  EXPECT_EQ(indexes->lookup_key("order-1", 10, 2, 1), (std::vector<std::uint64_t>{1}));
  EXPECT_EQ(indexes->find_by_time(101, 3, 1), 0U);
}

TEST(DerivedIndexes, ApplyRefusesAGapOrARepeat) {
  FakeLog log = random_log(1, 10);
  store::MemoryEnv env;
  OpenReport report;
  auto indexes = open_indexes(env, log, &report);
  ASSERT_NE(indexes, nullptr);
  EXPECT_FALSE(indexes->apply({log.entries[1]}));
  EXPECT_TRUE(indexes->apply({log.entries[0]}));
  EXPECT_FALSE(indexes->apply({log.entries[0]}));
  EXPECT_FALSE(indexes->apply({log.entries[1], log.entries[3]}));
  EXPECT_EQ(indexes->boundary(), 2U);
}

TEST(DerivedIndexes, APersistedIndexResumesAndEqualsOneRebuiltFromScratch) {
  const FakeLog log = random_log(2, 300);
  store::MemoryEnv env;
  {
    OpenReport report;
    auto indexes = open_indexes(env, log, &report);
    replay(*indexes, log);
    { const store::Status persisted = indexes->persist(); ASSERT_TRUE(persisted.ok()) << persisted.to_string(); }
  }
  env.crash();
  env.restart(store::CrashOptions{store::CrashMode::kLoseUnflushed, 1});
  OpenReport report;
  auto indexes = open_indexes(env, log, &report);
  ASSERT_NE(indexes, nullptr);
  EXPECT_EQ(report.mode, OpenMode::kResumed) << report.reason;
  EXPECT_EQ(indexes->boundary(), log.last_index() + 1);
  EXPECT_EQ(describe(*indexes, log), describe_from_scratch(log));
}

TEST(DerivedIndexes, ACursorBehindTheLogIsReplayedForward) {
  const FakeLog log = random_log(3, 200);
  FakeLog prefix = log;
  prefix.truncate_from(120);
  store::MemoryEnv env;
  {
    OpenReport report;
    auto indexes = open_indexes(env, prefix, &report);
    replay(*indexes, prefix);
    { const store::Status persisted = indexes->persist(); ASSERT_TRUE(persisted.ok()) << persisted.to_string(); }
  }
  OpenReport report;
  auto indexes = open_indexes(env, log, &report);
  EXPECT_EQ(report.mode, OpenMode::kResumed) << report.reason;
  EXPECT_EQ(indexes->boundary(), 120U);
  replay(*indexes, log);
  EXPECT_EQ(describe(*indexes, log), describe_from_scratch(log));
}

TEST(DerivedIndexes, RecordsWrittenAfterTheCursorAreCut) {
  const FakeLog log = random_log(4, 200);
  FakeLog prefix = log;
  prefix.truncate_from(100);
  store::MemoryEnv env;
  {
    OpenReport report;
    auto indexes = open_indexes(env, log, &report);
    replay(*indexes, prefix);
    { const store::Status persisted = indexes->persist(); ASSERT_TRUE(persisted.ok()) << persisted.to_string(); }
    replay(*indexes, log);
    // The records reach the files, the cursor does not (a crash between the two steps).
    env.crash_after_syncs(3);
    EXPECT_FALSE(indexes->persist().ok());
  }
  env.restart(store::CrashOptions{store::CrashMode::kKeepAll, 1});
  OpenReport report;
  auto indexes = open_indexes(env, log, &report);
  EXPECT_EQ(report.mode, OpenMode::kResumed) << report.reason;
  EXPECT_EQ(indexes->boundary(), 100U);
  EXPECT_EQ(describe(*indexes, prefix), describe_from_scratch(prefix));
  replay(*indexes, log);
  EXPECT_EQ(describe(*indexes, log), describe_from_scratch(log));
}

// A node's stop bounds its last persist (Dispatcher::kStopPersistBoundMs; outside test drills5 M3:
// a stop with thousands of new topic queues took 15-40 s of fsyncs). A persist told to stop between
// two record logs writes no cursor; a power cut then loses what it wrote unsynced, and the next
// open resumes at the previous cursor and replays the rest into the same index.
TEST(DerivedIndexes, APersistToldToStopLeavesThePreviousCursorAndTheRestIsReplayed) {
  constexpr int kTopics = 40;
  FakeLog log;
  for (int i = 0; i < 3 * kTopics; ++i) {
    log.add(1, "topic-" + std::to_string(i % kTopics), {"key-" + std::to_string(i)},
            1'000'000 + static_cast<std::uint64_t>(i));
  }
  FakeLog prefix = log;
  prefix.truncate_from(kTopics + 1);  // every topic has its queue, one record each
  store::MemoryEnv env;
  {
    OpenReport report;
    auto indexes = open_indexes(env, log, &report);
    ASSERT_NE(indexes, nullptr);
    replay(*indexes, prefix);
    bool finished = false;
    const store::Status first = indexes->persist(nullptr, &finished);
    ASSERT_TRUE(first.ok()) << first.to_string();
    EXPECT_TRUE(finished);
    replay(*indexes, log);
    int asked = 0;
    const store::Status cut = indexes->persist([&] { return ++asked <= 10; }, &finished);
    ASSERT_TRUE(cut.ok()) << cut.to_string();
    EXPECT_FALSE(finished);
    EXPECT_EQ(asked, 11) << "the persist must stop at the first 'no', not sync every queue";
  }
  env.crash();
  env.restart(store::CrashOptions{store::CrashMode::kLoseUnflushed, 7});
  OpenReport report;
  auto indexes = open_indexes(env, log, &report);
  ASSERT_NE(indexes, nullptr);
  EXPECT_EQ(report.mode, OpenMode::kResumed) << report.reason;
  EXPECT_EQ(indexes->boundary(), static_cast<std::uint64_t>(kTopics + 1));
  replay(*indexes, log);
  EXPECT_EQ(describe(*indexes, log), describe_from_scratch(log));
  bool finished = false;
  const store::Status whole = indexes->persist([] { return true; }, &finished);
  ASSERT_TRUE(whole.ok()) << whole.to_string();
  EXPECT_TRUE(finished);
}

class DamagedIndex : public ::testing::Test {
 protected:
  void SetUp() override {
    log_ = random_log(5, 300);
    OpenReport report;
    auto indexes = open_indexes(env_, log_, &report);
    replay(*indexes, log_);
    { const store::Status persisted = indexes->persist(); ASSERT_TRUE(persisted.ok()) << persisted.to_string(); }
  }
  void expect_rebuilt() {
    OpenReport report;
    auto indexes = open_indexes(env_, log_, &report);
    ASSERT_NE(indexes, nullptr);
    EXPECT_EQ(report.mode, OpenMode::kRebuilt);
    EXPECT_FALSE(report.reason.empty());
    replay(*indexes, log_);
    EXPECT_EQ(describe(*indexes, log_), describe_from_scratch(log_));
    ASSERT_TRUE(indexes->persist().ok());  // for the next damage
  }
  std::string queue_file() const { return "/derived/topics/t1/00000000000000000000.rec"; }
  store::MemoryEnv env_;
  FakeLog log_;
};

TEST_F(DamagedIndex, AFlippedByteInARecordIsRebuilt) {
  for (std::uint64_t offset : {0ULL, 5ULL, 9ULL, 40ULL, 63ULL}) {
    ASSERT_TRUE(env_.corrupt_byte(queue_file(), offset, 3).ok());
    expect_rebuilt();
  }
}

TEST_F(DamagedIndex, ATruncatedIndexFileIsRebuilt) {
  auto file = env_.open(queue_file(), false);
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE((*file)->truncate(kRecordBytes + 7).ok());
  file->reset();
  expect_rebuilt();
}

TEST_F(DamagedIndex, ADeletedIndexFileIsRebuilt) {
  ASSERT_TRUE(env_.remove("/derived/keys/00000000000000000000.rec").ok());
  expect_rebuilt();
}

TEST_F(DamagedIndex, AFlippedCursorIsRebuilt) {
  ASSERT_TRUE(env_.corrupt_byte("/derived/CURSOR", 30, 1).ok());
  expect_rebuilt();
}

TEST_F(DamagedIndex, ADeletedCursorIsRebuilt) {
  ASSERT_TRUE(env_.remove("/derived/CURSOR").ok());
  OpenReport report;
  auto indexes = open_indexes(env_, log_, &report);
  EXPECT_EQ(report.mode, OpenMode::kFresh);
  replay(*indexes, log_);
  EXPECT_EQ(describe(*indexes, log_), describe_from_scratch(log_));
}

TEST_F(DamagedIndex, AnotherLogsIndexIsRebuilt) {
  OpenReport report;
  auto indexes = open_indexes(env_, log_, &report, LogIdentity{"c", 2});
  EXPECT_EQ(report.mode, OpenMode::kRebuilt);
  indexes.reset();
  indexes = open_indexes(env_, log_, &report, LogIdentity{"other-cluster", 2});
  EXPECT_EQ(report.mode, OpenMode::kRebuilt);
}

TEST(DerivedIndexes, ALogTruncatedUnderTheIndexRollsItBack) {
  const FakeLog original = random_log(6, 300);
  store::MemoryEnv env;
  {
    OpenReport report;
    auto indexes = open_indexes(env, original, &report);
    replay(*indexes, original);
    { const store::Status persisted = indexes->persist(); ASSERT_TRUE(persisted.ok()) << persisted.to_string(); }
  }
  // The log lost its tail from 241 (shorter: the cursor is ahead of it) ...
  FakeLog cut = original;
  cut.truncate_from(241);
  {
    OpenReport report;
    auto indexes = open_indexes(env, cut, &report);
    EXPECT_EQ(report.mode, OpenMode::kRolledBack);
    EXPECT_LE(indexes->boundary(), 241U);
    EXPECT_GT(report.cut_records, 0U);
    replay(*indexes, cut);
    EXPECT_EQ(describe(*indexes, cut), describe_from_scratch(cut));
    { const store::Status persisted = indexes->persist(); ASSERT_TRUE(persisted.ok()) << persisted.to_string(); }
  }
  // ... then got other entries (a later term) at those indexes, beyond the old end: the boundary
  // entry's term differs.
  FakeLog replaced = cut;
  for (int i = 0; i < 80; ++i) replaced.add(99, "t" + std::to_string(i % 2), {"k3"}, 5'000'000 + i);
  {
    OpenReport report;
    auto indexes = open_indexes(env, replaced, &report);
    EXPECT_EQ(report.mode, OpenMode::kResumed);
    replay(*indexes, replaced);
    { const store::Status persisted = indexes->persist(); ASSERT_TRUE(persisted.ok()) << persisted.to_string(); }
  }
  FakeLog diverged = cut;
  diverged.truncate_from(200);
  for (int i = 0; i < 150; ++i) diverged.add(100, "t3", {"k4"}, 6'000'000 + i);
  OpenReport report;
  auto indexes = open_indexes(env, diverged, &report);
  EXPECT_EQ(report.mode, OpenMode::kRolledBack) << report.reason;
  EXPECT_LE(indexes->boundary(), 200U);
  replay(*indexes, diverged);
  EXPECT_EQ(describe(*indexes, diverged), describe_from_scratch(diverged));
}

// The cut tail held the newest timestamps: after the roll back, the entries that replace it are
// clamped to what the kept entries hold, not to the cut tail's (as a rebuild from scratch does).
TEST(DerivedIndexes, ARollBackForgetsTheTimestampsOfTheCutTail) {
  FakeLog original = random_log(8, 200);
  for (int i = 0; i < 50; ++i) original.add(1, "t0", {"k1"}, 9'000'000 + i);
  store::MemoryEnv env;
  {
    OpenReport report;
    auto indexes = open_indexes(env, original, &report);
    replay(*indexes, original);
    const store::Status persisted = indexes->persist();
    ASSERT_TRUE(persisted.ok()) << persisted.to_string();
  }
  FakeLog diverged = original;
  diverged.truncate_from(201);
  for (int i = 0; i < 60; ++i) diverged.add(7, "t1", {"k2"}, 1'001'000 + i);
  OpenReport report;
  auto indexes = open_indexes(env, diverged, &report);
  ASSERT_NE(indexes, nullptr);
  EXPECT_EQ(report.mode, OpenMode::kRolledBack) << report.reason;
  replay(*indexes, diverged);
  EXPECT_EQ(describe(*indexes, diverged), describe_from_scratch(diverged));
}

// drills6 M4: after a trim, a time lookup skipped the retained entries stamped in the same
// millisecond as the last trimmed one (the time record pointing at that millisecond's first entry lay
// below the first retained index: the lookup moved on to the next millisecond, and retention dropped
// the record's segment anyway), while a node that installed a snapshot answered the first retained
// entry. Both now answer as an index built from the retained log alone.
TEST(DerivedIndexes, ATimeLookupAfterATrimStartsAtTheBoundarysFirstRetainedEntry) {
  FakeLog log;
  // Distinct stamps for every record of the first two record segments but the last; that last
  // record is the shared millisecond of ten entries, which the trim cuts in the middle.
  const std::uint64_t distinct = kRecordsPerSegment * 2 - 1;
  for (std::uint64_t i = 0; i < distinct; ++i) log.add(1, "t", {}, 1000 + i);
  const std::uint64_t shared_stamp = 1000 + distinct;
  const std::uint64_t shared_first = log.first + log.entries.size();
  for (int i = 0; i < 10; ++i) log.add(1, "t", {}, shared_stamp);
  for (int i = 1; i <= 5; ++i) log.add(1, "t", {}, shared_stamp + 10 * i);
  store::MemoryEnv env;
  OpenReport report;
  auto indexes = open_indexes(env, log, &report);
  replay(*indexes, log, 4096);
  { const store::Status persisted = indexes->persist(); ASSERT_TRUE(persisted.ok()) << persisted.to_string(); }
  const std::uint64_t new_first = shared_first + 4;
  log.trim_to(new_first);
  ASSERT_TRUE(indexes->trim_below(new_first).ok());

  store::MemoryEnv fresh_env;  // what a node that installed a snapshot at new_first builds
  auto rebuilt = open_indexes(fresh_env, log, &report);
  replay(*rebuilt, log, 4096);
  const std::uint64_t last = log.last_index();
  for (DerivedIndexes* answering : {indexes.get(), rebuilt.get()}) {
    EXPECT_EQ(answering->find_by_time(shared_stamp, last, new_first), new_first);
    EXPECT_EQ(answering->find_by_time(1000, last, new_first), new_first) << "any earlier time";
    EXPECT_EQ(answering->find_by_time(shared_stamp + 1, last, new_first), shared_first + 10);
    EXPECT_EQ(answering->find_by_time(shared_stamp + 50, last, new_first), shared_first + 14);
    EXPECT_EQ(answering->find_by_time(shared_stamp + 51, last, new_first), 0U);
    EXPECT_EQ(answering->find_by_time(shared_stamp, new_first - 1, new_first), 0U)
        << "nothing past the visible bound";
  }
}

TEST(DerivedIndexes, RetentionMovesTheFirstOffsetAndReadsBelowItAreTrimmed) {
  FakeLog log;
  const std::uint64_t count = kRecordsPerSegment * 2 + 10;
  for (std::uint64_t i = 0; i < count; ++i) log.add(1, "t", {}, 1000 + i);
  store::MemoryEnv env;
  OpenReport report;
  auto indexes = open_indexes(env, log, &report);
  replay(*indexes, log, 4096);
  { const store::Status persisted = indexes->persist(); ASSERT_TRUE(persisted.ok()) << persisted.to_string(); }
  const std::uint64_t new_first = kRecordsPerSegment + 100;
  log.trim_to(new_first);
  ASSERT_TRUE(indexes->trim_below(new_first).ok());
  EXPECT_FALSE(env.exists("/derived/topics/t/00000000000000000000.rec"));
  const TopicInfo topic = indexes->list_topics(log.last_index(), log.first).at(0);
  EXPECT_EQ(topic.first_offset, new_first - 1);  // offsets stay what they were
  EXPECT_EQ(topic.end_offset, count);
  EXPECT_EQ(indexes->read_topic("t", 5, 10, log.last_index(), log.first).status,
            TopicReadStatus::kTrimmed);
  EXPECT_EQ(indexes->read_topic("t", new_first - 1, 1, log.last_index(), log.first).records.at(0).index,
            new_first);
  { const store::Status persisted = indexes->persist(); ASSERT_TRUE(persisted.ok()) << persisted.to_string(); }
  indexes.reset();
  indexes = open_indexes(env, log, &report);
  EXPECT_EQ(report.mode, OpenMode::kResumed) << report.reason;
  EXPECT_EQ(indexes->list_topics(log.last_index(), log.first).at(0).first_offset, new_first - 1);
}

// Retention of records never persisted (nor synced): trim_below writes them and a cursor naming
// the new first offsets before it unlinks a file, so a restart resumes with the same offsets
// (it used to unlink first, and to index past the unsynced records in RecordLog::sync).
TEST(DerivedIndexes, RetentionOfUnpersistedRecordsKeepsTheOffsetsAcrossARestart) {
  FakeLog log;
  const std::uint64_t count = kRecordsPerSegment * 2 + 10;
  for (std::uint64_t i = 0; i < count; ++i) log.add(1, "t", {"k" + std::to_string(i % 7)}, 1000 + i);
  store::MemoryEnv env;
  OpenReport report;
  auto indexes = open_indexes(env, log, &report);
  replay(*indexes, log, 4096);
  const std::uint64_t new_first = kRecordsPerSegment + 100;
  log.trim_to(new_first);
  { const store::Status trimmed = indexes->trim_below(new_first); ASSERT_TRUE(trimmed.ok()) << trimmed.to_string(); }
  EXPECT_FALSE(env.exists("/derived/topics/t/00000000000000000000.rec"));
  EXPECT_EQ(indexes->list_topics(log.last_index(), log.first).at(0).first_offset, new_first - 1);
  // A crash right after the cursor, before the unlink, leaves a segment below the first record.
  ASSERT_TRUE(env.write_file("/derived/topics/t/00000000000000000000.rec", "left by a crash").ok());
  env.crash();
  env.restart(store::CrashOptions{store::CrashMode::kKeepAll, 3});
  indexes = open_indexes(env, log, &report);
  ASSERT_NE(indexes, nullptr);
  EXPECT_EQ(report.mode, OpenMode::kResumed) << report.reason;
  EXPECT_FALSE(env.exists("/derived/topics/t/00000000000000000000.rec"));
  const TopicInfo topic = indexes->list_topics(log.last_index(), log.first).at(0);
  EXPECT_EQ(topic.first_offset, new_first - 1);
  EXPECT_EQ(topic.end_offset, count);
  EXPECT_EQ(indexes->read_topic("t", new_first - 1, 1, log.last_index(), log.first).records.at(0).index,
            new_first);
}

TEST(DerivedIndexes, EntriesTrimmedBeforeTheyWereIndexedAreSkipped) {
  FakeLog log = random_log(7, 100);
  store::MemoryEnv env;
  OpenReport report;
  auto indexes = open_indexes(env, log, &report);
  FakeLog prefix = log;
  prefix.truncate_from(40);
  replay(*indexes, prefix);
  log.trim_to(60);  // retention removed 40..59 before the dispatcher read them
  indexes->skip_to(60);
  indexes->skip_to(10);  // never backwards
  EXPECT_EQ(indexes->boundary(), 60U);
  replay(*indexes, log);
  ASSERT_TRUE(indexes->persist().ok());
  indexes.reset();
  indexes = open_indexes(env, log, &report);
  EXPECT_EQ(report.mode, OpenMode::kResumed) << report.reason;
  EXPECT_EQ(indexes->boundary(), log.last_index() + 1);
  // What the log still holds is indexed: every key lookup equals a scan of the retained entries.
  for (int k = 0; k < 10; ++k) {
    std::vector<std::uint64_t> expected;
    for (const SourceEntry& entry : log.entries) {
      DecodedEnvelope envelope;
      if (!entry.has_envelope || decode_envelope(entry.payload, &envelope) != EnvelopeDecode::kOk)
        continue;
      for (std::string_view key : envelope.keys) {
        if (key == "k" + std::to_string(k) &&
            (expected.empty() || expected.back() != entry.index)) {
          expected.push_back(entry.index);
        }
      }
    }
    EXPECT_EQ(indexes->lookup_key("k" + std::to_string(k), 1000, log.last_index(), log.first),
              expected);
  }
}

// Every queued record as (log index -> topic:offset), the first retained offset of each topic and
// its end: what must not depend on how a node built its index.
std::map<std::uint64_t, std::string> offsets_by_index(const DerivedIndexes& indexes,
                                                      const FakeLog& log) {
  std::map<std::uint64_t, std::string> out;
  for (const TopicInfo& topic : indexes.list_topics(log.last_index(), log.first)) {
    out[0] += topic.topic + "[" + std::to_string(topic.first_offset) + "," +
              std::to_string(topic.end_offset) + ") ";
    const TopicRead read = indexes.read_topic(topic.topic, topic.first_offset, 1'000'000,
                                              log.last_index(), log.first);
    for (const QueueRecord& record : read.records) {
      out[record.index] = topic.topic + ":" + std::to_string(record.offset);
    }
  }
  return out;
}

// Issue 16, defect 1: a rebuild after retention numbered every topic from 0 at the log's first
// index, so the node's offsets differed from its peers'. The envelope now carries the offset.
TEST(DerivedIndexes, ARebuildAfterRetentionKeepsTheOffsetsTheEntriesCarry) {
  FakeLog log = random_log(11, 400);
  store::MemoryEnv env;
  OpenReport report;
  auto built_whole = open_indexes(env, log, &report);
  replay(*built_whole, log);
  log.trim_to(173);
  ASSERT_TRUE(built_whole->trim_below(173).ok());
  const std::map<std::uint64_t, std::string> expected = offsets_by_index(*built_whole, log);

  store::MemoryEnv other_env;  // a node whose derived/ was lost after retention: rebuilt
  auto rebuilt = open_indexes(other_env, log, &report);
  replay(*rebuilt, log);
  const std::map<std::uint64_t, std::string> after_rebuild = offsets_by_index(*rebuilt, log);
  // The whole-log index still holds records below the first retained index until their segment
  // goes; compare what both serve: entries the log still holds.
  for (const auto& [index, topic_offset] : after_rebuild) {
    if (index == 0) continue;
    EXPECT_EQ(topic_offset, expected.at(index)) << "entry " << index;
  }
  EXPECT_EQ(after_rebuild.at(0), expected.at(0));  // the same first and end offsets per topic
  EXPECT_GT(rebuilt->renumbered_entries(), 0U);    // each topic started at its carried offset
}

TEST(DerivedIndexes, EntriesSkippedBeforeIndexingDoNotShiftLaterOffsets) {
  FakeLog log = random_log(12, 200);
  store::MemoryEnv env;
  OpenReport report;
  auto whole = open_indexes(env, log, &report);
  replay(*whole, log);

  store::MemoryEnv skipping_env;
  FakeLog prefix = log;
  prefix.truncate_from(50);
  auto skipping = open_indexes(skipping_env, prefix, &report);
  replay(*skipping, prefix);
  FakeLog trimmed = log;
  trimmed.trim_to(90);  // retention removed 50..89 before this node indexed them
  skipping->skip_to(90);
  replay(*skipping, trimmed);
  const std::map<std::uint64_t, std::string> expected = offsets_by_index(*whole, trimmed);
  for (const auto& [index, topic_offset] : offsets_by_index(*skipping, trimmed)) {
    if (index == 0) continue;
    EXPECT_EQ(topic_offset, expected.at(index)) << "entry " << index;
  }
  // Restarted, it resumes with the same numbering.
  ASSERT_TRUE(skipping->persist().ok());
  skipping = open_indexes(skipping_env, trimmed, &report);
  EXPECT_EQ(report.mode, OpenMode::kResumed) << report.reason;
  for (const auto& [index, topic_offset] : offsets_by_index(*skipping, trimmed)) {
    if (index == 0) continue;
    EXPECT_EQ(topic_offset, expected.at(index)) << "entry " << index;
  }
}

// Logs written before version 2: version-1 entries are counted (as they always were), and the
// leader's first version-2 entry of the topic continues that count.
TEST(DerivedIndexes, VersionOneEntriesAreCountedAndVersionTwoContinuesThem) {
  FakeLog log;
  log.add_v1(1, "orders", 100);
  log.add_v1(1, "pay", 101);
  log.add_v1(1, "orders", 102);
  log.add(2, "orders", {}, 103);  // offset 2, stamped from the count
  log.add(2, "pay", {}, 104);     // offset 1
  store::MemoryEnv env;
  OpenReport report;
  auto indexes = open_indexes(env, log, &report);
  replay(*indexes, log);
  const std::map<std::uint64_t, std::string> offsets = offsets_by_index(*indexes, log);
  EXPECT_EQ(offsets.at(1), "orders:0");
  EXPECT_EQ(offsets.at(2), "pay:0");
  EXPECT_EQ(offsets.at(3), "orders:1");
  EXPECT_EQ(offsets.at(4), "orders:2");
  EXPECT_EQ(offsets.at(5), "pay:1");
  EXPECT_EQ(indexes->renumbered_entries(), 0U);
}

// A follower caught up from a snapshot at index 8: its log starts at 9, and version-1 entries after
// the point (a log an older binary wrote) are numbered on from the leader's topic table as of 8,
// which the snapshot carried, not from the follower's own count (0 for a topic it never saw, its
// old count for one it had indexed before it fell behind). Restarted before it indexed a topic's
// first entry, it is seeded again and numbers it the same.
TEST(DerivedIndexes, VersionOneEntriesAfterASnapshotAreNumberedFromItsTopicTable) {
  FakeLog leader_log;
  for (int i = 0; i < 3; ++i) leader_log.add_v1(1, "orders", 100 + i);
  leader_log.add(1, "pay", {}, 104);
  leader_log.add_v1(1, "old", 105);  // its only entry before the point
  leader_log.add(1, "orders", {}, 106);
  leader_log.add_v1(1, "pay", 107);
  leader_log.add_plain(1);
  const std::uint64_t point = leader_log.last_index();
  ASSERT_EQ(point, 8U);
  std::vector<TopicNextOffset> table;
  for (const auto& [topic, next] : leader_log.next_offsets) table.push_back({topic, next});
  leader_log.add_v1(2, "orders", 108);  // after the point: offset 4 on the leader
  leader_log.add_v1(2, "pay", 109);     // offset 2
  leader_log.add_v1(2, "old", 110);     // offset 1
  leader_log.add_v1(2, "fresh", 111);   // offset 0
  leader_log.add_v1(2, "orders", 112);  // offset 5
  leader_log.add(2, "pay", {}, 113);    // offset 3, stamped
  store::MemoryEnv leader_env;
  OpenReport report;
  auto leader = open_indexes(leader_env, leader_log, &report);
  replay(*leader, leader_log);
  FakeLog follower_log = leader_log;
  follower_log.trim_to(point + 1);
  std::map<std::uint64_t, std::string> expected;
  for (const auto& [index, offset] : offsets_by_index(*leader, follower_log)) {
    if (index > point) expected[index] = offset;
  }
  ASSERT_EQ(expected.at(9), "orders:4");
  ASSERT_EQ(expected.at(12), "fresh:0");

  // The follower had indexed "orders" 0 and 1 before it fell behind; after the install its
  // indexes skip to the log's start and are seeded with the snapshot's table.
  FakeLog stale_log;
  stale_log.add_v1(1, "orders", 100);
  stale_log.add_v1(1, "orders", 101);
  store::MemoryEnv follower_env;
  auto follower = open_indexes(follower_env, stale_log, &report);
  replay(*follower, stale_log);
  follower->skip_to(point + 1);
  EXPECT_TRUE(follower->seed_topic_offsets(point + 1, table));
  replay(*follower, follower_log);
  std::map<std::uint64_t, std::string> numbered;
  for (const auto& [index, offset] : offsets_by_index(*follower, follower_log)) {
    if (index > point) numbered[index] = offset;
  }
  EXPECT_EQ(numbered, expected);

  // A node whose indexes are rebuilt at the log's start (or restarted before a topic's first entry
  // after it) is seeded at open: the same numbering, and again after a restart part-way.
  store::MemoryEnv rebuilt_env;
  auto rebuilt = open_indexes(rebuilt_env, follower_log, &report);
  ASSERT_EQ(rebuilt->boundary(), point + 1);
  rebuilt->seed_topic_offsets(point + 1, table);
  std::vector<SourceEntry> first_two(follower_log.entries.begin(),
                                     follower_log.entries.begin() + 2);
  ASSERT_TRUE(rebuilt->apply(first_two));
  ASSERT_TRUE(rebuilt->persist().ok());
  rebuilt = open_indexes(rebuilt_env, follower_log, &report);
  ASSERT_EQ(report.mode, OpenMode::kResumed) << report.reason;
  EXPECT_FALSE(rebuilt->seed_topic_offsets(point + 1, table)) << "no queue moves past the start";
  replay(*rebuilt, follower_log);
  numbered.clear();
  for (const auto& [index, offset] : offsets_by_index(*rebuilt, follower_log)) {
    if (index > point) numbered[index] = offset;
  }
  EXPECT_EQ(numbered, expected);
}

}  // namespace
}  // namespace raftlog::derived

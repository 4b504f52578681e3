// After a trim, every node answers a query as an index built from the retained log alone: a node
// whose indexes saw the trimmed entries (they stay in memory until their whole segment goes, and
// its time records below the log's start spanned it), one rebuilt from the trimmed log (derived/
// lost, or a follower's snapshot install), one that indexed a prefix before it skipped to the
// start, and the first one after a restart. The dispatcher seeds each with the topic table and the
// running max stamp as of the log's first index - 1 (DerivedIndexes::seed_topic_offsets), as it
// does from SNAPSHOT.
#include <gtest/gtest.h>

#include <algorithm>

#include <sstream>

#include "derived/cursor.h"
#include "derived/derived_indexes.h"
#include "derived_test_support.h"
#include "store/endian.h"
#include "util/crc32c.h"

namespace raftlog::derived {
namespace {

using namespace raftlog::derived::testing;

// describe(), plus every topic's time lookups (the ReadTopic position `topic read --since` takes).
std::string answers(const DerivedIndexes& indexes, const FakeLog& log) {
  std::ostringstream out;
  out << describe(indexes, log);
  for (const TopicInfo& topic : indexes.list_topics(log.last_index(), log.first)) {
    out << "\n" << topic.topic << " by time:";
    for (std::uint64_t t = 999'990; t < 1'000'000 + 5 * log.entries.size() + 10; t += 7) {
      out << " " << indexes.find_topic_offset_by_time(topic.topic, t, log.last_index(), log.first)
                        .value_or(UINT64_MAX);
    }
  }
  return out.str();
}

// The log's first retained entry is plain and the first stamped one after it repeats the last
// trimmed stamp. A time at or before that stamp was reached by a trimmed entry, and every retained
// entry, the plain ones too, was appended after it: the answer is the log's start, as the untrimmed
// log's answer clamped to it (review of dispatch3, M3, the lead's choice). Until then both nodes
// answered the first stamped entry (13), leaving out the plain 11 and 12 once the trim ran; the
// rebuilt node now knows the trimmed stamp from its seed.
TEST(DerivedTrimAgreement, ATimeReachedBeforeAPlainFirstEntryIsAnsweredWithItOnEveryNode) {
  FakeLog log;
  for (int i = 0; i < 10; ++i) log.add(1, "t", {}, 100 + i);  // 1..10, stamps 100..109
  log.add_plain(1);                                            // 11: the log's start after the trim
  log.add_plain(1);                                            // 12
  log.add(1, "t", {}, 109);                                    // 13: the trimmed millisecond again
  log.add(1, "t", {}, 120);                                    // 14
  const FakeLog full = log;
  store::MemoryEnv env;
  OpenReport report;
  auto indexed = open_indexes(env, full, &report);
  replay(*indexed, full);
  ASSERT_TRUE(indexed->persist().ok());
  log.trim_to(11);
  ASSERT_TRUE(indexed->trim_below(11).ok());

  store::MemoryEnv fresh_env;
  auto rebuilt = open_seeded(fresh_env, full, log, &report);
  replay(*rebuilt, log);
  for (DerivedIndexes* node : {indexed.get(), rebuilt.get()}) {
    const bool indexed_before = node == indexed.get();
    EXPECT_EQ(node->find_by_time(50, 14, 11), 11U) << "indexed before the trim: " << indexed_before;
    EXPECT_EQ(node->find_by_time(109, 14, 11), 11U) << indexed_before;
    EXPECT_EQ(node->find_by_time(110, 14, 11), 14U) << indexed_before;
    EXPECT_EQ(node->find_by_time(121, 14, 11), 0U) << indexed_before;
    EXPECT_EQ(node->find_by_time(110, 13, 11), 0U) << "the answer is not visible yet";
    EXPECT_EQ(node->find_by_time(50, 11, 11), 11U) << "the start is visible";
  }
}

// What a time lookup must answer after a trim below `first`: the whole log's answer (the first
// entry stamped, by an envelope the decoder accepts, whose running max reaches `t`) clamped to the
// log's start; 0 if none.
std::uint64_t expected_time_answer(const FakeLog& full, std::uint64_t first, std::uint64_t t) {
  std::uint64_t running = 0;
  for (const SourceEntry& entry : full.entries) {
    DecodedEnvelope envelope;
    if (!entry.has_envelope || decode_envelope(entry.payload, &envelope) != EnvelopeDecode::kOk) {
      continue;
    }
    running = std::max(running, envelope.timestamp_ms);
    if (running >= t) return std::max(entry.index, first);
  }
  return 0;
}

// Rewrites /derived/CURSOR with another format version (and its checksum): a cursor an older
// binary wrote.
void set_cursor_version(store::MemoryEnv& env, std::uint32_t version) {
  auto bytes = env.read_file("/derived/CURSOR", kMaxCursorBytes);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  std::string cursor = *bytes;
  store::put_u32(cursor.data() + 8, version);
  store::put_u32(cursor.data() + 4, util::crc32c::value(cursor.data() + 8, cursor.size() - 8));
  ASSERT_TRUE(env.write_file("/derived/CURSOR", cursor).ok());
}

// Review of dispatch3, M1: time records written before 2026-12-07 lack the record of a stamped
// entry after a plain one in an unchanged millisecond, which that version's lookup relied on (after
// an upgrade and a trim at a plain entry inside such a millisecond, the resumed node answered a
// later millisecond, entries 12..20 skipped). A cursor of version 1 makes the first open rebuild
// the indexes once. The lookup of review M3's rule needs only the records where the running max
// rises, which every version wrote: the rebuild stays (one, at the upgrade), and the answers are
// that rule's (11: entry 10's stamp reached the times asked).
TEST(DerivedTrimAgreement, IndexesOfTheOldTimeRecordRuleAreRebuiltOnce) {
  // What the old rule left: entry 11 stamped in 10's millisecond, so 11..20 have no time record.
  auto make_log = [](bool eleven_plain) {
    FakeLog log;
    for (int i = 0; i < 10; ++i) log.add(1, "t", {}, 100 + i);  // 1..10, stamps 100..109
    if (eleven_plain) {
      log.add_plain(1);
    } else {
      log.add(1, "", {"k"}, 109);
    }
    for (int i = 12; i <= 20; ++i) log.add(1, "t", {}, 109);  // the same millisecond
    log.add(1, "t", {}, 110);                                   // 21
    return log;
  };
  const FakeLog written = make_log(false);
  store::MemoryEnv env;
  OpenReport report;
  auto old_indexes = open_indexes(env, written, &report);
  replay(*old_indexes, written);
  ASSERT_TRUE(old_indexes->persist().ok());
  old_indexes.reset();
  ASSERT_NO_FATAL_FAILURE(set_cursor_version(env, 1));

  FakeLog log = make_log(true);  // the log as it is: 11 plain, 12..20 stamped in 109
  auto upgraded = open_indexes(env, log, &report);
  ASSERT_NE(upgraded, nullptr);
  EXPECT_EQ(report.mode, OpenMode::kRebuilt) << report.reason;
  replay(*upgraded, log);
  log.trim_to(11);
  ASSERT_TRUE(upgraded->trim_below(11).ok());
  EXPECT_EQ(upgraded->find_by_time(50, 21, 11), 11U) << "entries 11..20 were skipped";
  EXPECT_EQ(upgraded->find_by_time(109, 21, 11), 11U);
  EXPECT_EQ(upgraded->find_by_time(110, 21, 11), 21U);
}

// Review of since4, M1: this version writes no extra time record for a stamped entry after a plain
// one, which dispatch3's lookup (cursor version 2) relies on; rolled back to, that binary resumed
// on these records and skipped a millisecond's stamped entries. The cursor is now written as
// version 3, which a version-2 binary refuses (it rebuilds), while this one still resumes a
// version-2 cursor (its extra records are harmless). Failed before: the cursor written was
// version 2.
TEST(DerivedTrimAgreement, TheCursorIsWrittenAsVersion3AndAVersion2OneStillResumes) {
  const FakeLog log = random_log(3, 60);
  store::MemoryEnv env;
  OpenReport report;
  auto indexes = open_indexes(env, log, &report);
  replay(*indexes, log);
  ASSERT_TRUE(indexes->persist().ok());
  indexes.reset();
  auto bytes = env.read_file("/derived/CURSOR", kMaxCursorBytes);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  EXPECT_EQ(store::get_u32(bytes->data() + 8), 3U) << "a dispatch3 binary would resume it";

  ASSERT_NO_FATAL_FAILURE(set_cursor_version(env, 2));
  auto resumed = open_indexes(env, log, &report);
  ASSERT_NE(resumed, nullptr);
  EXPECT_EQ(report.mode, OpenMode::kResumed) << report.reason;
  EXPECT_EQ(describe(*resumed, log), describe_from_scratch(log));
  resumed.reset();

  ASSERT_NO_FATAL_FAILURE(set_cursor_version(env, 4));
  auto rebuilt = open_indexes(env, log, &report);
  ASSERT_NE(rebuilt, nullptr);
  EXPECT_EQ(report.mode, OpenMode::kRebuilt) << report.reason;
  replay(*rebuilt, log);
  EXPECT_EQ(describe(*rebuilt, log), describe_from_scratch(log));
}

// Any trim point, any of the four histories, records dropped by retention or still in memory: the
// same answers as an index built from the retained log seeded as the dispatcher seeds it (topics,
// offsets, keys, time, topic time), and time answers right. Odd seeds step stamps back (a leader
// change between clocks more than 60 s apart does, docs/design.md): the running max of the trimmed
// stamps, seeded, makes the rebuilt and skipped nodes' running max the indexed node's (failed
// before the seed carried it: the rebuilt node's topic reads showed lower running stamps).
TEST(DerivedTrimAgreement, EveryHistoryAnswersAsTheRetainedLogAfterAnyTrim) {
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    const bool monotonic = seed % 2 == 0;
    FakeLog full;
    // A topic whose entries every trim below removes whole: still known everywhere after it.
    for (int i = 0; i < 3; ++i) full.add(1, "gone", {"k9"}, 1'000'000);
    const FakeLog tail = random_log(seed, 160, monotonic);
    for (const SourceEntry& entry : tail.entries) {
      SourceEntry copy = entry;
      copy.index = full.first + full.entries.size();
      full.entries.push_back(std::move(copy));
    }
    for (const std::uint64_t per_segment : {kRecordsPerSegment, std::uint64_t{8}}) {
      for (std::uint64_t first = 4; first < full.last_index(); first += 1 + seed % 5) {
        SCOPED_TRACE("seed " + std::to_string(seed) + ", records per segment " +
                     std::to_string(per_segment) + ", trimmed below " + std::to_string(first));
        FakeLog log = full;
        log.trim_to(first);
        OpenReport report;

        store::MemoryEnv scratch_env;  // built from the retained log alone
        auto scratch = open_seeded(scratch_env, full, log, &report, per_segment);
        replay(*scratch, log);
        const std::string expected = answers(*scratch, log);
        // Not only the same everywhere: right (review of dispatch3, L6).
        std::string wrong;
        for (std::uint64_t t = 999'990; t < 1'000'000 + 5 * log.entries.size() + 10; t += 3) {
          const std::uint64_t answer = scratch->find_by_time(t, log.last_index(), log.first);
          if (answer != expected_time_answer(full, first, t)) {
            wrong += " t=" + std::to_string(t) + ":" + std::to_string(answer) +
                     "!=" + std::to_string(expected_time_answer(full, first, t));
          }
        }
        EXPECT_EQ(wrong, "")
            << "time lookups that are not the whole log's answer clamped to the start";

        store::MemoryEnv env;  // indexed everything before the trim
        auto indexed = open_indexes(env, full, &report, LogIdentity{"c", 1}, per_segment);
        replay(*indexed, full);
        ASSERT_TRUE(indexed->trim_below(first).ok());
        EXPECT_EQ(answers(*indexed, log), expected) << "indexed before the trim";
        ASSERT_TRUE(indexed->persist().ok());
        indexed.reset();
        auto restarted = open_seeded(env, full, log, &report, per_segment);
        replay(*restarted, log);
        EXPECT_EQ(answers(*restarted, log), expected) << "restarted after the trim";

        store::MemoryEnv prefix_env;  // indexed a prefix, then skipped to the log's start
        auto skipped = open_indexes(prefix_env, full, &report, LogIdentity{"c", 1}, per_segment);
        std::vector<SourceEntry> prefix(full.entries.begin(),
                                        full.entries.begin() + static_cast<std::ptrdiff_t>(first / 2));
        ASSERT_TRUE(skipped->apply(prefix));
        (void)skipped->retain_from(first);
        skipped->skip_to(first);
        (void)skipped->seed_topic_offsets(first, table_before(full, first),
                                          stamp_before(full, first));
        replay(*skipped, log);
        EXPECT_EQ(answers(*skipped, log), expected) << "skipped to the log's start";
        if (HasFailure()) return;
      }
    }
  }
}

}  // namespace
}  // namespace raftlog::derived

// Power cuts and process kills during dispatch, at every sync step, many times (seeded and
// bounded): after each restart the index, caught up, equals one rebuilt from scratch from the same
// log (compared by every answer it gives: topics read whole, every key, a sweep of times). Once
// with whole persists, once as the dispatcher drives them: sliced, with batches applied, entries
// skipped and trimmed, topics seeded between a persist's begin and its cursor.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "derived_test_support.h"

namespace raftlog::derived {
namespace {

using namespace raftlog::derived::testing;

TEST(DerivedCrash, EveryCrashPointRecoversToTheRebuiltIndex) {
  constexpr int kRuns = 100;  // bounded: a few seconds in all
  const store::CrashMode modes[] = {store::CrashMode::kLoseUnflushed, store::CrashMode::kTornWrite,
                                    store::CrashMode::kKeepRandomSectors,
                                    store::CrashMode::kFlipBits, store::CrashMode::kKeepAll};
  for (int run = 0; run < kRuns; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    util::Prng prng(static_cast<std::uint64_t>(run) + 1);
    const FakeLog log = random_log(static_cast<std::uint64_t>(run) + 100, 400);
    const std::string expected = describe_from_scratch(log);
    store::MemoryEnv env;
    std::uint64_t dispatched_to = 1;
    store::CrashMode last_mode = store::CrashMode::kKeepAll;
    for (int life = 0; life < 4; ++life) {
      OpenReport report;
      store::Status error;
      auto indexes = DerivedIndexes::open(&env, "/derived", LogIdentity{"c", 1}, log, &report, &error);
      ASSERT_NE(indexes, nullptr) << error.to_string();
      // Whatever it recovered, it never claims more than what was dispatched before the cut.
      EXPECT_LE(indexes->boundary(), dispatched_to);
      // A power cut loses only unsynced bytes, which no cursor vouches for: never a rebuild.
      if (last_mode == store::CrashMode::kLoseUnflushed) {
        EXPECT_NE(report.mode, OpenMode::kRebuilt) << report.reason;
      }
      env.crash_after_syncs(prng.below(300));
      while (indexes->boundary() <= log.last_index() && !env.crashed()) {
        const std::uint64_t from = indexes->boundary();
        std::vector<SourceEntry> batch;
        const std::uint64_t size = 1 + prng.below(30);
        for (std::uint64_t i = from; i <= log.last_index() && batch.size() < size; ++i)
          batch.push_back(log.entries[i - log.first]);
        ASSERT_TRUE(indexes->apply(batch));
        dispatched_to = indexes->boundary();
        if (!indexes->persist().ok()) break;
      }
      indexes.reset();
      if (!env.crashed()) env.crash();
      last_mode = modes[prng.below(5)];
      env.restart(store::CrashOptions{last_mode, prng.next_u64()});
    }
    OpenReport report;
    store::Status error;
    auto indexes = DerivedIndexes::open(&env, "/derived", LogIdentity{"c", 1}, log, &report, &error);
    ASSERT_NE(indexes, nullptr) << error.to_string();
    replay(*indexes, log);
    EXPECT_EQ(describe(*indexes, log), expected) << to_string(report.mode) << ": " << report.reason;
  }
}

// A log whose timestamps only grow (a trim then leaves nothing for the index's clamp to differ on
// between a node that indexed the trimmed entries and one that never saw them), with version-1
// entries among the topics' (numbered from seeding after a trim: seed_topic_offsets).
FakeLog growing_log(std::uint64_t seed, std::size_t count) {
  util::Prng prng(seed);
  FakeLog log;
  std::uint64_t term = 1;
  std::uint64_t time = 1'000'000;
  for (std::size_t i = 0; i < count; ++i) {
    if (prng.below(50) == 0) ++term;
    time += 1 + prng.below(4);
    if (prng.below(7) == 0) {
      log.add_plain(term);
      continue;
    }
    const std::string topic = prng.below(5) == 0 ? "" : "t" + std::to_string(prng.below(4));
    if (!topic.empty() && prng.below(6) == 0) {
      log.add_v1(term, topic, time);
      continue;
    }
    std::vector<std::string> keys;
    for (std::uint64_t k = prng.below(3); k > 0; --k) keys.push_back("k" + std::to_string(prng.below(10)));
    log.add(term, topic, keys, time);
  }
  return log;
}

// Each topic's next offset after the entries of `full` below `first` (the topic table a trim's
// snapshot saves: what the dispatcher seeds the indexes with).
std::vector<TopicNextOffset> table_before(const FakeLog& full, std::uint64_t first) {
  std::map<std::string, std::uint64_t> next;
  for (std::uint64_t index = full.first; index < first; ++index) {
    const SourceEntry& entry = full.entries[index - full.first];
    DecodedEnvelope envelope;
    if (!entry.has_envelope || decode_envelope(entry.payload, &envelope) != EnvelopeDecode::kOk ||
        envelope.topic.empty()) {
      continue;
    }
    ++next[std::string(envelope.topic)];
  }
  std::vector<TopicNextOffset> table;
  for (const auto& [topic, offset] : next) table.push_back({topic, offset});
  return table;
}

// Records per segment of the indexes under test in the sliced loop: a 400-entry log then fills
// several, and retention drops some (kRecordsPerSegment, 65,536, would never fill).
constexpr std::uint64_t kSmallSegments = 16;

std::unique_ptr<DerivedIndexes> open_seeded(store::MemoryEnv& env, const FakeLog& full,
                                            const FakeLog& log, OpenReport* report,
                                            std::uint64_t records_per_segment = kRecordsPerSegment) {
  store::Status error;
  auto indexes = DerivedIndexes::open(&env, "/derived", LogIdentity{"c", 1}, log, report, &error,
                                      records_per_segment);
  EXPECT_NE(indexes, nullptr) << error.to_string();
  // The dispatcher seeds at every open (Dispatcher::seed_topics_from_snapshot).
  if (indexes != nullptr && log.first > 1) {
    (void)indexes->seed_topic_offsets(log.first, table_before(full, log.first));
  }
  return indexes;
}

// Retention moves the log's start, behind what is indexed (the dispatcher's retain_from, applied
// by the next persist; or trim_below, a whole persist) or past it (skipped, and the topics
// seeded, as the dispatcher's skip_trimmed does). False when the indexes refused.
bool trim(DerivedIndexes& indexes, FakeLog& log, const FakeLog& full, util::Prng& prng) {
  std::uint64_t first = log.first + 1 + prng.below(60);
  // At an entry with an envelope: when the log starts with a plain entry, a node that indexed the
  // entries before it answers a time lookup from the log's first index, one that never saw them
  // from its first stamped entry (the time index's records, not a persist's, decide that).
  while (!log.entries[first - log.first].has_envelope) ++first;
  log.trim_to(first);
  if (indexes.boundary() < first) {
    indexes.skip_to(first);
    (void)indexes.seed_topic_offsets(first, table_before(full, first));
    return true;
  }
  if (prng.below(4) != 0) {
    (void)indexes.retain_from(first);
    return true;
  }
  return indexes.trim_below(first).ok();
}

// One life of the sliced loop: batches applied, a persist begun when none is pending and 0-3 of
// its syncs run after each batch, trims now and then, until the log is dispatched, the env
// crashed, or a persist step failed. After a failure it goes on as the dispatcher's round did
// before review H1 (a trim, a continue, a persist): each must refuse.
void sliced_life(DerivedIndexes& indexes, FakeLog& log, const FakeLog& full, bool trims,
                 util::Prng& prng, store::MemoryEnv& env, std::uint64_t* dispatched_to) {
  bool failed = false;
  while (indexes.boundary() <= log.last_index() && !env.crashed() && !failed) {
    std::vector<SourceEntry> batch;
    const std::uint64_t size = 1 + prng.below(30);
    for (std::uint64_t i = indexes.boundary(); i <= log.last_index() && batch.size() < size; ++i)
      batch.push_back(log.entries[i - log.first]);
    ASSERT_TRUE(indexes.apply(batch));
    *dispatched_to = indexes.boundary();
    if (trims && prng.below(8) == 0 && log.last_index() > log.first + 150 &&
        !trim(indexes, log, full, prng)) {
      failed = true;
      break;
    }
    if (!indexes.persist_pending() && !indexes.begin_persist().ok()) {
      failed = true;
      break;
    }
    std::uint64_t steps = prng.below(4);  // this slice's syncs (0: none, as a stop's)
    auto slice = [&] {
      if (steps == 0) return false;
      --steps;
      return true;
    };
    bool finished = false;
    failed = !indexes.continue_persist(slice, &finished).ok();
  }
  if (!failed) return;
  bool finished = false;
  EXPECT_FALSE(indexes.trim_below(log.first).ok());
  EXPECT_FALSE(indexes.continue_persist(nullptr, &finished).ok());
  EXPECT_FALSE(indexes.persist().ok());
}

// Review of dispatch, M2: the dispatcher applies batches between a persist's begin and its cursor
// and runs its syncs a few at a time; entries are skipped (trimmed before they were indexed) and
// topics seeded meanwhile, trims come while a persist is pending (segments of 16 records, so that
// they drop some), and in a tenth of the runs a file sync fails and loses the file's unsynced
// bytes, as Linux may (the indexes then fail for good: review H1). Crashes at any sync, in every
// mode; after a power cut that loses only unsynced bytes the indexes are never rebuilt (a cursor
// never vouches for records that were not durable).
TEST(DerivedCrash, SlicedPersistsWithDispatchBetweenTheirStepsRecoverToTheRebuiltIndex) {
  constexpr int kRuns = 100;  // bounded: a few seconds in all
  const store::CrashMode modes[] = {store::CrashMode::kLoseUnflushed, store::CrashMode::kTornWrite,
                                    store::CrashMode::kKeepRandomSectors,
                                    store::CrashMode::kFlipBits, store::CrashMode::kKeepAll};
  for (int run = 0; run < kRuns; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    util::Prng prng(static_cast<std::uint64_t>(run) + 5000);
    const FakeLog full = growing_log(static_cast<std::uint64_t>(run) + 300, 400);
    FakeLog log = full;  // its first index moves in the runs that trim
    store::MemoryEnv env;
    std::uint64_t dispatched_to = 1;
    store::CrashMode last_mode = store::CrashMode::kKeepAll;
    for (int life = 0; life < 4; ++life) {
      OpenReport report;
      auto indexes = open_seeded(env, full, log, &report, kSmallSegments);
      ASSERT_NE(indexes, nullptr);
      EXPECT_LE(indexes->boundary(), std::max(dispatched_to, log.first));
      if (last_mode == store::CrashMode::kLoseUnflushed) {
        EXPECT_NE(report.mode, OpenMode::kRebuilt) << "life " << life << ": " << report.reason;
      }
      env.crash_after_syncs(prng.below(300));
      const bool failing = run % 10 == 4 && life == 1;
      if (failing) env.fail_next_syncs(1, /*drop_dirty=*/true);
      ASSERT_NO_FATAL_FAILURE(
          sliced_life(*indexes, log, full, run % 2 == 1 && life < 3, prng, env, &dispatched_to));
      indexes.reset();
      if (!env.crashed()) env.crash();
      last_mode = failing ? store::CrashMode::kLoseUnflushed : modes[prng.below(5)];
      env.restart(store::CrashOptions{last_mode, prng.next_u64()});
    }
    OpenReport report;
    auto indexes = open_seeded(env, full, log, &report, kSmallSegments);
    ASSERT_NE(indexes, nullptr);
    if (last_mode == store::CrashMode::kLoseUnflushed) {
      EXPECT_NE(report.mode, OpenMode::kRebuilt) << report.reason;
    }
    replay(*indexes, log);
    store::MemoryEnv scratch_env;
    OpenReport scratch_report;
    auto scratch = open_seeded(scratch_env, full, log, &scratch_report);
    ASSERT_NE(scratch, nullptr);
    replay(*scratch, log);
    EXPECT_EQ(describe(*indexes, log), describe(*scratch, log))
        << to_string(report.mode) << ": " << report.reason;
  }
}

}  // namespace
}  // namespace raftlog::derived

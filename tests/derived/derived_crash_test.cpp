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
    for (int life = 0; life < 4; ++life) {
      OpenReport report;
      store::Status error;
      auto indexes = DerivedIndexes::open(&env, "/derived", LogIdentity{"c", 1}, log, &report, &error);
      ASSERT_NE(indexes, nullptr) << error.to_string();
      // Whatever it recovered, it never claims more than what was dispatched before the cut.
      EXPECT_LE(indexes->boundary(), dispatched_to);
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
      env.restart(store::CrashOptions{modes[prng.below(5)], prng.next_u64()});
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

std::unique_ptr<DerivedIndexes> open_seeded(store::MemoryEnv& env, const FakeLog& full,
                                            const FakeLog& log, OpenReport* report) {
  store::Status error;
  auto indexes = DerivedIndexes::open(&env, "/derived", LogIdentity{"c", 1}, log, report, &error);
  EXPECT_NE(indexes, nullptr) << error.to_string();
  // The dispatcher seeds at every open (Dispatcher::seed_topics_from_snapshot).
  if (indexes != nullptr && log.first > 1) {
    (void)indexes->seed_topic_offsets(log.first, table_before(full, log.first));
  }
  return indexes;
}

// Review of dispatch, M2: the dispatcher applies batches between a persist's begin and its cursor
// and runs its syncs a few at a time; entries are skipped (trimmed before they were indexed) and
// topics seeded meanwhile, trims come while a persist is pending, and a sync fails in some runs
// (the indexes then fail for good: review H1). Crashes at any sync, in every mode.
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
    const bool trims = run % 2 == 1;
    for (int life = 0; life < 4; ++life) {
      OpenReport report;
      auto indexes = open_seeded(env, full, log, &report);
      ASSERT_NE(indexes, nullptr);
      EXPECT_LE(indexes->boundary(), std::max(dispatched_to, log.first));
      env.crash_after_syncs(prng.below(300));
      if (run % 10 == 4 && life == 1) env.fail_next_syncs(1);
      while (indexes->boundary() <= log.last_index() && !env.crashed()) {
        const std::uint64_t from = indexes->boundary();
        std::vector<SourceEntry> batch;
        const std::uint64_t size = 1 + prng.below(30);
        for (std::uint64_t i = from; i <= log.last_index() && batch.size() < size; ++i)
          batch.push_back(log.entries[i - log.first]);
        ASSERT_TRUE(indexes->apply(batch));
        dispatched_to = indexes->boundary();
        if (trims && life < 3 && prng.below(8) == 0 && log.last_index() > log.first + 150) {
          // Retention moves the log's start, behind or past what is indexed (then skipped, and
          // the topics seeded, as the dispatcher's skip_trimmed does).
          std::uint64_t first = log.first + 1 + prng.below(60);
          // At an entry with an envelope: when the log starts with a plain entry, a node that
          // indexed the entries before it answers a time lookup from the log's first index, one
          // that never saw them from its first stamped entry (the time index's records, not a
          // persist's, decide that: find_by_time).
          while (!log.entries[first - log.first].has_envelope) ++first;
          log.trim_to(first);
          if (indexes->boundary() < first) {
            indexes->skip_to(first);
            (void)indexes->seed_topic_offsets(first, table_before(full, first));
          } else if (!indexes->trim_below(first).ok()) {
            break;
          }
        }
        if (!indexes->persist_pending() && !indexes->begin_persist().ok()) break;
        std::uint64_t steps = prng.below(4);  // this slice's syncs (0: none, as a stop's)
        auto slice = [&] {
          if (steps == 0) return false;
          --steps;
          return true;
        };
        bool finished = false;
        if (!indexes->continue_persist(slice, &finished).ok()) break;
      }
      indexes.reset();
      if (!env.crashed()) env.crash();
      env.restart(store::CrashOptions{modes[prng.below(5)], prng.next_u64()});
    }
    OpenReport report;
    auto indexes = open_seeded(env, full, log, &report);
    ASSERT_NE(indexes, nullptr);
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

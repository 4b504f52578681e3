// Power cuts and process kills during dispatch, at every sync step, many times (seeded and
// bounded): after each restart the index, caught up, equals one rebuilt from scratch from the same
// log (compared by every answer it gives: topics read whole, every key, a sweep of times). Once
// with whole persists, once as the dispatcher drives them: sliced, with batches applied, entries
// skipped and trimmed, topics seeded between a persist's begin and its cursor.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>

#include "derived_test_support.h"

namespace raftlog::derived {
namespace {

using namespace raftlog::derived::testing;

constexpr int kRuns = 100;  // per test, bounded: a few seconds each
constexpr store::CrashMode kCrashModes[] = {
    store::CrashMode::kLoseUnflushed, store::CrashMode::kTornWrite,
    store::CrashMode::kKeepRandomSectors, store::CrashMode::kFlipBits, store::CrashMode::kKeepAll};

// The lives of one seeded run: each opens the indexes (`open`), checks what they recovered, arms a
// crash at a random sync step and hands them to `run_life` (which may arm more faults); then the
// env is cut, when the life did not crash it, and restarted in a drawn mode, or in the one
// `forced_mode` names for that life. `bound`: the most the reopened boundary may claim. Returns the
// last restart's mode.
store::CrashMode run_lives(
    int lives, store::MemoryEnv& env, util::Prng& prng,
    const std::function<std::unique_ptr<DerivedIndexes>(OpenReport*)>& open,
    const std::function<std::uint64_t()>& bound,
    const std::function<void(int, DerivedIndexes&)>& run_life,
    const std::function<std::optional<store::CrashMode>(int)>& forced_mode = nullptr) {
  store::CrashMode last_mode = store::CrashMode::kKeepAll;
  for (int life = 0; life < lives; ++life) {
    OpenReport report;
    auto indexes = open(&report);
    EXPECT_NE(indexes, nullptr);
    if (indexes == nullptr) return last_mode;
    // Whatever it recovered, it never claims more than what was dispatched before the cut.
    EXPECT_LE(indexes->boundary(), bound());
    // A power cut loses only unsynced bytes, which no cursor vouches for: never a rebuild.
    if (last_mode == store::CrashMode::kLoseUnflushed) {
      EXPECT_NE(report.mode, OpenMode::kRebuilt) << "life " << life << ": " << report.reason;
    }
    env.crash_after_syncs(prng.below(300));
    run_life(life, *indexes);
    if (::testing::Test::HasFatalFailure()) return last_mode;  // as an ASSERT in the life would
    indexes.reset();
    if (!env.crashed()) env.crash();
    const std::optional<store::CrashMode> forced = forced_mode ? forced_mode(life) : std::nullopt;
    last_mode = forced ? *forced : kCrashModes[prng.below(5)];
    env.restart(store::CrashOptions{last_mode, prng.next_u64()});
  }
  return last_mode;
}

TEST(DerivedCrash, EveryCrashPointRecoversToTheRebuiltIndex) {
  for (int run = 0; run < kRuns; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    util::Prng prng(static_cast<std::uint64_t>(run) + 1);
    const FakeLog log = random_log(static_cast<std::uint64_t>(run) + 100, 400);
    const std::string expected = describe_from_scratch(log);
    store::MemoryEnv env;
    std::uint64_t dispatched_to = 1;
    (void)run_lives(
        4, env, prng, [&](OpenReport* report) { return open_indexes(env, log, report); },
        [&] { return dispatched_to; },
        [&](int, DerivedIndexes& indexes) {
          while (indexes.boundary() <= log.last_index() && !env.crashed()) {
            const std::uint64_t from = indexes.boundary();
            std::vector<SourceEntry> batch;
            const std::uint64_t size = 1 + prng.below(30);
            for (std::uint64_t i = from; i <= log.last_index() && batch.size() < size; ++i)
              batch.push_back(log.entries[i - log.first]);
            ASSERT_TRUE(indexes.apply(batch));
            dispatched_to = indexes.boundary();
            if (!indexes.persist().ok()) break;
          }
        });
    OpenReport report;
    auto indexes = open_indexes(env, log, &report);
    ASSERT_NE(indexes, nullptr);
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

// Records per segment of the indexes under test in the sliced loop: a 400-entry log then fills
// several, and retention drops some (kRecordsPerSegment, 65,536, would never fill).
constexpr std::uint64_t kSmallSegments = 16;

// Retention moves the log's start, behind what is indexed (the dispatcher's retain_from, applied
// by the next persist; or trim_below, a whole persist) or past it (skipped, and the topics
// seeded, as the dispatcher's skip_trimmed does). False when the indexes refused.
bool trim(DerivedIndexes& indexes, FakeLog& log, const FakeLog& full, util::Prng& prng) {
  // Any entry, a plain one too: every node answers a time lookup at a plain first entry alike
  // since 2026-12-07 (derived_trim_agreement_test); this test used to trim at envelopes only.
  const std::uint64_t first = log.first + 1 + prng.below(60);
  log.trim_to(first);
  if (indexes.boundary() < first) {
    indexes.skip_to(first);
    (void)indexes.seed_topic_offsets(first, table_before(full, first), stamp_before(full, first));
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
    // A kill or power cut between two slices, also among a persist's writes (a begin only
    // captures the records; its writes run in the slices, with batches applied between them).
    if (!failed && indexes.persist_pending() && prng.below(24) == 0) env.crash();
  }
  if (!failed) return;
  bool finished = false;
  EXPECT_FALSE(indexes.trim_below(log.first).ok());
  EXPECT_FALSE(indexes.continue_persist(nullptr, &finished).ok());
  EXPECT_FALSE(indexes.persist().ok());
}

// Review of dispatch, M2: the dispatcher applies batches between a persist's begin and its cursor
// and runs its writes (one segment file a step, since 2026-12-07) and syncs a few at a time, and a
// crash may come between any two of them; entries are skipped (trimmed before they were indexed) and
// topics seeded meanwhile, trims come while a persist is pending (segments of 16 records, so that
// they drop some), and in a tenth of the runs a file sync fails and loses the file's unsynced
// bytes, as Linux may (the indexes then fail for good: review H1). Crashes at any sync, in every
// mode; after a power cut that loses only unsynced bytes the indexes are never rebuilt (a cursor
// never vouches for records that were not durable).
TEST(DerivedCrash, SlicedPersistsWithDispatchBetweenTheirStepsRecoverToTheRebuiltIndex) {
  for (int run = 0; run < kRuns; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    util::Prng prng(static_cast<std::uint64_t>(run) + 5000);
    const FakeLog full = growing_log(static_cast<std::uint64_t>(run) + 300, 400);
    FakeLog log = full;  // its first index moves in the runs that trim
    store::MemoryEnv env;
    std::uint64_t dispatched_to = 1;
    auto failing = [&](int life) { return run % 10 == 4 && life == 1; };
    const store::CrashMode last_mode = run_lives(
        4, env, prng,
        [&](OpenReport* report) { return open_seeded(env, full, log, report, kSmallSegments); },
        [&] { return std::max(dispatched_to, log.first); },
        [&](int life, DerivedIndexes& indexes) {
          if (failing(life)) env.fail_next_syncs(1, /*drop_dirty=*/true);
          ASSERT_NO_FATAL_FAILURE(sliced_life(indexes, log, full, run % 2 == 1 && life < 3, prng,
                                              env, &dispatched_to));
        },
        [&](int life) {
          return failing(life) ? std::optional(store::CrashMode::kLoseUnflushed) : std::nullopt;
        });
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

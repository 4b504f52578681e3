// Power cuts and process kills during dispatch, at every sync step, many times (seeded and
// bounded): after each restart the index, caught up, equals one rebuilt from scratch from the same
// log (compared by every answer it gives: topics read whole, every key, a sweep of times).
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace raftlog::derived

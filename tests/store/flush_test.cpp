// Flush modes: sync (group commit) and async (interval, dirty-bytes threshold, explicit flush),
// the non-blocking path (append_no_wait + wait_flushed + listener), and flush statistics.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "test_util.h"

namespace raftlog::store {
namespace {

using namespace std::chrono_literals;
using testing::make_batch;
using testing::open_ok;
using testing::small_options;

bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds limit = 3000ms) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return condition();
}

TEST(FlushAsync, AppendReturnsBeforeFlushAndExplicitFlushPersists) {
  MemoryEnv env;
  ASSERT_TRUE(env.create_dir("/log").ok());
  auto options = small_options(&env, FlushMode::kAsync);
  options.flush_interval_ms = 60000;       // the timer never fires during this test
  options.flush_dirty_bytes = 1ULL << 40;  // nor the dirty-bytes trigger
  options.checkpoint_interval_ms = 60000;
  auto log = open_ok("/log", options);
  ASSERT_TRUE(log);
  auto batch = make_batch(1, 10, 1, 100);
  ASSERT_TRUE(log->append(batch.span()).ok());
  EXPECT_EQ(log->last_index(), 10U);
  std::this_thread::sleep_for(30ms);
  EXPECT_EQ(log->flushed_index(), 0U);  // written, not durable
  ASSERT_TRUE(log->flush().ok());
  EXPECT_EQ(log->flushed_index(), 10U);
  EXPECT_GE(log->stats().flushes, 1U);
  // What was flushed survives power loss; an unflushed later append does not.
  auto more = make_batch(11, 5, 1, 100);
  ASSERT_TRUE(log->append(more.span()).ok());
  env.crash();
  log.reset();
  env.restart({CrashMode::kLoseUnflushed, 3});
  auto reopened = open_ok("/log", options);
  ASSERT_TRUE(reopened);
  EXPECT_EQ(reopened->recovery_report().mode, RecoveryMode::kAbnormal);
  EXPECT_EQ(reopened->last_index(), 10U);
  testing::expect_entries(*reopened, 1, 10, 1, 100);
}

TEST(FlushAsync, IntervalFlushesInTheBackground) {
  MemoryEnv env;
  ASSERT_TRUE(env.create_dir("/log").ok());
  auto options = small_options(&env, FlushMode::kAsync);
  options.flush_interval_ms = 10;
  options.flush_dirty_bytes = 1ULL << 40;
  auto log = open_ok("/log", options);
  ASSERT_TRUE(log);
  auto batch = make_batch(1, 50, 1, 100);
  ASSERT_TRUE(log->append(batch.span()).ok());
  EXPECT_TRUE(eventually([&] { return log->flushed_index() == 50; }));
}

TEST(FlushAsync, DirtyBytesThresholdTriggersFlush) {
  MemoryEnv env;
  ASSERT_TRUE(env.create_dir("/log").ok());
  auto options = small_options(&env, FlushMode::kAsync);
  options.flush_interval_ms = 60000;
  options.flush_dirty_bytes = 4096;
  auto log = open_ok("/log", options);
  ASSERT_TRUE(log);
  auto small = make_batch(1, 1, 1, 100);
  ASSERT_TRUE(log->append(small.span()).ok());
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(log->flushed_index(), 0U);    // below the threshold, timer far away
  auto big = make_batch(2, 10, 1, 1000);  // > 4096 unflushed bytes
  ASSERT_TRUE(log->append(big.span()).ok());
  EXPECT_TRUE(eventually([&] { return log->flushed_index() == 11; }));
}

TEST(FlushSync, NonBlockingPathWithWaiterAndListener) {
  MemoryEnv env;
  ASSERT_TRUE(env.create_dir("/log").ok());
  auto log = open_ok("/log", small_options(&env, FlushMode::kSync));
  ASSERT_TRUE(log);
  std::mutex mu;
  std::vector<std::uint64_t> notified;
  log->set_flush_listener([&](std::uint64_t flushed) {
    std::lock_guard lock(mu);
    notified.push_back(flushed);
  });
  for (std::uint64_t i = 1; i <= 100; i += 10) {
    auto batch = make_batch(i, 10, 1, 64);
    auto range = log->append_no_wait(batch.span());
    ASSERT_TRUE(range.ok());
  }
  ASSERT_TRUE(log->wait_flushed(100).ok());
  EXPECT_GE(log->flushed_index(), 100U);
  EXPECT_TRUE(eventually([&] {
    std::lock_guard lock(mu);
    return !notified.empty() && notified.back() == 100;
  }));
  {
    std::lock_guard lock(mu);
    EXPECT_TRUE(std::is_sorted(notified.begin(), notified.end()));
  }
  log->set_flush_listener(nullptr);
  ASSERT_TRUE(log->close().ok());
  EXPECT_EQ(log->wait_flushed(1000).code(), StatusCode::kClosed);
}

// 64 concurrent writers in sync mode on real files: group commit must cover many appends per
// fdatasync/msync, so far fewer flushes than appends happen.
TEST(FlushSync, GroupCommitWith64Writers) {
  testing::TempDir dir;
  const Options options = testing::real_file_sync_options(4 << 20);
  auto log = open_ok(dir.path(), options);
  ASSERT_TRUE(log);
  constexpr int kWriters = 64;
  constexpr int kAppendsPerWriter = 10;
  std::atomic<bool> go{false};
  std::atomic<int> failures{0};
  std::vector<std::thread> writers;
  const std::string payload(1024, 'p');
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&] {
      while (!go.load()) std::this_thread::yield();
      for (int i = 0; i < kAppendsPerWriter; ++i) {
        EntryToAppend entry;
        entry.meta.index = 0;  // the log assigns the next index under its writer lock
        entry.meta.term = 1;
        entry.payload = payload;
        auto result = log->append(std::span<const EntryToAppend>(&entry, 1));
        if (!result.ok() || log->flushed_index() < result->last) failures.fetch_add(1);
      }
    });
  }
  go.store(true);
  for (auto& t : writers) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(log->last_index(), static_cast<std::uint64_t>(kWriters * kAppendsPerWriter));
  const FlushStats stats = log->stats();
  std::printf("group commit: %llu appends, %llu flushes, %.1f entries per flush, %llu sync calls\n",
              static_cast<unsigned long long>(kWriters * kAppendsPerWriter),
              static_cast<unsigned long long>(stats.flushes), stats.entries_per_flush(),
              static_cast<unsigned long long>(stats.sync_calls));
  EXPECT_LT(stats.flushes, static_cast<std::uint64_t>(kWriters));
  EXPECT_GT(stats.entries_per_flush(), 5.0);
}

}  // namespace
}  // namespace raftlog::store

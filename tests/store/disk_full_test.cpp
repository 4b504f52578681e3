// Disk full: an append that cannot get space fails with kNoSpace, writes nothing, leaves the log
// readable and consistent, and appends succeed again once space is freed.
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <cstring>
#include <filesystem>
#include <thread>

#include "test_util.h"

namespace raftlog::store {
namespace {

using testing::make_batch;
using testing::open_ok;
using testing::small_options;

TEST(DiskFull, InjectedNoSpaceOnSegmentCreation) {
  MemoryEnv env;
  ASSERT_TRUE(env.create_dir("/log").ok());
  auto options = small_options(&env);
  auto log = open_ok("/log", options);
  ASSERT_TRUE(log);
  auto first = make_batch(1, 30, 1, 1000);  // ~half a segment
  ASSERT_TRUE(log->append(first.span()).ok());
  // Let the allocator finish its prepared segment, then cap the disk at what is used now: the
  // prepared segment is consumed by the next roll; the one after cannot be created.
  ASSERT_TRUE(log->flush().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  env.set_capacity_bytes(env.used_bytes());

  std::uint64_t next = 31;
  Status failure;
  for (int i = 0; i < 400 && failure.ok(); ++i) {
    auto batch = make_batch(next, 5, 1, 1000);
    auto result = log->append(batch.span());
    if (result.ok()) {
      next += 5;
    } else {
      failure = result.status();
    }
  }
  ASSERT_FALSE(failure.ok()) << "the disk never filled";
  EXPECT_EQ(failure.code(), StatusCode::kNoSpace) << failure.to_string();
  EXPECT_NE(failure.message().find("No space"), std::string::npos) << failure.message();
  // Nothing of the failed batch is visible; everything before it is intact and durable.
  EXPECT_EQ(log->last_index(), next - 1);
  EXPECT_EQ(log->flushed_index(), next - 1);
  testing::expect_entries(*log, 1, next - 1, 1, 1000);
  // Still failing while the disk is full, still consistent.
  auto again = make_batch(next, 5, 1, 1000);
  EXPECT_EQ(log->append(again.span()).status().code(), StatusCode::kNoSpace);
  EXPECT_EQ(log->last_index(), next - 1);

  // Free space: appends work again.
  env.set_capacity_bytes(0);
  ASSERT_TRUE(log->append(again.span()).ok());
  EXPECT_EQ(log->last_index(), next + 4);
  testing::expect_entries(*log, 1, next + 4, 1, 1000);
  ASSERT_TRUE(log->close().ok());
  auto reopened = open_ok("/log", options);
  ASSERT_TRUE(reopened);
  EXPECT_EQ(reopened->last_index(), next + 4);
}

TEST(DiskFull, FailedAppendLeavesNothingAfterCrash) {
  MemoryEnv env;
  ASSERT_TRUE(env.create_dir("/log").ok());
  auto options = small_options(&env);
  options.preallocate_next_segment = false;  // every roll creates its segment synchronously
  auto log = open_ok("/log", options);
  ASSERT_TRUE(log);
  auto first = make_batch(1, 40, 1, 1000);
  ASSERT_TRUE(log->append(first.span()).ok());
  env.set_capacity_bytes(env.used_bytes());
  // A batch that needs a new segment midway: the first part would fit the current segment.
  auto spanning = make_batch(41, 40, 1, 1000);
  EXPECT_EQ(log->append(spanning.span()).status().code(), StatusCode::kNoSpace);
  EXPECT_EQ(log->last_index(), 40U);
  env.crash();
  log.reset();
  env.restart({CrashMode::kKeepAll, 1});
  env.set_capacity_bytes(0);
  auto reopened = open_ok("/log", options);
  ASSERT_TRUE(reopened);
  EXPECT_EQ(reopened->last_index(), 40U);  // no partial batch resurfaces
  testing::expect_entries(*reopened, 1, 40, 1, 1000);
}

// Real ENOSPC from a tiny tmpfs (needs root and mount permission; skipped otherwise).
TEST(DiskFull, RealTmpfsNoSpace) {
  testing::TempDir mount_point;
  if (mount("tmpfs", mount_point.path().c_str(), "tmpfs", 0, "size=1m") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here: " << std::strerror(errno);
  }
  struct Unmount {
    std::string path;
    ~Unmount() { umount2(path.c_str(), MNT_DETACH); }
  } unmount{mount_point.path()};
  const std::string dir = mount_point.path() + "/log";
  Options options;
  options.segment_size_bytes = 256 << 10;
  options.max_entry_size_bytes = 8 << 10;
  auto log = open_ok(dir, options);
  ASSERT_TRUE(log);
  std::uint64_t next = 1;
  Status failure;
  for (int i = 0; i < 1000 && failure.ok(); ++i) {
    auto batch = make_batch(next, 10, 1, 2000);
    auto result = log->append(batch.span());
    if (result.ok()) {
      next += 10;
    } else {
      failure = result.status();
    }
  }
  ASSERT_FALSE(failure.ok());
  EXPECT_EQ(failure.code(), StatusCode::kNoSpace) << failure.to_string();
  EXPECT_EQ(log->last_index(), next - 1);
  testing::expect_entries(*log, 1, next - 1, 1, 2000);
  // Retention frees whole segments; then appends succeed again.
  ASSERT_TRUE(log->truncate_prefix(next - 1).ok());
  auto batch = make_batch(next, 10, 1, 2000);
  auto result = log->append(batch.span());
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  ASSERT_TRUE(log->close().ok());
}

}  // namespace
}  // namespace raftlog::store

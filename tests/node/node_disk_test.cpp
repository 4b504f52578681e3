// A Node on a file system that fills: DISK_FULL and the disk watermarks refuse appends while reads
// go on, and appends resume once space is freed. Each test mounts a small tmpfs (needs root and
// mount permission; skipped otherwise).
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "node_test_support.h"

namespace raftlog::server {
namespace {

using namespace raftlog::server::testing;  // node_test_support.h

// A small tmpfs mounted on a temp dir for the test's lifetime (needs root and mount permission).
class ScopedTmpfs {
 public:
  explicit ScopedTmpfs(const char* size) {
    mounted_ = ::mount("tmpfs", dir_.path().c_str(), "tmpfs", 0,
                       (std::string("size=") + size).c_str()) == 0;
    if (!mounted_) error_ = std::strerror(errno);
  }
  ~ScopedTmpfs() {
    if (mounted_) ::umount2(dir_.path().c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }
  const std::string& path() const { return dir_.path(); }

 private:
  TempDir dir_;
  bool mounted_ = false;
  std::string error_;
};

// A leader whose file system fills refuses appends with RESOURCE_EXHAUSTED/DISK_FULL instead of
// failing, keeps serving reads, and accepts appends again once space is freed. Real ENOSPC from a
// small tmpfs (needs root and mount permission; skipped otherwise).
TEST(Node, DiskFullRefusesAppendsKeepsReadsAndRecoversWhenSpaceIsFreed) {
  ScopedTmpfs mount_point("2m");
  if (!mount_point.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here: " << mount_point.error();

  NodeConfig config = test_config(mount_point.path(), 1);
  config.store.segment_size_bytes = 256 << 10;
  FakeCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.start_leader(config));
  Node& node = *cluster.node;
  const AppendResult before = append_and_wait(node, {"before-full"});
  ASSERT_TRUE(before.error.ok()) << before.error.message;

  // Fill the file system with a scratch file until less than a segment is left.
  const std::string filler = mount_point.path() + "/filler";
  {
    FILE* f = std::fopen(filler.c_str(), "w");
    ASSERT_NE(f, nullptr);
    const std::string block(64 << 10, 'x');
    for (int i = 0; i < 64 && std::fwrite(block.data(), 1, block.size(), f) == block.size(); ++i) {
    }
    std::fclose(f);
  }
  // The free-space check is refreshed every 100 ms.
  AppendResult refused;
  ASSERT_TRUE(wait_until([&] {
    refused = append_and_wait(node, {"while-full"});
    return !refused.error.ok();
  }));
  EXPECT_EQ(refused.error.code, ErrorCode::kResourceExhausted) << refused.error.message;
  EXPECT_EQ(refused.error.reason, "DISK_FULL");
  EXPECT_FALSE(node.failed());
  // Reads keep working and nothing was lost.
  const std::vector<raft::Entry> entries = read_all(node, before.first_index);
  ASSERT_FALSE(entries.empty());
  EXPECT_EQ(entries.front().payload, "before-full");

  ASSERT_EQ(std::remove(filler.c_str()), 0);
  AppendResult after;
  ASSERT_TRUE(wait_until([&] {
    after = append_and_wait(node, {"after-space-freed"});
    return after.error.ok();
  }));
  EXPECT_GT(after.first_index, before.last_index);
  node.stop();
}

// Fills `path` with `bytes` of scratch data (replacing it).
void write_filler(const std::string& path, std::size_t bytes) {
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  const std::string block(64 << 10, 'x');
  for (std::size_t written = 0; written < bytes; written += block.size()) {
    ASSERT_EQ(std::fwrite(block.data(), 1, block.size(), f), block.size());
  }
  ASSERT_EQ(std::fclose(f), 0);
}

// Above the high watermark the leader refuses appends with RESOURCE_EXHAUSTED/DISK_WATERMARK while
// reads go on; between the watermarks it keeps refusing (hysteresis); at or below the low watermark it
// accepts again. A real small tmpfs (needs root and mount permission; skipped otherwise).
TEST(Node, DiskWatermarkRefusesAppendsWithHysteresisAndKeepsReads) {
  ScopedTmpfs mount_point("8m");
  if (!mount_point.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here: " << mount_point.error();

  NodeConfig config = test_config(mount_point.path(), 1);
  config.store.segment_size_bytes = 256 << 10;
  config.disk_high_watermark = 0.60;
  config.disk_low_watermark = 0.30;
  FakeCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.start_leader(config));
  Node& node = *cluster.node;
  const AppendResult before = append_and_wait(node, {"before-watermark"});
  ASSERT_TRUE(before.error.ok()) << before.error.message;
  EXPECT_FALSE(node.disk_watermark_exceeded());

  const std::string filler = mount_point.path() + "/filler";
  write_filler(filler, 6 << 20);  // ~75 % of 8 MiB with the log
  AppendResult refused;
  ASSERT_TRUE(wait_until([&] {
    refused = append_and_wait(node, {"above-high"});
    return !refused.error.ok();
  }));
  EXPECT_EQ(refused.error.code, ErrorCode::kResourceExhausted) << refused.error.message;
  EXPECT_EQ(refused.error.reason, "DISK_WATERMARK");
  EXPECT_NE(refused.error.message.find("high watermark"), std::string::npos)
      << refused.error.message;
  EXPECT_TRUE(node.disk_watermark_exceeded());
  EXPECT_FALSE(node.failed());
  // Status shows it (raftlogctl status, drills4 M2): use past the mark, and a leader with no
  // follower reporting room (it has none) keeping leadership. The loop publishes status at the end
  // of its round, after it answered the refused append: read it once that round has ended.
  replica::NodeStatus full;
  EXPECT_TRUE(wait_until([&] {
    full = node.status();
    return full.disk_over_high_watermark;
  }));
  EXPECT_TRUE(full.disk_over_high_watermark);
  EXPECT_GE(full.disk_used_ratio, 0.60);
  EXPECT_DOUBLE_EQ(full.disk_high_watermark, 0.60);
  EXPECT_TRUE(full.disk_keeping_leadership);
  // Reads keep working: the entry from before, then the appends accepted before the next check.
  const std::vector<raft::Entry> entries = read_all(node, before.first_index);
  ASSERT_FALSE(entries.empty());
  EXPECT_EQ(entries.front().payload, "before-watermark");
  for (std::size_t i = 1; i < entries.size(); ++i) EXPECT_EQ(entries[i].payload, "above-high");

  // Between the watermarks (~45 %): still refused, even after several checks.
  write_filler(filler, 3 << 20);
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  for (int i = 0; i < 3; ++i) {
    const AppendResult between = append_and_wait(node, {"between"});
    EXPECT_EQ(between.error.reason, "DISK_WATERMARK") << between.error.message;
    std::this_thread::sleep_for(std::chrono::milliseconds(110));
  }

  ASSERT_EQ(std::remove(filler.c_str()), 0);
  AppendResult after;
  ASSERT_TRUE(wait_until([&] {
    after = append_and_wait(node, {"below-low"});
    return after.error.ok();
  }));
  EXPECT_FALSE(node.disk_watermark_exceeded());
  replica::NodeStatus freed;
  EXPECT_TRUE(wait_until([&] {
    freed = node.status();
    return !freed.disk_over_high_watermark;
  }));
  EXPECT_FALSE(freed.disk_over_high_watermark);
  EXPECT_FALSE(freed.disk_keeping_leadership);
  EXPECT_LE(freed.disk_used_ratio, 0.30);
  EXPECT_GT(after.first_index, before.last_index);
  node.stop();
}

}  // namespace
}  // namespace raftlog::server

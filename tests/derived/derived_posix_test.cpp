// DerivedIndexes over the real file system (PosixEnv in a temp directory): MemoryEnv cannot catch
// every POSIX rule (unlink() of a directory is EISDIR), so the rebuild and the cleanup of stray
// topic directories are run here on a real disk too.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "derived/derived_indexes.h"
#include "derived_test_support.h"

namespace raftlog::derived {
namespace {

using namespace raftlog::derived::testing;

class PosixDerivedIndexes : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "raftlog-derived-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    dir_ = root_ + "/derived";
    log_ = random_log(5, 300);
    OpenReport report;
    auto indexes = open(&report);
    ASSERT_NE(indexes, nullptr);
    replay(*indexes, log_);
    const store::Status persisted = indexes->persist();
    ASSERT_TRUE(persisted.ok()) << persisted.to_string();
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(root_, ignored);
  }
  std::unique_ptr<DerivedIndexes> open(OpenReport* report) {
    store::Status error;
    auto indexes =
        DerivedIndexes::open(store::Env::posix(), dir_, LogIdentity{"c", 1}, log_, report, &error);
    EXPECT_NE(indexes, nullptr) << error.to_string();
    return indexes;
  }
  void flip_byte(const std::string& path, std::streamoff offset) {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(file.is_open()) << path;
    file.seekg(offset);
    char byte = 0;
    file.read(&byte, 1);
    byte = static_cast<char>(byte ^ 0x08);
    file.seekp(offset);
    file.write(&byte, 1);
  }
  void expect_rebuilt_then_resumed() {
    {
      OpenReport report;
      auto indexes = open(&report);
      ASSERT_NE(indexes, nullptr);
      EXPECT_EQ(report.mode, OpenMode::kRebuilt) << report.reason;
      replay(*indexes, log_);
      EXPECT_EQ(describe(*indexes, log_), describe_from_scratch(log_));
      ASSERT_TRUE(indexes->persist().ok());
    }
    OpenReport report;
    auto indexes = open(&report);
    ASSERT_NE(indexes, nullptr);
    EXPECT_EQ(report.mode, OpenMode::kResumed) << report.reason;
    EXPECT_EQ(describe(*indexes, log_), describe_from_scratch(log_));
  }
  std::string root_;
  std::string dir_;
  FakeLog log_;
};

TEST_F(PosixDerivedIndexes, AFlippedCursorIsRebuiltOnARealDisk) {
  ASSERT_TRUE(std::filesystem::is_directory(dir_ + "/topics/t1"));
  flip_byte(dir_ + "/CURSOR", 30);
  expect_rebuilt_then_resumed();
}

TEST_F(PosixDerivedIndexes, AFlippedRecordIsRebuiltOnARealDisk) {
  flip_byte(dir_ + "/topics/t1/00000000000000000000.rec", 9);
  expect_rebuilt_then_resumed();
}

TEST_F(PosixDerivedIndexes, AStrayTopicDirectoryIsRemovedAtOpen) {
  // A topic created after the last cursor: its directory and records are not vouched for.
  const std::string stray = dir_ + "/topics/not-in-the-cursor";
  std::filesystem::create_directory(stray);
  std::ofstream(stray + "/00000000000000000000.rec") << std::string(kRecordBytes, 'x');
  OpenReport report;
  auto indexes = open(&report);
  ASSERT_NE(indexes, nullptr);
  EXPECT_EQ(report.mode, OpenMode::kResumed) << report.reason;
  EXPECT_FALSE(std::filesystem::exists(stray));
  EXPECT_EQ(describe(*indexes, log_), describe_from_scratch(log_));
}

}  // namespace
}  // namespace raftlog::derived

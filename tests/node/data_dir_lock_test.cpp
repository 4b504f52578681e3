// One raftlogd per data directory (src/server/data_dir_lock.h): a second lock on a directory is
// refused, naming the holder, until the first is released; nothing is written into the directory;
// the holder's pid comes from /proc/locks text that is parsed strictly.
#include "server/data_dir_lock.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "temp_dir.h"

namespace raftlog::server {
namespace {

using testing::TempDir;

TEST(DataDirLock, ASecondLockOnTheDirectoryIsRefusedAndNamesTheHolder) {
  TempDir dir;
  const std::string data_dir = dir.path() + "/data";
  std::string problem;
  auto first = DataDirLock::acquire(data_dir, &problem);
  ASSERT_NE(first, nullptr) << problem;
  EXPECT_TRUE(std::filesystem::is_directory(data_dir));  // created when missing
  EXPECT_TRUE(std::filesystem::is_empty(data_dir));      // nothing written into it

  // flock(2) locks belong to an open file description, so a second acquire in this process
  // conflicts exactly as another process's would.
  auto second = DataDirLock::acquire(data_dir, &problem);
  EXPECT_EQ(second, nullptr);
  EXPECT_NE(problem.find("is in use by another process (process " + std::to_string(::getpid()) +
                         ")"),
            std::string::npos)
      << problem;
  EXPECT_NE(problem.find("is another raftlogd running on it?"), std::string::npos) << problem;

  first.reset();  // released: the next start may take it
  problem.clear();
  auto third = DataDirLock::acquire(data_dir, &problem);
  EXPECT_NE(third, nullptr) << problem;
}

TEST(DataDirLock, ADirectoryItCreatedIsRemovedOnlyWhileEmpty) {
  TempDir dir;
  const std::string refused = dir.path() + "/refused";
  std::string problem;
  auto lock = DataDirLock::acquire(refused, &problem);
  ASSERT_NE(lock, nullptr) << problem;
  lock.reset();  // a start refused before it wrote anything leaves no directory behind
  EXPECT_FALSE(std::filesystem::exists(refused));

  const std::string used = dir.path() + "/used";
  lock = DataDirLock::acquire(used, &problem);
  ASSERT_NE(lock, nullptr) << problem;
  { std::FILE* file = std::fopen((used + "/IDENTITY").c_str(), "w"); ASSERT_NE(file, nullptr); std::fclose(file); }
  lock.reset();
  EXPECT_TRUE(std::filesystem::exists(used + "/IDENTITY"));

  const std::string existing = dir.path() + "/existing";
  std::filesystem::create_directory(existing);
  lock = DataDirLock::acquire(existing, &problem);
  ASSERT_NE(lock, nullptr) << problem;
  lock.reset();  // not ours to remove, empty or not
  EXPECT_TRUE(std::filesystem::is_directory(existing));
}

TEST(DataDirLock, ADataDirectoryThatIsAFileIsRefusedWithTheReason) {
  TempDir dir;
  const std::string path = dir.path() + "/file";
  { std::FILE* file = std::fopen(path.c_str(), "w"); ASSERT_NE(file, nullptr); std::fclose(file); }
  std::string problem;
  EXPECT_EQ(DataDirLock::acquire(path, &problem), nullptr);
  EXPECT_NE(problem.find(path), std::string::npos) << problem;
}

TEST(DataDirLock, TheHolderIsReadOnlyFromAWellFormedFlockLine) {
  const std::string text =
      "1: POSIX  ADVISORY  WRITE 111 08:01:42 0 EOF\n"      // a POSIX lock, not ours
      "2: FLOCK  ADVISORY  READ 222 08:01:42 0 EOF\n"       // a shared flock
      "3: FLOCK  ADVISORY  WRITE 333 08:02:42 0 EOF\n"      // another device
      "4: FLOCK  ADVISORY  WRITE 444 08:01:43 0 EOF\n"      // another inode
      "5: FLOCK  ADVISORY  WRITE x55 fd:01:42 0 EOF\n"      // a pid that is not a number
      "6: FLOCK  ADVISORY  WRITE 666 fd:01:42x 0 EOF\n"     // a device field with a tail
      "6: -> FLOCK  ADVISORY  WRITE 667 fd:01:42 0 EOF\n"   // a blocked waiter
      "garbage\n"
      "7: FLOCK  ADVISORY  WRITE 777 fd:01:42 0 EOF\n";
  EXPECT_EQ(holder_pid_from_proc_locks(text, 0xfd, 0x01, 42), 777);
  EXPECT_EQ(holder_pid_from_proc_locks(text, 0x08, 0x01, 42), 0);  // only POSIX/READ/others there
  EXPECT_EQ(holder_pid_from_proc_locks("", 0xfd, 0x01, 42), 0);
  EXPECT_EQ(holder_pid_from_proc_locks("7: FLOCK  ADVISORY  WRITE -5 fd:01:42 0 EOF\n", 0xfd, 1, 42), 0);
}

}  // namespace
}  // namespace raftlog::server

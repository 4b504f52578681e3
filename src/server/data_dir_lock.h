// One raftlogd per data directory. Two processes on one directory (a second start by hand, a
// supervisor and an operator both starting the node, a container restarted while the old one still
// runs) each recover the same files, append to the same segments and answer as the same node: one
// can acknowledge an entry that the other's writes then overwrite (outside test drills7 D4: an
// acknowledged append lost at index 1514, the nodes disagreeing silently after a restart).
//
// raftlogd takes an exclusive flock(2) on the data directory itself before it reads or writes
// anything in it (DIR/JOIN, DIR/IDENTITY, the log) and holds it until the process exits; the kernel
// drops it when the process dies, kill -9 included, so there is no stale lock to clear. Nothing is
// written: the lock is on the directory's inode, not on a file in it, so a refused directory (another
// cluster's, another node's) is not changed either. docs/operations.md, "Starting and stopping a node".
#pragma once

#include <memory>
#include <string>
#include <utility>

namespace raftlog::server {

class DataDirLock {
 public:
  // Creates `data_dir` when missing and locks it. nullptr with `problem` set when another process
  // holds the lock (naming its pid when /proc/locks shows it) or the directory cannot be made,
  // opened or locked.
  static std::unique_ptr<DataDirLock> acquire(const std::string& data_dir, std::string* problem);
  // Unlocks; a directory this lock created and nothing has been written into since is removed
  // again, so a start refused after the lock (a join another cluster answered, a bad certificate)
  // leaves no trace, as before the lock existed.
  ~DataDirLock();
  DataDirLock(const DataDirLock&) = delete;
  DataDirLock& operator=(const DataDirLock&) = delete;

 private:
  DataDirLock(int fd, std::string created_path) : fd_(fd), created_path_(std::move(created_path)) {}
  int fd_;
  std::string created_path_;  // empty when the directory existed before acquire()
};

// The pid /proc/locks names for an flock held on (`device_major`, `device_minor`, `inode`), 0 when
// no line matches or the text is not what Linux writes. Reads at most `kMaxLockLines` lines of
// `proc_locks_text` (the file is the machine's, not ours: its size is not ours to trust).
inline constexpr int kMaxLockLines = 100000;
long holder_pid_from_proc_locks(const std::string& proc_locks_text, unsigned device_major,
                                unsigned device_minor, unsigned long long inode);

}  // namespace raftlog::server

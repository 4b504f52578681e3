#include "server/data_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace raftlog::server {
namespace {

// At most 1 MiB of /proc/locks: enough for ~15,000 locks, and a bound on what a message reads.
constexpr std::streamsize kMaxProcLocksBytes = 1 << 20;

std::string read_proc_locks() {
  std::ifstream in("/proc/locks", std::ios::binary);
  if (!in) return "";
  std::string text(static_cast<std::size_t>(kMaxProcLocksBytes), '\0');
  in.read(text.data(), kMaxProcLocksBytes);
  text.resize(static_cast<std::size_t>(in.gcount()));
  return text;
}

}  // namespace

long holder_pid_from_proc_locks(const std::string& proc_locks_text, unsigned device_major,
                                unsigned device_minor, unsigned long long inode) {
  // Linux writes "N: FLOCK  ADVISORY  WRITE PID MAJ:MIN:INODE START END" with MAJ and MIN in hex
  // (fs/locks.c); lines of blocked waiters start with "N: ->" and are skipped.
  std::istringstream lines(proc_locks_text);
  std::string line;
  for (int count = 0; count < kMaxLockLines && std::getline(lines, line); ++count) {
    std::istringstream fields(line);
    std::string number, kind, mode, access, pid_text, device_text;
    if (!(fields >> number >> kind >> mode >> access >> pid_text >> device_text)) continue;
    if (kind != "FLOCK" || access != "WRITE") continue;
    unsigned major_read = 0, minor_read = 0;
    unsigned long long inode_read = 0;
    char tail = 0;
    if (std::sscanf(device_text.c_str(), "%x:%x:%llu%c", &major_read, &minor_read, &inode_read,
                    &tail) != 3) {
      continue;
    }
    if (major_read != device_major || minor_read != device_minor || inode_read != inode) continue;
    char* end = nullptr;
    errno = 0;
    const long pid = std::strtol(pid_text.c_str(), &end, 10);
    if (errno != 0 || end == pid_text.c_str() || *end != '\0' || pid <= 0) continue;
    return pid;
  }
  return 0;
}

std::unique_ptr<DataDirLock> DataDirLock::acquire(const std::string& data_dir,
                                                  std::string* problem) {
  std::error_code exists_error;
  const bool existed = std::filesystem::exists(data_dir, exists_error);
  std::error_code mkdir_error;
  std::filesystem::create_directories(data_dir, mkdir_error);
  if (mkdir_error) {
    *problem = "cannot create the data directory " + data_dir + ": " + mkdir_error.message();
    return nullptr;
  }
  const int fd = ::open(data_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    *problem = "cannot open the data directory " + data_dir + ": " + std::strerror(errno);
    return nullptr;
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
    return std::unique_ptr<DataDirLock>(new DataDirLock(fd, existed ? "" : data_dir));
  }
  const int lock_errno = errno;
  std::string holder;
  struct stat info {};
  if (lock_errno == EWOULDBLOCK && ::fstat(fd, &info) == 0) {
    const long pid = holder_pid_from_proc_locks(read_proc_locks(), major(info.st_dev),
                                                minor(info.st_dev), info.st_ino);
    if (pid > 0) holder = " (process " + std::to_string(pid) + ")";
  }
  ::close(fd);
  if (lock_errno == EWOULDBLOCK) {
    *problem = "the data directory " + data_dir + " is in use by another process" + holder +
               ": is another raftlogd running on it? Two processes on one data directory would "
               "overwrite each other's entries; stop the other one first";
  } else {
    *problem = "cannot lock the data directory " + data_dir + ": " + std::strerror(lock_errno);
  }
  return nullptr;
}

DataDirLock::~DataDirLock() {
  // rmdir(2) removes only an empty directory: once the node wrote anything it stays.
  if (!created_path_.empty()) ::rmdir(created_path_.c_str());
  ::close(fd_);
}

}  // namespace raftlog::server

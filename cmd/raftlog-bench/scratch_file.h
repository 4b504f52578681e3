// The preallocated file the raw-disk loops (raw_disk.cpp, raw_group_commit.cpp) write into: created
// (it must not exist), preallocated with fallocate() as a store segment is, the preallocation made
// durable so the loops measure data syncs rather than extent setup, and removed however the
// measurement ends. Errors throw std::system_error naming `what` and the path.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>

namespace raftlog::bench {

[[noreturn]] inline void throw_errno(int error, const std::string& what) {
  throw std::system_error(error, std::generic_category(), what);
}

class ScratchFile {
 public:
  // `what` prefixes error messages ("raw disk", "raw group commit").
  ScratchFile(std::filesystem::path path, std::uint64_t preallocate_bytes, std::string what)
      : path_(std::move(path)), what_(std::move(what)) {
    fd_ = ::open(path_.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0644);
    if (fd_ < 0) throw_errno(errno, what_ + ": create " + path_.string());
    if (const int error = ::posix_fallocate(fd_, 0, static_cast<off_t>(preallocate_bytes));
        error != 0) {
      cleanup();
      throw_errno(error, what_ + ": fallocate " + std::to_string(preallocate_bytes) + " bytes in " +
                             path_.string());
    }
    if (::fsync(fd_) != 0) {
      const int error = errno;
      cleanup();
      throw_errno(error, what_ + ": fsync " + path_.string());
    }
  }
  ~ScratchFile() { cleanup(); }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  int fd() const { return fd_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  void cleanup() {
    if (fd_ < 0) return;
    ::close(fd_);
    fd_ = -1;
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }

  std::filesystem::path path_;
  std::string what_;
  int fd_ = -1;
};

}  // namespace raftlog::bench

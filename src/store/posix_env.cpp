// PosixEnv: the production file layer (open/posix_fallocate/mmap/msync/fdatasync/rename/unlink).
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "store/env.h"

namespace raftlog::store {
namespace {

std::uint64_t page_size_bytes() {
  static const std::uint64_t size = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  return size;
}

class PosixMapping final : public Mapping {
 public:
  PosixMapping(char* data, std::size_t size, std::string path)
      : data_(data), size_(size), path_(std::move(path)) {}
  ~PosixMapping() override { munmap(data_, size_); }
  char* data() override { return data_; }
  const char* data() const override { return data_; }
  std::size_t size() const override { return size_; }
  Status flush(std::uint64_t offset, std::uint64_t length) override {
    if (length == 0) return Status();
    if (offset + length > size_)
      return Status::invalid_argument("flush range past mapping of " + path_);
    const std::uint64_t page = page_size_bytes();
    const std::uint64_t start = offset / page * page;
    const std::uint64_t end = offset + length;
    if (msync(data_ + start, end - start, MS_SYNC) != 0) {
      return Status::from_errno(errno, "msync " + path_);
    }
    return Status();
  }

 private:
  char* data_;
  std::size_t size_;
  std::string path_;
};

class PosixFile final : public File {
 public:
  PosixFile(int fd, std::string path, bool writable)
      : fd_(fd), path_(std::move(path)), writable_(writable) {}
  ~PosixFile() override { ::close(fd_); }
  Status allocate(std::uint64_t offset, std::uint64_t length) override {
    const int rc = posix_fallocate(fd_, static_cast<off_t>(offset), static_cast<off_t>(length));
    if (rc != 0) return Status::from_errno(rc, "posix_fallocate " + path_);
    return Status();
  }
  Status truncate(std::uint64_t size_bytes) override {
    if (ftruncate(fd_, static_cast<off_t>(size_bytes)) != 0) {
      return Status::from_errno(errno, "ftruncate " + path_);
    }
    return Status();
  }
  Result<std::uint64_t> size() const override {
    struct stat st {};
    if (fstat(fd_, &st) != 0) return Status::from_errno(errno, "fstat " + path_);
    return static_cast<std::uint64_t>(st.st_size);
  }
  Result<std::shared_ptr<Mapping>> map(std::uint64_t length) override {
    auto current = size();
    if (!current.ok()) return current.status();
    if (*current < length) return Status::invalid_argument("map past end of " + path_);
    const int protection = writable_ ? PROT_READ | PROT_WRITE : PROT_READ;
    void* data = mmap(nullptr, length, protection, MAP_SHARED, fd_, 0);
    if (data == MAP_FAILED) return Status::from_errno(errno, "mmap " + path_);
    return std::shared_ptr<Mapping>(
        std::make_shared<PosixMapping>(static_cast<char*>(data), length, path_));
  }
  Status write_at(std::uint64_t offset, std::string_view data) override {
    // Bounded: every pass writes at least one byte or fails; EINTR retries do not advance.
    std::size_t done = 0;
    while (done < data.size()) {
      const ssize_t n =
          ::pwrite(fd_, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
      if (n < 0) {
        if (errno == EINTR) continue;
        return Status::from_errno(errno, "pwrite " + path_);
      }
      if (n == 0) return Status::io("pwrite " + path_ + ": wrote nothing");
      done += static_cast<std::size_t>(n);
    }
    return Status();
  }
  Status sync() override {
    if (fdatasync(fd_) != 0) return Status::from_errno(errno, "fdatasync " + path_);
    return Status();
  }

 private:
  int fd_;
  std::string path_;
  bool writable_;
};

class PosixEnv final : public Env {
 public:
  Status create_dir(const std::string& path) override {
    if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
      return Status::from_errno(errno, "mkdir " + path);
    }
    return Status();
  }
  Result<std::vector<std::string>> list_dir(const std::string& dir) const override {
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) return Status::from_errno(errno, "opendir " + dir);
    std::vector<std::string> names;
    while (const dirent* entry = readdir(d)) {
      const std::string name = entry->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    closedir(d);
    return names;
  }
  bool exists(const std::string& path) const override {
    struct stat st {};
    return stat(path.c_str(), &st) == 0;
  }
  Result<std::chrono::system_clock::time_point> modified_at(
      const std::string& path) const override {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) return Status::from_errno(errno, "stat " + path);
    return std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::seconds(st.st_mtim.tv_sec) +
            std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
  }
  Result<std::unique_ptr<File>> open(const std::string& path, bool create) override {
    const int flags = O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0);
    const int fd = ::open(path.c_str(), flags, 0644);
    if (fd < 0) return Status::from_errno(errno, "open " + path);
    return std::unique_ptr<File>(std::make_unique<PosixFile>(fd, path, /*writable=*/true));
  }
  Result<std::unique_ptr<File>> open_read_only(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Status::from_errno(errno, "open " + path);
    return std::unique_ptr<File>(std::make_unique<PosixFile>(fd, path, /*writable=*/false));
  }
  Status rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      return Status::from_errno(errno, "rename " + from + " -> " + to);
    }
    return Status();
  }
  Status remove(const std::string& path) override {
    if (unlink(path.c_str()) != 0 && errno != ENOENT)
      return Status::from_errno(errno, "unlink " + path);
    return Status();
  }
  Status remove_dir(const std::string& path) override {
    if (rmdir(path.c_str()) != 0 && errno != ENOENT)
      return Status::from_errno(errno, "rmdir " + path);
    return Status();
  }
  Status sync_dir(const std::string& dir) override {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return Status::from_errno(errno, "open dir " + dir);
    const int rc = fsync(fd);
    const int saved = errno;
    ::close(fd);
    if (rc != 0) return Status::from_errno(saved, "fsync dir " + dir);
    return Status();
  }
  Result<std::string> read_file(const std::string& path, std::size_t max_bytes) const override {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Status::from_errno(errno, "open " + path);
    std::string content;
    char buffer[4096];
    for (;;) {
      const ssize_t n = ::read(fd, buffer, sizeof(buffer));
      if (n < 0) {
        if (errno == EINTR) continue;
        const int saved = errno;
        ::close(fd);
        return Status::from_errno(saved, "read " + path);
      }
      if (n == 0) break;
      content.append(buffer, static_cast<std::size_t>(n));
      if (content.size() > max_bytes) {
        ::close(fd);
        return Status::invalid_argument(path + " is larger than " + std::to_string(max_bytes) +
                                        " bytes");
      }
    }
    ::close(fd);
    return content;
  }
  Status write_file(const std::string& path, std::string_view content) override {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return Status::from_errno(errno, "open " + path);
    std::size_t written = 0;
    while (written < content.size()) {
      const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
      if (n < 0) {
        if (errno == EINTR) continue;
        const int saved = errno;
        ::close(fd);
        return Status::from_errno(saved, "write " + path);
      }
      written += static_cast<std::size_t>(n);
    }
    const int rc = fdatasync(fd);
    const int saved = errno;
    ::close(fd);
    if (rc != 0) return Status::from_errno(saved, "fdatasync " + path);
    return Status();
  }
};

}  // namespace

Env* Env::posix() {
  static PosixEnv env;
  return &env;
}

}  // namespace raftlog::store

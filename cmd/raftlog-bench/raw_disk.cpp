#include "raw_disk.h"

#include <fcntl.h>
#include <unistd.h>

#include <cassert>
#include <cerrno>
#include <string>
#include <system_error>
#include <vector>

#include "report.h"

namespace raftlog::bench {
namespace {

[[noreturn]] void throw_errno(int error, const std::string& what) {
  throw std::system_error(error, std::generic_category(), what);
}

// Owns the descriptor and the file: both are gone however the measurement ends.
class ScratchFile {
 public:
  explicit ScratchFile(std::filesystem::path path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    if (fd_ < 0) throw_errno(errno, "raw disk: create " + path_.string());
  }
  ~ScratchFile() {
    ::close(fd_);
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;
  int fd() const { return fd_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

}  // namespace

double RawDiskResult::mib_per_s() const { return seconds > 0 ? static_cast<double>(bytes) / kMiB / seconds : 0.0; }
double RawDiskResult::syncs_per_s() const { return seconds > 0 ? static_cast<double>(syncs) / seconds : 0.0; }

RawDiskResult measure_raw_write_fdatasync(const RawDiskOptions& options, std::atomic<std::uint64_t>* progress_bytes) {
  assert(options.batch_bytes > 0);
  assert(options.max_file_bytes >= options.batch_bytes);
  ScratchFile file(options.file);
  if (const int error = ::posix_fallocate(file.fd(), 0, static_cast<off_t>(options.max_file_bytes)); error != 0) {
    throw_errno(error, "raw disk: fallocate " + std::to_string(options.max_file_bytes) + " bytes in " +
                           file.path().string());
  }
  // Make the preallocation itself durable first so the loop measures data syncs, not the extent setup.
  if (::fsync(file.fd()) != 0) throw_errno(errno, "raw disk: fsync " + file.path().string());

  // Non-zero, non-repeating-per-page content so that no layer can shortcut zero pages.
  std::vector<char> batch(options.batch_bytes);
  for (std::size_t i = 0; i < batch.size(); ++i) batch[i] = static_cast<char>('a' + (i * 7 + i / 4096) % 26);

  RawDiskResult result;
  const std::uint64_t max_syncs = options.max_file_bytes / options.batch_bytes;  // the loop bound
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + options.duration;
  while (result.syncs < max_syncs && std::chrono::steady_clock::now() < deadline) {
    std::uint64_t written = 0;
    while (written < options.batch_bytes) {
      const ssize_t n = ::pwrite(file.fd(), batch.data() + written, options.batch_bytes - written,
                                 static_cast<off_t>(result.bytes + written));
      if (n < 0) {
        if (errno == EINTR) continue;
        throw_errno(errno, "raw disk: write " + file.path().string());
      }
      written += static_cast<std::uint64_t>(n);
    }
    if (::fdatasync(file.fd()) != 0) throw_errno(errno, "raw disk: fdatasync " + file.path().string());
    result.bytes += options.batch_bytes;
    ++result.syncs;
    if (progress_bytes != nullptr) progress_bytes->store(result.bytes, std::memory_order_relaxed);
  }
  result.seconds = seconds_since(start);
  return result;
}

}  // namespace raftlog::bench

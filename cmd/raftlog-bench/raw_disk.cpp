#include "raw_disk.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cassert>
#include <optional>
#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>
#include <vector>

#include "report.h"
#include "scratch_file.h"

namespace raftlog::bench {
namespace {

// The whole file mapped shared, unmapped however the measurement ends.
class SharedMapping {
 public:
  SharedMapping(int fd, std::uint64_t bytes, const std::filesystem::path& path) : bytes_(bytes) {
    void* address = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (address == MAP_FAILED) throw_errno(errno, "raw disk: mmap " + path.string());
    data_ = static_cast<char*>(address);
  }
  ~SharedMapping() { ::munmap(data_, bytes_); }
  SharedMapping(const SharedMapping&) = delete;
  SharedMapping& operator=(const SharedMapping&) = delete;
  char* data() const { return data_; }

 private:
  char* data_ = nullptr;
  std::uint64_t bytes_ = 0;
};

void write_batch(int fd, const std::vector<char>& batch, std::uint64_t offset,
                 const std::filesystem::path& path) {
  std::uint64_t written = 0;
  while (written < batch.size()) {
    const ssize_t n = ::pwrite(fd, batch.data() + written, batch.size() - written,
                               static_cast<off_t>(offset + written));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno(errno, "raw disk: write " + path.string());
    }
    written += static_cast<std::uint64_t>(n);
  }
}

}  // namespace

const char* to_string(RawSyncMethod method) {
  return method == RawSyncMethod::kMmapMsync ? "mmap_msync" : "write_fdatasync";
}

double RawDiskResult::mib_per_s() const {
  return seconds > 0 ? static_cast<double>(bytes) / kMiB / seconds : 0.0;
}
double RawDiskResult::syncs_per_s() const {
  return seconds > 0 ? static_cast<double>(syncs) / seconds : 0.0;
}

RawDiskResult measure_raw_sync_loop(const RawDiskOptions& options,
                                    std::atomic<std::uint64_t>* progress_bytes) {
  assert(options.batch_bytes > 0);
  assert(options.max_file_bytes >= options.batch_bytes);
  const ScratchFile file(options.file, options.max_file_bytes, "raw disk");

  // Non-zero, non-repeating-per-page content so that no layer can shortcut zero pages.
  std::vector<char> batch(options.batch_bytes);
  for (std::size_t i = 0; i < batch.size(); ++i)
    batch[i] = static_cast<char>('a' + (i * 7 + i / 4096) % 26);

  std::optional<SharedMapping> mapping;
  if (options.method == RawSyncMethod::kMmapMsync)
    mapping.emplace(file.fd(), options.max_file_bytes, file.path());
  const auto page_bytes = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));

  RawDiskResult result;
  const std::uint64_t max_syncs = options.max_file_bytes / options.batch_bytes;  // the loop bound
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + options.duration;
  while (result.syncs < max_syncs && std::chrono::steady_clock::now() < deadline) {
    if (mapping) {
      std::memcpy(mapping->data() + result.bytes, batch.data(), batch.size());
      // msync needs a page-aligned start: the page holding the batch's first byte (which the previous
      // batch may have ended in, as a store flush starts where the last one ended).
      const std::uint64_t from = result.bytes / page_bytes * page_bytes;
      if (::msync(mapping->data() + from, result.bytes + options.batch_bytes - from, MS_SYNC) !=
          0) {
        throw_errno(errno, "raw disk: msync " + file.path().string());
      }
    } else {
      write_batch(file.fd(), batch, result.bytes, file.path());
      if (::fdatasync(file.fd()) != 0)
        throw_errno(errno, "raw disk: fdatasync " + file.path().string());
    }
    result.bytes += options.batch_bytes;
    ++result.syncs;
    if (progress_bytes != nullptr) progress_bytes->store(result.bytes, std::memory_order_relaxed);
  }
  result.seconds = seconds_since(start);
  return result;
}

}  // namespace raftlog::bench

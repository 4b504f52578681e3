// The raw disk limit the store is compared with: one thread doing sequential pwrite() of a batch
// followed by fdatasync(), in a loop, on a file preallocated with fallocate() (as a store segment
// is preallocated ahead of use). This is the best any write-ahead log that makes every batch durable
// can do on this file system at that batch size; the store's sync mode is reported as a ratio of it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>

namespace raftlog::bench {

// How a batch is written and made durable.
enum class RawSyncMethod {
  kWriteFdatasync,  // pwrite() of the batch, then fdatasync() of the file
  kMmapMsync,  // memcpy() into a MAP_SHARED mapping of the file, then msync(MS_SYNC) of the batch's
               // pages, as the store's CommitLog writes and flushes its segments
};
const char* to_string(RawSyncMethod method);

struct RawDiskOptions {
  std::filesystem::path file;     // created (must not exist) and removed afterwards
  std::uint64_t batch_bytes = 0;  // bytes written between two fdatasync() calls, > 0
  std::chrono::milliseconds duration{2000};
  std::uint64_t max_file_bytes =
      0;  // bound on disk use; the loop stops early when the file is full
  RawSyncMethod method = RawSyncMethod::kWriteFdatasync;
};

struct RawDiskResult {
  std::uint64_t syncs = 0;
  std::uint64_t bytes = 0;
  double seconds = 0.0;

  double mib_per_s() const;
  double syncs_per_s() const;
};

// Runs the loop (`options.method`); `progress_bytes` (may be null) is advanced after every fdatasync for a progress line.
// Throws std::system_error on any I/O failure (after removing the file).
RawDiskResult measure_raw_sync_loop(const RawDiskOptions& options,
                                    std::atomic<std::uint64_t>* progress_bytes);

}  // namespace raftlog::bench

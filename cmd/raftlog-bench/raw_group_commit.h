// A minimal group commit, the baseline for what 64 writer threads cost the kernel: N writer threads each pwrite() one record at
// its own offset of a preallocated file and wait until an fdatasync() that started after their write
// has completed; one syncer thread runs fdatasync() back to back while anyone waits. No encoding, no
// checksum, no index, no checkpoint. `raftlog-bench raw --writers N` runs it next to the one-thread
// loop at the same bytes per sync, to tell what 64 concurrent writers cost the kernel from what the
// store adds on top (docs/benchmarks.md, issue 2).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>

namespace raftlog::bench {

struct RawGroupCommitOptions {
  std::filesystem::path file;  // created (must not exist) and removed afterwards
  std::uint64_t writers = 64;  // 1..1024
  std::uint64_t record_bytes = 1080;
  std::chrono::milliseconds duration{2000};
  std::uint64_t max_file_bytes = 0;  // bound on disk use; writers stop when the file is full
};

struct RawGroupCommitResult {
  std::uint64_t syncs = 0;
  std::uint64_t records = 0;  // made durable and acknowledged to their writer
  std::uint64_t bytes = 0;
  double seconds = 0.0;
};

// Throws std::system_error on any I/O failure (after removing the file).
RawGroupCommitResult measure_raw_group_commit(const RawGroupCommitOptions& options,
                                              std::atomic<std::uint64_t>* progress_bytes);

}  // namespace raftlog::bench

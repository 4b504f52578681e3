// One cell of the store benchmark matrix: N concurrent writers appending entries of one size to a
// fresh CommitLog in one flush mode for a bounded time, then the raw-disk loop at the batch size the
// store achieved.
#pragma once

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <string>

#include "store/options.h"

namespace raftlog::bench {

// How the writers of a cell are run.
enum class WriterModel {
  // One OS thread per writer, blocking in CommitLog::append() until its entry is acknowledged.
  kThread,
  // The writers are logical: each has at most one entry outstanding and appends its next one when
  // the previous is acknowledged, all driven from one thread with append_no_wait() and
  // wait_flushed() completions. This is how raftlogd drives its log (one thread, many clients).
  kCompletion,
};
const char* to_string(WriterModel model);

struct CellConfig {
  std::string dir;  // fresh directory for this cell's log (created, removed by the caller)
  store::FlushMode mode = store::FlushMode::kSync;
  std::uint64_t writers = 1;
  WriterModel writer_model = WriterModel::kThread;
  std::uint64_t entry_bytes = 1024;  // payload bytes per entry
  std::chrono::milliseconds duration{2000};
  std::uint64_t segment_size_bytes = 256ULL << 20;
  bool zero_fill_segments = false;  // store::Options::zero_fill_segments
  // Bound on payload bytes appended in the cell (disk use); writers stop early when reached.
  std::uint64_t max_payload_bytes = 2ULL << 30;
};

struct CellResult {
  double seconds = 0.0;       // time the writers ran
  std::uint64_t entries = 0;  // acknowledged appends (durable in sync mode, written in async mode)
  std::uint64_t payload_bytes = 0;
  std::uint64_t flushes = 0;     // group-commit flush cycles
  std::uint64_t sync_calls = 0;  // msync/fdatasync calls those cycles issued
  std::uint64_t entries_flushed = 0;
  std::uint64_t bytes_flushed = 0;     // on-disk entry bytes (headers included) made durable
  std::uint64_t sync_duration_us = 0;  // time the flush cycles spent inside msync/fdatasync
  std::uint64_t grouped_appends = 0;   // sync appends written through the log's append group
  std::uint64_t group_writes = 0;      // append calls (pwrite runs) that wrote them
  double latency_p50_us = 0.0;         // per-append acknowledgement latency
  double latency_p99_us = 0.0;
  double final_flush_ms =
      0.0;  // async mode: flush() of the remaining tail after the writers stopped

  double entries_per_s() const;
  double payload_mib_per_s() const;
  double disk_mib_per_s() const;  // bytes_flushed per second: what the raw loop is compared with
  double flushes_per_s() const;
  double sync_calls_per_s() const;
  double entries_per_flush() const;
  std::uint64_t bytes_per_flush() const;  // the batch size handed to the raw loop (>= 1)
  // Share of the cell's wall time the flusher spent in sync calls: near 1 means the disk is the limit,
  // well below 1 means time goes elsewhere (waking writers, appending, scheduling).
  double sync_busy_ratio() const;
  double appends_per_write() const;  // grouped appends per group write (1.0 = no sharing)
};

// Runs the cell, printing a progress line to `progress` every second. Throws std::runtime_error with
// the store's message when the store fails.
CellResult run_store_cell(const CellConfig& config, std::ostream& progress);

// "1KiB", "128B", "16KiB": exact, compact sizes for labels.
std::string size_label(std::uint64_t bytes);
// "sync w=64 1KiB" style label.
std::string cell_label(store::FlushMode mode, std::uint64_t writers, std::uint64_t entry_bytes);

}  // namespace raftlog::bench

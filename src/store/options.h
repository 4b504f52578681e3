// Configuration of a CommitLog. Every bound the store enforces is here, with its unit in the name.
#pragma once

#include <cstdint>
#include <string>

namespace raftlog::store {

class Env;

enum class FlushMode : std::uint8_t {
  // append() returns only once its entries are durable. Concurrent appenders share flushes
  // (group commit): one msync/fdatasync covers every write that arrived before it started.
  kSync = 0,
  // append() returns once the entries are written to the mapped segment; a background flusher makes
  // them durable every flush_interval_ms, sooner when more than flush_dirty_bytes are unflushed, or
  // when flush()/request_flush() is called.
  kAsync = 1,
};

const char* to_string(FlushMode mode);

// Who runs the log's background work: flush cycles, the periodic checkpoint, segment preallocation.
enum class BackgroundWork : std::uint8_t {
  // The log's own threads: a flusher (group commit), a waker for many waiters, a segment allocator.
  // raftlogd runs this way.
  kThreads = 0,
  // No thread at all, so that a deterministic simulator can run the log on its own thread: the owner
  // calls CommitLog::run_flush_cycle() and CommitLog::run_checkpoint() when it decides to, and a
  // segment roll creates its segment inline. Nothing waits for durability: append() in sync flush
  // mode and wait_flushed() for an unflushed index are refused (kFailedPrecondition); the owner uses
  // append_no_wait() and the flush listener, which run_flush_cycle() calls on the caller's thread.
  // flush_interval_ms, flush_dirty_bytes, checkpoint_interval_ms and preallocate_next_segment have
  // no effect (commit_log.h, "STEPPED MODE").
  kStepped = 1,
};

const char* to_string(BackgroundWork work);

struct Options {
  // Bytes per segment file (including its header). Every segment is preallocated to this size.
  // Allowed: [kMinSegmentSizeBytes, kMaxSegmentSizeBytes].
  std::uint64_t segment_size_bytes = 1ULL << 30;
  // Largest payload one entry may carry. An append holding a larger entry fails with
  // kInvalidArgument and writes nothing. Must leave room for the entry header in one segment.
  std::uint32_t max_entry_size_bytes = 4U << 20;
  // Most entries one append() call may carry (bounds the work done under the writer lock).
  std::uint32_t max_batch_entries = 65536;
  // An entry whose payload has at least this many bytes is written from where its payload is, in
  // three writes (payload, padding, header), instead of being copied into the writer's 1 MiB
  // staging buffer with its neighbours: copying MiB payloads on the Raft loop cost leadership
  // under load (docs/benchmarks.md). Any value is valid; tests set it low to exercise the path.
  std::uint32_t direct_write_min_payload_bytes = 64U << 10;

  FlushMode flush_mode = FlushMode::kSync;
  BackgroundWork background_work = BackgroundWork::kThreads;
  // Async mode: longest time written entries stay unflushed (the flusher's period).
  std::uint32_t flush_interval_ms = 10;
  // Async mode: flush early once this many written bytes are unflushed.
  std::uint64_t flush_dirty_bytes = 4ULL << 20;

  // The checkpoint (flushed position + commit-index slot) is rewritten at most this often by the
  // flusher when it changed, and always on close() and after a truncation.
  std::uint32_t checkpoint_interval_ms = 1000;

  // Create the next segment in the background as soon as the active one is opened, so that an append
  // never waits for file creation and preallocation. (Disabled only by tests that count files.)
  bool preallocate_next_segment = true;
  // Additionally write zeros over a new segment after preallocation (RocketMQ's "warm mapped file"):
  // later flushes then only write data, never convert unwritten extents. Costs one sequential write
  // of segment_size_bytes per segment, done in the background.
  bool zero_fill_segments = false;

  // Recovery: when corruption is found BEFORE the checkpointed flushed point, open() fails with
  // kCorruption naming the file and offset. With this set, the log is instead truncated at the first
  // bad entry (loudly logged at error level). Operator use only: it discards durable data.
  bool allow_truncate_corrupted_flushed_data = false;

  // File layer; nullptr means the process-wide PosixEnv. Not owned; must outlive the CommitLog.
  Env* env = nullptr;

  static constexpr std::uint64_t kMinSegmentSizeBytes = 64ULL << 10;
  static constexpr std::uint64_t kMaxSegmentSizeBytes = 16ULL << 30;
};

// Empty when CommitLog::open accepts `options`, else the problem, naming the field. open() refuses
// such options with kInvalidArgument; callers that must not touch the disk on a configuration error
// (raftlogd) check first.
std::string validate_options(const Options& options);

}  // namespace raftlog::store

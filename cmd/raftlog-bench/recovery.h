// Recovery benchmark: how long CommitLog::open() takes on a large log after an unclean shutdown
// (abnormal recovery re-validates every entry after the checkpoint) and after a clean one (normal
// recovery trusts the checkpoint; must not grow with the log size).
//
// The log is built by a forked child process that appends until the target size, makes everything
// durable with flush(), reports its last index through a pipe and is then killed with SIGKILL by the
// parent — a real unclean shutdown: the abort marker stays and the checkpoint is stale. The child
// runs with a checkpoint interval longer than the build, so the checkpoint still describes the empty
// log and the whole log lies after it: abnormal recovery has to validate all of it (the worst case).
// The parent then opens the log (abnormal), closes it cleanly, and opens it again (normal).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

#include "store/commit_log.h"

namespace raftlog::bench {

struct RecoveryConfig {
  std::string dir;                      // fresh directory (created, removed by the caller)
  std::uint64_t log_payload_bytes = 0;  // payload to append before the crash
  std::uint64_t entry_bytes = 1024;
  std::uint64_t segment_size_bytes = 1ULL << 30;
  // Drop the page cache before each open (needs root; measures a cold start). Default: warm cache.
  bool drop_caches = false;
};

struct RecoveryOpen {
  store::RecoveryReport report;
  double open_seconds = 0.0;  // wall time of CommitLog::open()
  // CPU time (user + system, all threads) the process used during open(): with a shared, loaded
  // machine this separates "recovery is slow" from "recovery did not get the CPU".
  double open_cpu_seconds = 0.0;
  bool caches_dropped = false;
};

struct RecoveryResult {
  std::uint64_t last_index = 0;  // acknowledged (flushed) by the child before the kill
  double build_seconds = 0.0;
  RecoveryOpen unclean;
  RecoveryOpen clean;
};

// Throws std::runtime_error on any failure, including a recovery that lost acknowledged entries or
// did not run in the expected mode.
RecoveryResult run_recovery_bench(const RecoveryConfig& config, std::ostream& progress);

}  // namespace raftlog::bench

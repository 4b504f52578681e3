// The raftlogd process's own figures for /metrics, read from /proc/self and glibc's allocator
// (prometheus-cpp exports none of its own).
#pragma once

namespace raftlog::server::metrics {

struct ProcessSample {
  double cpu_seconds = 0;
  double resident_bytes = 0;
  // Resident minus file-backed pages (the mapped segments are file-backed).
  double anonymous_bytes = 0;
  double heap_in_use_bytes = 0;
  double heap_free_bytes = 0;
};

// Zeros for what cannot be read.
ProcessSample sample_process();

}  // namespace raftlog::server::metrics

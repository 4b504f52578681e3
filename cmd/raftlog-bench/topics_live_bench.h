// `raftlog-bench topics --phases live`: the dispatcher under a steady append load (drills6 M2).
// A cluster of its own per variant (keys off/on x each persist slice given), with metrics; paced
// appends of a few entries each, every entry in one of `topics` topics and, with keys, a key of
// its own, for `seconds`; the nodes' largest dispatcher lag sampled 10 times a second (each
// second's largest reported), a consumer group commit every 200 ms (how many failed, p50 and max
// latency: a commit waits for the indexes), how long the lag takes to drain after the load, and
// where the dispatchers' time went (raftlog_derived_persist* and
// raftlog_derived_apply_seconds_total, before and after). Bounded: the load and the probe stop at
// `seconds`, the drain wait at 60 s. docs/benchmarks.md, "Topics and keys".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace raftlog::bench {

struct LiveSettings {
  std::uint64_t nodes = 3;
  std::uint64_t topics = 2000;
  std::uint64_t rate = 800;       // appends per second offered
  std::uint64_t batch = 2;        // entries per append
  std::uint64_t entry_size = 100;  // payload bytes per entry
  std::uint64_t seconds = 30;
  bool keys = true;
  std::uint64_t slice_ms = 20;  // raftlogd --derived-persist-slice-ms
};

// Runs keys "off", "on" or "both" (off first), each with every slice of `slices`; false when a
// variant failed to start, an append failed, or a lag did not drain.
bool run_topics_live(const LiveSettings& settings, const std::vector<std::uint64_t>& slices,
                     const std::string& keys, const std::string& flush_mode, const cli::Io& io);

}  // namespace raftlog::bench

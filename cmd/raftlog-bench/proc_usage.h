// CPU time and resident memory of server processes (raftlogd, etcd) read from /proc, so a load run
// can report what the servers spent on it, not only what the clients saw.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace raftlog::bench {

struct ProcessUsage {
  double cpu_s = 0.0;         // user + system time of every thread of the process so far
  std::uint64_t rss_kib = 0;  // resident set size now
  std::uint64_t rss_anon_kib =
      0;  // of which anonymous (heap, stacks); the rest is mostly mapped files
};

// Reads /proc/<pid>/stat (utime + stime) and /proc/<pid>/status (VmRSS, RssAnon); nullopt if the
// process is gone.
std::optional<ProcessUsage> read_process_usage(pid_t pid);

// Parses "123,456,789" (at most kMaxServerPids positive pids); nullopt with `error` set otherwise.
inline constexpr std::size_t kMaxServerPids = 16;
std::optional<std::vector<pid_t>> parse_pid_list(const std::string& text, std::string* error);

// The servers' usage taken at the start of a run; `finish()` gives what they used since.
class ServerUsageWindow {
 public:
  explicit ServerUsageWindow(std::vector<pid_t> pids);
  struct Totals {
    bool complete = false;            // every process was readable at both ends
    double cpu_s = 0.0;               // summed over the processes
    std::uint64_t rss_total_kib = 0;  // at finish(), summed
    std::uint64_t rss_max_kib = 0;    // at finish(), the largest process
    std::uint64_t rss_anon_total_kib =
        0;  // at finish(), anonymous memory summed (what a leak grows)
  };
  Totals finish() const;
  bool empty() const { return pids_.empty(); }

 private:
  std::vector<pid_t> pids_;
  std::vector<std::optional<ProcessUsage>> start_;
};

}  // namespace raftlog::bench

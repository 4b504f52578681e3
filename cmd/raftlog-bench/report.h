// Output helpers for raftlog-bench: machine-readable RESULT lines and a once-a-second progress line.
//
// Every figure the benchmark produces ends in exactly one line
//   RESULT bench=<name> key=value key=value ...
// on stdout (keys in snake_case with units last: entries_per_s, mib_per_s, seconds). Progress goes to
// stderr so that `raftlog-bench ... | grep RESULT` stays clean while a terminal still shows both.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace raftlog::bench {

class ResultLine {
 public:
  explicit ResultLine(std::string_view bench_name);
  ResultLine& add(std::string_view key, std::string_view value);
  ResultLine& add(std::string_view key, const char* value) {
    return add(key, std::string_view(value));
  }
  ResultLine& add(std::string_view key, std::uint64_t value);
  ResultLine& add(std::string_view key, double value, int decimals = 2);
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

// Calls `make_line` every `interval` on its own thread and writes the returned text to `out` as one
// line, until destroyed. The callback must only read thread-safe state (atomics).
class ProgressTicker {
 public:
  ProgressTicker(std::ostream& out, std::chrono::milliseconds interval,
                 std::function<std::string()> make_line);
  ~ProgressTicker();
  ProgressTicker(const ProgressTicker&) = delete;
  ProgressTicker& operator=(const ProgressTicker&) = delete;

 private:
  void run();

  std::ostream& out_;
  const std::chrono::milliseconds interval_;
  const std::function<std::string()> make_line_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

// Seconds elapsed since `start` on the steady clock.
double seconds_since(std::chrono::steady_clock::time_point start);

// Fixed-point formatting for human-readable tables.
std::string fixed(double value, int decimals);

inline constexpr double kMiB = 1024.0 * 1024.0;
inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

}  // namespace raftlog::bench

// The run's event trace: always a bounded ring of the most recent events (printed with a violation), and
// optionally every event (`raftlog-sim --trace`). Lines carry simulated time only, never wall-clock time
// or addresses, so one seed always produces byte-identical traces.
//
// A trace can also be off (Trace::off()): it then records nothing, and callers skip building costly
// arguments (check enabled()). A run is traced only when its trace is wanted: the seed sweeps run
// untraced and, since a seed names one history, rerun a failing seed with the trace on for its report.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

namespace raftlog::sim {

class Trace {
 public:
  // Bound on the ring; each line is also bounded (kMaxLineBytes) so the ring's memory is bounded.
  static constexpr std::size_t kMaxTailEvents = 100'000;
  static constexpr std::size_t kMaxLineBytes = 240;

  // `tail_capacity` recent events are kept; with `keep_all`, every event is also appended to full().
  Trace(std::size_t tail_capacity, bool keep_all);
  // A trace that records nothing.
  static Trace off() { return Trace(); }

  bool enabled() const { return !ring_.empty(); }

  // The simulated clock stamped on following lines: tick and sub-tick step.
  void set_clock(std::uint64_t tick, std::uint64_t step_in_tick) {
    tick_ = tick;
    step_in_tick_ = step_in_tick;
  }

  template <typename... Args>
  void log(fmt::format_string<Args...> format, Args&&... args) {
    if (!enabled()) return;
    std::string& line = next_line();
    fmt::format_to(std::back_inserter(line), "[{:>5}.{}] ", tick_, step_in_tick_);
    fmt::format_to(std::back_inserter(line), format, std::forward<Args>(args)...);
    finish_line(line);
  }

  // The most recent events, oldest first.
  std::vector<std::string> tail() const;
  // Every event, one per line (empty unless keep_all).
  const std::string& full() const { return full_; }
  std::uint64_t event_count() const { return event_count_; }

 private:
  Trace() : keep_all_(false) {}
  std::string& next_line();
  void finish_line(std::string& line);

  std::vector<std::string> ring_;
  std::size_t next_slot_ = 0;
  bool keep_all_;
  std::string full_;
  std::uint64_t tick_ = 0;
  std::uint64_t step_in_tick_ = 0;
  std::uint64_t event_count_ = 0;
};

}  // namespace raftlog::sim

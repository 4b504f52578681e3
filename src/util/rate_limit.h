// RateLimit: lets a repeated event through at most once per interval and counts the ones it held
// back, so a log line that can repeat (a flapping peer, a follower that cannot catch up) is printed
// once per interval with "N more since" instead of flooding the log. Not thread-safe: the caller
// holds whatever lock guards the state the line is about.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace raftlog::util {

class RateLimit {
 public:
  using Clock = std::chrono::steady_clock;

  explicit RateLimit(Clock::duration interval) : interval_(interval) {}

  // nullopt: held back (counted). Otherwise the event may be reported, and the value is how many
  // were held back since the last one let through. The first event always passes.
  std::optional<std::uint64_t> admit(Clock::time_point now) {
    if (last_.has_value() && now - *last_ < interval_) {
      ++held_back_;
      return std::nullopt;
    }
    last_ = now;
    const std::uint64_t held_back = held_back_;
    held_back_ = 0;
    return held_back;
  }

 private:
  Clock::duration interval_;
  std::optional<Clock::time_point> last_;
  std::uint64_t held_back_ = 0;
};

}  // namespace raftlog::util

// A safety alarm that peers' messages keep raising: a leader's append contradicting a committed
// entry (raft::CommittedConflict), a second leader of a term (raft::Raft::second_leader), a refusal
// of this node's leadership (raft::Raft::leadership_refused). The core counts the messages; the
// replica logs a critical line when the count rose, at most once per kLogEvery with how many were
// held back, and shows the alarm (status, and for the first two health NOT_SERVING) while the count
// keeps rising: within kShownFor of its last rise. One stray or forged message must not take a node
// out of service for good (review amnesia M4), while a peer that keeps sending such messages (a
// leader probes every heartbeat) keeps it shown. The count itself stays (a metric).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

#include "util/rate_limit.h"

namespace raftlog::replica {

class AlarmWindow {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr Clock::duration kShownFor = std::chrono::seconds(10);
  static constexpr Clock::duration kLogEvery = std::chrono::seconds(30);

  // `count` is the core's running count. When it rose since the last call and a log line is due:
  // how many rises were held back since the last line; nullopt otherwise (no rise, or held back).
  std::optional<std::uint64_t> note(std::uint64_t count, Clock::time_point now) {
    if (count == reported_) return std::nullopt;
    reported_ = count;
    seen_at_ = now;
    return log_.admit(now);
  }

  // The alarm is shown: the count is above 0, was noted as it is, and rose within kShownFor.
  bool shown(std::uint64_t count, Clock::time_point now) const {
    return count > 0 && reported_ == count && now - seen_at_ < kShownFor;
  }

 private:
  std::uint64_t reported_ = 0;
  Clock::time_point seen_at_{};
  util::RateLimit log_{kLogEvery};
};

}  // namespace raftlog::replica

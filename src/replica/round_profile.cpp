#include "replica/round_profile.h"

#include <algorithm>

namespace raftlog::replica {

const char* round_part_name(RoundPart part) {
  switch (part) {
    case RoundPart::kOther:
      return "other";
    case RoundPart::kTicks:
      return "ticks";
    case RoundPart::kStepMessages:
      return "step";
    case RoundPart::kClientRequests:
      return "client_requests";
    case RoundPart::kOffLoopResults:
      return "off_loop_results";
    case RoundPart::kSnapshotGather:
      return "snapshot.gather";
    case RoundPart::kCoreReady:
      return "ready.core";
    case RoundPart::kHardState:
      return "ready.hard_state";
    case RoundPart::kSnapshotInstall:
      return "ready.install";
    case RoundPart::kLogTruncate:
      return "ready.truncate";
    case RoundPart::kConfState:
      return "conf_state";
    case RoundPart::kSend:
      return "ready.send";
    case RoundPart::kLogAppend:
      return "ready.append";
    case RoundPart::kDurability:
      return "durability";
    case RoundPart::kApplyCommit:
      return "ready.commit";
    case RoundPart::kTopicState:
      return "topic_state";
    case RoundPart::kSnapshotPrepare:
      return "snapshot.prepare";
    case RoundPart::kRetentionCheck:
      return "retention.check";
    case RoundPart::kTrimFlush:
      return "trim.flush";
    case RoundPart::kTrimScan:
      return "trim.scan";
    case RoundPart::kTrimSnapshotNext:
      return "trim.snapshot_next";
    case RoundPart::kTrimUnlink:
      return "trim.unlink";
    case RoundPart::kTrimSnapshot:
      return "trim.snapshot";
    case RoundPart::kStatus:
      return "status";
    case RoundPart::kCount:
      break;
  }
  return "?";
}

void RoundProfile::begin() {
  spent_.fill(Clock::duration::zero());
  entered_.fill(0);
  current_ = RoundPart::kOther;
  started_ = (*clock_)();
  switched_ = started_;
  total_ = Clock::duration::zero();
  in_round_ = true;
}

RoundProfile::Clock::duration RoundProfile::end() {
  if (!in_round_) return total_;
  const Clock::time_point now = (*clock_)();
  charge(now);
  total_ = now - started_;
  in_round_ = false;
  return total_;
}

void RoundProfile::charge(Clock::time_point now) {
  spent_[index(current_)] += now - switched_;
  switched_ = now;
}

RoundPart RoundProfile::enter(RoundPart part) {
  const RoundPart previous = current_;
  if (!in_round_) return previous;
  charge((*clock_)());
  current_ = part;
  ++entered_[index(part)];
  return previous;
}

void RoundProfile::leave(RoundPart previous) {
  if (!in_round_) return;
  charge((*clock_)());
  current_ = previous;
}

std::string RoundProfile::describe(Clock::duration min_part) const {
  std::array<std::size_t, kParts> order{};
  for (std::size_t i = 0; i < kParts; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return spent_[a] > spent_[b]; });
  std::string out;
  for (std::size_t i : order) {
    if (!out.empty() && spent_[i] < min_part) break;
    const auto ms = std::chrono::duration_cast<std::chrono::microseconds>(spent_[i]).count();
    if (!out.empty()) out += ", ";
    out += round_part_name(static_cast<RoundPart>(i));
    out += ' ';
    out += std::to_string(ms / 1000) + '.' + std::to_string(ms % 1000 / 100) + " ms";
    if (static_cast<RoundPart>(i) != RoundPart::kOther) {
      out += " (" + std::to_string(entered_[i]) + ")";
    }
  }
  return out;
}

}  // namespace raftlog::replica

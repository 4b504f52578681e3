#include "store/truncation_history.h"

#include <string>

namespace raftlog::store {

void TruncationHistory::record(std::uint64_t from_index) {
  std::lock_guard lock(mu_);
  const std::uint64_t n = count_.load();
  cut_from_[n % kRememberedTruncations] = from_index;
  count_.store(n + 1);  // after the cut is stored: a reader that sees n + 1 finds it under mu_
}

Status TruncationHistory::check(std::uint64_t count_seen, std::uint64_t last_index) const {
  if (count_.load() == count_seen) return Status();  // the common case: no truncation at all
  std::lock_guard lock(mu_);
  const std::uint64_t now = count_.load();
  if (now - count_seen > kRememberedTruncations) {
    return {StatusCode::kTruncated,
            std::to_string(now - count_seen) +
                " truncations of the log's tail while entries up to " + std::to_string(last_index) +
                " waited to be durable: whether they are still in the log is unknown"};
  }
  // Bounded by kRememberedTruncations.
  for (std::uint64_t n = count_seen; n < now; ++n) {
    const std::uint64_t from = cut_from_[n % kRememberedTruncations];
    if (from <= last_index) {
      return {StatusCode::kTruncated,
              "truncate_suffix(" + std::to_string(from) + ") removed the entries from index " +
                  std::to_string(from) + " on while entries up to " + std::to_string(last_index) +
                  " waited: those are not in the log"};
    }
  }
  return Status();
}

}  // namespace raftlog::store

// TruncationHistory: the truncate_suffix() calls of one open log, so that a sync append can tell
// its own entries from later ones at the same indexes.
//
// Why: flushed_index() says how far the log is durable by index. If truncate_suffix(j) removes an
// entry that a sync append() wrote at index i >= j while that append waits, and a later append
// writes a new entry at i, the flush of the new entry raises flushed_index() past i. Waiting by index
// alone, the first append would then return OK for an entry that is no longer in the log: an
// acknowledged entry lost. Instead a sync append notes count() while it writes its entries (under
// the writer lock, which truncate_suffix() holds too) and, each time it wakes, asks check() whether a
// truncation since then cut at or below its last index.
//
// Ordering (what makes the lock-free fast path sound): truncate_suffix() calls record() after it has
// removed the entries and before it releases the writer lock, so before any later append can write
// new entries at those indexes, let alone flush them. A waiter that reads the flushed index first
// and count() after it therefore sees every truncation that happened before the flush it read.
//
// Bound: the cut points of the last kRememberedTruncations truncations, in a ring. A waiter that
// slept through more than that many truncations gets kTruncated with "outcome unknown": it cannot
// tell whether one of the forgotten ones removed its entries. Each truncation makes at least two
// durable checkpoint writes, and a sync append waits one flush cycle, so this does not happen in
// practice; it is the documented answer if it ever does.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>

#include "store/status.h"

namespace raftlog::store {

class TruncationHistory {
 public:
  static constexpr std::uint64_t kRememberedTruncations = 64;

  // Truncations recorded so far. Lock-free: a waiter's fast path compares it with what it noted.
  std::uint64_t count() const { return count_.load(); }

  // A truncate_suffix(from_index) completed (the caller holds the log's writer lock).
  void record(std::uint64_t from_index);

  // OK when no truncation recorded after `count_seen` cut at or below `last_index`, i.e. the entries
  // up to last_index written while count() was count_seen are still the log's. Otherwise kTruncated,
  // naming the cut (or saying the outcome is unknown when more than kRememberedTruncations passed).
  Status check(std::uint64_t count_seen, std::uint64_t last_index) const;

 private:
  mutable std::mutex mu_;  // guards cut_from_; count_ is stored under it and read without it
  std::array<std::uint64_t, kRememberedTruncations> cut_from_{};  // [n % kRemembered]: n-th cut
  std::atomic<std::uint64_t> count_{0};
};

}  // namespace raftlog::store

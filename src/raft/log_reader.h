// The core's read-only view of the driver's log. The driver owns the log and mutates it as Ready
// batches instruct; the core never writes through this interface.
//
// Implemented by MemoryLog (tests, simulator) and, in the server, by an adapter over the store.
// Entries the core has produced but the driver has not yet appended are kept by the core itself
// (its "unstable" tail) and shadow this view from their first index on.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "raft/types.h"

namespace raftlog::raft {

class LogReader {
 public:
  virtual ~LogReader() = default;

  // First index still held (1 for a log never trimmed). For an empty log: last_index() + 1.
  virtual Index first_index() const = 0;
  // Last index held; 0 for an empty, never-trimmed log.
  virtual Index last_index() const = 0;
  // Term of the entry at `index`; term 0 for index 0; nullopt if `index` is outside
  // [first_index() - 1, last_index()] or unknown (trimmed). The term of first_index() - 1 is known
  // when the log was trimmed (kept as the "trim point"), so that AppendEntries can match against it.
  virtual std::optional<Term> term_at(Index index) const = 0;
  // Entries in [from, to] (inclusive), stopping early once `max_bytes` (by Entry::byte_size) would be
  // exceeded, but always at least one entry when from <= to. Precondition: first_index() <= from and
  // to <= last_index().
  virtual std::vector<Entry> entries(Index from, Index to, std::size_t max_bytes) const = 0;
};

}  // namespace raftlog::raft

// An in-memory LogReader for tests and the simulator, with the mutators a driver needs to apply Ready
// batches. Entries live in one vector starting at first_index(); a trim keeps the trim point's term so
// that AppendEntries can still match against the entry just before first_index().
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "raft/log_reader.h"
#include "raft/types.h"

namespace raftlog::raft {

class MemoryLog final : public LogReader {
 public:
  MemoryLog() = default;

  Index first_index() const override;
  Index last_index() const override;
  std::optional<Term> term_at(Index index) const override;
  std::vector<Entry> entries(Index from, Index to, std::size_t max_bytes) const override;

  // Appends entries that must continue the log: the first has index last_index() + 1 and indexes are
  // contiguous; terms never decrease. Asserted.
  void append(const std::vector<Entry>& new_entries);
  // Drops every entry with index >= from. `from` must be > first_index() - 1 (cannot cut the trim point).
  void truncate_suffix(Index from);
  // Drops every entry with index < before, remembering the term of before - 1. `before` must be in
  // [first_index(), last_index() + 1].
  void truncate_prefix(Index before);
  // Replaces the whole log by an empty one whose first index is index + 1, remembering `term` as the
  // term of `index` (a snapshot install).
  void restore(Index index, Term term);
  // Applies a Ready's log changes: its snapshot (if set), truncate_from (if set), then entries.
  void apply(const Ready& ready);

  // The entry at `index`; precondition first_index() <= index <= last_index().
  const Entry& entry(Index index) const;
  std::size_t size() const { return entries_.size(); }

 private:
  Index trim_index_ = 0;  // index of the entry just before the first held one
  Term trim_term_ = 0;
  std::vector<Entry> entries_;
};

}  // namespace raftlog::raft

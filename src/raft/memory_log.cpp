#include "raft/memory_log.h"

#include "raft/assert.h"

namespace raftlog::raft {

Index MemoryLog::first_index() const { return trim_index_ + 1; }

Index MemoryLog::last_index() const { return trim_index_ + entries_.size(); }

std::optional<Term> MemoryLog::term_at(Index index) const {
  if (index == trim_index_) return trim_term_;
  if (index < trim_index_ || index > last_index()) return std::nullopt;
  return entries_[index - first_index()].term;
}

std::vector<Entry> MemoryLog::entries(Index from, Index to, std::size_t max_bytes) const {
  RAFT_ASSERT(from >= first_index() && to <= last_index(),
              "MemoryLog::entries range outside the log");
  std::vector<Entry> out;
  std::size_t total_bytes = 0;
  for (Index index = from; index <= to; ++index) {
    const Entry& e = entries_[index - first_index()];
    if (!out.empty() && total_bytes + e.byte_size() > max_bytes) break;
    total_bytes += e.byte_size();
    out.push_back(e);
  }
  return out;
}

void MemoryLog::append(const std::vector<Entry>& new_entries) {
  for (const Entry& e : new_entries) {
    RAFT_ASSERT(e.index == last_index() + 1, "MemoryLog::append needs contiguous indexes");
    const Term previous_term = entries_.empty() ? trim_term_ : entries_.back().term;
    RAFT_ASSERT(e.term >= previous_term, "MemoryLog::append: terms never decrease along a log");
    entries_.push_back(e);
  }
}

void MemoryLog::truncate_suffix(Index from) {
  RAFT_ASSERT(from > trim_index_,
              "MemoryLog::truncate_suffix cannot cut at or below the trim point");
  if (from > last_index()) return;
  entries_.resize(from - first_index());
}

void MemoryLog::truncate_prefix(Index before) {
  RAFT_ASSERT(before >= first_index() && before <= last_index() + 1,
              "MemoryLog::truncate_prefix outside [first_index, last_index + 1]");
  if (before == first_index()) return;
  const Index new_trim_index = before - 1;
  const Term new_trim_term = *term_at(new_trim_index);
  entries_.erase(entries_.begin(),
                 entries_.begin() + static_cast<std::ptrdiff_t>(before - first_index()));
  trim_index_ = new_trim_index;
  trim_term_ = new_trim_term;
}

void MemoryLog::restore(Index index, Term term) {
  RAFT_ASSERT(index >= 1 && term >= 1, "a snapshot replaces at least one entry");
  entries_.clear();
  trim_index_ = index;
  trim_term_ = term;
}

void MemoryLog::apply(const Ready& ready) {
  if (ready.snapshot) restore(ready.snapshot->index, ready.snapshot->term);
  if (ready.truncate_from) truncate_suffix(*ready.truncate_from);
  append(ready.entries);
}

const Entry& MemoryLog::entry(Index index) const {
  RAFT_ASSERT(index >= first_index() && index <= last_index(),
              "MemoryLog::entry index outside the log");
  return entries_[index - first_index()];
}

}  // namespace raftlog::raft

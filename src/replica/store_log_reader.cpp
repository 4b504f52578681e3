#include "replica/store_log_reader.h"

#include <cassert>
#include <limits>

namespace raftlog::replica {

static_assert(static_cast<int>(raft::EntryType::kNormal) ==
              static_cast<int>(store::EntryType::kNormal));
static_assert(static_cast<int>(raft::EntryType::kNoop) ==
              static_cast<int>(store::EntryType::kNoop));
static_assert(static_cast<int>(raft::EntryType::kConfig) ==
              static_cast<int>(store::EntryType::kConfig));

raft::Index StoreLogReader::first_index() const { return log_.first_index(); }

raft::Index StoreLogReader::last_index() const { return log_.last_index(); }

std::optional<raft::Term> StoreLogReader::term_at(raft::Index index) const {
  if (index == 0) return 0;
  auto term = log_.term_at(index);
  if (!term.ok()) return std::nullopt;
  return *term;
}

std::optional<FailedRead> first_failed_read(const store::CommitLog& log, std::uint64_t from,
                                            std::uint64_t count) {
  for (std::uint64_t index = from; index < from + count; ++index) {
    auto one = log.read(index, 1, std::numeric_limits<std::size_t>::max());
    if (!one.ok()) return FailedRead{index, one.status()};
  }
  return std::nullopt;
}

std::uint64_t first_corrupt_index(const store::CommitLog& log, std::uint64_t from,
                                  std::uint64_t count) {
  const std::optional<FailedRead> failed = first_failed_read(log, from, count);
  return failed && failed->status.code() == store::StatusCode::kCorruption ? failed->index : 0;
}

void StoreLogReader::throw_unreadable(raft::Index from, raft::Index to,
                                      const store::Status& failure) const {
  // So that the entry recorded for repair is the bad one, not the start of the batch.
  if (const std::optional<FailedRead> failed = first_failed_read(log_, from, to - from + 1)) {
    throw UnreadableEntry(failed->index, failed->status.to_string());
  }
  throw UnreadableEntry(from, failure.to_string());  // failed only as a batch: name its start
}

std::vector<raft::Entry> StoreLogReader::entries(raft::Index from, raft::Index to,
                                                 std::size_t max_bytes) const {
  std::vector<raft::Entry> out;
  std::size_t bytes = 0;
  // Bounded: every iteration returns at least one entry or stops.
  while (from <= to) {
    const std::size_t want = static_cast<std::size_t>(to - from + 1);
    auto batch = log_.read(from, want, max_bytes);
    if (!batch.ok()) throw_unreadable(from, to, batch.status());
    if (batch->entries.empty()) throw UnreadableEntry(from, "the store returned no entry");
    for (const store::EntryView& view : batch->entries) {
      raft::Entry entry = to_raft_entry(view);
      if (!out.empty() && bytes + entry.byte_size() > max_bytes) return out;
      bytes += entry.byte_size();
      out.push_back(std::move(entry));
      ++from;
      if (from > to) break;
    }
  }
  assert(!out.empty() || from > to);
  return out;
}

raft::Entry to_raft_entry(const store::EntryView& view) {
  raft::Entry entry;
  entry.index = view.meta.index;
  entry.term = view.meta.term;
  entry.type = static_cast<raft::EntryType>(view.meta.type);
  entry.client_id = view.meta.client_id;
  entry.sequence = view.meta.sequence;
  entry.proposal_continues = (view.meta.flags & kEntryFlagProposalContinues) != 0;
  entry.has_envelope = (view.meta.flags & kEntryFlagEnvelope) != 0;
  entry.is_group_commit = (view.meta.flags & kEntryFlagGroupCommit) != 0;
  entry.payload = std::string(view.payload);
  return entry;
}

store::EntryToAppend to_store_entry(const raft::Entry& entry) {
  store::EntryToAppend out;
  out.meta.index = entry.index;
  out.meta.term = entry.term;
  out.meta.type = static_cast<store::EntryType>(entry.type);
  out.meta.client_id = entry.client_id;
  out.meta.sequence = entry.sequence;
  out.meta.flags = static_cast<std::uint16_t>(
      (entry.proposal_continues ? kEntryFlagProposalContinues : 0) |
      (entry.has_envelope ? kEntryFlagEnvelope : 0) |
      (entry.is_group_commit ? kEntryFlagGroupCommit : 0));
  out.payload = entry.payload.view();  // shares the entry's bytes: `entry` must outlive `out`
  return out;
}

}  // namespace raftlog::replica

// The Raft core's view of the node's CommitLog (raft::LogReader over store::CommitLog).
//
// The core reads only entries it knows are persisted (see raft.h), which the store holds in its
// mapped segments; entries() copies payloads into raft::Entry because messages outlive the read.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>

#include "raft/log_reader.h"
#include "store/commit_log.h"

namespace raftlog::replica {

// Thrown by StoreLogReader::entries when the store cannot return an entry the core asked for (its
// CRC check failed, or the read failed): the core has no way to go on without it (LogReader
// promises at least one entry), so the Replica catches this around every call into the core,
// records the entry for repair and stops (Replica::mark_corrupt) instead of letting the core
// abort on a storage fault and crash-loop at every restart. The core is not used again after it.
class UnreadableEntry : public std::runtime_error {
 public:
  UnreadableEntry(std::uint64_t index, const std::string& problem)
      : std::runtime_error(problem), index_(index) {}
  std::uint64_t index() const { return index_; }

 private:
  std::uint64_t index_;
};

class StoreLogReader final : public raft::LogReader {
 public:
  explicit StoreLogReader(const store::CommitLog& log) : log_(log) {}

  raft::Index first_index() const override;
  raft::Index last_index() const override;
  std::optional<raft::Term> term_at(raft::Index index) const override;
  // Throws UnreadableEntry when an entry in [from, to] cannot be read.
  std::vector<raft::Entry> entries(raft::Index from, raft::Index to,
                                   std::size_t max_bytes) const override;

 private:
  [[noreturn]] void throw_unreadable(raft::Index from, raft::Index to,
                                     const store::Status& failure) const;

  const store::CommitLog& log_;
};

// The store's entry flags (opaque to it) as the node uses them: docs/storage-format.md.
inline constexpr std::uint16_t kEntryFlagProposalContinues = 1;
// The payload starts with an envelope (topic, keys, timestamp: src/derived/envelope.h).
inline constexpr std::uint16_t kEntryFlagEnvelope = 2;
// The payload is a consumer group's offset commit (src/derived/group_commit.h).
inline constexpr std::uint16_t kEntryFlagGroupCommit = 4;

// The first entry in [from, from + count) whose read alone fails, with why; nullopt when each one
// reads. A batch read fails as a whole, so this names the entry to blame. Bounded by `count`
// (one read batch's worth); it stops at the first failure.
struct FailedRead {
  std::uint64_t index = 0;
  store::Status status;
};
std::optional<FailedRead> first_failed_read(const store::CommitLog& log, std::uint64_t from,
                                            std::uint64_t count);
// The index first_failed_read finds if that read failed its check (kCorruption), else 0 (every read
// succeeded, or the first failure was not corruption, such as a truncation that raced).
std::uint64_t first_corrupt_index(const store::CommitLog& log, std::uint64_t from,
                                  std::uint64_t count);

// Conversions between the two layers' entry types (they agree on the numeric entry types).
raft::Entry to_raft_entry(const store::EntryView& view);
store::EntryToAppend to_store_entry(const raft::Entry& entry);

}  // namespace raftlog::replica

// The Raft core's view of the node's CommitLog (raft::LogReader over store::CommitLog).
//
// The core reads only entries it knows are persisted (see raft.h), which the store holds in its
// mapped segments; entries() copies payloads into raft::Entry because messages outlive the read.
#pragma once

#include "raft/log_reader.h"
#include "store/commit_log.h"

namespace raftlog::replica {

class StoreLogReader final : public raft::LogReader {
 public:
  explicit StoreLogReader(const store::CommitLog& log) : log_(log) {}

  raft::Index first_index() const override;
  raft::Index last_index() const override;
  std::optional<raft::Term> term_at(raft::Index index) const override;
  std::vector<raft::Entry> entries(raft::Index from, raft::Index to,
                                   std::size_t max_bytes) const override;

 private:
  const store::CommitLog& log_;
};

// The store's entry flags (opaque to it) as the node uses them: docs/storage-format.md.
inline constexpr std::uint16_t kEntryFlagProposalContinues = 1;

// Conversions between the two layers' entry types (they agree on the numeric entry types).
raft::Entry to_raft_entry(const store::EntryView& view);
store::EntryToAppend to_store_entry(const raft::Entry& entry);

}  // namespace raftlog::replica

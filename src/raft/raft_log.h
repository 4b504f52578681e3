// The core's view of its log: the driver's LogReader below `offset`, and the core's own unstable tail
// (entries it produced that are not yet reported durable) from `offset` on.
//
// Rule (see also types.h, "Log timing"): entries stay in the unstable tail until on_persisted() covers
// them; only then are they read through the LogReader. Entries the driver has been handed but not yet
// reported durable are shadowed by the tail, so the driver may apply a Ready's log changes late, as long
// as it applies them before reporting them durable.
//
//   reader:   [first .......... offset-1]  (durable, read through LogReader)
//   unstable:                   [offset ... driver_last | ... last]
//                               handed out to the driver   not yet handed out (next Ready)
#pragma once

#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

#include "raft/log_reader.h"
#include "raft/types.h"

namespace raftlog::raft {

class RaftLog {
 public:
  RaftLog(const LogReader& reader, Index committed);

  Index first_index() const;
  Index last_index() const;
  Term last_term() const;
  // Term at `index`; 0 for index 0; nullopt outside [first_index() - 1, last_index()] or if trimmed.
  std::optional<Term> term_at(Index index) const;
  bool matches(Index index, Term term) const;
  // Entries in [from, to], byte-bounded like LogReader::entries (at least one when from <= to).
  std::vector<Entry> entries(Index from, Index to, std::size_t max_bytes) const;

  Index committed() const { return committed_; }
  // Advances the commit index (never backwards: smaller values are ignored). Asserts to <= last_index().
  void commit_to(Index to);
  // Highest index known durable locally.
  Index persisted_index() const { return offset_ - 1; }

  // Appends entries that continue the log or overwrite its uncommitted tail from entries[0].index
  // (asserted > committed()). Entries must be contiguous.
  void append(const std::vector<Entry>& new_entries);
  void append(std::vector<Entry>&& new_entries);  // the same, moving the entries in
  // First index among `incoming` (contiguous) whose term differs from ours or that we lack; 0 if none.
  Index find_conflict(const std::vector<Entry>& incoming) const;
  // Largest index <= `index` whose term is <= `term`, with that term (fast backtracking). Stops at the
  // first unknown (trimmed) term, returning it with term 0.
  std::pair<Index, Term> find_conflict_by_term(Index index, Term term) const;

  // on_persisted(index, term): drops the durable prefix of the unstable tail. Returns false for a stale
  // or unknown report (ignored).
  bool stable_to(Index index, Term term);

  // Replaces the whole log by `snapshot` (a follower installing its leader's snapshot): empty from
  // snapshot.index + 1 on, with the term there known and everything up to it committed. Asserts
  // snapshot.index > committed(). Until the driver reports the install (stable_to at or above
  // snapshot.index), the core's view shadows the driver's log: first_index() is snapshot.index + 1,
  // term_at(snapshot.index) is snapshot.term and nothing below it is known.
  void restore(Snapshot snapshot);
  // The snapshot restore() installed that the driver has not reported yet (nullopt: none).
  const std::optional<Snapshot>& installing() const { return installing_; }

  // Log changes not yet handed to the driver.
  bool has_handout() const;
  struct Handout {
    std::optional<Snapshot> snapshot;  // install first
    std::optional<Index> truncate_from;
    std::vector<Entry> entries;
  };
  Handout take_handout();

 private:
  void truncate_from(Index index);

  const LogReader& reader_;
  Index committed_ = 0;
  Index offset_ = 1;             // index of unstable_[0]; everything below is durable
  std::vector<Entry> unstable_;  // contiguous from offset_
  Index driver_last_ = 0;        // last index the driver holds once it applied every handout
  std::optional<Index> pending_truncate_;  // truncation the driver still has to be told about
  // restore(): the snapshot the driver still has to be handed (with its data), and the one it has
  // not reported installed yet (index, term and conf; its data dropped once handed out).
  std::optional<Snapshot> pending_snapshot_;
  std::optional<Snapshot> installing_;
};

}  // namespace raftlog::raft

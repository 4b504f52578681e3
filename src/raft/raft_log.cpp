#include "raft/raft_log.h"

#include <algorithm>

#include "raft/assert.h"

namespace raftlog::raft {

RaftLog::RaftLog(const LogReader& reader, Index committed)
    : reader_(reader),
      committed_(committed),
      offset_(reader.last_index() + 1),
      driver_last_(reader.last_index()) {
  RAFT_ASSERT(committed_ <= reader_.last_index(),
              "hard state commit is beyond the recovered log: the log lost committed entries");
  RAFT_ASSERT(reader_.term_at(reader_.last_index()).has_value(),
              "the log's last term must be known");
}

Index RaftLog::first_index() const {
  if (installing_) return installing_->index + 1;
  return std::min(reader_.first_index(), offset_);
}

Index RaftLog::last_index() const { return offset_ + unstable_.size() - 1; }

Term RaftLog::last_term() const {
  const std::optional<Term> term = term_at(last_index());
  RAFT_ASSERT(term.has_value(), "the last entry's term is always known");
  return *term;
}

std::optional<Term> RaftLog::term_at(Index index) const {
  if (index == 0) return Term{0};
  if (index > last_index()) return std::nullopt;
  if (index >= offset_) return unstable_[index - offset_].term;
  if (installing_) {  // the driver's log is not the snapshot's yet
    if (index == installing_->index) return installing_->term;
    return std::nullopt;
  }
  return reader_.term_at(index);
}

bool RaftLog::matches(Index index, Term term) const {
  const std::optional<Term> ours = term_at(index);
  return ours.has_value() && *ours == term;
}

std::vector<Entry> RaftLog::entries(Index from, Index to, std::size_t max_bytes) const {
  RAFT_ASSERT(from >= first_index() && to <= last_index(),
              "RaftLog::entries range outside the log");
  std::vector<Entry> out;
  if (from > to) return out;
  std::size_t total_bytes = 0;
  if (from < offset_) {
    const Index stable_to_index = std::min(to, offset_ - 1);
    out = reader_.entries(from, stable_to_index, max_bytes);
    RAFT_ASSERT(!out.empty() && out.front().index == from,
                "LogReader::entries returned a wrong range");
    for (const Entry& e : out) total_bytes += e.byte_size();
    if (out.back().index < stable_to_index)
      return out;  // byte limit reached inside the stable part
    from = stable_to_index + 1;
  }
  for (Index index = std::max(from, offset_); index <= to; ++index) {
    const Entry& e = unstable_[index - offset_];
    if (!out.empty() && total_bytes + e.byte_size() > max_bytes) break;
    total_bytes += e.byte_size();
    out.push_back(e);
  }
  return out;
}

void RaftLog::commit_to(Index to) {
  if (to <= committed_) return;
  RAFT_ASSERT(to <= last_index(), "commit index beyond the last log index");
  committed_ = to;
}

void RaftLog::truncate_from(Index index) {
  RAFT_ASSERT(index > committed_, "a committed entry must never be truncated");
  RAFT_ASSERT(index <= last_index(), "truncation beyond the log's end");
  if (index >= offset_) {
    unstable_.resize(index - offset_);
  } else {
    offset_ = index;  // the durable suffix from `index` on is no longer ours
    unstable_.clear();
  }
  if (index <= driver_last_) {
    pending_truncate_ = pending_truncate_ ? std::min(*pending_truncate_, index) : index;
    driver_last_ = index - 1;
  }
}

void RaftLog::append(const std::vector<Entry>& new_entries) {
  append(std::vector<Entry>(new_entries));
}

void RaftLog::append(std::vector<Entry>&& new_entries) {
  if (new_entries.empty()) return;
  const Index first_new = new_entries.front().index;
  RAFT_ASSERT(first_new >= 1 && first_new <= last_index() + 1,
              "append would leave a gap in the log");
  if (first_new <= last_index()) truncate_from(first_new);
  for (Entry& e : new_entries) {
    RAFT_ASSERT(e.index == last_index() + 1, "appended entries must be contiguous");
    RAFT_ASSERT(e.term >= last_term(), "terms never decrease along a log");
    unstable_.push_back(std::move(e));
  }
}

Index RaftLog::find_conflict(const std::vector<Entry>& incoming) const {
  for (const Entry& e : incoming) {
    if (!matches(e.index, e.term)) return e.index;
  }
  return 0;
}

std::pair<Index, Term> RaftLog::find_conflict_by_term(Index index, Term term) const {
  RAFT_ASSERT(index <= last_index(), "find_conflict_by_term beyond the log");
  // Bounded by the log length: each step moves one index down and stops at 0 or an unknown term.
  for (; index > 0; --index) {
    const std::optional<Term> ours = term_at(index);
    if (!ours) return {index, 0};
    if (*ours <= term) return {index, *ours};
  }
  return {0, 0};
}

void RaftLog::restore(Snapshot snapshot) {
  RAFT_ASSERT(snapshot.index > committed_, "a snapshot never replaces committed entries");
  RAFT_ASSERT(!pending_snapshot_ || pending_snapshot_->index < snapshot.index,
              "a later snapshot replaces a pending one");
  unstable_.clear();
  pending_truncate_.reset();  // the snapshot replaces the whole log the driver holds
  offset_ = snapshot.index + 1;
  driver_last_ = snapshot.index;
  committed_ = snapshot.index;
  installing_ = snapshot;
  installing_->data = Payload();
  pending_snapshot_ = std::move(snapshot);
}

bool RaftLog::stable_to(Index index, Term term) {
  if (installing_ && !pending_snapshot_ && index >= installing_->index) {
    // The driver reports the install, or an entry after it: either way it installed the snapshot
    // (Ready's contract), and its log now reads as the snapshot's.
    if (index == installing_->index) {
      if (term != installing_->term) return false;
      installing_.reset();
      return true;
    }
    if (!matches(index, term) || index > driver_last_ || index < offset_) return false;
    installing_.reset();
  }
  if (index < offset_ || index > driver_last_)
    return false;                           // already durable, or never handed out
  if (!matches(index, term)) return false;  // stale: that entry was replaced
  unstable_.erase(unstable_.begin(),
                  unstable_.begin() + static_cast<std::ptrdiff_t>(index - offset_ + 1));
  offset_ = index + 1;
  return true;
}

bool RaftLog::has_handout() const {
  return pending_snapshot_.has_value() || pending_truncate_.has_value() ||
         driver_last_ < last_index();
}

RaftLog::Handout RaftLog::take_handout() {
  Handout handout;
  handout.snapshot = std::move(pending_snapshot_);
  pending_snapshot_.reset();
  handout.truncate_from = pending_truncate_;
  pending_truncate_.reset();
  RAFT_ASSERT(driver_last_ + 1 >= offset_, "the driver holds every durable entry");
  for (Index index = driver_last_ + 1; index <= last_index(); ++index) {
    handout.entries.push_back(unstable_[index - offset_]);
  }
  driver_last_ = last_index();
  return handout;
}

}  // namespace raftlog::raft

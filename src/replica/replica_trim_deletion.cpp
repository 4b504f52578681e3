// Replica: a trim's deletion (after its SNAPSHOT.next), spread over loop rounds.
//
// CRASH CASES (docs/storage-format.md, "A trim cut part-way"). The deletion's durable steps, in
// order: (1) SNAPSHOT.next written (tmp, fdatasync, rename, directory fsync) naming X = new_first -
// 1 (replica_retention.cpp), by the off-loop worker (replica_off_loop_write.cpp): the deletion
// exists from the hand-off but unlinks nothing before the write came back ok (next_written), so a
// cut meanwhile is a cut "before any unlink", and an install or a stop settles the write first;
// (1b) the store's checkpoint vouching for the segments to go and for the commit index up to X,
// asked of the store's flusher (CommitLog::request_checkpoint) and waited for round by round
// (prefix_checkpointed): a cut before it is durable is again one before any unlink; (2) the
// segments before X + 1 unlinked oldest first, a few per round, each round's unlinks
// followed by a directory fsync (CommitLog::truncate_prefix); (3) SNAPSHOT.next renamed over
// SNAPSHOT, directory fsync. Between the rounds of (2) nothing else of a trim runs, so the disk is
// always in one of the states a power cut inside a one-round deletion leaves: before any unlink
// (the open deletes the stale SNAPSHOT.next), part-way (the open finishes the deletion and
// promotes the file: Replica::finish_cut_trim), all gone (the open promotes it). What may happen in
// between: entries appended (above X: the checks of finish_cut_trim hold), TOPICSTATE and CONFSTATE
// rewritten (they only move up), a stop (close() finishes the deletion within the trim limit, the
// open any rest), an install (it finishes the deletion first: its rename of SNAPSHOT.install over
// SNAPSHOT.next must not replace a trim's file while the log starts part-way, or a power cut before
// the install's commit point would leave a log start no file describes, with the dedup records of
// the deleted entries lost).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>

#include "replica/replica.h"

namespace raftlog::replica {

store::Status Replica::advance_trim_deletion(const std::function<bool()>& must_yield, bool* stepped,
                                             std::size_t max_segments) {
  TrimDeletion& deletion = *trim_.deletion;
  // SNAPSHOT.next still being written off the loop: nothing may go before it is durable.
  if (!deletion.next_written) return store::Status();
  const std::uint64_t first = log_->first_index();
  if (first < deletion.new_first) {
    // Never past what a trim may delete now (a follower's leader hold may have fallen since
    // SNAPSHOT.next was written): the rest waits for the limit, the log start unknown meanwhile.
    const std::uint64_t goal = std::min(deletion.new_first, trim_limit());
    if (trim_start_for(goal) <= first || must_yield()) return store::Status();
    // The truncation's checkpoint (a flush cycle and every segment's index file synced: 369-572 ms
    // with 90,000 topics' segments, the longest trim round left: review offloop L6) is the store
    // flusher's, asked now; the unlinks wait for it, round by round, as the trim's flush does.
    // Nothing is deleted before it is durable (a power cut meanwhile is one before any unlink).
    if (!log_->prefix_checkpointed(goal)) {
      RoundProfile::Scope part(round_, RoundPart::kTrimFlush);
      log_->request_checkpoint();
      return store::Status();
    }
    *stepped = true;
    store::Status truncated;
    {
      RoundProfile::Scope part(round_, RoundPart::kTrimUnlink);
      truncated = log_->truncate_prefix(
          goal, [&](std::size_t deleted) { return deleted < max_segments && !must_yield(); });
    }
    const std::uint64_t now_first = log_->first_index();
    if (!truncated.ok() || now_first == first) {
      // A store error (the store has failed), or a store that deleted nothing: as a deletion a
      // power cut stopped, for the next open (finish_trim_snapshot leaves or removes the file).
      if (!truncated.ok() || now_first != deletion.first_before) {
        spdlog::warn(
            "node {}: a trim's deletion stopped with the log starting at {}, not at {}: {}",
            config_.node_id, now_first, deletion.new_first,
            truncated.ok() ? "no segment went" : truncated.to_string());
      }
      abandon_trim_deletion();
      return truncated;
    }
    if (now_first < deletion.new_first) {
      // Part-way: no table this node has describes the entry before the log's start.
      first_index_topics_.reset();
      first_index_conf_.reset();
      first_index_stamp_.reset();  // read only with the table: unknown with it
      tell_core_trim_point_conf();
      return store::Status();
    }
  }
  if (!deletion.reached) {
    // The log starts where SNAPSHOT.next says: its tables describe the start from now on.
    deletion.reached = true;
    note_trimmed_start(deletion.first_before, deletion.new_first, std::move(deletion.topics),
                       std::move(deletion.conf), deletion.stamp);
  }
  if (must_yield()) return store::Status();  // the rename in the next round
  *stepped = true;
  {
    RoundProfile::Scope part(round_, RoundPart::kTrimSnapshot);
    finish_trim_snapshot(deletion.first_before, deletion.new_first);
  }
  trim_.deletion.reset();
  return store::Status();
}

void Replica::abandon_trim_deletion() {
  const TrimDeletion& deletion = *trim_.deletion;
  note_trimmed_start(deletion.first_before, deletion.new_first, std::nullopt, std::nullopt, 0);
  finish_trim_snapshot(deletion.first_before, deletion.new_first);
  trim_.deletion.reset();
}

store::Status Replica::finish_trim_deletion_now(bool within_limit) {
  // Its SNAPSHOT.next written or dropped first (the callers, an install and a stop, settled the
  // write already: this is for any other).
  settle_pending_write();
  if (!trim_.deletion) return store::Status();
  if (!trim_.deletion->next_written) {
    // Not expected (settling publishes the deletion's SNAPSHOT.next write or drops the deletion);
    // without a durable SNAPSHOT.next nothing may go: the dedup records of the entries would be
    // lost at the next power cut. Given up as a deletion that never began.
    spdlog::error("node {}: a trim's deletion without its SNAPSHOT.next: dropped", config_.node_id);
    abandon_trim_deletion();
    return store::Status();
  }
  const std::uint64_t new_first = trim_.deletion->new_first;
  // Past the limit for an install (it replaces the whole log, whatever the limit says); within it
  // for a stop. At once: the truncation's checkpoint too, on this thread when the last one does not
  // cover it (neither waits rounds for the flusher's, which advance_trim_deletion would).
  const std::uint64_t goal = within_limit ? std::min(new_first, trim_limit()) : new_first;
  const std::uint64_t first_now = log_->first_index();
  if (first_now < goal && (!within_limit || trim_start_for(goal) > first_now)) {
    store::Status truncated;
    {
      RoundProfile::Scope part(round_, RoundPart::kTrimUnlink);
      truncated = log_->truncate_prefix(goal);
    }
    if (!truncated.ok()) {
      abandon_trim_deletion();
      return truncated;
    }
  }
  bool stepped = false;
  while (trim_.deletion) {
    const std::uint64_t first = log_->first_index();
    const bool reached = trim_.deletion->reached;
    RAFTLOG_RETURN_IF_ERROR(advance_trim_deletion([] { return false; }, &stepped, SIZE_MAX));
    // Held back by the limit: what is left waits for the next open (finish_cut_trim).
    if (trim_.deletion && log_->first_index() == first && trim_.deletion->reached == reached) {
      break;
    }
  }
  return store::Status();
}

}  // namespace raftlog::replica

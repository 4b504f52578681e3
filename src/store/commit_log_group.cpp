// CommitLog::Impl::append_grouped: sync-mode appends of auto-indexed batches from many threads,
// written together by one of them (append_group.h) and then waited for like any sync append.
#include "store/commit_log_impl.h"
#include "util/check.h"

namespace raftlog::store {

Result<IndexRange> CommitLog::Impl::append_grouped(std::span<const EntryToAppend> batch) {
  RAFTLOG_CHECK(options_.flush_mode == FlushMode::kSync, "only sync-mode appends are grouped");
  // Checked here, so that a bad batch fails alone and never joins a run with others.
  RAFTLOG_RETURN_IF_ERROR(validate_batch(batch));
  if (batch[0].meta.index != 0)
    return Status::invalid_argument("a grouped append takes index 0 only");

  const auto lead = [this](GroupMember* oldest) {
    append_group_.lead(
        oldest,
        // Written, not waited for: the members wait below, each for its own range. In sync mode
        // append() also wakes the flusher.
        [this](std::span<const EntryToAppend> run,
               const AppendGroup::ResolveWritten& resolve_written) {
          return append(run, /*wait_durable=*/false, &resolve_written);
        },
        // If the log stopped (closed or failed) while the run's members slept as "queued", no
        // flush cycle will wake them to see their range: wake them here. The state stores come
        // first, so a member that read "queued" also read the epoch this bumps.
        [this](const IndexRange&) {
          if (flush_waiters_.released()) flush_waiters_.wake_all();
        },
        [this] { flush_waiters_.wake_all(); });
  };

  GroupMember member(batch);
  if (append_group_.join(&member)) lead(&member);
  // Bounded by the flusher: every pass either returns or sleeps until a flush cycle, a failed
  // append or a hand-over changed something (spurious wake-ups only re-check).
  for (;;) {
    // In this order (flush_waiters.h): the epoch, the cycle guess for a batch not yet appended, the
    // state (an appended batch then waits with guesses of its own). No wake-up between these reads
    // is lost, and no guess is later than the cycle that covers the batch: a member still reads
    // "queued" only while no flush cycle can see its entries (append_group.h), so the guess made
    // before that read holds.
    const std::uint32_t seen = flush_waiters_.epoch();
    const std::uint64_t queued_cycle = flush_waiters_.covering_cycle_of_next_append();
    switch (member.state.load()) {
      case GroupMember::kLeading:
        lead(&member);
        continue;
      case GroupMember::kFailed:
        return member.status;
      case GroupMember::kAppended:
        // Written: from here on it waits like any sync append, for its own entries.
        RAFTLOG_RETURN_IF_ERROR(wait_own_entries(member.range.last, member.truncations_seen));
        return member.range;
      default:
        // Queued: a leader will append the batch. Even if the log closes now, the member must stay
        // until the leader resolved it (the leader reads it), so this waits regardless.
        flush_waiters_.sleep(seen, queued_cycle);
        continue;
    }
  }
}

}  // namespace raftlog::store

// AppendGroup: many threads appending at the next index, written by one of them at a time.
//
// Why: with 64 threads each appending one entry and waiting for it to be durable (sync mode), every
// flush woke about 30 of them at once, and each then queued on the writer lock: a thread switch to
// sleep on the lock, another to wake up, one pwrite per entry, and the flush wait after that. On two
// cores those switches and system calls were most of the CPU an append cost, and a busy CPU slows
// this machine's own fdatasync (docs/benchmarks.md, run 12). The group-commit idea applied to the
// write itself (as RocksDB's write groups do): a thread that finds a writer active queues its batch
// and goes straight to waiting for durability; the active writer (the leader) appends every queued
// batch with one append call, one pwrite, and tells each member its indexes.
//
// The queue is a lock-free stack whose head word also carries a "leader active" bit:
//   0                   no leader, queue empty
//   kLeaderActive       a leader is appending, queue empty
//   member | kLeaderActive  a leader is appending, members queued (newest first)
// join() on 0 makes the caller the leader; otherwise it pushes. A leader, after each round, takes
// everything queued meanwhile (appending it oldest first) or, when nothing is queued, clears the word
// to 0 with one compare-and-swap. So a queued member always has a leader that will take it.
//
// Bounds: a member is one caller's batch (at most max_batch_entries), so the queue holds at most one
// member per appending thread. A round appends runs of at most max_run_entries entries. A leader leads
// at most kMaxLeadRounds rounds; if members are still queued then, it hands leadership to the oldest
// of them, so no caller serves others forever.
//
// Why before the log publishes: a queued member that goes to sleep guesses the first flush cycle
// that can cover its batch (flush_waiters.h). If a cycle is in flight and has read its target, the
// guess is the cycle after it: the batch is not in that target. That holds only if the member's
// "queued" state is still true whenever the log's last index can already include the batch, so the
// leader stores the members' ranges and states while the log still hides the run (the log calls
// back between writing the run and publishing its last index). A member that read "queued" thus
// read it before any flush cycle could see its entries.
//
// Member lifetime: a member lives on its caller's stack. The leader reads everything it needs from a
// member (its batch, its link to the next member) before it stores the member's final state; after
// that store the caller may return, so the leader never touches the member again.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>

#include "store/commit_log.h"
#include "store/status.h"

namespace raftlog::store {

struct GroupMember {
  enum State : std::uint32_t {
    kQueued = 0,    // waiting for a leader to append the batch
    kAppended = 1,  // written; `range` holds its indexes
    kFailed = 2,    // not written; `status` says why
    kLeading = 3,   // handed leadership: the caller must call AppendGroup::lead(this)
  };

  explicit GroupMember(std::span<const EntryToAppend> entries) : batch(entries) {}
  GroupMember(const GroupMember&) = delete;
  GroupMember& operator=(const GroupMember&) = delete;

  const std::span<const EntryToAppend> batch;  // every entry with index 0 (the log assigns them)
  std::atomic<std::uint32_t> state{kQueued};
  IndexRange range;  // valid once kAppended
  // The log's TruncationHistory::count() when the batch was written (truncation_history.h); valid
  // once kAppended. The member waits for its range and checks no truncation since then removed it.
  std::uint64_t truncations_seen = 0;
  Status status;                // valid once kFailed
  GroupMember* next = nullptr;  // owned by the group while kQueued (stack link, then list link)
};

class AppendGroup {
 public:
  // Called by the log with a run's range once the run is written and before the log publishes its
  // new last index (under the log's writer lock), with the log's truncation count at that moment;
  // stores each member's range, that count and its state.
  using ResolveWritten =
      std::function<void(const IndexRange& written, std::uint64_t truncations_seen)>;
  // Appends one run: the concatenated batches of consecutive members, all or nothing. Must call
  // `resolve_written` exactly once if (and only if) it writes the run.
  using AppendRun = std::function<Result<IndexRange>(std::span<const EntryToAppend> run,
                                                     const ResolveWritten& resolve_written)>;
  // Called after members failed or leadership was handed over: those callers sleep on the log's
  // flush wait-queue and must be woken to see their new state.
  using WakeAll = std::function<void()>;
  // Called after the members of a written run were told their ranges (their states stored), with the
  // run's range. A member that slept as "queued" is woken by the flush that covers its range (see
  // "Why before the log publishes"), but no flush comes once the log closed or failed: the callee
  // wakes the members then.
  using AfterAppended = std::function<void(const IndexRange& run)>;

  static constexpr std::uint32_t kMaxLeadRounds = 8;

  explicit AppendGroup(std::uint32_t max_run_entries) : max_run_entries_(max_run_entries) {}
  AppendGroup(const AppendGroup&) = delete;
  AppendGroup& operator=(const AppendGroup&) = delete;

  // Queues `member` (state kQueued). Returns true when the caller became the leader and must call
  // lead(member); false when a leader will append the batch and set the member's state.
  bool join(GroupMember* member);
  // Appends `oldest` and the members linked after it (oldest first), then every member queued
  // meanwhile, until the queue is empty (leadership released) or kMaxLeadRounds rounds passed
  // (leadership handed to the oldest queued member, which then sees kLeading).
  void lead(GroupMember* oldest, const AppendRun& append_run, const AfterAppended& after_appended,
            const WakeAll& wake_all);

  // For tests and diagnostics.
  std::uint64_t runs() const { return runs_.load(std::memory_order_relaxed); }
  std::uint64_t members() const { return members_.load(std::memory_order_relaxed); }

 private:
  static constexpr std::uintptr_t kLeaderActive = 1;  // GroupMember is aligned, bit 0 is free

  // Appends the members of one round in runs; resolves each member (its last access to it).
  void append_round(GroupMember* oldest, const AppendRun& append_run,
                    const AfterAppended& after_appended, const WakeAll& wake_all);

  const std::uint32_t max_run_entries_;
  std::atomic<std::uintptr_t> head_{0};
  std::atomic<std::uint64_t> runs_{0};
  std::atomic<std::uint64_t> members_{0};
};

}  // namespace raftlog::store

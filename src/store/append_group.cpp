#include "store/append_group.h"

#include <vector>

#include "util/check.h"

namespace raftlog::store {
namespace {

static_assert(alignof(GroupMember) >= 2, "bit 0 of a member's address carries the leader bit");

// The stack holds the newest member first; appends go oldest first (the order the callers came in).
GroupMember* reverse(GroupMember* newest) {
  GroupMember* oldest = nullptr;
  // Bounded: one step per queued member, at most one per appending thread.
  while (newest != nullptr) {
    GroupMember* next = newest->next;
    newest->next = oldest;
    oldest = newest;
    newest = next;
  }
  return oldest;
}

}  // namespace

bool AppendGroup::join(GroupMember* member) {
  RAFTLOG_CHECK(member->state.load() == GroupMember::kQueued, "a member joins the group once");
  std::uintptr_t head = head_.load();
  // Bounded by contention: each failed compare-and-swap means another thread joined or a leader
  // took the queue.
  for (;;) {
    if (head == 0) {
      member->next = nullptr;
      if (head_.compare_exchange_weak(head, kLeaderActive)) return true;
      continue;
    }
    member->next = reinterpret_cast<GroupMember*>(head & ~kLeaderActive);
    if (head_.compare_exchange_weak(head,
                                    reinterpret_cast<std::uintptr_t>(member) | kLeaderActive)) {
      return false;
    }
  }
}

void AppendGroup::lead(GroupMember* oldest, const AppendRun& append_run,
                       const AfterAppended& after_appended, const WakeAll& wake_all) {
  for (std::uint32_t round = 1;; ++round) {
    append_round(oldest, append_run, after_appended, wake_all);
    std::uintptr_t head = head_.load();
    // Bounded by contention, as in join().
    while (head == kLeaderActive) {
      if (head_.compare_exchange_weak(head, 0)) return;  // nothing queued: leadership released
    }
    head = head_.exchange(kLeaderActive);  // take everything queued during the round
    oldest = reverse(reinterpret_cast<GroupMember*>(head & ~kLeaderActive));
    RAFTLOG_CHECK(oldest != nullptr, "a queue the leader takes over holds a member");
    if (round >= kMaxLeadRounds) {
      // The head still says "leader active": the new leader takes over the queue with it.
      oldest->state.store(GroupMember::kLeading);  // last access: the new leader owns the list now
      wake_all();
      return;
    }
  }
}

void AppendGroup::append_round(GroupMember* oldest, const AppendRun& append_run,
                               const AfterAppended& after_appended, const WakeAll& wake_all) {
  std::vector<EntryToAppend> run;
  bool any_failed = false;
  bool one_member_per_run = false;  // after a shared run was refused as invalid
  GroupMember* member = oldest;
  // Bounded: each pass resolves at least one member or switches to one member per run (once per
  // refused shared run), and the round's list is finite.
  while (member != nullptr) {
    // A run: consecutive members while the run stays within max_run_entries (a member is never
    // split) and terms do not decrease (the log refuses a batch whose terms decrease).
    run.clear();
    GroupMember* const first = member;
    std::uint32_t members_in_run = 0;
    while (member != nullptr) {
      const auto& batch = member->batch;
      RAFTLOG_CHECK(!batch.empty(), "a member's batch was validated (not empty) before it joined");
      if (members_in_run > 0 &&
          (one_member_per_run || run.size() + batch.size() > max_run_entries_ ||
           batch.front().meta.term < run.back().meta.term)) {
        break;
      }
      run.insert(run.end(), batch.begin(), batch.end());
      ++members_in_run;
      member = member->next;
    }
    // The members learn their ranges from inside the append (resolve_written), before the log makes
    // the entries visible to its flusher: see "Why before the log publishes" in append_group.h.
    // Resolving stores each member's final state, the group's last access to that member.
    // One pointer captured, so the std::function needs no heap allocation per run.
    struct RunToResolve {
      GroupMember* first = nullptr;
      std::uint32_t members = 0;
      std::size_t entries = 0;
      bool resolved = false;
    } to_resolve{first, members_in_run, run.size(), false};
    const auto resolve_written = [&to_resolve](const IndexRange& written,
                                               std::uint64_t truncations_seen) {
      RAFTLOG_CHECK(!to_resolve.resolved && written.last - written.first + 1 == to_resolve.entries,
                    "a run is resolved once, with a range of its own size");
      to_resolve.resolved = true;
      std::uint64_t next_index = written.first;
      GroupMember* resolving = to_resolve.first;
      for (std::uint32_t i = 0; i < to_resolve.members; ++i) {
        GroupMember* const after = resolving->next;  // read before the member may go away
        resolving->range = IndexRange{next_index, next_index + resolving->batch.size() - 1};
        resolving->truncations_seen = truncations_seen;
        next_index += resolving->batch.size();
        resolving->state.store(GroupMember::kAppended);
        resolving = after;
      }
    };
    Result<IndexRange> appended = append_run(run, resolve_written);
    runs_.fetch_add(1, std::memory_order_relaxed);
    RAFTLOG_CHECK(appended.ok() == to_resolve.resolved,
                  "the log resolves a run exactly when it writes it");
    if (!appended.ok() && members_in_run > 1 &&
        appended.status().code() == StatusCode::kInvalidArgument) {
      // One member's entries (say a term below the log's last term) must not fail the others':
      // nothing was written, so append these members again one by one.
      one_member_per_run = true;
      member = first;
      continue;
    }
    members_.fetch_add(members_in_run, std::memory_order_relaxed);
    if (appended.ok()) {
      after_appended(*appended);  // after every state store of the run
      continue;
    }
    GroupMember* failing = first;
    for (std::uint32_t i = 0; i < members_in_run; ++i) {
      GroupMember* const after = failing->next;  // read before the member may go away
      failing->status = appended.status();
      failing->state.store(GroupMember::kFailed);
      failing = after;
    }
    any_failed = true;
  }
  if (any_failed) wake_all();
}

}  // namespace raftlog::store

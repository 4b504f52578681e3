// TrimProgress: where a replica's trim stands between the loop rounds that carry it on
// (replica_retention.cpp, replica_trim_deletion.cpp, replica_topic_scan.cpp). A trim is spread over
// rounds so that no round holds the Raft loop for much more than the round's trim budget
// (ReplicaConfig::trim_round_budget_ms; docs/design.md, "Known limits"): what it waits for (the
// flusher's flush or checkpoint, a write off the loop, the topic scan) and what it has done so far
// live here, apart from the replica's other state, with the plan one trim() call makes (TrimPlan).
// Plain data: the replica's loop thread alone reads and writes it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "raft/types.h"
#include "replica/replica_config.h"
#include "replica/topic_offsets.h"
#include "store/status.h"

namespace raftlog::replica {

// Moving the topic table as of the log's first index - 1 forward means reading the entries a trim
// deletes (their topics and offsets), up to a whole segment (1 GiB by default) per trim: far too
// long for one round of the replica's loop, which also answers heartbeats. So the entries are read
// in slices of at most ReplicaConfig::topic_scan_slice_bytes, one per loop round (or per trim
// call), and a trim deletes only the segments the scan has passed; the rest of it waits in
// TrimProgress::pending_before and runs as the scan gets there. `boundary` is the last index of the
// newest segment the scan finished (the log's first index - 1 when none), `boundary_table` the
// topic table as of it, `running` the table as of the scan's point inside the next segment (its
// journal empty: every entry scanned is committed).
// `boundary_conf` and `running_conf` are the configurations in force there (nullopt: not known,
// as the replica's first_index_conf_, or a configuration entry that did not decode).
struct TopicScan {
  std::uint64_t boundary = 0;
  std::vector<TopicOffsets::TopicNext> boundary_table;
  TopicOffsets running;
  std::optional<raft::ConfState> boundary_conf;
  std::optional<raft::ConfState> running_conf;
  // The running max of the stamps as of `boundary` and of the scan's point (first_index_stamp_).
  std::uint64_t boundary_stamp = 0;
  std::uint64_t running_stamp = 0;
};

// A trim's deletion, once its SNAPSHOT.next is written (replica_trim_deletion.cpp): the segments
// before `new_first` are unlinked oldest first, a few per round, and SNAPSHOT.next renamed over
// SNAPSHOT once the log starts at new_first. Between rounds the log starts between first_before
// and new_first, as after a power cut in the middle of a deletion (docs/storage-format.md, "A
// trim cut part-way": the open finishes it), and no table describes its start (snapshots fall
// back); `topics` and `conf`, as of new_first - 1, become the log start's once it starts there
// (`reached`). At most one: a trim continues it before anything else, an install finishes it.
struct TrimDeletion {
  std::uint64_t first_before = 0;
  std::uint64_t new_first = 0;
  std::optional<std::vector<TopicOffsets::TopicNext>> topics;
  std::optional<raft::ConfState> conf;
  std::uint64_t stamp = 0;  // the running max stamp as of new_first - 1, with `topics`
  bool reached = false;
  // SNAPSHOT.next is durable (its write off the loop came back): until then nothing is deleted.
  bool next_written = false;
};

// The trim's budget of the current loop round (trim_round_budget_ms), shared by every trim()
// call of the round: when the round began for the trim, and whether an expensive step ran.
struct TrimBudget {
  std::uint64_t round = 0;
  Clock::time_point started{};
  bool stepped = false;
};

// What one trim() call's steps plan (replica_retention.cpp; not kept between rounds): where the
// log starts after this deletion and the tables as of new_first - 1 (the topic scan's, when it
// reached there).
struct TrimPlan {
  std::uint64_t new_first = 0;
  std::optional<std::vector<TopicOffsets::TopicNext>> topics;
  std::optional<raft::ConfState> conf;
  std::uint64_t stamp = 0;  // the running max stamp as of new_first - 1, with `topics`
};

struct TrimProgress {
  // The trim's point still to reach in later rounds (0: no trim waits), continued each loop round
  // (Replica::continue_pending_trim).
  std::uint64_t pending_before = 0;
  // A trim's own TOPICSTATE save (its through index, 0: none asked): once it is back, the trim
  // goes no further than it reaches (the commit index moves meanwhile; saving again would chase
  // it).
  std::uint64_t topic_state_through = 0;
  // The flushed index a trim waits for (0: none), asked of the store's flusher: the commit index
  // when it asked.
  std::uint64_t flush_wanted = 0;
  // A failed write of the trim's (TOPICSTATE or SNAPSHOT.next) that came back off the loop: the
  // trim reports it and stops.
  std::optional<store::Status> write_failure;
  std::optional<TrimDeletion> deletion;
  // The loop round (Replica::begin_round) in which the deletion last advanced: it advances once per
  // round, whichever trim() calls of the round (a request, the continuation, the retention check)
  // ask, so a round holds the loop for one budget of it, not one per call. Without rounds (the
  // simulator, tests that call trim() alone) every call advances it.
  std::uint64_t deletion_advanced_round = 0;
  TrimBudget budget;
  std::unique_ptr<TopicScan> topic_scan;

  // A trim answers before its deletion has run: whether one is still under way.
  bool in_progress() const { return pending_before != 0 || deletion.has_value(); }
  // The trim is over: nothing of it waits any more (its request, TOPICSTATE save, flush). The
  // deletion and the topic scan are not its to end.
  void end() {
    pending_before = 0;
    topic_state_through = 0;
    flush_wanted = 0;
  }
  // The round's trim budget is spent (an expensive step ran and `budget_ms` passed since the round
  // began for the trim). `now` (the replica's clock) is read only once a step ran: a test's clock
  // that moves at every reading counts the readings (TopicScanSliceTest).
  template <typename Now>
  bool must_yield(const Now& now, std::uint64_t budget_ms) const {
    return budget.stepped && budget_spent(now, budget_ms);
  }
  // `budget_ms` passed since the round began for the trim, whether or not a step ran (the topic
  // scan's slice stops on it after one batch at least).
  template <typename Now>
  bool budget_spent(const Now& now, std::uint64_t budget_ms) const {
    return now() - budget.started >= std::chrono::milliseconds(budget_ms);
  }
};

}  // namespace raftlog::replica

// Replica: retention — deleting whole committed segments on request (trim) and by age or size.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <utility>

#include "replica/durability_rules.h"
#include "replica/replica.h"
#include "replica/topic_state_file.h"

namespace raftlog::replica {

// Never past the commit index (an uncommitted tail may still be replaced). On the leader, never past
// what a follower still needs, unless the follower has been silent longer than the grace period: it
// could not be caught up anyway once it is that far gone, and keeping the log forever for a dead node
// would fill the disk. On a follower, never past the hold its current leader sent (the same follower
// part of the leader's limit), while that leader was heard within the grace period: a follower that
// becomes leader still holds what a lagging node needs. See docs/operations.md ("Retention").
std::uint64_t Replica::trim_limit() const {
  // TOPICSTATE, saved first, reaches only as far as the log is flushed (topic_state_through()).
  std::uint64_t limit = topic_state_through() + 1;
  if (const std::uint64_t hold = retention_hold_.load(); hold != 0) {
    limit = std::min(limit, hold);
  }
  if (raft_->role() != raft::Role::kLeader) {
    // From the network: it only ever lowers the limit (a hold above it changes nothing). Not on a
    // disk past its high watermark: a follower does not refuse replicated appends, and keeping the
    // log for a lagging node (an optimisation: it avoids a snapshot) must not fill its disk.
    const std::optional<std::uint64_t> held =
        disk_.exceeded()
            ? std::nullopt
            : leader_hold_.limit(raft_->leader(), raft_->term(), deps_.clock(),
                                 std::chrono::milliseconds(config_.retention_follower_grace_ms));
    return rules::follower_trim_limit(limit, held.value_or(0));
  }
  const std::uint64_t followers =
      leader_retention_hold(raft_->progress(), config_.node_id, raft::kNoNode, config_.tick_ms,
                            config_.retention_follower_grace_ms, inherited_retention_hold());
  if (followers != 0) limit = std::min(limit, followers);
  return limit;
}

void Replica::stamp_retention_hold(std::vector<raft::Message>& messages) const {
  if (raft_->role() != raft::Role::kLeader) return;
  std::optional<std::vector<raft::PeerProgress>> progress;  // read once, if a message needs it
  const std::uint64_t inherited = inherited_retention_hold();
  for (raft::Message& message : messages) {
    if (message.type != raft::MessageType::kAppend &&
        message.type != raft::MessageType::kHeartbeat) {
      continue;
    }
    if (!progress) progress = raft_->progress();
    message.retention_hold =
        leader_retention_hold(*progress, config_.node_id, message.to, config_.tick_ms,
                              config_.retention_follower_grace_ms, inherited);
  }
}

std::uint64_t Replica::inherited_retention_hold() const {
  return leader_hold_.inherited(deps_.clock(),
                                std::chrono::milliseconds(config_.retention_follower_grace_ms));
}

TrimResult Replica::trim(std::uint64_t before_index, const char* why) {
  // One round of the loop runs the trim's expensive steps (TOPICSTATE, CONFSTATE, a scan slice,
  // SNAPSHOT.next, the deletion's unlinks) only while they took less than trim_round_budget_ms
  // together; the rest waits in trim_.pending_before for the next round (continue_pending_trim),
  // which starts again from what it finds then (new entries, an install that moved the log's
  // start, a new leader). Each step on a loaded disk can take tens of ms (a TOPICSTATE of 20,000
  // topics is MBs, synced); all of them at once held the loop past an election timeout
  // (docs/benchmarks.md, "Trim round"). One budget per loop round, whichever trim() calls of the
  // round spend it (a request, the continuation, the retention check: drills5 M2 saw a scan slice
  // and SNAPSHOT.next, or two slices, in one round, each call with a fresh budget). Without rounds
  // (the simulator, tests that call trim() alone) every call has its own.
  if (!round_.in_round() || trim_.budget.round != round_id_) {
    trim_.budget = TrimBudget{round_id_, deps_.clock(), false};
  }
  const std::uint64_t first_before = log_->first_index();
  const std::uint64_t segments_before = log_->disk_usage().segments;
  // A deletion an earlier round began goes on first; the rest of the trim waits for it (the next
  // round continues: trim_.pending_before).
  if (trim_.deletion) {
    trim_.pending_before = std::max(trim_.pending_before, before_index);
    return finish_trim_call(before_index, why, trim_limit(), first_before, segments_before);
  }
  if (trim_waits_for_flush(before_index)) {
    return yield_trim(before_index, first_before, trim_limit());
  }
  const std::uint64_t limit = trim_limit();
  std::uint64_t target = std::min(before_index, limit);
  // A write of this trim's that failed off the loop (TOPICSTATE, SNAPSHOT.next): reported, and the
  // trim stops (the retention check or a new request starts it again).
  if (trim_.write_failure) {
    return stop_failed_trim("", *std::exchange(trim_.write_failure, std::nullopt), first_before,
                            limit);
  }
  if (trim_start_for(target) <= first_before) {
    // No whole segment below the point now (it lies in the active segment, or the limit holds it
    // back): the trim ends here, with no TOPICSTATE saved for nothing, rather than stay pending and
    // delete whenever that segment seals or the limit rises (review offloop2 M1).
    trim_.end();
    return finish_trim_call(before_index, why, limit, first_before, segments_before);
  }
  if (std::optional<TrimResult> waits =
          trim_topic_state_step(before_index, first_before, limit, &target)) {
    return *waits;
  }
  if (target > first_before) {
    if (std::optional<TrimResult> stops =
            trim_deletion_step(before_index, first_before, limit, target)) {
      return *stops;
    }
  }
  return finish_trim_call(before_index, why, limit, first_before, segments_before);
}

bool Replica::trim_must_yield() const {
  return trim_.must_yield(deps_.clock, config_.trim_round_budget_ms);
}

TrimResult Replica::yield_trim(std::uint64_t before_index, std::uint64_t first_before,
                               std::uint64_t allowed) {
  trim_.pending_before = std::max(trim_.pending_before, before_index);
  return TrimResult{NodeError{}, first_before, allowed};
}

bool Replica::trim_waits_for_flush(std::uint64_t before_index) {
  if (before_index > topic_state_through() + 1 && commit_ > log_->flushed_index() &&
      trim_.topic_state_through == 0) {
    // Async flush mode: the committed entries to trim may not be flushed yet, and TOPICSTATE may
    // not describe them before they are. The store's flusher makes them durable, asked now (a
    // stepped store: at its owner's next flush step), not this loop: a flush of 9 MB held it
    // 0.33-0.56 s (docs/benchmarks.md, "Trim round"). The trim waits for the flushed index to reach
    // what was committed when it asked (not what is committed since: that would chase the
    // appends), then trims no further than the flushed index (trim_limit()).
    if (trim_.flush_wanted == 0) trim_.flush_wanted = std::min(before_index - 1, commit_);
    if (log_->flushed_index() < trim_.flush_wanted) {
      RoundProfile::Scope part(round_, RoundPart::kTrimFlush);
      log_->request_flush();
      return true;
    }
  }
  trim_.flush_wanted = 0;
  return false;
}

std::optional<TrimResult> Replica::trim_topic_state_step(std::uint64_t before_index,
                                                         std::uint64_t first_before,
                                                         std::uint64_t limit,
                                                         std::uint64_t* target) {
  if (*target > first_before && *target - 1 > topic_state_saved_through_ &&
      (trim_.topic_state_through == 0 || topic_state_saved_through_ < trim_.topic_state_through)) {
    // TOPICSTATE first: once the entries are gone, only it remembers their topics' offsets. Written
    // off the loop (replica_off_loop_write.cpp); the trim waits for it in trim_.pending_before.
    if (pending_write_ || trim_must_yield()) return yield_trim(before_index, first_before, limit);
    trim_.budget.stepped = true;
    (void)start_topic_state_save(/*for_trim=*/true);
    trim_.topic_state_through = topic_state_saved_through_;  // inline: back already
    if (pending_write_) {
      trim_.topic_state_through = pending_write_->through;
      return yield_trim(before_index, first_before, limit);
    }
    if (trim_.write_failure) {
      const store::Status failed = *std::exchange(trim_.write_failure, std::nullopt);
      spdlog::error("node {}: not trimming before {}: saving TOPICSTATE: {}", config_.node_id,
                    *target, failed.to_string());
      return stop_failed_trim("saving TOPICSTATE: ", failed, first_before, limit);
    }
  }
  // The trim's own save is back: no further than it reaches (the commit index moved meanwhile).
  if (trim_.topic_state_through != 0) {
    *target = std::min(*target, topic_state_saved_through_ + 1);
    trim_.topic_state_through = 0;
  }
  return std::nullopt;
}

std::optional<TrimResult> Replica::trim_deletion_step(std::uint64_t before_index,
                                                      std::uint64_t first_before,
                                                      std::uint64_t limit, std::uint64_t target) {
  // CONFSTATE's base (with its members' addresses) moves up to what the flush above settled
  // before the entries go: a configuration entry trimmed while the base still named an older one
  // would leave a restart with a member's role but not its address.
  if (settled_conf_base(commit_) != 0) {
    if (trim_must_yield()) return yield_trim(before_index, first_before, limit);
    trim_.budget.stepped = true;
  }
  {
    RoundProfile::Scope part(round_, RoundPart::kConfState);
    settle_conf_records(commit_);
  }
  if (failed_) {
    return TrimResult{
        make_error(ErrorCode::kInternal, "trim failed: persisting the settled configuration",
                   kReasonStorageError),
        first_before, limit};
  }
  // The dedup table's appends in the segments about to go, for the next open: SNAPSHOT.next,
  // which becomes SNAPSHOT once the segments are gone (until then SNAPSHOT still describes the
  // log's start; a crash in between: the open takes whichever file does). Where the log will
  // start: the first segment that keeps an entry at or above the target, as far as the topic scan
  // has read (trim_scan_step).
  TrimPlan plan{trim_start_for(target), std::nullopt, std::nullopt};
  if (std::optional<TrimResult> waits = trim_scan_step(before_index, first_before, limit, &plan)) {
    return *waits;
  }
  if (plan.new_first <= first_before) return std::nullopt;
  // The deletion: SNAPSHOT.next (describing the log as this round found it: gathered now,
  // written off the loop), then the segments' unlinks and SNAPSHOT, spread over rounds within the
  // budget (replica_trim_deletion.cpp). Not while another write is out (a periodic TOPICSTATE).
  if (pending_write_ || trim_must_yield()) return yield_trim(before_index, first_before, limit);
  trim_.budget.stepped = true;
  RoundProfile::Scope part(round_, RoundPart::kTrimSnapshotNext);
  const std::uint64_t new_first = plan.new_first;
  trim_.deletion = TrimDeletion{first_before,          new_first,  std::move(plan.topics),
                                std::move(plan.conf),  plan.stamp, /*reached=*/false,
                                /*next_written=*/false};
  const store::Status started = start_trim_snapshot(
      new_first - 1, trim_.deletion->topics ? &*trim_.deletion->topics : nullptr,
      trim_.deletion->conf ? &*trim_.deletion->conf : nullptr, trim_.deletion->stamp);
  // Failed here (its point unreadable), or inline and failed (publish_write logged it).
  std::optional<store::Status> failed;
  if (!started.ok()) {
    spdlog::error("node {}: not trimming before {}: saving the dedup table: {}", config_.node_id,
                  target, started.to_string());
    failed = started;
    trim_.deletion.reset();
  } else if (trim_.write_failure) {
    failed = std::exchange(trim_.write_failure, std::nullopt);
  }
  if (failed) return stop_failed_trim("saving the dedup table: ", *failed, first_before, limit);
  return std::nullopt;
}

std::optional<TrimResult> Replica::trim_scan_step(std::uint64_t before_index,
                                                  std::uint64_t first_before, std::uint64_t limit,
                                                  TrimPlan* plan) {
  // The topic table as of the new first index - 1, for snapshots sent at that point: the one as
  // of the old first index - 1 advanced by the entries about to go (still on disk), read in
  // bounded slices (replica_topic_scan.cpp), and the configuration in force there likewise (the
  // newest configuration entry the scan passed). Only the segments the scan has finished go now;
  // the rest of the trim waits for it (trim_.pending_before, continued each loop round).
  if (plan->new_first <= first_before || !first_index_topics_) return std::nullopt;
  // Segments a slice of an earlier round finished go first, without reading more now.
  const bool finished_earlier = trim_.topic_scan && trim_.topic_scan->boundary >= first_before &&
                                trim_.topic_scan->boundary < plan->new_first - 1;
  if (!finished_earlier) {
    if (trim_must_yield()) return yield_trim(before_index, first_before, limit);
    const std::uint64_t read_through = trim_.topic_scan ? trim_.topic_scan->running.through() : 0;
    RoundProfile::Scope part(round_, RoundPart::kTrimScan);
    // Its reading stops when the round's trim budget is spent (after one batch at least), whether
    // or not another step ran before it in this round.
    advance_topic_scan(plan->new_first - 1, config_.topic_scan_slice_bytes, [this] {
      return trim_.budget_spent(deps_.clock, config_.trim_round_budget_ms);
    });
    if (!trim_.topic_scan || trim_.topic_scan->running.through() != read_through) {
      trim_.budget.stepped = true;
    }
  }
  if (trim_.topic_scan && trim_.topic_scan->boundary < plan->new_first - 1) {
    trim_.pending_before = std::max(trim_.pending_before, before_index);
    plan->new_first = trim_.topic_scan->boundary + 1;
  }
  if (trim_.topic_scan && plan->new_first > first_before) {
    plan->topics = trim_.topic_scan->boundary_table;
    plan->conf = trim_.topic_scan->boundary_conf;
    plan->stamp = trim_.topic_scan->boundary_stamp;
  }
  return std::nullopt;
}

TrimResult Replica::finish_trim_call(std::uint64_t before_index, const char* why,
                                     std::uint64_t limit, std::uint64_t first_before,
                                     std::uint64_t segments_before) {
  const bool advanced_this_round = round_.in_round() && trim_.deletion_advanced_round == round_id_;
  if (trim_.deletion && !advanced_this_round) {
    trim_.deletion_advanced_round = round_id_;
    if (store::Status deleted = advance_trim_deletion(
            [this] { return trim_must_yield(); }, &trim_.budget.stepped,
            config_.trim_segments_per_round != 0 ? config_.trim_segments_per_round : SIZE_MAX);
        !deleted.ok()) {
      spdlog::error("node {}: trimming the log before {}: {}", config_.node_id, before_index,
                    deleted.to_string());
      trim_.end();  // the deletion ended as a cut one (the store failed): nothing to go on with
      return TrimResult{make_error(ErrorCode::kInternal, "trim failed: " + deleted.to_string(),
                                   kReasonStorageError),
                        log_->first_index(), limit};
    }
  }
  // The rest of the deletion, and of the trim, in the next rounds (continue_pending_trim).
  if (trim_.deletion) {
    trim_.pending_before = std::max(trim_.pending_before, before_index);
  } else if (trim_.pending_before != 0 &&
             trim_start_for(std::min(trim_.pending_before, trim_limit())) <= log_->first_index()) {
    // As far as it goes now: the rest lies in the active segment or past the limit. The trim ends
    // here, as a one-round trim did, rather than wait to delete it whenever that segment seals or
    // the limit rises (perhaps long after, below a snapshot point sent meanwhile): a new request
    // or the retention check asks again.
    trim_.end();
  }
  const std::uint64_t first_after = log_->first_index();
  const std::uint64_t removed =
      segments_before - std::min(segments_before, log_->disk_usage().segments);
  if (removed > 0) {
    spdlog::info(
        "node {}: {} trim before {} (allowed up to {}): {} segment(s) deleted, first index {} -> "
        "{}",
        config_.node_id, why, before_index, limit, removed, first_before, first_after);
    if (deps_.events != nullptr) deps_.events->segments_deleted(removed);
  }
  return TrimResult{NodeError{}, first_after, limit};
}

TrimResult Replica::stop_failed_trim(const std::string& what, const store::Status& failed,
                                     std::uint64_t first_before, std::uint64_t limit) {
  trim_.end();
  return TrimResult{make_error(ErrorCode::kInternal, "trim failed: " + what + failed.to_string(),
                               kReasonStorageError),
                    first_before, limit};
}

// After the prefix truncation (its commit point), whether it succeeded or not: SNAPSHOT.next names
// new_first - 1, so it replaces SNAPSHOT once the log starts there; when no segment went it is
// stale and goes. A deletion a store error stopped part-way leaves it for the next open, which
// finishes the deletion first (finish_cut_trim) and then promotes it (its appends at or below the
// start cover the old SNAPSHOT's whatever the open does). Not fatal: the open finishes either step
// from what it finds.
void Replica::finish_trim_snapshot(std::uint64_t first_before, std::uint64_t new_first) {
  store::Env* const env = config_.store.env;
  const std::uint64_t first_after = log_->first_index();
  if (first_after != new_first && first_after != first_before) {
    spdlog::warn(
        "node {}: the trim left the log starting at {}, not at {} as planned; the next "
        "open finishes it",
        config_.node_id, first_after, new_first);
    return;
  }
  const store::Status st = first_after > first_before ? promote_snapshot_next(env, config_.data_dir)
                                                      : remove_snapshot_next(env, config_.data_dir);
  if (!st.ok()) {
    spdlog::error("node {}: finishing SNAPSHOT after the trim (the next open finishes it): {}",
                  config_.node_id, st.to_string());
  }
}

std::uint64_t Replica::trim_start_for(std::uint64_t target) const {
  std::uint64_t start = log_->first_index();
  for (const store::CommitLog::SegmentInfo& segment : log_->segments()) {
    if (segment.active || segment.last_index >= target) break;
    start = segment.last_index + 1;
  }
  return start;
}

void Replica::note_trimmed_start(std::uint64_t first_before, std::uint64_t expected_first,
                                 std::optional<std::vector<TopicOffsets::TopicNext>> topics,
                                 std::optional<raft::ConfState> conf, std::uint64_t stamp) {
  const std::uint64_t first_after = log_->first_index();
  if (first_after == first_before) return;
  // SNAPSHOT names expected_first - 1 (saved before the truncation); a log that starts anywhere
  // else is not described by any table this node has.
  if (first_after == expected_first) {
    first_index_topics_ = std::move(topics);
    first_index_conf_ = std::move(conf);
    first_index_stamp_.reset();
    if (first_index_topics_) first_index_stamp_ = stamp;  // read only with the table
  } else {
    first_index_topics_.reset();
    first_index_conf_.reset();
    first_index_stamp_.reset();  // read only with the table: unknown with it
    trim_.topic_scan.reset();
  }
  tell_core_trim_point_conf();
}

// Why each check: the deletion may only go where the trim itself was allowed to (committed and
// flushed entries, whole segments, with TOPICSTATE and CONFSTATE already past them: the trim saved
// both before SNAPSHOT.next), and the file's table must be the one as of its point (version 2).
// The retention hold (the group table's persisted boundary) is not known yet at open; it only
// rises, and the trim that wrote the file respected it.
std::string Replica::cut_trim_mismatch(const SnapshotData& planned) const {
  const std::uint64_t point = planned.index;
  if (!planned.topics_at_index) return "its topic table is not known (a version-1 file)";
  if (point > std::min(log_->commit_index(), log_->last_index())) {
    return "it is past the commit index the store recovered (" +
           std::to_string(log_->commit_index()) + ")";
  }
  if (auto term = log_->term_at(point); !term.ok() || *term != planned.term) {
    return "the log holds another entry at " + std::to_string(point);
  }
  bool at_segment_start = false;
  for (const store::CommitLog::SegmentInfo& segment : log_->segments()) {
    if (segment.base_index == point + 1) at_segment_start = true;
  }
  // An entry after the point too: the segment that holds the point is then sealed and below the
  // flushed index, so the store's prefix truncation reaches it.
  if (!at_segment_start || log_->last_index() <= point) {
    return "no segment holding entries starts at " + std::to_string(point + 1);
  }
  auto topic_state = read_topic_state(config_.store.env, config_.data_dir);
  if (!topic_state.ok() || !topic_state->has_value() || (*topic_state)->through_index < point ||
      (*topic_state)->through_index > log_->last_index()) {
    return "TOPICSTATE does not reach it";
  }
  const std::vector<raft::ConfRecord>& recorded = conf_state_file_->current();
  for (std::size_t i = 1; i < recorded.size(); ++i) {
    if (recorded[i].index <= point) return "CONFSTATE lists a configuration entry at or below it";
  }
  return "";
}

bool Replica::finish_cut_trim(std::string* problem) {
  store::Env* const env = config_.store.env;
  auto next = read_snapshot_file(env, config_.data_dir, SnapshotFile::kNext);
  if (!next.ok() || !next->has_value() || (*next)->origin != SnapshotOrigin::kTrim) return true;
  const SnapshotData& planned = **next;
  const std::uint64_t first = log_->first_index();
  if (planned.index < first) return true;  // it names the log's start (or is stale)
  // The deletion began: the log starts past SNAPSHOT's point + 1 (no SNAPSHOT: the log started at
  // 1 before this trim). At SNAPSHOT's point + 1 exactly, no segment went: SNAPSHOT stays.
  auto current = read_snapshot_file(env, config_.data_dir, SnapshotFile::kCurrent);
  std::string mismatch;
  if (!current.ok()) {
    mismatch = "SNAPSHOT does not read";
  } else if (const std::uint64_t old_point = current->has_value() ? (*current)->index : 0;
             first <= old_point + 1) {
    return true;
  } else {
    mismatch = cut_trim_mismatch(planned);
  }
  if (!mismatch.empty()) {
    spdlog::warn(
        "node {}: SNAPSHOT.next plans a trim to start the log at {}, which starts at {}: not "
        "finishing it ({}); the topic table as of the first index - 1 stays unknown",
        config_.node_id, planned.index + 1, first, mismatch);
    return true;
  }
  spdlog::warn(
      "node {}: a trim to start the log at {} was cut with the log starting at {}: "
      "finishing its deletion",
      config_.node_id, planned.index + 1, first);
  if (store::Status st = log_->truncate_prefix(planned.index + 1); !st.ok()) {
    *problem = "finishing a cut trim (deleting the segments before " +
               std::to_string(planned.index + 1) + "): " + st.to_string();
    return false;
  }
  if (log_->first_index() != planned.index + 1) {
    // Stopped short without an error: not a reason to refuse the open (the file is then taken for
    // its dedup part, as for any mismatch).
    spdlog::warn("node {}: finishing the cut trim stopped with the log starting at {}, not at {}",
                 config_.node_id, log_->first_index(), planned.index + 1);
  }
  return true;
}

void Replica::load_first_index_topics() {
  first_index_topics_.reset();
  first_index_conf_.reset();
  first_index_stamp_.reset();
  trim_.topic_scan.reset();
  trim_.pending_before = 0;
  if (log_->first_index() <= 1) {
    first_index_topics_.emplace();                  // nothing before the log
    first_index_conf_ = config_.raft.initial_conf;  // in force at 0: the bootstrap configuration
    first_index_stamp_ = 0;                         // no entry: no stamp
  } else if (loaded_snapshot_ && loaded_snapshot_->index + 1 == log_->first_index()) {
    // It names the log's first index - 1. A trim's of an older version knows less (conf_at_index,
    // topics_at_index false): not known then, and snapshots fall back (replica_snapshot.cpp).
    // The stamp with the table only (the scan that advances one advances both). A trim's of version
    // 5, an installed snapshot's of framed version 6 that knew it; not known for older versions.
    if (loaded_snapshot_->topics_at_index) {
      first_index_topics_ = loaded_snapshot_->topics;
      if (loaded_snapshot_->stamp_at_index) first_index_stamp_ = loaded_snapshot_->stamp_max_ms;
    }
    if (loaded_snapshot_->conf_at_index) first_index_conf_ = loaded_snapshot_->conf;
  }
}

void Replica::learn_first_index_conf_from_records() {
  if (first_index_conf_ || conf_records_.empty()) return;
  const std::uint64_t first = log_->first_index();
  const bool base_at_or_below = conf_records_.front().index + 1 <= first;
  const bool none_after_below = conf_records_.size() == 1 || conf_records_[1].index >= first;
  if (base_at_or_below && none_after_below) first_index_conf_ = conf_records_.front().conf;
}

void Replica::tell_core_trim_point_conf() {
  if (raft_ == nullptr) return;  // the open tells it once the core exists
  if (first_index_topics_ && first_index_conf_) {
    raft_->set_trim_point_conf(log_->first_index() - 1, *first_index_conf_);
  } else {
    raft_->forget_trim_point_conf();
  }
}

void Replica::apply_retention(Clock::time_point now) {
  continue_pending_trim();
  if (config_.retention_max_age_s == 0 && config_.retention_max_bytes == 0) return;
  if (now - retention_checked_at_ < std::chrono::milliseconds(config_.retention_check_interval_ms))
    return;
  retention_checked_at_ = now;
  std::uint64_t before = 0;
  {
    RoundProfile::Scope part(round_, RoundPart::kRetentionCheck);
    const std::vector<store::CommitLog::SegmentInfo> segments = log_->segments();
    std::uint64_t total_bytes = 0;
    for (const auto& segment : segments) total_bytes += segment.disk_bytes;
    // File times through the store's Env, on the injected wall clock (the simulator's MemoryEnv and
    // clock agree with each other, as a real file system and the system clock do).
    store::Env* const env = config_.store.env != nullptr ? config_.store.env : store::Env::posix();
    const auto oldest_kept = deps_.wall_clock() - std::chrono::seconds(config_.retention_max_age_s);
    // Oldest first; stops at the first segment that may stay (retention deletes a prefix).
    for (const auto& segment : segments) {
      if (segment.active) break;
      bool expired = false;
      if (config_.retention_max_age_s != 0) {
        const auto modified = env->modified_at(segment.data_path);
        expired = modified.ok() && *modified < oldest_kept;
      }
      const bool over_size =
          config_.retention_max_bytes != 0 && total_bytes > config_.retention_max_bytes;
      if (!expired && !over_size) break;
      before = segment.last_index + 1;
      total_bytes -= std::min(total_bytes, segment.disk_bytes);
    }
  }
  if (before > log_->first_index()) trim(before, "retention:");
}

}  // namespace raftlog::replica

// Replica: snapshots (docs/raft.md, "Snapshots"; snapshot_data.h). The leader fills in the data of
// every kSnapshot it sends; a follower checks what it receives before its core sees it, installs it
// crash-safely (Ready step 0), and a restart completes an install that a crash cut after its log
// reset.
//
// THE SNAPSHOT POINT. The core names S = its first index - 1, with the configuration in force there:
// its newest committed one when that is at or below S, else the one this replica told it
// (first_index_conf_, below; without it the core names the newer committed configuration's index).
// The replica sends the state as of S itself whenever it can describe it, so that the follower's
// log starts where the leader's does and every entry the leader retains reaches it by ordinary
// AppendEntries after the install:
//   - the dedup table's appends that start at or below S (the in-memory table keeps them after a
//     trim; replaying (S, commit] on the follower records the rest, as for any replicated entry);
//   - the topic table as of S: first_index_topics_, the table as of the first index - 1, kept up to
//     date by every trim (the entries it deletes are still on disk when it runs: the table at the
//     new S is the one at the old S advanced by their envelopes, version 2 taking the stamped
//     offset, version 1 counting) and saved with the trim's dedup part in SNAPSHOT (version 2),
//     loaded at open; a log that starts at 1 has S = 0 and an empty table, an installed snapshot's
//     log starts with its table. Chosen over computing it at send time from the table's committed
//     point back over (S, P] (a read of the whole retained log on the Raft loop, per snapshot) and
//     over carrying the table as of P installed at S (version-1 entries in (S, P] would be counted
//     twice, and the table would name offsets of entries the follower does not hold yet);
//   - the consumer group table (the node's section) as of a boundary B past S: the follower's
//     dispatcher adopts it and applies commits only after B (server/dispatcher.h), so replaying
//     (S, B] changes nothing and it ends with the leader's table;
//   - the configuration in force at S (the core's): when a configuration committed above S, the
//     core's history no longer holds it, so the replica keeps first_index_conf_, the configuration
//     in force at the first index - 1, like first_index_topics_: the bootstrap one for a log that
//     starts at 1, the installed snapshot's, then at every trim the newest kConfig entry among the
//     entries it deletes (the same bounded reading as the topic table's, replica_topic_scan.cpp),
//     saved in the trim's SNAPSHOT (version 3) and loaded at open (from CONFSTATE's base when an
//     older trim file lacks it and no configuration entry lies between that base and the first
//     index - 1: learn_first_index_conf_from_records); it tells the core
//     (set_trim_point_conf) whenever it knows both the table and the configuration there. Chosen
//     over the core keeping committed configuration records back to the one in force at the first
//     index - 1: the core does not see trims, so its list (and CONFSTATE's, across restarts) would
//     grow with every change until told which can go; here it is one configuration, read by a
//     reading the trim does anyway, saved by a write it does anyway, crash-safe the same way;
//   - the ids retired as of S (this node's, less the members of the configuration at S), which the
//     follower's install writes into CONFSTATE, so that it refuses them (ID_RETIRED) once it leads;
//   - the timestamp floor (the leader's newest: a floor only holds timestamps back, and replayed
//     entries never lower it).
// When the topic table as of S is not known — S above the first index - 1 (a configuration
// committed there and the one at the first index - 1 not known: a trim SNAPSHOT of version 1 or 2),
// or a log trimmed by an older binary (a version-1 trim SNAPSHOT), or SNAPSHOT lost — the leader
// falls back to P = max(S, the topic table's committed point): its undo journal
// describes any point at or above that, usually the commit index. P <= the commit index, P >= S,
// the log holds P (and its term), and no configuration entry lies in (S, P] (S is at or above the
// newest committed configuration, P at or below the commit index), so the configuration in force at
// P is the core's. The follower's log then starts at P + 1 (SnapshotStats::sent_above_first_index
// counts it). Either way the follower installs the point; its acknowledgement is at or above S,
// which is what the leader's core waits for. Below, "P" is the point sent, whichever it is.
//
// THE INSTALL, in this order, each step durable before the next:
//   1. the hard state's term and vote (apply_ready writes them before step 0);
//   2. SNAPSHOT (the data, naming P): temp file, fsync, rename, directory fsync;
//   3. CommitLog::reset(P + 1, term): the commit point (atomic, storage-format.md crash case 7); the
//      store's checkpoint then records commit index P (the hard state's commit lives there);
//   4. CONFSTATE rewritten with the base record {P, term, conf} and the data's retired ids;
//   5. TOPICSTATE {P, floor, topics}, written off the loop from a copy of the table
//      (replica_off_loop_write.cpp): a cut before it lands leaves the state of a cut before 5;
//   then the in-memory state (dedup table, topic table, commit index), what waited on the replaced
//   log fails or is dropped, on_persisted(P, term), and the node's section (snapshot_installed).
// A crash before 3 leaves the old log, and open ignores a SNAPSHOT that does not name the log's
// first index - 1; after 3, open finds SNAPSHOT naming it and completes 4 and 5 from it.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "replica/durability_rules.h"
#include "replica/replica.h"
#include "replica/topic_state_file.h"

namespace raftlog::replica {
namespace {

// Wall time since `start`, for SnapshotStats::InstallTimes.
std::chrono::microseconds since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

// What a pending append learns when an install replaced the log it waited in: its outcome is unknown
// to this node (the leader's log may hold it or not).
AppendResult replaced_by_snapshot_error() {
  return failed_append(make_error(ErrorCode::kUnavailable,
                                  "this node installed a snapshot that replaced its log; the "
                                  "outcome is unknown: retry with the "
                                  "same client_id/sequence",
                                  kReasonLeadershipLost));
}

}  // namespace

void Replica::add_dedup_within_budget(SnapshotData* data, std::size_t size) {
  bool full = false;
  dedup_.for_each_client_through(data->index, commit_, [&](const DedupTable::ClientState& client) {
    DedupTable::ClientState kept = exportable_client(client, data->term);
    const std::size_t cost = encoded_client_size(kept);
    if (full || size + cost > config_.max_snapshot_data_bytes) {
      full = true;  // the rest are less recently used
      ++snapshot_stats_.clients_left_out;
      return true;
    }
    size += cost;
    data->dedup_clients.push_back(std::move(kept));
    return true;
  });
}

store::Status Replica::start_trim_snapshot(std::uint64_t point,
                                           const std::vector<TopicOffsets::TopicNext>* topics,
                                           const raft::ConfState* conf, std::uint64_t stamp) {
  snapshot_encoding_.invalidate();  // the trim moves the log's start it was taken against
  abandon_outgoing_snapshot("a trim moves the log's start it was taken against");
  auto term = log_->term_at(point);
  if (!term.ok()) return term.status();
  // Gathered here (copies of the tables: the loop's part), encoded, written and synced off it.
  auto data = std::make_shared<SnapshotData>();
  data->index = point;
  data->term = *term;
  data->origin = SnapshotOrigin::kTrim;
  // The configuration in force at the point when known (version 3); else a placeholder (a valid
  // one is required) that the open does not use.
  data->conf_at_index = conf != nullptr;
  data->conf = conf != nullptr ? *conf : raft_->conf_history().front().conf;
  data->timestamp_floor_ms = last_timestamp_ms_;
  data->topics_at_index = topics != nullptr;  // version 2 when known
  if (topics != nullptr) data->topics = *topics;
  // With the table, the running max stamp the same scan read (version 5): the derived indexes'
  // time lookups after the trim (docs/design.md, "Time lookups after a trim").
  data->stamp_at_index = topics != nullptr;
  data->stamp_max_ms = topics != nullptr ? stamp : 0;
  data->dedup_view_start = std::min(dedup_.view_start(), point + 1);
  add_dedup_within_budget(data.get(), encoded_size_without_dedup(*data));
  store::Env* const env = config_.store.env;
  hand_off_write(PendingWrite{PendingWrite::Kind::kTrimSnapshotNext, point, true, nullptr},
                 [env, dir = config_.data_dir, data = std::shared_ptr<const SnapshotData>(data)] {
                   return write_snapshot_next(env, dir, encode_snapshot_data(*data));
                 });
  return store::Status();
}

void Replica::install_snapshot(const raft::Snapshot& snapshot) {
  SnapshotStats::InstallTimes& times = snapshot_stats_.last_install;
  const auto install_start = std::chrono::steady_clock::now();
  auto part_start = install_start;
  // The time of the part that ends now, and the next one's start.
  const auto part = [&part_start] {
    const auto took = since(part_start);
    part_start = std::chrono::steady_clock::now();
    return took;
  };
  // A write off the loop (TOPICSTATE, a trim's SNAPSHOT.next) is taken back first: dropped if the
  // worker has not started it, else waited for and published (a trim's SNAPSHOT.next then
  // written, its deletion goes on below). Nothing of the install may share its files with it.
  settle_pending_write();
  trim_.topic_state_through = 0;
  trim_.flush_wanted = 0;
  trim_.write_failure.reset();
  // A trim's deletion still under way finishes first, before anything of the install writes
  // SNAPSHOT.next (the fallback below, or the rename of SNAPSHOT.install over it): the trim's
  // SNAPSHOT.next must become SNAPSHOT first (replica_trim_deletion.cpp, CRASH CASES).
  if (store::Status st = finish_trim_deletion_now(/*within_limit=*/false); !st.ok()) {
    fatal("finishing a trim's deletion before the install: " + st.to_string());
    return;
  }
  // The preparation of these very bytes (the core hands on the message's buffer): every snapshot
  // the core installs was stepped into it by finish_snapshot_preparation, in this process().
  bool written_as_next = false;  // SNAPSHOT.next holds the data already (step 2 done)
  if (!prepared_snapshot_ || !prepared_snapshot_->bytes.shares_bytes_with(snapshot.data) ||
      prepared_snapshot_->data.index != snapshot.index ||
      prepared_snapshot_->data.term != snapshot.term) {
    // Not expected (core_would_install() mirrors the core's rules, and a test drives each), and
    // handled all the same: prepared here, on the loop, with the checks of a preparation. Its
    // file is not SNAPSHOT.install: a preparation job still out (another snapshot's, or one
    // abandoned) may be writing that one now, and its `done` removes it. The data goes straight
    // to SNAPSHOT.next, through its own temporary file (write_snapshot_next, which only the loop
    // and a trim's write off it call: that one was settled above), and step 2 is done with it.
    if (prepared_snapshot_) {
      // Another snapshot's preparation, which the core replaced: its file goes, unless a job is
      // out (then that job may be writing SNAPSHOT.install now, and its `done` removes it).
      const bool had_file = prepared_snapshot_->file_written;
      prepared_snapshot_.reset();
      if (had_file && off_loop_outstanding_ == 0) {
        if (store::Status st = remove_snapshot_install(config_.store.env, config_.data_dir);
            !st.ok()) {
          spdlog::warn("node {}: removing SNAPSHOT.install: {}", config_.node_id, st.to_string());
        }
      }
    }
    PreparedSnapshot on_loop;
    on_loop.bytes = snapshot.data;
    prepare_snapshot(on_loop, snapshot, config_.store.env, config_.data_dir,
                     config_.dedup_max_clients, config_.dedup_sequences_per_client,
                     /*cancelled=*/nullptr, /*write_install_file=*/false);
    ++snapshot_stats_.decodes;
    if (on_loop.problem.empty() && !on_loop.data.section.empty() && deps_.check_snapshot_section) {
      on_loop.problem = deps_.check_snapshot_section(on_loop.data.section, on_loop.data.index);
    }
    if (!on_loop.problem.empty()) {
      fatal("the snapshot to install does not validate: " + on_loop.problem);  // a bug
      return;
    }
    const auto write_start = std::chrono::steady_clock::now();
    if (store::Status st =
            write_snapshot_next(config_.store.env, config_.data_dir, on_loop.bytes.view());
        !st.ok()) {
      fatal("writing SNAPSHOT.next: " + st.to_string());
      return;
    }
    on_loop.times.snapshot_file = since(write_start);
    written_as_next = true;
    prepared_snapshot_ = std::move(on_loop);
  }
  PreparedSnapshot prepared = std::move(*prepared_snapshot_);
  prepared_snapshot_.reset();
  times = prepared.times;
  times.prepared_off_loop = times.decode + times.snapshot_file + times.tables;
  SnapshotData& data = prepared.data;
  const std::uint64_t point = data.index;
  snapshot_encoding_.invalidate();  // it described the log this install replaces
  abandon_outgoing_snapshot("an install replaces the log");
  spdlog::warn(
      "node {}: term {}: installing the leader's snapshot of index {} term {} in place "
      "of the log [{}, {}] (commit {})",
      config_.node_id, raft_->term(), point, data.term, log_->first_index(), log_->last_index(),
      commit_);
  part_start = std::chrono::steady_clock::now();
  // 2. SNAPSHOT.next, naming the point (SNAPSHOT still describes the old log until step 3): the
  // prepared SNAPSHOT.install, written and synced off the loop, renamed, with a directory fsync.
  if (!written_as_next) {
    if (store::Status st = promote_snapshot_install(config_.store.env, config_.data_dir);
        !st.ok()) {
      fatal("renaming SNAPSHOT.install to SNAPSHOT.next: " + st.to_string());
      return;
    }
  }
  times.rename = part();
  // 3. The commit point: the old log is gone, the new one starts at point + 1. Then SNAPSHOT.next
  // becomes SNAPSHOT (a crash before that: the open finishes the rename).
  if (store::Status st = log_->reset(point + 1, data.term); !st.ok()) {
    fatal("resetting the log to start at " + std::to_string(point + 1) + ": " + st.to_string());
    return;
  }
  if (store::Status st = promote_snapshot_next(config_.store.env, config_.data_dir); !st.ok()) {
    fatal("renaming SNAPSHOT.next to SNAPSHOT: " + st.to_string());
    return;
  }
  times.log_reset = part();
  // 4. CONFSTATE, with the snapshot's retired ids.
  conf_records_ = {raft::ConfRecord{point, data.term, data.conf}};
  if (store::Status st = rules::install_rewrites_conf_state()
                             ? conf_state_file_->write(conf_records_, {}, data.retired_ids)
                             : store::Status();
      !st.ok()) {
    fatal("persisting the snapshot's configuration: " + st.to_string());
    return;
  }
  times.conf_state = part();
  // 5. TOPICSTATE (not fatal, as any save: the next open completes it from SNAPSHOT).
  commit_ = point;
  topics_ = std::move(prepared.topics);          // built off the loop: moved in
  first_index_topics_ = std::move(data.topics);  // the log now starts at point + 1
  first_index_conf_ = data.conf;
  // Known when the leader sent it (framed version 6, the leader's first index - 1): the derived
  // indexes seed their time lookups with it from SNAPSHOT (these very bytes), as the leader's do.
  first_index_stamp_.reset();
  if (data.stamp_at_index) first_index_stamp_ = data.stamp_max_ms;
  tell_core_trim_point_conf();
  trim_.topic_scan.reset();  // it scanned the replaced log
  trim_.pending_before = 0;
  times.swap = part();  // the topic table's part; the dedup table's is added below
  // Bounded as a replicated entry's timestamp is (note_entry): a sender's clock far ahead (or a
  // forged snapshot) must not pin this node's future timestamps, and TOPICSTATE saves this.
  last_timestamp_ms_ = std::max(
      last_timestamp_ms_, std::min(data.timestamp_floor_ms, wall_now_ms() + kMaxTimestampSkewMs));
  // Off the loop: its failure is logged when it comes back, and a cut before it lands is completed
  // by the open from SNAPSHOT, as before. settle_pending_write above left no other write out. What
  // topic_state_to_save() would copy here (the table at the point: topics_ is the preparation's,
  // reset at the point) was copied by the preparation, off the loop, and is moved in.
  (void)start_topic_state_save(
      TopicState{point, last_timestamp_ms_, std::move(prepared.topic_state_table)},
      /*for_trim=*/false);
  times.topic_state = part();
  // In memory: the replaced log's records go, what waited on it fails or is dropped.
  dedup_ = std::move(*prepared.dedup);  // built off the loop from the data's clients
  dedup_recorded_through_ = point;
  times.swap += part();
  unwritten_proposals_.clear();
  held_messages_.clear();
  for (auto& [last, pending] : pending_appends_) pending.done(replaced_by_snapshot_error());
  pending_appends_.clear();
  fail_pending_memberships(make_error(
      ErrorCode::kUnavailable,
      "this node installed a snapshot that replaced its log; check the configuration and retry",
      kReasonLeadershipLost));
  if (deps_.commit_advanced) deps_.commit_advanced(point);
  while (!reads_awaiting_commit_.empty() && reads_awaiting_commit_.begin()->first <= point) {
    auto first = reads_awaiting_commit_.begin();
    first->second.done(ReadIndexResult{NodeError{}, first->first});
    reads_awaiting_commit_.erase(first);
  }
  reported_durable_ = point;
  raft_->on_persisted(point, data.term);
  ++snapshot_stats_.installed;
  snapshot_stats_.last_installed_index = point;
  if (deps_.snapshot_installed) deps_.snapshot_installed(point, data.section);
  times.node_section = part();
  times.install = since(install_start);
  log_install_times(point);
}

void Replica::log_install_times(std::uint64_t point) const {
  const SnapshotStats::InstallTimes& t = snapshot_stats_.last_install;
  const auto ms = [](std::chrono::microseconds us) {
    return static_cast<double>(us.count()) / 1e3;
  };
  spdlog::info(
      "node {}: installed the snapshot of index {}: {:.1f} ms on the Raft loop (SNAPSHOT rename "
      "{:.1f}, log reset {:.1f}, CONFSTATE {:.1f}, TOPICSTATE {:.1f}, tables moved in {:.1f}, "
      "node section {:.1f} ms), prepared in {:.1f} ms off it (decode {:.1f}, SNAPSHOT.install "
      "written and synced {:.1f}, tables built {:.1f} ms)",
      config_.node_id, point, ms(t.install), ms(t.rename), ms(t.log_reset), ms(t.conf_state),
      ms(t.topic_state), ms(t.swap), ms(t.node_section), ms(t.prepared_off_loop), ms(t.decode),
      ms(t.snapshot_file), ms(t.tables));
}

namespace {

// Whether a snapshot file describes the log's start: it names first - 1 with the log's term there,
// or it is a trim's whose point the log still holds (a crash cut the trim's deletion of segments
// midway: its appends at or below that point cover the log's start too).
bool describes_log_start(const store::Result<std::optional<SnapshotData>>& file,
                         const store::CommitLog& log) {
  if (!file.ok() || !file->has_value()) return false;
  const SnapshotData& data = **file;
  const std::uint64_t first = log.first_index();
  const bool names_start = data.index + 1 == first;
  const bool trim_covers =
      data.origin == SnapshotOrigin::kTrim && data.index >= first && data.index <= log.last_index();
  if (!names_start && !trim_covers) return false;
  auto term = log.term_at(data.index);
  return term.ok() && *term == data.term;
}

}  // namespace

// Whether a log whose start no readable snapshot file describes is whole without one: no install a
// crash interrupted is left to complete (CONFSTATE's base is at or past the log's first index - 1:
// step 4 ran; or TOPICSTATE reaches it: step 5 ran, or the start came from a trim, which saves
// TOPICSTATE first), and the dedup records such a file holds lie below the window the open rebuilds
// from the log anyway (the log holds at least dedup_rebuild_entries entries).
bool Replica::complete_without_snapshot() const {
  const std::uint64_t first = log_->first_index();
  const std::uint64_t last = log_->last_index();
  if (last + 1 < first || last + 1 - first < config_.dedup_rebuild_entries) return false;
  const std::vector<raft::ConfRecord>& recorded = conf_state_file_->current();
  if (!recorded.empty() && recorded.front().index + 1 >= first) return true;
  auto topic_state = read_topic_state(config_.store.env, config_.data_dir);
  return topic_state.ok() && topic_state->has_value() &&
         (*topic_state)->through_index + 1 >= first && (*topic_state)->through_index <= last;
}

bool Replica::load_snapshot_state(std::string* problem) {
  loaded_snapshot_.reset();
  store::Env* const env = config_.store.env;
  // A received snapshot's preparation that a crash or a stop cut (never renamed: it counts for
  // nothing; replica_snapshot_receive.cpp).
  if (store::Status st = remove_snapshot_install(env, config_.data_dir); !st.ok()) {
    *problem = "removing a left-over SNAPSHOT.install: " + st.to_string();
    return false;
  }
  if (!finish_cut_trim(problem)) return false;
  const std::uint64_t first = log_->first_index();
  if (first <= 1) {
    // No install (nor trim) behind this log; a SNAPSHOT.next is a trim's that deleted nothing.
    if (store::Status st = remove_snapshot_next(env, config_.data_dir); !st.ok()) {
      spdlog::warn("node {}: removing a stale SNAPSHOT.next: {}", config_.node_id, st.to_string());
    }
    return true;
  }
  // SNAPSHOT.next describes the log's start once its install or trim reached the commit point (the
  // rename that followed did not happen yet): finished here. Otherwise SNAPSHOT, and a
  // SNAPSHOT.next is stale (its commit point never came).
  auto next = read_snapshot_file(env, config_.data_dir, SnapshotFile::kNext);
  auto current = read_snapshot_file(env, config_.data_dir, SnapshotFile::kCurrent);
  store::Result<std::optional<SnapshotData>>* saved = nullptr;
  // SNAPSHOT naming the log's first index - 1 exactly wins: a trim whose SNAPSHOT.next point the log
  // still holds but that deleted no segment before the cut never reached its commit point, and its
  // file may have left out (budget) clients only SNAPSHOT holds.
  const bool current_names_start = current.ok() && current->has_value() &&
                                   (*current)->index + 1 == first &&
                                   describes_log_start(current, *log_);
  if (!current_names_start && describes_log_start(next, *log_)) {
    spdlog::warn("node {}: finishing the snapshot of index {}: SNAPSHOT.next becomes SNAPSHOT",
                 config_.node_id, (*next)->index);
    if (store::Status st = promote_snapshot_next(env, config_.data_dir); !st.ok()) {
      *problem = "renaming SNAPSHOT.next to SNAPSHOT: " + st.to_string();
      return false;
    }
    saved = &next;
  } else {
    if (next.ok() && next->has_value()) {
      spdlog::info("node {}: removing SNAPSHOT.next of index {}: the log does not start after it",
                   config_.node_id, (*next)->index);
    }
    const bool stale_next = next.ok() ? next->has_value() : describes_log_start(current, *log_);
    if (stale_next) {
      if (store::Status st = remove_snapshot_next(env, config_.data_dir); !st.ok()) {
        spdlog::warn("node {}: removing a stale SNAPSHOT.next: {}", config_.node_id,
                     st.to_string());
      }
    }
    if (describes_log_start(current, *log_)) saved = &current;
  }
  if (saved == nullptr) {
    if (next.ok() && current.ok()) return true;  // none, or an older install's or trim's
    // One of them does not read or decode: it may be the one this log starts after.
    const std::string unreadable =
        !current.ok() ? current.status().to_string() : next.status().to_string();
    if (!complete_without_snapshot()) {
      *problem = unreadable + "; the log starts at " + std::to_string(first) +
                 " and without this file the dedup records of the appends before it (and, after "
                 "an interrupted install, the snapshot's configuration and topic table) are lost: "
                 "restore this node's data directory from a backup or replace the node "
                 "(docs/operations.md, \"Damaged data at startup\")";
      return false;
    }
    spdlog::error("node {}: {}; ignored: the log and CONFSTATE hold everything it could add",
                  config_.node_id, unreadable);
    return true;
  }
  loaded_snapshot_ = std::move(**(*saved));
  const SnapshotData& data = *loaded_snapshot_;
  // A trim's: only its dedup part counts (TOPICSTATE and CONFSTATE were right before it ran).
  if (data.origin == SnapshotOrigin::kTrim) return true;
  // Step 4, if a crash came before it: the configuration in force at the snapshot's index.
  const std::vector<raft::ConfRecord>& recorded = conf_state_file_->current();
  if ((recorded.empty() || recorded.front().index < data.index) &&
      rules::install_rewrites_conf_state()) {
    spdlog::warn("node {}: completing the install of snapshot {}: CONFSTATE", config_.node_id,
                 data.index);
    if (store::Status st = conf_state_file_->write(
            {raft::ConfRecord{data.index, data.term, data.conf}}, {}, data.retired_ids);
        !st.ok()) {
      *problem = "completing the snapshot install (CONFSTATE): " + st.to_string();
      return false;
    }
  }
  // Step 5: TOPICSTATE as of the snapshot, unless one reaches that far already.
  auto topic_state = read_topic_state(config_.store.env, config_.data_dir);
  if (!topic_state.ok() || !topic_state->has_value() ||
      (*topic_state)->through_index < data.index ||
      (*topic_state)->through_index > log_->last_index()) {
    spdlog::warn("node {}: completing the install of snapshot {}: TOPICSTATE", config_.node_id,
                 data.index);
    // The floor bounded as at the install, and never below the old TOPICSTATE's (each of its
    // values was bounded when it was raised).
    std::uint64_t floor = std::min(data.timestamp_floor_ms, wall_now_ms() + kMaxTimestampSkewMs);
    if (topic_state.ok() && topic_state->has_value()) {
      floor = std::max(floor, (*topic_state)->timestamp_floor_ms);
    }
    const TopicState state{data.index, floor, data.topics};
    if (store::Status st = write_topic_state(config_.store.env, config_.data_dir, state);
        !st.ok()) {
      *problem = "completing the snapshot install (TOPICSTATE): " + st.to_string();
      return false;
    }
  }
  return true;
}

}  // namespace raftlog::replica

// Replica: opening (recovery of the store and the hard state, the dedup rebuild, the storage-fault
// assessment), closing, and the status snapshot.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "replica/replica.h"
#include "replica/storage_fault.h"
#include "replica/topic_state_file.h"

namespace raftlog::replica {

const char* to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return "OK";
    case ErrorCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case ErrorCode::kNotLeader:
      return "NOT_LEADER";
    case ErrorCode::kNoLeader:
      return "NO_LEADER";
    case ErrorCode::kOutOfRange:
      return "OUT_OF_RANGE";
    case ErrorCode::kResourceExhausted:
      return "RESOURCE_EXHAUSTED";
    case ErrorCode::kUnavailable:
      return "UNAVAILABLE";
    case ErrorCode::kDeadlineExceeded:
      return "DEADLINE_EXCEEDED";
    case ErrorCode::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case ErrorCode::kInternal:
      return "INTERNAL";
    case ErrorCode::kDataLoss:
      return "DATA_LOSS";
  }
  return "UNKNOWN";
}

NodeError make_error(ErrorCode code, std::string message, std::string reason) {
  NodeError error;
  error.code = code;
  error.message = std::move(message);
  error.reason = std::move(reason);
  return error;
}

Replica::Replica(ReplicaConfig config, ReplicaDeps deps)
    : config_(std::move(config)),
      deps_(std::move(deps)),
      dedup_(config_.dedup_max_clients, config_.dedup_sequences_per_client),
      disk_(config_.node_id, config_.data_dir, config_.disk_high_watermark,
            config_.disk_low_watermark) {}

Replica::~Replica() { close(); }

std::unique_ptr<Replica> Replica::open(ReplicaConfig config, ReplicaDeps deps, NodeError* error) {
  if (deps.sender == nullptr || deps.disk == nullptr || !deps.clock) {
    *error = make_error(ErrorCode::kInvalidArgument,
                        "a replica needs a message sender, a disk probe and a clock");
    return nullptr;
  }
  std::unique_ptr<Replica> replica(new Replica(std::move(config), std::move(deps)));
  const ReplicaConfig& c = replica->config_;
  if (!replica->open_conf_state(error)) return nullptr;
  store::Options store_options = c.store;
  // With peers to repair from, a corrupt durable entry cuts the log there (and the node catches up,
  // below) instead of keeping the node down for good; a single node has no other copy, so it refuses.
  store_options.allow_truncate_corrupted_flushed_data =
      replica->has_peers() && c.store.flush_mode == store::FlushMode::kSync;
  if (!replica->open_store(store_options, error)) return nullptr;
  if (!replica->open_hard_state(error)) return nullptr;

  store::CommitLog& log = *replica->log_;
  replica->reader_ = std::make_unique<StoreLogReader>(log);
  raft::Config raft_config = c.raft;
  raft_config.conf_history = replica->conf_records_;
  raft_config.retired_ids = replica->conf_state_file_->retired();
  replica->assess_recovery(&raft_config);
  if (!replica->open_unvouched_marker(&raft_config, error)) return nullptr;
  if (!raft_config.unvouched && raft_config.unvouched_may_elect != raft::kNoNode) {
    spdlog::warn("node {}: --unvouched-may-elect {} is ignored: this node is not unvouched (its "
                 "log holds entries, or it is a sole member); remove the flag",
                 c.node_id, raft_config.unvouched_may_elect);
  }
  if (!replica->open_not_founder_marker(&raft_config, error)) return nullptr;
  if (!replica->open_removed_word_record(&raft_config, error)) return nullptr;
  if (std::string problem = raft::validate_config(raft_config); !problem.empty()) {
    *error = make_error(ErrorCode::kInvalidArgument, "bad Raft configuration: " + problem);
    return nullptr;
  }
  replica->raft_ =
      std::make_unique<raft::Raft>(raft_config, *replica->reader_, replica->persisted_hard_state_);
  replica->tell_core_trim_point_conf();
  const raft::HardState& hs = replica->persisted_hard_state_;
  spdlog::info("node {}: restored term {} vote {} leader {} commit {}, log [{}, {}]", c.node_id,
               hs.term, hs.vote, hs.leader, hs.commit, log.first_index(), log.last_index());
  replica->dedup_recorded_through_ =
      log.last_index();  // open_store() rebuilt the dedup table from the log
  replica->reported_durable_ =
      log.last_index();  // recovered entries are durable (recovery flushed them)
  replica->commit_ = hs.commit;
  replica->topics_.committed(replica->topic_state_through());
  if (replica->topic_state_saved_through_ == 0 ||
      hs.commit >= replica->topic_state_saved_through_ + c.topic_state_save_entries) {
    // No TOPICSTATE yet (a new node, or a log from before it existed), or an old one: written now,
    // so that the next open reads little of the log. Not fatal: the table is in memory, and a trim
    // does not run until a save succeeded.
    if (store::Status saved = replica->save_topic_state(); !saved.ok()) {
      spdlog::warn("node {}: writing TOPICSTATE: {}", c.node_id, saved.to_string());
    }
  }
  spdlog::info("node {}: configuration {} (entry {})", c.node_id,
               raft::to_string(replica->raft_->conf()), raft_config.conf_history.back().index);
  if (replica->deps_.events != nullptr) {
    log.set_flush_observer(
        [events = replica->deps_.events](const store::CommitLog::FlushCycle& cycle) {
          events->store_flushed(cycle);
        });
  }
  replica->opened_ = true;
  return replica;
}

bool Replica::open_hard_state(NodeError* error) {
  auto hard_state_file = HardStateFile::open(config_.data_dir, config_.store.env);
  if (!hard_state_file.ok()) {
    *error = make_error(ErrorCode::kInternal,
                        "opening the hard state failed: " + hard_state_file.status().to_string());
    return false;
  }
  hard_state_file_ = std::move(hard_state_file).value();
  persisted_hard_state_ = hard_state_file_->current();
  // The restart rule is the core's (raft::restart_problem), checked here so that the node refuses to
  // start with the reason instead of aborting. The checkpoint's commit index is not part of it: it
  // may be ahead of what the log recovered (below).
  StoreLogReader reader(*log_);
  raft::HardState without_commit = persisted_hard_state_;
  without_commit.commit = 0;
  if (std::string problem = raft::restart_problem(without_commit, reader); !problem.empty()) {
    *error = make_error(ErrorCode::kInternal, config_.data_dir + "/HARDSTATE: " + problem +
                                                  "; refusing to start (see docs/operations.md)");
    return false;
  }
  // restart_problem() compares the hard state with the last entry; a log that holds none after an
  // install (reset to start at S + 1) still knows the term of S, which the node saw as a follower:
  // a hard state below it was lost (deleted, zeroed), and the node may have voted in that term.
  if (const std::uint64_t first = log_->first_index(); first > 1 && log_->last_index() < first) {
    auto term_before = log_->term_at(first - 1);
    if (term_before.ok() && *term_before > persisted_hard_state_.term) {
      *error = make_error(
          ErrorCode::kInternal,
          config_.data_dir + "/HARDSTATE: hard state term " +
              std::to_string(persisted_hard_state_.term) + " is below the term " +
              std::to_string(*term_before) + " of entry " + std::to_string(first - 1) +
              " the empty log starts after: the hard state was lost or replaced, and starting "
              "could vote twice in one term; refusing to start (see docs/operations.md)");
      return false;
    }
  }
  if (persisted_hard_state_.term > raft::kMaxTerm) {
    *error = make_error(ErrorCode::kInternal, config_.data_dir + "/HARDSTATE: term " +
                                                  std::to_string(persisted_hard_state_.term) +
                                                  " is above the limit " +
                                                  std::to_string(raft::kMaxTerm) +
                                                  "; refusing to start (see docs/operations.md)");
    return false;
  }
  // The commit index lives in the store's checkpoint. It may be ahead of what the log recovered (async
  // flush mode can lose a written tail; a storage fault can remove entries, see assess_recovery());
  // Raft re-learns the commit index from the leader.
  persisted_hard_state_.commit = std::min(log_->commit_index(), log_->last_index());
  return true;
}

bool Replica::open_conf_state(NodeError* error) {
  auto file = ConfStateFile::open(config_.data_dir, config_.store.env);
  if (!file.ok()) {
    *error = make_error(ErrorCode::kInternal,
                        "opening the configuration record failed: " + file.status().to_string() +
                            "; refusing to start (docs/operations.md, \"Damaged data at startup\")");
    return false;
  }
  conf_state_file_ = std::move(file).value();
  conf_record_missing_at_open_ = conf_state_file_->current().empty();
  return true;
}

bool Replica::has_peers() const {
  // The members this node may repair from: the newest configuration it recorded, or --members.
  const std::vector<raft::ConfRecord>& recorded = conf_state_file_->current();
  if (recorded.empty()) return config_.members.size() > 1;
  const raft::ConfState& conf = recorded.back().conf;
  // Members other than this node: a node removed from a one-member configuration still has that
  // member for a peer. Counting its own configuration's size, it took itself for a sole member,
  // started unvouched on a lost log/ no more, and granted a stale candidate its vote at once (the
  // simulator's --wipe --reconfigure, seed 54: two leaders of one term).
  for (const std::vector<raft::NodeId>* members : {&conf.voters, &conf.learners}) {
    for (raft::NodeId member : *members) {
      if (member != config_.node_id) return true;
    }
  }
  return false;
}

// Whether the log still holds `record`'s entry: 1 yes (or trimmed: below the first index, hence
// committed), 0 no (gone, or another entry there), -1 reading it failed (`problem` says why, and
// `corrupt_index` is set on a checksum failure).
int Replica::log_holds(const raft::ConfRecord& record, std::uint64_t* corrupt_index,
                       std::string* problem, raft::ConfState* from_log) const {
  if (record.index == 0 || record.index < log_->first_index()) return 1;
  if (record.index > log_->last_index()) return 0;
  auto batch = log_->read(record.index, 1, 1ULL << 20);
  if (!batch.ok() || batch->entries.empty()) {
    if (!batch.ok() && batch.status().code() == store::StatusCode::kCorruption) {
      *corrupt_index = record.index;
    }
    *problem = "reading configuration entry " + std::to_string(record.index) + ": " +
               batch.status().to_string();
    return -1;
  }
  const store::EntryView& entry = batch->entries.front();
  if (entry.meta.type != store::EntryType::kConfig || entry.meta.term != record.term) return 0;
  std::optional<raft::ConfState> held = raft::decode_config(std::string(entry.payload));
  // CONFSTATE keeps the roles of a later record, not its addresses (conf_state_file.h): the entry
  // is the record when the roles agree, and its addresses are the ones in force.
  if (!held || !raft::same_members(*held, record.conf)) return 0;
  if (from_log != nullptr) *from_log = std::move(*held);
  return 1;
}

// CONFSTATE lists the base configuration and every later configuration entry a crash or a
// truncation could still remove (conf_state_file.h); the log holds no kConfig entry it does not
// list. Each listed entry still in the log is in force after the ones before it; the first that is
// gone (lost in a crash, or cut before the record was rewritten) ends the walk. No record at all: the
// bootstrap configuration (--members), once check_conf_record_against_disk() found nothing on disk
// that contradicts it. At most 1 + kMaxPendingRecords entries are read; a checksum failure goes to
// the storage-fault repair (open_store), never a refusal.
bool Replica::recover_conf_history(std::uint64_t* corrupt_index, std::string* problem) {
  if (!check_conf_record_against_disk(corrupt_index, problem)) return false;
  const std::vector<raft::ConfRecord>& recorded = conf_state_file_->current();
  conf_records_ = {raft::ConfRecord{0, 0, config_.raft.initial_conf}};
  if (recorded.empty()) return true;
  conf_records_ = {recorded.front()};
  // The base was committed and flushed when it was written: only a storage fault loses its entry,
  // and the node then catches up (assess_recovery) and receives it again; it stays in force.
  const int base_held = log_holds(recorded.front(), corrupt_index, problem);
  if (base_held < 0) return false;
  if (base_held == 0) {
    spdlog::warn("node {}: configuration entry {} is not in the log; keeping {}", config_.node_id,
                 recorded.front().index, raft::to_string(recorded.front().conf));
  }
  for (std::size_t i = 1; i < recorded.size(); ++i) {
    raft::ConfRecord record = recorded[i];
    const int held = log_holds(record, corrupt_index, problem, &record.conf);
    if (held < 0) return false;
    if (held == 0) {
      spdlog::warn("node {}: configuration entry {} is no longer in the log; back to entry {} ({})",
                   config_.node_id, recorded[i].index, conf_records_.back().index,
                   raft::to_string(conf_records_.back().conf));
      break;
    }
    conf_records_.push_back(std::move(record));
  }
  return true;
}

// The walk (recover_conf_history) stopped at a record whose entry a crash lost: CONFSTATE is
// rewritten without it now. Kept, it would outlive its index: once the log holds another entry
// there and a trim removes it, the next open would take the record for a trimmed (so committed)
// configuration and run it (the simulator's retention runs found this).
bool Replica::forget_lost_conf_records(NodeError* error) {
  const std::vector<raft::ConfRecord>& recorded = conf_state_file_->current();
  if (recorded.empty() || conf_records_.size() >= recorded.size()) return true;
  if (store::Status st = conf_state_file_->write(conf_records_); !st.ok()) {
    *error = make_error(ErrorCode::kInternal,
                        "rewriting the configuration record without the entries the log lost: " +
                            st.to_string());
    return false;
  }
  return true;
}

bool Replica::open_store(const store::Options& store_options, NodeError* error) {
  // Recovery spot-checks sealed segments; the dedup rebuild then reads (and CRC-checks) the tail of the
  // log. A corrupt entry found there is marked suspect and the log reopened, so that recovery checks
  // that segment in full and cuts the log at it (with peers to repair from: allow_truncate_...).
  // Bounded: every round cuts the log below the previous cut.
  constexpr int kMaxOpenRepairs = 8;
  for (int attempt = 0;; ++attempt) {
    auto log = store::CommitLog::open(config_.data_dir + "/log", store_options);
    if (!log.ok()) {
      *error = make_error(ErrorCode::kInternal,
                          "opening the commit log failed: " + log.status().to_string());
      return false;
    }
    log_ = std::move(log).value();
    spdlog::info("node {}: store recovered: {}", config_.node_id,
                 log_->recovery_report().to_string());
    std::uint64_t corrupt_index = 0;
    std::string problem;
    if (!load_snapshot_state(&problem)) {
      *error = make_error(ErrorCode::kInternal, "recovering the log failed: " + problem);
      return false;
    }
    load_first_index_topics();
    const bool recovered =
        rebuild_dedup(&corrupt_index, &problem) && recover_conf_history(&corrupt_index, &problem);
    loaded_snapshot_.reset();
    if (recovered) {
      learn_first_index_conf_from_records();
      return forget_lost_conf_records(error) && write_bootstrap_conf_record(error);
    }
    if (corrupt_index == 0 || !store_options.allow_truncate_corrupted_flushed_data ||
        attempt >= kMaxOpenRepairs) {
      *error = make_error(ErrorCode::kInternal, "recovering the log failed: " + problem);
      return false;
    }
    spdlog::error(
        "node {}: entry {} is corrupt ({}); reopening the log so that recovery cuts it there, to "
        "be "
        "repaired from the peers",
        config_.node_id, corrupt_index, problem);
    if (store::Status st = log_->mark_suspect(corrupt_index); !st.ok()) {
      *error = make_error(ErrorCode::kInternal, "marking entry " + std::to_string(corrupt_index) +
                                                    " suspect failed: " + st.to_string());
      return false;
    }
    if (store::Status st = log_->close(); !st.ok()) {
      *error = make_error(ErrorCode::kInternal, "closing the commit log failed: " + st.to_string());
      return false;
    }
    log_.reset();
    dedup_ = DedupTable(config_.dedup_max_clients, config_.dedup_sequences_per_client);
  }
}

bool Replica::rebuild_dedup(std::uint64_t* corrupt_index, std::string* problem) {
  // The last dedup_rebuild_entries entries of the log (the window is documented in node_config.h).
  const std::uint64_t last = log_->last_index();
  std::uint64_t dedup_from = log_->first_index();
  if (last >= config_.dedup_rebuild_entries &&
      last - config_.dedup_rebuild_entries + 1 > dedup_from) {
    dedup_from = last - config_.dedup_rebuild_entries + 1;
  }
  if (loaded_snapshot_) {
    // The log starts right after an installed snapshot: its appends first, the log's on top.
    dedup_.replace(log_->first_index(), loaded_snapshot_->dedup_view_start,
                   loaded_snapshot_->dedup_clients, loaded_snapshot_->spliced_view_starts);
  }
  dedup_.set_view_start(dedup_from);  // an append that began below `from` is seen only in part
  // The same pass rebuilds the topic table and the timestamp floor from TOPICSTATE on: whatever
  // the distance to the newest envelope, nothing after the saved point is missed.
  std::uint64_t topics_from = 0;
  bool topic_state_missing = false;
  if (!load_topic_state(&topics_from, &topic_state_missing, problem)) return false;
  // The version of the first envelope the scan finds (kNone: none yet).
  NotedEnvelope first_envelope = NotedEnvelope::kNone;
  std::uint64_t from = std::min(dedup_from, topics_from);
  const std::uint64_t checkpoint_commit = std::min(log_->commit_index(), last);
  const std::uint64_t now_ms = wall_now_ms();
  constexpr std::size_t kBatchEntries = 4096;
  while (from <= last) {
    auto batch = log_->read(from, kBatchEntries, 64ULL << 20);
    if (!batch.ok() || batch->entries.empty()) {
      if (!batch.ok() && batch.status().code() == store::StatusCode::kCorruption) {
        *corrupt_index = first_corrupt_index(*log_, from, kBatchEntries);
      }
      *problem = "at index " + std::to_string(from) + ": " + batch.status().to_string();
      return false;
    }
    for (const store::EntryView& view : batch->entries) {
      const bool has_envelope = (view.meta.flags & kEntryFlagEnvelope) != 0;
      if (view.meta.index >= dedup_from) {
        dedup_.record_entry(view.meta.client_id, view.meta.sequence, view.meta.index,
                            view.meta.term, view.payload, has_envelope);
      }
      const NotedEnvelope noted = note_entry(view.meta.index, has_envelope, view.payload, now_ms);
      if (first_envelope == NotedEnvelope::kNone) first_envelope = noted;
    }
    topics_.committed(checkpoint_commit);  // keeps the undo journal to the uncommitted tail
    from = batch->entries.back().meta.index + 1;
  }
  if (topic_state_missing && first_envelope == NotedEnvelope::kVersion2) {
    // The oldest envelope still in the log already carries an offset: the trimmed entries before
    // it may have been of version 2 too, and a topic whose entries retention removed would restart
    // at offset 0. (When the oldest one is of version 1, the log was trimmed before this node
    // wrote offsets — an old binary's log upgraded — and is counted as a version-1 log.)
    *problem = config_.data_dir + "/TOPICSTATE is missing, but the log is trimmed (it starts at " +
               std::to_string(log_->first_index()) +
               ") and its oldest envelope already carries a leader-assigned topic offset, so the "
               "offsets of trimmed entries cannot be recovered; replace this node under a new id "
               "with an empty directory (docs/operations.md, \"Damaged data at startup\")";
    return false;
  }
  return true;
}

void Replica::assess_recovery(raft::Config* raft_config) {
  RecoveryFacts facts;
  facts.report = log_->recovery_report();
  facts.checkpoint_commit_index = log_->commit_index();
  facts.recovered_last_index = log_->last_index();
  facts.hard_state_term = persisted_hard_state_.term;
  if (log_->last_index() >= log_->first_index()) {
    if (auto term = log_->term_at(log_->last_index()); term.ok()) facts.last_log_term = *term;
  }
  facts.sync_flush = config_.store.flush_mode == store::FlushMode::kSync;
  facts.single_member = !has_peers();
  facts.same_boot = config_.same_boot;
  const StorageFault fault = assess_storage_fault(facts);
  if (!fault.lost_durable_entries) return;
  storage_fault_ = fault.description;
  raft_config->promised_index = fault.promised_index;
  raft_config->promised_term = fault.promised_term;
  spdlog::error(
      "node {}: storage fault: {}; this node may have acknowledged entries up to {} (term {}) that "
      "it no longer holds: it catches up from the leader and neither votes nor counts toward "
      "commit until its log reaches them (docs/operations.md, \"Storage faults\")",
      config_.node_id, fault.description, fault.promised_index, fault.promised_term);
}

void Replica::mark_corrupt(std::uint64_t index, const std::string& message) {
  // The entry is never served (reads of it fail with DATA_LOSS). The node cannot cut its log below
  // the commit index while it runs, so it records the entry for the next open, which verifies that
  // segment in full, cuts the log at the first bad entry and catches up from the leader
  // (assess_recovery). Stopping makes a supervisor (systemd, Kubernetes) restart it.
  std::string outcome = "marked for repair";
  if (store::Status st = log_->mark_suspect(index); !st.ok())
    outcome = "NOT marked: " + st.to_string();
  fatal("entry " + std::to_string(index) + " is corrupt (" + message + "); " + outcome +
        ": restart the node and it re-fetches the entries from its peers (docs/operations.md, "
        "\"Storage "
        "faults\")");
}

void Replica::close() {
  if (closed_ || log_ == nullptr) return;
  closed_ = true;
  // A preparation still out: its `done` never runs (the next open removes a SNAPSHOT.install).
  abandon_incoming_snapshot("the node stops");
  // A file write off the loop: dropped if the worker has not started it (nothing of it reaches the
  // disk), else waited for, so that nothing of this replica writes in the directory once it is
  // closed (the next open may run at once). A trim's SNAPSHOT.next that landed: finished below.
  settle_pending_write();
  log_slow_round_window();  // the longest slow round of a window still open
  log_->set_flush_listener(nullptr);
  log_->set_flush_observer(nullptr);
  // An open refused midway never saves: its tables were not loaded, and a TOPICSTATE written from
  // them would replace the good one with an empty table (the next open then refuses for that too).
  if (!failed_ && opened_) {
    // A trim's deletion under way: finished within the trim limit (the next open finishes any
    // rest, replica_trim_deletion.cpp).
    if (store::Status st = finish_trim_deletion_now(/*within_limit=*/true); !st.ok()) {
      spdlog::error("node {}: finishing a trim's deletion: {}", config_.node_id, st.to_string());
    }
    if (store::Status saved = save_topic_state(); !saved.ok()) {
      spdlog::error("node {}: saving TOPICSTATE: {}", config_.node_id, saved.to_string());
    }
    // The checkpoint keeps the commit index so that a restart knows what was committed.
    const std::uint64_t commit = std::min(commit_, log_->last_index());
    if (commit > log_->commit_index()) {
      if (auto st = log_->set_commit_index(commit); !st.ok()) {
        spdlog::error("node {}: saving commit index {}: {}", config_.node_id, commit,
                      st.to_string());
      }
    }
  }
  store::Status st = log_->close();
  if (!st.ok()) spdlog::error("node {}: closing the store: {}", config_.node_id, st.to_string());
  spdlog::info("node {}: stopped (commit {}, last {})", config_.node_id, commit_,
               log_->last_index());
}

NodeStatus Replica::status() {
  NodeStatus status;
  status.node_id = config_.node_id;
  const std::map<std::uint64_t, std::string>& book = address_book();
  status.address = book.count(config_.node_id) ? book.at(config_.node_id) : "";
  status.role = raft_->role();
  status.term = raft_->term();
  // Health then says "no leader known", as for a voter whose election timer fired.
  status.leader_id = leader_silent() ? raft::kNoNode : raft_->leader();
  if (auto it = book.find(status.leader_id); it != book.end()) status.leader_address = it->second;
  status.first_index = log_->first_index();
  status.last_index = log_->last_index();
  status.commit_index = commit_;
  status.flushed_index = log_->flushed_index();
  status.flush_mode = config_.store.flush_mode;
  status.catching_up = raft_->catching_up();
  status.catching_up_to_index = raft_->catching_up_to();
  status.storage_fault = status.catching_up ? catch_up_reason() : "";
  status.unvouched = raft_->unvouched();
  if (status.unvouched) status.unvouched_reason = unvouched_reason();
  status.unvouched_hint = unvouched_hint();
  const raft::CommittedConflict& conflict = raft_->committed_conflict();
  status.committed_conflicts = conflict.count;
  // NOT_SERVING (a non-empty sentence) only while such appends keep coming: a leader that cannot
  // catch this node up probes it every heartbeat; one stray (forged) message must not take a node
  // out of service for good. The counter and the critical log line stay.
  if (committed_conflict_alarm_.shown(conflict.count, deps_.clock())) {
    status.committed_conflict =
        "leader " + std::to_string(conflict.leader) + " holds an entry of term " +
        std::to_string(conflict.leader_term) + " at index " + std::to_string(conflict.index) +
        " where this node holds a committed entry of term " + std::to_string(conflict.own_term);
  }
  fill_term_leader_status(status);
  status.stranded_below_index = raft_->stranded_below();
  status.disk_used_ratio = disk_.used_ratio();
  // 0 is what older nodes send: `raftlogctl status` then prints "-" for the disk, which is right
  // until a probe has read it (drills6 L6: a just-started node showed "DISK 0%").
  status.disk_high_watermark = disk_.used_ratio_known() ? disk_.high_watermark() : 0.0;
  status.disk_over_high_watermark = disk_.exceeded();
  status.disk_keeping_leadership = status.disk_over_high_watermark &&
                                   raft_->role() == raft::Role::kLeader &&
                                   choose_disk_handover_target() == raft::kNoNode;
  status.disk_handover_wait_ms = disk_handover_wait_ms(deps_.clock());
  status.snapshots_above_first_index = snapshot_stats_.sent_above_first_index;
  status.snapshot_encodes = snapshot_stats_.encodes;
  status.snapshot_encodings_reused = snapshot_stats_.encodings_reused;
  status.snapshot_encoding_in_flight = snapshot_stats_.encoding_in_flight != 0;
  status.snapshot_last_encoding_duration = snapshot_stats_.last_encoding_duration;
  status.snapshot_sends_dropped = snapshot_stats_.sends_dropped;
  status.snapshot_install_preparing = snapshot_stats_.install_preparing != 0;
  status.snapshot_install_write_failures = snapshot_stats_.install_write_failures;
  status.snapshot_last_install_on_loop = snapshot_stats_.last_install.install;
  status.voters = raft_->conf().voters;
  status.learners = raft_->conf().learners;
  status.conf_index = raft_->conf_history().back().index;
  status.conf_committed = status.conf_index <= commit_;
  for (const auto& [id, address] : book) {
    if (raft::is_member(raft_->conf(), id)) status.member_addresses.emplace(id, address);
  }
  status.bootstrap_voters = config_.raft.initial_conf.voters;
  status.retired_ids = retired_ids();
  // Told so by a member (its log lacks the removal), or its own log holds the committed removal.
  status.removed = raft_->removed() ||
                   std::find(status.retired_ids.begin(), status.retired_ids.end(),
                             config_.node_id) != status.retired_ids.end();
  // Only a binding word names its member (review of retired5 #5): a word without a position is
  // information only, and the node still campaigns and leads.
  status.removed_by = raft_->told_removed() ? raft_->removed_by() : 0;
  // One rule for voters and learners (catch_up_rule.h); the learner's own field is kept for clients
  // older than catching_up_to_leader_commit.
  observe_catch_up();
  status.catching_up_to_leader_commit = catch_up_.catching_up_to();
  status.behind_leader_commit_entries = catch_up_.gap();
  if (!raft::is_voter(raft_->conf(), config_.node_id)) {
    status.learner_catching_up_to_index = catch_up_.catching_up_to();
  }
  for (const raft::PeerProgress& progress : raft_->progress()) {
    if (progress.id == config_.node_id) continue;
    PeerStatus peer;
    peer.id = progress.id;
    if (auto it = book.find(progress.id); it != book.end()) peer.address = it->second;
    peer.match_index = progress.match_index;
    peer.lag_entries =
        status.last_index > progress.match_index ? status.last_index - progress.match_index : 0;
    peer.last_contact_ms = progress.ticks_since_contact * config_.tick_ms;
    peer.probing = progress.probing;
    peer.inflight_messages = progress.inflight_messages;
    peer.inflight_bytes = progress.inflight_bytes;
    peer.disk_over_watermark = progress.disk_over_watermark;
    // A follower that needs entries this leader no longer holds: with snapshots (raftlogd's
    // setting) it catches up from one; without, it must be rebuilt from a copy of a healthy node
    // (docs/operations.md).
    peer.behind_first_index = progress.needs_trimmed_entries(status.first_index);
    if (peer.behind_first_index && peers_behind_first_index_.insert(progress.id).second) {
      auto limit =
          behind_first_index_log_.try_emplace(progress.id, kBehindFirstIndexLogInterval).first;
      if (const std::optional<std::uint64_t> held_back =
              limit->second.admit(util::RateLimit::Clock::now())) {
        // With snapshots (raftlogd) this is the ordinary catch-up of a new or lagging member:
        // information, not an error. Without them the follower is stuck until rebuilt.
        spdlog::log(
            config_.raft.snapshots ? spdlog::level::info : spdlog::level::err,
            "node {}: follower {} needs entries from {} but the first retained index is {}: {}{}",
            config_.node_id, progress.id,
            progress.needs_entries_from(), status.first_index,
            config_.raft.snapshots
                ? "it catches up from this leader's snapshot (docs/raft.md, \"Snapshots\")"
                : "it cannot catch up; rebuild it from a copy of a healthy node's data directory "
                  "(docs/operations.md)",
            *held_back == 0
                ? std::string()
                : " (" + std::to_string(*held_back) + " more such report(s) not logged)");
      }
    } else if (!peer.behind_first_index) {
      peers_behind_first_index_.erase(progress.id);
    }
    status.peers.push_back(std::move(peer));
  }
  return status;
}

}  // namespace raftlog::replica

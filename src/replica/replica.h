// Replica: one raftlog replica's logic, single-threaded and free of gRPC, sockets and threads of its
// own. It owns the Raft core, the CommitLog, the hard state and the dedup table, and decides
// everything durability depends on: hard state before entries, acknowledgements held until a flush
// covers them, truncation and the waiters it cuts, commit delivery, retention, read index, transfer.
//
// Its caller (raftlogd's Node, src/server/node.h) gives it one input at a time from one thread, then
// calls process() to drive the core's Ready batches; completion callbacks run inside those calls.
// What it needs from the world comes in through ReplicaDeps: where messages go, the time, the disk's
// free space, and observers. Its store comes in through ReplicaConfig::store (replica_config.h
// defines both): raftlogd's runs its own flusher thread over the POSIX file system; the simulator's
// is stepped (Options::background_work) over a store::MemoryEnv, and the simulator takes each flush
// cycle itself (docs/design.md).
//
// DURABILITY (docs/durability.md)
//   Hard state (term, vote) is written durably before any message that depends on it leaves.
//   Entries are appended to the CommitLog without waiting; in sync flush mode a message that
//   acknowledges them (a follower's append response, a vote) is held until the store reports them
//   flushed, and the leader counts its own entries toward the quorum only once flushed. In async mode
//   an entry counts as soon as it is written to the mapped segment.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "raft/raft.h"
#include "replica/alarm_window.h"
#include "replica/catch_up_rule.h"
#include "replica/conf_state_file.h"
#include "replica/dedup_table.h"
#include "replica/disk_probe.h"
#include "replica/hard_state_file.h"
#include "replica/node_events.h"
#include "replica/node_status.h"
#include "replica/off_loop_write.h"
#include "replica/off_loop.h"
#include "replica/replica_config.h"
#include "replica/results.h"
#include "replica/retention_hold.h"
#include "replica/round_profile.h"
#include "replica/snapshot_data.h"
#include "replica/snapshot_encoding.h"
#include "replica/snapshot_preparation.h"
#include "replica/snapshot_stats.h"
#include "replica/store_log_reader.h"
#include "replica/topic_offsets.h"
#include "replica/topic_state_file.h"
#include "replica/trim_progress.h"
#include "store/commit_log.h"
#include "util/rate_limit.h"

namespace raftlog::replica {

class Replica {
 public:
  using AppendCallback = std::function<void(AppendResult)>;
  using ReadIndexCallback = std::function<void(ReadIndexResult)>;
  using TransferCallback = std::function<void(TransferResult)>;
  using MembershipCallback = std::function<void(MembershipResult)>;

  struct AppendRequest {
    std::vector<std::string> payloads;  // validated by the caller (count, sizes)
    std::uint64_t client_id = 0;
    std::uint64_t sequence = 0;
    AppendCallback done;
    Clock::time_point deadline;
    // Every payload starts with an envelope (src/derived/envelope.h, encoded and validated by the
    // caller): the replica stamps its timestamp when it proposes (next_timestamp_ms()).
    bool has_envelopes = false;
    // Every payload is a consumer group's offset commit (src/derived/group_commit.h, encoded and
    // validated by the caller); never together with has_envelopes, and never deduplicated.
    bool group_commits = false;
  };
  struct ReadIndexRequest {
    ReadIndexCallback done;
    Clock::time_point deadline;
  };
  struct TransferRequest {
    std::uint64_t target = 0;
    TransferCallback done;
  };
  struct MembershipRequest {
    // change.addresses is filled by propose_conf_change (address_book(), with `address` for the
    // node an add names) when `address` is set or the configuration records addresses already.
    raft::ConfChange change;
    MembershipCallback done;  // once the change committed (or failed)
    Clock::time_point deadline;
    std::string address = {};  // the new member's, for an add ("" = none)
  };

  // Recovers the CommitLog and the hard state from config.data_dir and rebuilds the dedup table.
  // nullptr with `error` set when the directory cannot be served.
  static std::unique_ptr<Replica> open(ReplicaConfig config, ReplicaDeps deps, NodeError* error);
  ~Replica();
  Replica(const Replica&) = delete;
  Replica& operator=(const Replica&) = delete;

  // Where an accepted append's entries were proposed (the answer itself still comes through `done`,
  // once they commit): for observers that check placement against the log (the simulator).
  struct AppendPlacement {
    bool proposed = false;  // false: answered already, or a retry waiting for its original
    std::uint64_t first = 0;
    std::uint64_t last = 0;
    std::uint64_t term = 0;
  };

  // --- inputs --------------------------------------------------------------------------------
  AppendPlacement append(AppendRequest request);
  void read_index(ReadIndexRequest request);
  void transfer_leadership(TransferRequest request);
  // Leader only: one membership change (docs/raft.md, "Membership changes"), answered once its
  // configuration entry committed, or refused at once (MembershipResult says why).
  void propose_conf_change(MembershipRequest request);
  // Every address this node knows: ReplicaConfig::members, overridden by the addresses the
  // configurations of the core's history record (newest last).
  // Recomputed only when the configuration history changes (status() asks every loop round).
  const std::map<std::uint64_t, std::string>& address_book() const;
  // The peers the transport must reach and accept (not this node): every member of every
  // configuration a truncation could still roll back to, and, while the newest configuration records
  // no addresses, every node of ReplicaConfig::members too (the seed list of a joining node, whose
  // log does not name its peers yet). Each with its address_book() address; unknown ones left out.
  std::map<std::uint64_t, std::string> peer_addresses() const;
  // Ids a committed change removed (CONFSTATE's tombstones and the newer committed ones), oldest
  // retirement first: never added again (ID_RETIRED). Cached: recomputed only when CONFSTATE was
  // rewritten, the core's oldest record moved or a record committed (status() asks every round).
  const std::vector<raft::NodeId>& retired_ids() const;
  void step(raft::Message message);  // by value: an append's entries move into the core
  void tick();
  // See Node::trim (src/server/node.h).
  TrimResult trim(std::uint64_t before_index, const char* why);
  // A trim answers before its deletion has run: whether one is still under way (waiting for its
  // flush or a write off the loop, a scan slice, or its deletion's next rounds).
  bool trim_in_progress() const { return trim_.in_progress(); }
  // The entry at `index` failed its check: recorded for the next open (a full check of its
  // segment), then fatal. The caller holds off concurrent readers of the store.
  void mark_corrupt(std::uint64_t index, const std::string& message);

  // --- driving -------------------------------------------------------------------------------
  // Reports durability, then drives the core's Ready batches until it has none (bounded).
  void process();
  void expire_pending(Clock::time_point now);
  void apply_retention(Clock::time_point now);
  // Fails every waiting append, read and transfer with `code`.
  void fail_all(ErrorCode code, const std::string& message);
  // The caller's loop round, timed by part (round_profile.h): begin_round() at its start, the
  // caller's own parts marked with RoundProfile::Scope on round_profile(), end_round() at its end.
  // end_round() returns the round's length and, for a round of at least `log_threshold` (zero:
  // never), logs one warning naming its parts and their milliseconds: the first slow round at
  // once, then for the kSlowRoundLogInterval after it the longest of the slow rounds that
  // followed, with how many there were, once that window closes (slow_window_).
  void begin_round() {
    round_.begin();
    ++round_id_;
  }
  RoundProfile& round_profile() { return round_; }
  Clock::duration end_round(Clock::duration log_threshold);
  static constexpr std::chrono::seconds kSlowRoundLogInterval{10};
  // Saves the commit index in the checkpoint (unless failed) and closes the store.
  void close();

  // --- state ---------------------------------------------------------------------------------
  // True once an error it cannot continue from happened (logged); the caller stops feeding it.
  bool failed() const { return failed_; }
  const std::string& failure_reason() const { return failure_; }     // what failed() stopped on
  bool disk_watermark_exceeded() const { return disk_.exceeded(); }  // any thread
  // Retention never trims at or above `index` (0: no hold). The server's consumer group table
  // holds the log from its persisted boundary, so no commit entry it has not made durable in its
  // own file can be trimmed (docs/design.md, "Consumer groups"). Any thread.
  void hold_log_from(std::uint64_t index) { retention_hold_.store(index); }
  raft::Role role() const { return raft_->role(); }
  // The configuration in force: the newest in this node's log.
  const raft::ConfState& conf() const { return raft_->conf(); }
  std::uint64_t commit_index() const { return commit_; }
  // Status as of now, without what only the caller knows (scrubber, corrupt index).
  NodeStatus status();
  // The store, for the caller's concurrent readers (reads, scrub, flush) and its flush listener.
  store::CommitLog& log() { return *log_; }
  const store::CommitLog& log() const { return *log_; }
  const ReplicaConfig& config() const { return config_; }
  // The log as the Raft core reads it (the simulator's checker reads the same view).
  const raft::LogReader& log_reader() const { return *reader_; }
  // The Raft core, read-only: for harnesses that assert on its state (tests/raft's TestCluster).
  // Every input still goes through the replica.
  const raft::Raft& core() const { return *raft_; }
  // The topic table (the next offset of every topic as this node's log stands) and the timestamp
  // floor, for tests and the simulator's checker.
  const TopicOffsets& topic_offsets() const { return topics_; }
  std::uint64_t timestamp_floor_ms() const { return last_timestamp_ms_; }
  SnapshotStats snapshot_stats() const {
    SnapshotStats stats = snapshot_stats_;
    stats.dedup_walks = dedup_.walks();
    return stats;
  }
  // Whether this node knows the topic table as of its first index - 1, so that the snapshots it
  // sends are at that point (replica_snapshot.cpp).
  bool knows_first_index_topics() const { return first_index_topics_.has_value(); }
  // Whether it knows the configuration in force at its first index - 1: with the topic table there
  // (its core is told then), its snapshots are at that point even when a configuration committed
  // above it.
  bool knows_first_index_conf() const { return first_index_conf_.has_value(); }
  const std::optional<raft::ConfState>& first_index_conf() const { return first_index_conf_; }
  // What the dedup table answers a retry of (client_id, sequence) carrying `payloads`, without
  // answering it: for tests and the simulator's checker.
  DedupTable::Lookup dedup_lookup(std::uint64_t client_id, std::uint64_t sequence,
                                  const std::vector<std::string>& payloads,
                                  DedupTable::Range* range, bool has_envelope = false) {
    return dedup_.find(client_id, sequence, payloads, range, has_envelope);
  }

  // How far ahead of this node's wall clock a timestamp in a replicated (or recovered) entry may
  // raise the floor for later timestamps: a forged or far-skewed timestamp then pins later entries
  // for at most this long (docs/design.md, "Timestamps").
  static constexpr std::uint64_t kMaxTimestampSkewMs = 60000;

 private:
  // Tests reach single steps of the snapshot hand-off through it (tests/replica/
  // replica_test_access.h): orders of events the public inputs do not produce.
  friend class ReplicaTestAccess;

  // An append (or a retry of one) waiting for its range to commit.
  struct PendingAppend {
    std::uint64_t first = 0;
    std::uint64_t last = 0;
    std::uint64_t term = 0;
    bool duplicate = false;
    AppendCallback done;
    Clock::time_point deadline;
    // For metrics: when it was proposed and how many payload bytes it carries (0 for a duplicate).
    Clock::time_point proposed_at{};
    std::uint64_t payload_bytes = 0;
  };
  struct PendingRead {
    ReadIndexCallback done;
    Clock::time_point deadline;
  };
  struct PendingMembership {
    std::uint64_t term = 0;  // the kConfig entry's term: the change succeeded iff it commits so
    MembershipCallback done;
    Clock::time_point deadline;
  };
  // Messages that may leave only once the log is durable up to `required_index`, whose entry must
  // still have `required_term` then: after a truncation the messages vouch for entries that no
  // longer exist and are dropped (Raft retransmits; a lost vote is re-requested).
  struct HeldMessages {
    std::uint64_t required_index = 0;
    std::uint64_t required_term = 0;
    std::vector<raft::Message> messages;
  };

  Replica(ReplicaConfig config, ReplicaDeps deps);

  // Opening (replica_open.cpp).
  bool open_store(const store::Options& store_options, NodeError* error);
  bool rebuild_dedup(std::uint64_t* corrupt_index, std::string* problem);
  // Loads TOPICSTATE into topics_ and the timestamp floor; the first log index the open scan must
  // read for them (replica_topics.cpp).
  // `missing_on_trimmed_log`: there was none and the log does not start at index 1.
  bool load_topic_state(std::uint64_t* scan_from, bool* missing_on_trimmed_log,
                        std::string* problem);
  void assess_recovery(raft::Config* raft_config);
  // DATA_DIR/UNVOUCHED (unvouched_marker.h): found, or written when the directory is empty and the
  // configuration has other members; either way the core starts unvouched. False when it cannot be
  // read or written (the node then refuses to start).
  bool open_unvouched_marker(raft::Config* raft_config, NodeError* error);
  // Rewrites DATA_DIR/UNVOUCHED with the core's vouching() when it changed, durably, before a
  // Ready's entries and snapshot are written. False (the replica failed) when it cannot.
  bool record_vouching_word();
  // Removes DATA_DIR/UNVOUCHED once the core says a leader caught this node up (and any snapshot
  // it installed is durable). Each loop round; a failed removal is retried in the next one.
  void forget_unvouched_marker_once_vouched();
  // DATA_DIR/NOT_FOUNDER (not_founder_marker.h): read, or written for a node outside its bootstrap
  // voters; sets raft::Config::never_founds. False when it cannot be read or written.
  bool open_not_founder_marker(raft::Config* raft_config, NodeError* error);
  // Writes DATA_DIR/NOT_FOUNDER once the commit index is above 0 (each loop round until it is).
  void record_not_founder_once_committed();
  // DATA_DIR/REMOVED (removed_word_record.h): read into raft::Config::removed_word at open (false,
  // with the reason, when it is damaged); rewritten or removed as the core's binding word changes,
  // each loop round (replica_membership.cpp).
  bool open_removed_word_record(raft::Config* raft_config, NodeError* error);
  void record_removed_word();
  // A leader's append contradicted a committed entry (raft::Raft::committed_conflict): a critical
  // log line, at most one per 30 s (committed_conflict_alarm_; replica_vouching.cpp).
  void report_committed_conflict();
  // Two leaders of one term met (raft::Raft::second_leader, leadership_refused): critical log lines,
  // at most one per 30 s each (replica_term_leader.cpp).
  void report_term_leader_clashes();
  // The status sentences for those (NodeStatus::second_leader, leadership_refused).
  void fill_term_leader_status(NodeStatus& status) const;
  // Why the core catches up, for status (NodeStatus::storage_fault): recovery's finding, or what the
  // core found itself.
  std::string catch_up_reason() const;
  bool open_hard_state(NodeError* error);
  bool open_conf_state(NodeError* error);
  bool has_peers() const;
  // The configurations CONFSTATE lists that the recovered log still holds (replica_open.cpp); false
  // with `corrupt_index` set when reading an entry it names failed on a checksum.
  bool recover_conf_history(std::uint64_t* corrupt_index, std::string* problem);
  // Rewrites CONFSTATE when recover_conf_history() dropped records whose entries are gone.
  bool forget_lost_conf_records(NodeError* error);
  // CONFSTATE without a record beside a log that is not new, or a bootstrap record (entry 0) other
  // than the configured bootstrap: false, with the reason, when the disk contradicts the configured
  // bootstrap configuration (replica_conf_record.cpp).
  bool check_conf_record_against_disk(std::uint64_t* corrupt_index, std::string* problem);
  // Writes the bootstrap record (entry 0) when CONFSTATE has none, so a missing one is damage.
  bool write_bootstrap_conf_record(NodeError* error);
  // `from_log`, when given, receives the configuration the entry holds (its addresses included).
  int log_holds(const raft::ConfRecord& record, std::uint64_t* corrupt_index, std::string* problem,
                raft::ConfState* from_log = nullptr) const;

  // Requests (replica_requests.cpp).
  bool answer_from_dedup(AppendRequest& in);
  bool disk_has_room(std::uint64_t append_bytes, NodeError* error);
  NodeError not_leader_error() const;
  NodeError told_removed_error() const;
  void fail_pending_appends(ErrorCode code, const std::string& message, const char* reason);

  // The Ready driver (replica_ready.cpp).
  void handle_ready(raft::Ready& ready);  // observed, around apply_ready()
  void apply_ready(raft::Ready& ready);
  void note_soft_state(const raft::SoftState& next);
  void truncate_log_from(std::uint64_t from);
  // Tracks the batch's kConfig entries and cuts in conf_records_ and rewrites CONFSTATE when they
  // changed (replica_membership.cpp).
  void persist_conf(const raft::Ready& ready);
  // Cuts a received append before the configuration entry that would leave more configuration
  // entries uncommitted than CONFSTATE holds (ConfStateFile::kMaxPendingRecords); the leader sends
  // the rest again once the commit index caught up (replica_membership.cpp).
  void hold_back_config_entries(raft::Message& append);
  // Moves CONFSTATE's base (with its addresses) up to the newest configuration entry that is
  // committed (up to `commit`) and flushed, and rewrites the record when it moved (before
  // retention can trim the entry that holds the addresses).
  void settle_conf_records(std::uint64_t commit);
  // Where the base would move: the position in conf_records_ of the newest record committed (up to
  // `commit`) and flushed.
  std::size_t settled_conf_base(std::uint64_t commit) const;
  // Erases conf_records_ before position `base` (it becomes the base); returns their
  // configurations, all committed, for CONFSTATE's retired ids.
  std::vector<raft::ConfState> settle_to(std::size_t base);
  void answer_membership(std::uint64_t commit);
  void fail_pending_memberships(const NodeError& error);
  void expire_pending_memberships(Clock::time_point now);
  void hold_until_durable(std::vector<raft::Message> messages);
  void report_durability();
  void release_held(std::uint64_t durable_index);
  void deliver_commit(std::uint64_t commit);
  void record_commit_in_store();
  void deliver_read_states(const raft::Ready& ready);
  void record_dedup(const std::vector<raft::Entry>& entries);
  // Undoes the dedup and topic records of this node's own proposals that the core replaced before
  // they reached the store (see unwritten_proposals_), before `entries` are recorded.
  void forget_replaced_proposals(const std::vector<raft::Entry>& entries);
  // Timestamps and topic offsets (replica_topics.cpp; docs/design.md, "Topics, keys and time").
  // A timestamp is the leader's append time, never below the newest timestamp this node's log holds
  // (up to kMaxTimestampSkewMs ahead of its clock), so they do not go backwards across leader
  // changes. Every entry the log gains is noted in the topic table (note_entry); a leader stamps
  // its proposals' envelopes from it (stamp_proposal).
  // What note_entry found: the open scan needs to know whether the first envelope of a trimmed
  // log is of version 2 (load_topic_state, rebuild_dedup).
  enum class NotedEnvelope : std::uint8_t { kNone, kVersion1, kVersion2 };
  NotedEnvelope note_entry(std::uint64_t index, bool has_envelope, std::string_view payload,
                           std::uint64_t now_ms);
  std::uint64_t wall_now_ms() const;
  std::uint64_t next_timestamp_ms();
  // Stamps timestamp and topic offsets into `payloads` (envelopes) for entries from `first_index`
  // on and records them in topics_; on a refusal nothing stays recorded.
  NodeError stamp_proposal(std::vector<std::string>& payloads, std::uint64_t first_index);
  // Writes TOPICSTATE as of the commit index as far as the log is flushed (topic_state_through()),
  // on the loop (open, close); the loop's rounds use start_topic_state_save().
  store::Status save_topic_state();
  // What TOPICSTATE is saved as of (a copy of the table at topic_state_point()).
  TopicState topic_state_to_save() const;
  // The index TOPICSTATE may be saved as of, and the topic table marked committed through: the
  // commit index, but never past the log's flushed index. In async flush mode the commit index can
  // run ahead of what any node flushed; after a cluster-wide power cut a file saved beyond the
  // recovered log would hold offsets of entries that no longer exist.
  std::uint64_t topic_state_through() const;
  // Marks the topic table committed through topic_state_through() and saves TOPICSTATE when the
  // save interval has passed (deliver_commit, report_durability).
  void advance_topic_state();
  void fatal(const std::string& what);
  // Runs `call`, which calls into the core. The core reads persisted entries through reader_; one
  // that cannot be read (UnreadableEntry: a storage fault) is marked for repair and stops the
  // replica (mark_corrupt) rather than abort the process. The core is never called again after a
  // failure (its state may be half-changed): false then, and for every later call.
  template <typename Call>
  bool guard_core(Call&& call) {
    if (failed_) return false;
    try {
      call();
      return true;
    } catch (const UnreadableEntry& unreadable) {
      mark_corrupt(unreadable.index(), unreadable.what());
      return false;
    }
  }

  // Snapshots (replica_snapshot.cpp; docs/raft.md, "Snapshots").
  // A follower's received snapshots (replica_snapshot_receive.cpp; snapshot_preparation.h).
  std::optional<PreparedSnapshot> prepared_snapshot_;
  std::optional<IncomingSnapshot> incoming_snapshot_;
  std::uint64_t incoming_generation_ = 0;
  // Whether the core would install `message` (a kSnapshot with data): its term is not stale and its
  // point lies above the commit index and is not in the log.
  bool core_would_install(const raft::Message& message) const;
  // step() of a kSnapshot: to the core at once unless it would install it; then prepared.
  void receive_snapshot(raft::Message message);
  // receive_snapshot's end: `message` becomes the incoming snapshot (a retry of the one prepared
  // changes nothing, another one replaces it), handed off unless it must wait.
  void queue_incoming_snapshot(raft::Message message);
  // True (counted) for an append from the prepared snapshot's leader in its term: dropped.
  bool holds_back_for_incoming_snapshot(const raft::Message& message);
  // After every input: a term past the prepared snapshot's drops its preparation.
  void check_incoming_snapshot_current();
  void start_snapshot_preparation();
  // `cancelled` (nullptr on the loop): set when the preparation is dropped; checked after the
  // decode and after the write. Without `write_install_file` SNAPSHOT.install is not written (the
  // install's fallback writes its own file: replica_snapshot.cpp).
  static void prepare_snapshot(PreparedSnapshot& out, const raft::Snapshot& expected,
                               store::Env* env, const std::string& data_dir,
                               std::size_t max_clients, std::size_t sequences_per_client,
                               const std::atomic<bool>* cancelled = nullptr,
                               bool write_install_file = true);
  void finish_snapshot_preparation(std::uint64_t generation, PreparedSnapshot prepared);
  void refuse_snapshot(const raft::Message& message, const std::string& problem);
  void abandon_incoming_snapshot(const char* why);
  // At the end of process(): a prepared snapshot the core did not install goes, with its file.
  void discard_prepared_snapshot();
  // Adds the dedup table's clients (appends at or below data->index) while the encoding, `size`
  // bytes without them, stays within config_.max_snapshot_data_bytes.
  void add_dedup_within_budget(SnapshotData* data, std::size_t size);
  // Before a trim deletes segments: SNAPSHOT.next (origin kTrim) with the dedup table's appends at or
  // below `point` (the new first index - 1), so that a restart still answers their retries, and
  // `topics`, the topic table as of `point`, and `conf`, the configuration in force there (nullptr:
  // not known; the version says which are, snapshot_data.h), and with `topics` `stamp`, the running
  // max stamp as of `point` (version 5). Gathered on the loop, encoded,
  // written and synced off it (hand_off_write): trim_.deletion->next_written once it is back.
  store::Status start_trim_snapshot(std::uint64_t point,
                                    const std::vector<TopicOffsets::TopicNext>* topics,
                                    const raft::ConfState* conf, std::uint64_t stamp);
  // After the trim's prefix truncation: SNAPSHOT.next becomes SNAPSHOT, or goes if nothing was
  // deleted (replica_retention.cpp).
  void finish_trim_snapshot(std::uint64_t first_before, std::uint64_t new_first);
  // The caller's loop rounds (begin_round): a trim's budget and its deletion's steps are per round.
  std::uint64_t round_id_ = 0;
  // Where the trim under way stands between rounds (trim_progress.h).
  TrimProgress trim_;
  // The deletion's next steps while `must_yield` allows (the first one at least when nothing ran
  // in this call, `*stepped` false), at most `max_segments` unlinks: never past trim_limit() (a
  // follower's leader hold can fall meanwhile; the deletion then waits). A store error (the store
  // then has failed) ends the deletion as a cut one, for the next open to finish.
  store::Status advance_trim_deletion(const std::function<bool()>& must_yield, bool* stepped,
                                      std::size_t max_segments);
  // The rest of a pending deletion at once, without a bound (before an install replaces the log,
  // and at close, within the trim limit); false (fatal or logged) on a store error.
  store::Status finish_trim_deletion_now(bool within_limit);
  // A deletion a store error stopped: ended as a deletion a power cut stopped, for the next open
  // (the tables of the log's start unknown unless it starts where it did; SNAPSHOT.next left for
  // the open or removed: finish_trim_snapshot).
  void abandon_trim_deletion();
  // trim()'s steps (replica_retention.cpp), each nullopt to go on or the call's answer: the
  // flush it waits for (true: asked of the flusher), its TOPICSTATE (moves *target down to what
  // the save reached), CONFSTATE and SNAPSHOT.next, the topic scan's slice (moves new_first down
  // to what the scan passed). yield_trim: the rest in the next rounds (trim_.pending_before).
  bool trim_must_yield() const;  // the round's trim budget is spent
  TrimResult yield_trim(std::uint64_t before_index, std::uint64_t first_before,
                        std::uint64_t allowed);
  bool trim_waits_for_flush(std::uint64_t before_index);
  std::optional<TrimResult> trim_topic_state_step(std::uint64_t before_index,
                                                  std::uint64_t first_before, std::uint64_t limit,
                                                  std::uint64_t* target);
  std::optional<TrimResult> trim_deletion_step(std::uint64_t before_index,
                                               std::uint64_t first_before, std::uint64_t limit,
                                               std::uint64_t target);
  std::optional<TrimResult> trim_scan_step(std::uint64_t before_index, std::uint64_t first_before,
                                           std::uint64_t limit, TrimPlan* plan);
  // A write of the trim's failed (TOPICSTATE or SNAPSHOT.next, on the loop or off it): its error,
  // and the trim stops, nothing deleted (a new request or the retention check starts it again;
  // a continuation would otherwise retry the write every round).
  TrimResult stop_failed_trim(const std::string& what, const store::Status& failed,
                              std::uint64_t first_before, std::uint64_t limit);
  // The end of every trim() call: the pending deletion's next steps, the log line and the result.
  TrimResult finish_trim_call(std::uint64_t before_index, const char* why, std::uint64_t limit,
                              std::uint64_t first_before, std::uint64_t segments_before);
  // The topic-table scan (replica_topic_scan.cpp): starts it again from first_index_topics_ at the
  // log's first index - 1 (none when that table is not known).
  void restart_topic_scan();
  // Reads the entries after the scan's point toward `goal` (a sealed segment's last index), at most
  // about `budget_bytes` of payload and, after its first batch, only while `out_of_time` is false,
  // moving the scan's boundary over every segment it finishes. A read that fails makes
  // first_index_topics_ unknown (logged; snapshots fall back).
  void advance_topic_scan(std::uint64_t goal, std::uint64_t budget_bytes,
                          const std::function<bool()>& out_of_time);
  // Each loop round while a trim waits for the scan (trim_.pending_before): one slice, then the
  // trim when the scan reached its segments.
  void continue_pending_trim();
  // Where the log starts after a trim before `target`: the first segment that keeps an entry at or
  // above it (the active segment always stays; replica_retention.cpp).
  std::uint64_t trim_start_for(std::uint64_t target) const;
  // After a truncation (successful or not): first_index_topics_, first_index_conf_ and
  // first_index_stamp_ become `topics`, `conf` and `stamp` when the log now starts at
  // `expected_first`, unknown when it starts anywhere else than `first_before`.
  void note_trimmed_start(std::uint64_t first_before, std::uint64_t expected_first,
                          std::optional<std::vector<TopicOffsets::TopicNext>> topics,
                          std::optional<raft::ConfState> conf, std::uint64_t stamp);
  // Sets first_index_topics_ and first_index_conf_ from what the open found (log start 1, or
  // SNAPSHOT naming it).
  void load_first_index_topics();
  // At open, after recover_conf_history(), when SNAPSHOT did not say the configuration at the
  // log's first index - 1 (a trim's file of version 1 or 2): CONFSTATE lists every configuration
  // entry after its base, so when none lies in (base, first index - 1], the base's is in force.
  void learn_first_index_conf_from_records();
  // Tells the core the configuration in force at the log's first index - 1 when this node can
  // describe its whole state there (first_index_topics_ and first_index_conf_), else that it does
  // not know it: after every change of either (raft::Raft::set_trim_point_conf).
  void tell_core_trim_point_conf();
  // The follower's Ready step 0: crash-safe, in the order docs/raft.md gives.
  void install_snapshot(const raft::Snapshot& snapshot);
  // The install's log line, with SnapshotStats::last_install.
  void log_install_times(std::uint64_t point) const;
  // At open, before the dedup rebuild: loads SNAPSHOT (or SNAPSHOT.next) when it names the log's
  // first index - 1, and completes an install a crash cut after its log reset (CONFSTATE,
  // TOPICSTATE); refuses (false, *problem) when one does not read and the state is not provably
  // complete without it.
  bool load_snapshot_state(std::string* problem);
  // At open, first: a trim that a power cut (or a store error) stopped part-way through its
  // segment deletions leaves the log starting between SNAPSHOT's point + 1 and the point + 1 its
  // SNAPSHOT.next names, a start no saved topic table describes. When the file is such a trim's
  // and every check of cut_trim_mismatch() holds, the deletion is finished (the log then starts
  // where the file says, and load_snapshot_state promotes it); anything else is logged and left
  // as it is. False (*problem) only when the deletion itself fails (the store then has failed).
  bool finish_cut_trim(std::string* problem);
  // "" when the trim `planned` (a SNAPSHOT.next of origin kTrim whose point the log holds) may be
  // finished; else why not.
  std::string cut_trim_mismatch(const SnapshotData& planned) const;
  // At open, when no readable snapshot file describes the log's start but one does not read: whether
  // the node's state is provably whole without it (else the open is refused).
  bool complete_without_snapshot() const;

  // Retention (replica_retention.cpp).
  std::uint64_t trim_limit() const;
  // A leader's appends and heartbeats carry its retention hold (retention_hold.h).
  void stamp_retention_hold(std::vector<raft::Message>& messages) const;
  // What this node, as leader, keeps for a peer that has not answered it yet: the last leader's
  // hold while within its grace period (leader_retention_hold's unheard_hold).
  std::uint64_t inherited_retention_hold() const;

  // Disk-aware leadership (replica_disk_handover.cpp): a leader whose disk passed the high watermark
  // refuses appends; if a follower it heard from lately has room, it hands leadership to it, at most
  // once per kDiskHandoverInterval (so disks that all fill cannot make leadership bounce).
  void hand_over_leadership_for_disk(Clock::time_point now);
  std::uint64_t choose_disk_handover_target() const;  // kNoNode: no follower has room
  // How long a leader past its high watermark with a follower that has room still waits out the
  // bound between handovers (kDiskHandoverInterval) before handing leadership on; 0 otherwise.
  std::uint64_t disk_handover_wait_ms(Clock::time_point now) const;

  ReplicaConfig config_;
  ReplicaDeps deps_;
  // On deps_.clock (declared after it). The slow round's log line: rate-limited on the same clock.
  RoundProfile round_{&deps_.clock};
  // The slow-round log's window (end_round): opened by a slow round logged at once; the later
  // slow rounds within kSlowRoundLogInterval are counted and the longest one's line kept, logged
  // when the window closes (at the first round after it, or at close()).
  struct SlowRoundWindow {
    Clock::time_point opened;
    std::uint64_t later_rounds = 0;
    Clock::duration longest{};
    std::string longest_line;
  };
  std::optional<SlowRoundWindow> slow_window_;
  void log_slow_round_window();
  std::unique_ptr<store::CommitLog> log_;
  std::unique_ptr<HardStateFile> hard_state_file_;
  std::unique_ptr<ConfStateFile> conf_state_file_;
  bool conf_record_missing_at_open_ = false;  // CONFSTATE held no record when the open read it
  // What CONFSTATE lists (conf_state_file.h): the base configuration (committed and flushed) and
  // every later configuration entry of the log, at most 1 + kMaxPendingRecords; recovered at open
  // (the core starts with it) and kept by persist_conf().
  std::vector<raft::ConfRecord> conf_records_;
  // Configuration entries of received appends that the core took since the last Ready: not in the
  // store yet, so persist_conf's flush cannot settle them. step() drains them (process()) before
  // another append with configuration entries, so one Ready never carries more than
  // hold_back_config_entries() allowed for a single append.
  std::size_t conf_entries_since_ready_ = 0;
  std::unique_ptr<StoreLogReader> reader_;
  std::unique_ptr<raft::Raft> raft_;
  raft::HardState persisted_hard_state_;
  bool failed_ = false;
  std::string failure_;
  bool closed_ = false;
  bool opened_ = false;  // open() completed: close() may save what the node holds
  std::uint64_t commit_ = 0;

  SnapshotStats snapshot_stats_;
  // The last snapshot data this leader encoded, reused while valid (snapshot_encoding.h).
  SnapshotEncoding snapshot_encoding_;
  // A leader's snapshot send (replica_snapshot_send.cpp). The point and what the encoding's key
  // needs, computed before anything is gathered; nullopt (logged) when it cannot be sent.
  struct SnapshotPlan {
    SnapshotKey key;
    std::uint64_t first_index = 0;  // the leader's, when planned
    std::uint64_t core_point = 0;   // the index the core named
  };
  std::optional<SnapshotPlan> plan_snapshot(const raft::Message& message);
  // The one snapshot being gathered (slice by slice, each process()) or encoded off the loop, and
  // the kSnapshot messages that wait for it: at most one per follower, all of its key. Dropped
  // (abandon_outgoing_snapshot) when a trim, an install or a loss of leadership overtakes it.
  struct OutgoingSnapshot {
    std::uint64_t generation = 0;  // a late `done` of an abandoned encoding is ignored
    SnapshotPlan plan;
    raft::Term leader_term = 0;
    SnapshotData data;                      // handed to the encoding job when gathered
    std::vector<std::uint64_t> client_ids;  // the dedup table's, most recently used first
    std::size_t next_client = 0;
    std::size_t fixed_size = 0;    // the encoding's bytes without the dedup clients
    std::size_t client_bytes = 0;  // the gathered clients' records (encoded_client_size)
    bool gathered = false;  // waits for the previous job's `done` before its own is handed off
    bool encoding = false;
    // Set when abandoned: a job not started yet skips the encoding (its result is ignored anyway).
    std::shared_ptr<std::atomic<bool>> cancelled = std::make_shared<std::atomic<bool>>(false);
    bool without_section = false;
    std::size_t dedup_clients = 0;  // for the send's log line, once the data went to the job
    std::size_t topics = 0;
    std::map<std::uint64_t, raft::Message> waiting;  // by follower
  };
  std::optional<OutgoingSnapshot> outgoing_snapshot_;
  std::uint64_t outgoing_generation_ = 0;
  // Jobs handed to deps_.off_loop whose `done` has not run: at most 1 (an abandoned one included).
  std::size_t off_loop_outstanding_ = 0;
  // Expires with the replica: an executor's `done` that runs after it is gone does nothing.
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
  // Hands `job` off the loop (inline without deps_.off_loop), then runs `done` on the loop while
  // the replica lives, and after it start_waiting_off_loop_work() (replica_off_loop.cpp). Counted
  // in off_loop_outstanding_ until `done` ran. False: the executor refused; neither will run.
  bool hand_off(std::function<void()> job, std::function<void()> done);
  // After every job's `done`: the work that waited for the executor starts.
  void start_waiting_off_loop_work();
  // The durable file write out off the loop (off_loop_write.h, replica_off_loop_write.cpp).
  std::optional<PendingWrite> pending_write_;
  // Hands `write` off (inline without an executor, or when it refuses: then `done` has run on
  // return); `pending` becomes pending_write_ until its outcome is published.
  void hand_off_write(PendingWrite pending, std::function<store::Status()> write);
  void finish_pending_write(const std::shared_ptr<OffLoopWrite>& write);  // its `done`
  // An install or a stop: the pending write dropped (not started) or waited for, and published.
  void settle_pending_write();
  // `outcome` nullopt: dropped unwritten.
  void publish_write(const PendingWrite& pending, const std::optional<store::Status>& outcome);
  // TOPICSTATE as of topic_state_point(), written off the loop from a copy of the table; false
  // (nothing started) while another write is out. The through index of the save in
  // pending_write_. `for_trim`: a trim waits for it.
  bool start_topic_state_save(bool for_trim = false);
  // The same with the state to save given (moved in: no copy on the loop), for the install.
  bool start_topic_state_save(TopicState state, bool for_trim);
  // Sends the snapshot at once with the kept encoding (true), or keeps it waiting for an encoding,
  // or drops it (false: `message` was moved from, or is to be dropped).
  bool send_or_hold_snapshot(raft::Message& message);
  void start_outgoing_snapshot(raft::Message& message, const SnapshotPlan& plan,
                               std::optional<std::string> section);
  // One slice of the gather (all of it without an executor), then the encoding when done.
  void continue_snapshot_gather();
  void start_snapshot_encoding();
  void finish_snapshot_encoding(std::uint64_t generation, SnapshotEncoding::Encoded encoded,
                                std::chrono::microseconds took);
  void abandon_outgoing_snapshot(const char* why);
  // Counts and logs a snapshot that leaves with its data.
  void note_snapshot_sent(const raft::Message& message, const SnapshotPlan& plan,
                          std::size_t dedup_clients, std::size_t topics);
  // Leader: each tick, the transport's progress with the snapshot in flight to a peer restarts its
  // retry timer (replica_requests.cpp); what it reported last, per such peer.
  void report_snapshot_progress();
  std::map<std::uint64_t, MessageSender::SnapshotSendMark> snapshot_send_marks_;
  // load_snapshot_state(): the installed snapshot the open's dedup rebuild starts from.
  std::optional<SnapshotData> loaded_snapshot_;
  // The topic table as of the log's first index - 1, what a snapshot at that point carries
  // (replica_snapshot.cpp, "THE SNAPSHOT POINT"): empty for a log that starts at 1, the installed
  // snapshot's, then advanced by every trim over the entries it deletes and kept in SNAPSHOT
  // (version 2). nullopt: not known (a log trimmed by an older binary, SNAPSHOT lost or not naming
  // the log's start, a trim that could not read its entries); snapshots then fall back to the topic
  // table's committed point. At most TopicOffsets::kMaxTopics topics.
  std::optional<std::vector<TopicOffsets::TopicNext>> first_index_topics_;
  // The running max of the entries' stamps as of the same index, beside first_index_topics_ (the
  // same scan reads it; nullopt whenever that is): 0 for a log that starts at 1, the installed
  // snapshot's when its data carried it (framed version 6), then raised by every trim over the
  // entries it deletes and kept in SNAPSHOT (version 5), which the derived indexes seed their time
  // lookups with, and sent in a snapshot at the first index - 1 (version 6). nullopt: not known (a
  // trim SNAPSHOT of an older version, an installed snapshot of versions 1..4, or the table not
  // known); the trims after it then carry the largest stamp they passed, a lower bound
  // (docs/storage-format.md, "Snapshot data and SNAPSHOT"), known from then on as those files say.
  std::optional<std::uint64_t> first_index_stamp_;
  // The configuration in force at the log's first index - 1, kept like first_index_topics_ (the
  // bootstrap one for a log that starts at 1, the installed snapshot's, then the newest kConfig
  // entry among those every trim deletes, read by the same scan, and kept in SNAPSHOT, version 3).
  // The core keeps only the newest committed configuration; with this one a leader's snapshot is
  // at its first index - 1 even when a configuration committed above it. nullopt: not known (as
  // first_index_topics_, or a trim SNAPSHOT of an older version). One configuration: bounded.
  std::optional<raft::ConfState> first_index_conf_;
  util::RateLimit snapshot_log_{std::chrono::seconds(10)};
  DedupTable dedup_;
  std::uint64_t dedup_recorded_through_ = 0;  // highest log index recorded in dedup_
  // This node's own proposals (index range and term) recorded in dedup_ and topics_ when proposed,
  // whose entries the core has not handed out to the store yet. The core can replace such entries
  // with another leader's (a step in the same input batch) without a store truncation, because the
  // store never held them; forget_replaced_proposals() then undoes their records. Oldest first; at
  // most one range per pending append (config_.max_pending_appends), popped once handed out.
  std::deque<DedupTable::Range> unwritten_proposals_;
  // The newest envelope timestamp of the log (TOPICSTATE and the entries after it at open, then
  // every entry written), each bounded by kMaxTimestampSkewMs, in ms since the Unix epoch.
  std::uint64_t last_timestamp_ms_ = 0;
  TopicOffsets topics_;
  std::uint64_t topic_state_saved_through_ = 0;  // TOPICSTATE's through_index as last written
  // A failed periodic save is tried again once the commit index reaches this (a separate throttle:
  // topic_state_saved_through_ moves only on a successful write, trim() relies on it).
  std::uint64_t topic_state_retry_at_ = 0;
  util::RateLimit untracked_topic_log_{std::chrono::seconds(60)};
  std::multimap<std::uint64_t, PendingAppend> pending_appends_;  // by last index
  std::map<std::uint64_t, PendingRead> pending_reads_;           // by read request id
  // By entry index. The core accepts one change at a time per leader, so this holds at most one entry
  // per leadership this node held while changes were pending: all fail when leadership is lost.
  std::map<std::uint64_t, PendingMembership> pending_memberships_;
  // address_book()'s cache and the configuration history it was built from (size, oldest index,
  // newest index and term: any append, cut or commit of a configuration changes one of them).
  mutable std::array<std::uint64_t, 4> address_book_key_{};
  mutable bool address_book_valid_ = false;
  // retired_ids()'s cache and what it was computed from: CONFSTATE's generation, the core's oldest
  // record (index and term) and how many of conf_records_ are committed.
  mutable std::vector<raft::NodeId> retired_ids_;
  mutable std::array<std::uint64_t, 6> retired_ids_key_{};
  mutable bool retired_ids_valid_ = false;
  mutable std::map<std::uint64_t, std::string> address_book_;
  std::multimap<std::uint64_t, PendingRead> reads_awaiting_commit_;  // by read index
  std::uint64_t next_read_id_ = 1;
  std::deque<HeldMessages> held_messages_;
  std::uint64_t reported_durable_ = 0;  // highest index reported to the core via on_persisted
  std::optional<TransferRequest> pending_transfer_;
  Clock::time_point transfer_deadline_{};
  raft::SoftState soft_state_;
  std::string storage_fault_;      // why recovery started this node catching up ("" = it did not)
  bool unvouched_marker_ = false;  // DATA_DIR/UNVOUCHED exists (unvouched_marker.h)
  const char* unvouched_cause_ = kUnvouchedReason;  // node_status.h's sentence for what open found
  const char* unvouched_reason() const { return unvouched_cause_; }
  // NodeStatus::unvouched_hint: "" unless the node has been unvouched without a leader for long.
  void note_catch_up_for_unvouched_hint();  // every process() round
  std::string unvouched_hint() const;
  std::pair<raft::Term, raft::Index> recorded_vouching_{};  // the leader's word UNVOUCHED holds
  util::RateLimit unvouched_removal_log_{std::chrono::seconds(60)};
  bool not_founder_recorded_ = false;  // DATA_DIR/NOT_FOUNDER exists (not_founder_marker.h)
  util::RateLimit not_founder_log_{std::chrono::seconds(60)};
  std::optional<raft::RemovedWord> recorded_removed_word_;  // what DATA_DIR/REMOVED holds
  util::RateLimit removed_word_log_{std::chrono::seconds(60)};
  AlarmWindow committed_conflict_alarm_;  // raft::CommittedConflict::count (status, health, log)
  AlarmWindow second_leader_alarm_;       // raft::Raft::second_leader().count (status, health, log)
  AlarmWindow leadership_refused_alarm_;  // raft::Raft::leadership_refused().count (status, log)
  // The last round (process()) that found this node vouched or its catch-up moving
  // (raft::Raft::catch_up_moves: term, leader, the leader's word, log or commit changed), or its
  // first: how long an unvouched node has waited with nothing moving (NodeStatus::unvouched_hint).
  // Not "no leader known": a heartbeat queued before the node lost its log, delivered after its
  // restart, names a leader it then keeps (a node that may not campaign never forgets its leader).
  std::optional<Clock::time_point> unvouched_still_since_;
  std::uint64_t unvouched_moves_seen_ = 0;  // catch_up_moves() as of unvouched_still_since_
  // The last (pre-)vote request of a candidate with entries while unvouched: the hint is given only
  // while such candidates keep asking (review of bootstrap5, M4: a joiner waiting for `members add`
  // or a founder whose peers had not started was sent to --unvouched-may-elect).
  std::optional<Clock::time_point> candidate_with_entries_at_;
  util::RateLimit may_elect_override_log_{std::chrono::seconds(30)};
  // Before the core judges a (pre-)vote request: notes a candidate with entries for the hint, and
  // says loudly when --unvouched-may-elect makes the node grant a candidate whose log lacks what a
  // leader told it was committed (review of bootstrap5, M3).
  void note_vote_request_while_unvouched(const raft::Message& message);

  DiskWatermark disk_;
  static constexpr std::chrono::seconds kDiskHandoverInterval{10};
  Clock::time_point next_disk_handover_{};
  util::RateLimit no_disk_handover_log_{std::chrono::seconds(60)};
  Clock::time_point retention_checked_at_{};
  std::atomic<std::uint64_t> retention_hold_{0};  // hold_log_from()
  FollowerRetentionHold leader_hold_;  // the leader's, from its appends and heartbeats (trim_limit)
  // Readiness of a follower far behind its leader (catch_up_rule.h): observed after every message
  // and tick, so that no passage through "no leader" or through gap 0 falls between two status()
  // calls; logs its changes.
  CatchUpRule catch_up_{config_.serving_lag_entries};
  void observe_catch_up();
  // A learner's core keeps its leader for ever (it never campaigns): cut off, it read as SERVING
  // with a frozen log (review of lagging6, #1). Ticks since its leader's last append or heartbeat;
  // past twice the election timeout, status and the rule take it for a node without a leader.
  std::uint64_t ticks_without_leader_message_ = 0;
  bool leader_silent() const;
  std::set<std::uint64_t> peers_behind_first_index_;  // warned about once per episode each
  // A follower whose progress flaps across the first index would start an episode per probe: its
  // "cannot catch up" line is printed at most once per kBehindFirstIndexLogInterval.
  static constexpr std::chrono::minutes kBehindFirstIndexLogInterval{5};
  std::map<std::uint64_t, util::RateLimit> behind_first_index_log_;
};

}  // namespace raftlog::replica

// Dispatcher: advances the node's derived indexes (src/derived/derived_indexes.h) from its
// committed log, on a thread of its own, off the append path (docs/design.md, "Topics, keys and
// time"). No gRPC.
//
// It reads committed entries in log order through Node::read_committed (never past the commit
// index), at most kBatchEntries / kBatchBytes per read, applies them, and persists the indexes
// (records, then cursor) at most every kPersistIntervalMs when records were added, at most every
// kCursorOnlyPersistMs when only the cursor moved (plain entries: no records), and at stop(). A
// persist is sliced (NodeConfig::derived_persist_slice_ms): its records are captured in memory
// when it begins, then its writes (one segment file each: a new topic's file created) and its syncs
// (one per topic file written: thousands with thousands of topics) run at most a slice at a
// time, and the entries committed meanwhile are applied between two slices; its cursor, written
// after the last sync, covers what was applied when it began. Its
// cursor says how far the indexes are built; it proves nothing about the log's durability, and it
// is no consumer's offset. The node serves while the indexes catch up; lag() says by how much.
// Retention: when the log's first index moves, whole index segments below it are dropped by the
// next persist (sliced as any other: DerivedIndexes::retain_from); entries retention removed
// before they were indexed are skipped (logged), never waited for.
//
// It also applies the consumer group table (src/derived/group_table.h) from the same committed
// entries, with its own boundary, read position and file (derived/GROUPS): the table holds
// consumers' offsets, the cursor how far the indexes are built, and neither stands in for the
// other. When both are at the same boundary one read feeds both; when the indexes lag (a rebuild),
// the group table reads from its own boundary first, so Groups calls never wait for the indexes.
// The table is persisted when a slot changed (on the indexes' cadence: after a persist of the
// indexes, as the table stood when that persist began, so it never covers commits that name index
// records not yet durable), and when only its boundary
// moved at most every kGroupsBoundaryPersistMs, or sooner (every kPersistIntervalMs at most) once the boundary is
// kGroupsHoldLagEntries past the persisted one. After each persist the node's retention is held at
// the table's persisted boundary (Node::hold_log_from), so a commit entry is never trimmed before
// the table that applied it is durable.
#pragma once

#include <atomic>
#include <condition_variable>
#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "derived/derived_indexes.h"
#include "derived/group_table.h"
#include "replica/snapshot_data.h"
#include "server/dispatch_stats.h"
#include "server/node.h"

namespace raftlog::server {

class Dispatcher {
 public:
  static constexpr std::size_t kBatchEntries = 1024;
  static constexpr std::size_t kBatchBytes = 16U << 20;
  static constexpr std::uint32_t kPersistIntervalMs = 200;
  // A group table whose boundary alone moved (no slot changed) is rewritten at most this often...
  static constexpr std::uint32_t kGroupsBoundaryPersistMs = 10'000;
  // ... or once it applied this many entries past its persisted boundary (still at most every
  // kPersistIntervalMs): retention is held at the persisted boundary, so this bounds how far the
  // hold lags the applied index. 1: a boundary that moved is persisted at the next 200 ms persist,
  // as the indexes are, because a trim right after appends (Trim RPC, retention) is held at the
  // persisted boundary: 32 held a trim right after a burst of fewer entries for 10 s
  // (RetentionTest, the Python client's trim test). The cost: under any append load, one GROUPS
  // rewrite per 200 ms beside the indexes' own persist; an idle node writes nothing.
  static constexpr std::uint64_t kGroupsHoldLagEntries = 1;
  // Indexes whose cursor alone moved (the entries applied since the last persist were all plain:
  // no record to write) are persisted at most this often, not every kPersistIntervalMs: the
  // cursor's rewrite, rename and two fsyncs five times a second were 2-3 % of every node's CPU
  // under plain appends (docs/benchmarks.md, "Issue 17: the follower's remaining costs"). A
  // restart replays at most this much more of the log. When retention moves the log's start, a
  // cursor that moved is persisted at the kPersistIntervalMs cadence instead (so a restart seldom
  // finds it below the log's first index).
  static constexpr std::uint32_t kCursorOnlyPersistMs = 10'000;
  // stop() gives the indexes' last persist at most this long, counted from the stop request (a
  // periodic persist running then stops at its next record log): with thousands of new topic
  // queues a persist is thousands of fsyncs (15-40 s seen, outside test drills5 M3), past the
  // node's 3 s shutdown grace and systemd's stop timeout. What it did not write is replayed from
  // the log at the next start (DerivedIndexes::persist). The group table's persist is one file
  // and always runs: it holds retention.
  static constexpr std::uint32_t kStopPersistBoundMs = 1'000;

  // Opens data_dir/derived and checks it against the node's recovered log. nullptr with `problem`
  // when the directory cannot be used (the node then serves without topic and key queries).
  static std::unique_ptr<Dispatcher> open(Node* node, const NodeConfig& config,
                                          std::string* problem);
  ~Dispatcher();  // stop()
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  // When open() failed the node runs without a group table, and nothing would hold retention: it
  // could trim commits the table on disk has not applied, and a later start would forget every
  // offset. This holds retention at derived/GROUPS's boundary when the file decodes, else at the
  // log's first index (nothing more is trimmed), logs it, and returns the hold.
  static std::uint64_t hold_retention_without_table(Node* node, const NodeConfig& config);

  void start();
  // Persists what it applied and joins the thread; idempotent. Call before the node stops.
  void stop();

  // Snapshots (docs/raft.md, "Snapshots"): the consumer group table travels in the snapshot data's
  // node section, GROUPS' encoding (group_table.h), at most kMaxSnapshotGroupsBytes.
  static constexpr std::size_t kMaxSnapshotGroupsBytes = 1U << 20;
  // The leader's section as of at least `index`: the table when it applied past `index` and fits;
  // "" otherwise (the follower then marks every offset unknown, as after a trim). Any thread.
  std::string snapshot_section(std::uint64_t index) const;
  // "" when `section` is a table of this cluster that covers the log up to `index` at least.
  static std::string check_snapshot_section(std::string_view section, std::uint64_t index,
                                            const std::string& cluster_id);
  // This node installed a snapshot whose section is `section` (checked): the dispatcher's thread
  // replaces its table by it before its next read, and replay continues from the table's boundary
  // (commits at or below the snapshot's index are in the table already). Empty: nothing to adopt.
  // Any thread.
  void adopt_snapshot_section(const std::string& section);

  const derived::DerivedIndexes& indexes() const { return *indexes_; }
  const derived::OpenReport& open_report() const { return report_; }
  const derived::GroupTable& groups() const { return *groups_; }
  const derived::OpenReport& groups_open_report() const { return groups_report_; }
  // Block until the group table (the indexes) applied every entry up to and including `index`, the
  // deadline passes, dispatch failed or stop() ran. True when it has.
  bool wait_groups_applied(std::uint64_t index,
                           std::chrono::steady_clock::time_point deadline) const;
  bool wait_indexes_applied(std::uint64_t index,
                            std::chrono::steady_clock::time_point deadline) const;
  // Committed entries not yet indexed (commit index - (boundary - 1)).
  std::uint64_t lag() const;
  // Where the dispatcher's thread spent its time since start() (any thread).
  DispatchStats stats() const;
  // Set when a read or a write of the indexes failed: dispatch stopped (queries still answer what
  // was built; a restart rebuilds what is needed).
  std::string failure() const;

 private:
  Dispatcher(Node* node, std::unique_ptr<derived::DerivedIndexes> indexes,
             derived::OpenReport report, std::unique_ptr<derived::GroupTable> groups,
             derived::OpenReport groups_report);
  // The next index either consumer needs.
  std::uint64_t next_index() const;
  void set_failure(std::string failure);
  void run();
  bool dispatch_batch();  // true when it applied something
  // Reads committed entries from `from` into `batch`; false when there is nothing to read (or
  // after a trim it handled, or a failure it set), *skipped when retention removed `from`.
  bool read_batch(std::uint64_t from, std::vector<derived::SourceEntry>* batch, bool* skipped);
  void skip_trimmed(std::uint64_t from);
  // Replaces the group table by one adopt_snapshot_section() left; true when it did.
  bool adopt_pending_groups();
  // Replaces the group table by the one in the replica's SNAPSHOT when that names the log's first
  // index - 1 (an install whose hand-over the dispatcher has not seen yet, or one a restart came
  // before GROUPS was persisted) and reaches at least as far as the table; true when it did.
  bool adopt_installed_snapshot_groups(std::uint64_t first);
  // Replaces the group table by the leader's `state` (from a snapshot: `from` names where, for the
  // log line); it is persisted with the indexes' next records.
  void take_leaders_groups(derived::GroupTableState state, std::string_view from);
  // Hands the indexes the topic table as of `first` - 1 (DerivedIndexes::seed_topic_offsets) when
  // the replica's SNAPSHOT.next or SNAPSHOT holds it (an installed snapshot's, or a trim's that
  // knew it), so that version-1 entries after the log's start are numbered as on the leader.
  void seed_topics_from_snapshot(std::uint64_t first);
  // The saved snapshot (the files tried in `files`' order) that names the log's start (its index
  // is first - 1) and that `wanted` accepts; unreadable or absent files are skipped.
  std::optional<replica::SnapshotData> snapshot_naming_log_start(
      std::uint64_t first, std::initializer_list<replica::SnapshotFile> files,
      const std::function<bool(const replica::SnapshotData&)>& wanted) const;
  void persist();
  // True while a persist of the indexes may go on: until stop() is called for a periodic one, until
  // kStopPersistBoundMs after it for the last one.
  bool persist_may_go_on() const;
  // The indexes' persist (records and cursor) is due: at kPersistIntervalMs when records_dirty_,
  // at kCursorOnlyPersistMs when only the cursor moved, and always once stop_ is set.
  bool indexes_persist_due(std::chrono::steady_clock::time_point now) const;
  // Begins a persist of the indexes when none is pending, then runs its syncs for one slice
  // (persist_slice_ms_; 0 or `whole`: until the persist ends or persist_may_go_on() says stop).
  void persist_indexes(bool whole);
  // The pending persist's syncs, for one slice (persist_indexes).
  void continue_indexes_persist(bool whole);
  bool groups_persist_due(std::chrono::steady_clock::time_point now) const;
  // Persists `state` (GroupTable::state_for_persist) and holds retention at its boundary.
  void persist_groups(const derived::GroupTableState& state, std::uint64_t change_count,
                      std::chrono::steady_clock::time_point now);

  Node* node_;
  std::uint32_t persist_slice_ms_ = 0;  // NodeConfig::derived_persist_slice_ms
  std::unique_ptr<derived::DerivedIndexes> indexes_;
  derived::OpenReport report_;
  std::unique_ptr<derived::GroupTable> groups_;
  derived::OpenReport groups_report_;
  mutable std::mutex applied_mu_;
  mutable std::condition_variable applied_cv_;  // the group table applied more, or failure/stop
  std::atomic<bool> stop_{false};
  // Set by stop() before stop_: the steady-clock time (ns since its epoch) until which the last
  // persist of the indexes may run.
  std::atomic<std::int64_t> stop_persist_deadline_ns_{0};
  bool stopping_persist_ = false;  // the dispatcher thread is in its last persist (after run's loop)
  std::thread thread_;
  bool dirty_ = false;          // the indexes' cursor moved since they were last persisted
  bool records_dirty_ = false;  // ... and more than the cursor (records, a skip, an adoption)
  std::uint64_t trimmed_below_ = 0;
  std::chrono::steady_clock::time_point persisted_at_{};
  std::chrono::steady_clock::time_point indexes_persisted_at_{};
  // When the pending persist of the indexes began (it covers what was applied then).
  std::chrono::steady_clock::time_point indexes_persist_began_at_{};
  // The group table as the pending persist of the indexes began: persisted when that persist ends
  // (the table is never on disk ahead of the index records its commits can name).
  std::optional<std::pair<derived::GroupTableState, std::uint64_t>> groups_as_of_persist_;
  // stats(): written by the dispatcher's thread, read by any.
  std::atomic<std::uint64_t> persists_{0};
  std::atomic<std::uint64_t> persist_ns_{0};
  // The part of persist_ns_ spent in begins (capturing records; their writes are counted by
  // DerivedIndexes::persist_write_ns).
  std::atomic<std::uint64_t> persist_begin_ns_{0};
  std::atomic<std::uint64_t> apply_ns_{0};
  std::atomic<std::uint64_t> last_persist_ns_{0};
  std::chrono::steady_clock::time_point groups_persisted_at_{};
  mutable std::mutex failure_mu_;
  std::string failure_;
  std::string data_dir_;    // the node's, for SNAPSHOT
  store::Env* env_ = nullptr;  // the node's file layer (NodeConfig::store.env, else the disk)
  std::string cluster_id_;
  std::mutex adopt_mu_;
  std::optional<derived::GroupTableState> adopted_groups_;  // adopt_snapshot_section()
};

}  // namespace raftlog::server

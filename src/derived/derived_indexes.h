// DerivedIndexes: the indexes a node derives from its committed log (docs/design.md, "Topics, keys
// and time"): a ConsumeQueue per topic (offset -> log index; the offset is the one the leader
// wrote into the entry's envelope, dense per topic, or counted for a version-1 envelope), a key index
// (key hash -> log indexes) and a time index (timestamp -> first log index at or after it).
//
// One dispatcher (src/server/dispatcher.h) feeds it committed entries in log order, from
// boundary() on, and calls persist() now and then: records are made durable first, then the cursor
// that covers them (cursor.h). open() checks what is on disk against the recovered log:
//   - no cursor, a corrupt one, one of another log (cluster id, node id), or a record it vouches
//     for that is missing or bad: rebuilt from the log (everything cleared, dispatch from the log's
//     first index);
//   - a cursor ahead of the log, or whose boundary entry has another term in the log (its tail was
//     cut after the indexes saw it): rolled back to the last record the log still proves (by index
//     and term), and every record at or above that point is cut;
//   - behind the log: kept; the dispatcher replays forward from boundary().
// Queries take a `visible` bound (the node's commit index at that moment) and never return a
// record past it, whatever the cursor says. Thread-safe: one writer (the dispatcher), many readers
// (the locking is described at the members).
//
// Bounds: at most kMaxTopics topics (entries of further topics are not queued; counted in
// unqueued_entries()); memory is 32 bytes per queue, key and time record held (the records are
// mirrored in memory for queries), plus the key map (about 48 bytes per key record).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "derived/cursor.h"
#include "derived/record_log.h"
#include "store/env.h"

namespace raftlog::derived {

inline constexpr std::size_t kMaxTopics = 10000;
// The most topics seed_topic_offsets() keeps (the replica's topic table holds at most as many:
// replica/topic_offsets.h, TopicOffsets::kMaxTopics).
inline constexpr std::size_t kMaxSeededTopics = 100000;

// The log the indexes are checked against at open (the node's CommitLog).
class LogView {
 public:
  virtual ~LogView() = default;
  virtual std::uint64_t first_index() const = 0;  // the first retained index (last + 1 if empty)
  virtual std::uint64_t last_index() const = 0;
  virtual std::optional<std::uint64_t> term_at(std::uint64_t index) const = 0;
};

struct LogIdentity {
  std::string cluster_id;
  std::uint64_t node_id = 0;
};

// A committed entry as the dispatcher hands it over.
struct SourceEntry {
  std::uint64_t index = 0;
  std::uint64_t term = 0;
  bool has_envelope = false;
  std::string payload;  // read by the consumers only when has_envelope or is_group_commit
  bool is_group_commit = false;  // a consumer group's offset commit (group_table.h)
};

// A topic's next offset (its entries so far) as of some log index: one row of the replica's topic
// table, as an installed snapshot or a trim saved it (replica/snapshot_data.h).
struct TopicNextOffset {
  std::string topic;
  std::uint64_t next_offset = 0;
};

enum class OpenMode { kFresh, kResumed, kRolledBack, kRebuilt };
const char* to_string(OpenMode mode);

struct OpenReport {
  OpenMode mode = OpenMode::kFresh;
  std::string reason;           // why it was rolled back or rebuilt
  std::uint64_t boundary = 1;   // where dispatch resumes
  std::uint64_t cut_records = 0;  // records removed by a roll back
};

struct TopicInfo {
  std::string topic;
  std::uint64_t first_offset = 0;  // the first offset still readable (retention moves it)
  std::uint64_t end_offset = 0;    // one past the last visible offset
};

struct QueueRecord {
  std::uint64_t offset = 0;
  std::uint64_t index = 0;
  std::uint64_t timestamp_ms = 0;
};

enum class TopicReadStatus { kOk, kUnknownTopic, kTrimmed };

struct TopicRead {
  TopicReadStatus status = TopicReadStatus::kOk;
  std::vector<QueueRecord> records;
  std::uint64_t first_offset = 0;
  std::uint64_t end_offset = 0;
};

// The 64-bit FNV-1a hash of a key (what the key index stores; lookups compare the entry's keys).
std::uint64_t key_hash(std::string_view key);

class DerivedIndexes {
 public:
  // `dir` is the node's data_dir/derived. nullptr with `error` only when the directory cannot be
  // written at all (then the node serves without indexes).
  // `records_per_segment`: RecordLog's (tests choose small segments so that retention drops some).
  static std::unique_ptr<DerivedIndexes> open(store::Env* env, std::string dir,
                                              LogIdentity identity, const LogView& log,
                                              OpenReport* report, store::Status* error,
                                              std::uint64_t records_per_segment = kRecordsPerSegment);

  // The next log index to dispatch.
  std::uint64_t boundary() const;
  // Indexes `entries`, which must continue exactly at boundary() (checked: false and nothing done
  // otherwise). Not durable until persist().
  bool apply(const std::vector<SourceEntry>& entries);
  // Retention removed entries [boundary(), index) before they were indexed: dispatch resumes at
  // `index` and those entries stay unindexed (the next entry of each topic carries its offset, so
  // the queues continue at the offsets the other nodes use).
  void skip_to(std::uint64_t index);
  // The log starts at `first_log_index` after entries these indexes did not all see (an installed
  // snapshot, a trim past the cursor, a rebuild of a trimmed log), and `table` is the topic table
  // as of first_log_index - 1, the numbering the leader's continues from. Version-1 entries (no
  // offset in their envelope) are then numbered on from it instead of from this node's own count:
  // when boundary() == first_log_index (nothing after the start indexed yet) every queue in the
  // table continues at its offset there; a topic without a queue (none of its entries indexed
  // since the start) gets an empty one at its offset, so that it is known here as on a node that
  // indexed its trimmed entries (list_topics, read_topic, a group commit's check); when boundary()
  // is past first_log_index (a restart after such entries) only topics without a queue are
  // seeded. Nothing when boundary() is below it. Queues are created up to kMaxTopics; past that
  // at most kMaxSeededTopics rows are kept, in memory only (the dispatcher seeds again at every
  // open), and a topic starts at its row when its first entry comes. A queue's new start is
  // persisted with the next cursor. `stamp_before_ms`: the running max of the entries' stamps as of
  // first_log_index - 1 (SNAPSHOT's, 0 when none is known): kept for time lookups (find_by_time),
  // and when nothing after the start is indexed yet the entries from the start on carry it as their
  // running max, as on a node that indexed the trimmed entries. True when a queue was created, its
  // start moved or the running max rose (the cursor is then due).
  bool seed_topic_offsets(std::uint64_t first_log_index, const std::vector<TopicNextOffset>& table,
                          std::uint64_t stamp_before_ms = 0);
  // Makes every record durable, then the cursor that covers them. With `keep_going`, asked before
  // each record log is synced: once it answers false the persist stops there, before the cursor,
  // and returns OK with *finished false (true when it wrote the cursor). That leaves what a crash
  // inside a persist leaves (derived_crash_test): the cursor on disk is the previous one, which
  // vouches only for records already durable; what this persist wrote past it is outside it
  // (open() loads only the cursor's records and removes topic directories it does not name), so
  // the next start replays those entries from the log. A node's stop bounds its last persist so
  // (Dispatcher::kStopPersistBoundMs): with thousands of new topic queues it is one fdatasync per
  // file and one directory sync per new queue, which took 15-40 s (outside test drills5 M3).
  // A persist begun by begin_persist() (and not finished) is finished first; then one more
  // covers what was applied since it began.
  store::Status persist(const std::function<bool()>& keep_going = nullptr,
                        bool* finished = nullptr);
  // persist() in steps, for a caller that goes on applying between them (the dispatcher: with
  // thousands of topics a persist is thousands of fdatasyncs, seconds on a loaded disk, and
  // nothing was indexed meanwhile: outside test drills6 M2). begin_persist() encodes every record
  // applied so far for its file (memory only, 32 bytes a record: RecordLog::capture_pending) and
  // takes the cursor covering them; continue_persist() writes them, one segment file per step (a
  // new topic's directory and file created, grown and written: page cache, no sync), then runs the
  // syncs (one per file written, and directories), each step only while `keep_going` answers
  // true, and writes that cursor once all have run (*finished true). Until 2026-12-07 the begin
  // wrote every file at once: seconds with thousands of new topics, with dispatch waiting and a
  // stop's bound passed. apply(), skip_to(),
  // seed_topic_offsets() and retain_from() only change memory, so between the steps the files hold
  // what the pending cursor names, and a crash leaves what a crash inside persist() leaves: the
  // previous cursor. Segments retention released go from memory at the begin (before the cursor
  // is taken) and from disk after the cursor (retain_from). Nothing when a persist is pending
  // already (begin_persist) or none is (continue).
  // The first error of any step (a write, a sync, the cursor) fails the indexes for good: that and
  // every later persist, begin, continue and trim_below return an error and touch no file (a failed
  // fdatasync is never retried: the bytes it covered may be gone, and no cursor may vouch for
  // them). The cursor on disk stays the previous one; a restart replays the rest from the log.
  store::Status begin_persist();
  store::Status continue_persist(const std::function<bool()>& keep_going, bool* finished);
  bool persist_pending() const;
  // Syncs (files and directories, the cursor's two not counted) persists ran, since open.
  std::uint64_t persist_syncs() const { return persist_syncs_.load(); }
  // Time persists spent writing captured records to their files (continue_persist's write
  // steps), since open. Any thread.
  std::uint64_t persist_write_ns() const { return persist_write_ns_.load(); }
  // Retention: the log now starts at `first_log_index`. Memory only and cheap: the next persist's
  // begin forgets the whole record segments that point only below it (queries filter by the log's
  // first index meanwhile), that persist's cursor names the new first records, and their files
  // are unlinked once that cursor is durable, so no cursor on disk names a removed file and a
  // restart keeps the topics' offsets. The persist is one like any other, sliced by its caller (a
  // whole persist at every trim stalled dispatch with many busy topics: review of dispatch, M1).
  // True when a segment is due to go (a persist then has something to drop).
  bool retain_from(std::uint64_t first_log_index);
  // retain_from(), then a whole persist() when a segment is due to go (files unlinked on return).
  store::Status trim_below(std::uint64_t first_log_index);

  std::vector<TopicInfo> list_topics(std::uint64_t visible, std::uint64_t first_log_index) const;
  TopicRead read_topic(const std::string& topic, std::uint64_t from_offset, std::size_t max,
                       std::uint64_t visible, std::uint64_t first_log_index) const;
  // Log indexes of entries that carry a key with this hash (the caller checks the key itself),
  // oldest first, at most `max`, at least `first_log_index` and at most `visible`.
  std::vector<std::uint64_t> lookup_key(std::string_view key, std::size_t max,
                                        std::uint64_t visible, std::uint64_t first_log_index) const;
  // The answer the untrimmed log gives, clamped to the log's start (0: none yet, or past
  // `visible`): the first entry stamped at or after `timestamp_ms`, stamps taken as their running
  // max, and `first_log_index` itself when an entry before it reached the time (every retained
  // entry, plain ones too, was appended after that one). The same on every node, a rebuilt one
  // included, when the seed is exact (seed_topic_offsets; docs/design.md, "Time lookups after a
  // trim"). Reads the indexes only, never the log.
  std::uint64_t find_by_time(std::uint64_t timestamp_ms, std::uint64_t visible,
                             std::uint64_t first_log_index) const;
  // The first offset of `topic` whose timestamp is at or after `timestamp_ms` (its end offset if
  // none), never below its first offset at or above `first_log_index`; nullopt for an unknown topic.
  std::optional<std::uint64_t> find_topic_offset_by_time(const std::string& topic,
                                                         std::uint64_t timestamp_ms,
                                                         std::uint64_t visible,
                                                         std::uint64_t first_log_index) const;

  std::uint64_t unqueued_entries() const;
  std::uint64_t bad_envelopes() const;
  // Entries whose envelope's topic offset was not the next record of their queue (see
  // index_entry): counted, since apart from the first entry after a rebuild or a skip only
  // version-1 numbering that differed from the leader's produces them.
  std::uint64_t renumbered_entries() const;
  std::size_t topic_count() const;
  // Whether the indexes hold kMaxTopics queues: a topic they do not know may then have entries
  // they did not queue (a log whose leaders admitted more topics than a node indexes).
  bool topics_full() const { return topic_count() >= kMaxTopics; }

 private:
  DerivedIndexes(store::Env* env, std::string dir, LogIdentity identity,
                 std::uint64_t records_per_segment);
  bool load(const Cursor& cursor, std::string* problem);
  store::Status rebuild(const LogView& log);
  std::uint64_t roll_back(const LogView& log, std::uint64_t boundary);
  // The newest timestamp the records still hold (0 when none): the clamp after a roll back.
  std::uint64_t kept_timestamp_floor() const;
  RecordLog& queue_for(const std::string& topic);
  void index_entry(const SourceEntry& entry);
  Cursor cursor_locked() const;
  store::Status persist_locked(const std::function<bool()>& keep_going = nullptr,
                               bool* finished = nullptr);
  // Callers hold write_mu_ only (each takes mu_ shared where it reads records).
  store::Status begin_persist_locked();
  store::Status continue_persist_locked(const std::function<bool()>& keep_going, bool* finished);
  // The pending persist's write steps, while `keep_going` answers true (continue_persist_locked).
  store::Status write_captured_locked(const std::function<bool()>& keep_going);
  // Sets broken_ from the first error of a persist step and returns `error`.
  store::Status fail_for_good(store::Status error);
  // Whether a record log's first segment lies wholly below retain_from_ (write_mu_ held).
  bool retained_segment_due_locked() const;
  // Forgets those segments (write_mu_ and mu_ held exclusively; begin_persist_locked).
  void forget_retained_locked();

  store::Env* env_;
  std::string dir_;
  LogIdentity identity_;
  std::uint64_t records_per_segment_;
  // Locking: mu_ guards what queries read (the queues' records, the key map, the counters);
  // write_mu_ serializes the writer's operations (apply, skip_to, seed_topic_offsets, persist and
  // its steps, retain_from, trim_below), which alone touch the files, the records and the record
  // logs' write positions, so holding write_mu_ is enough to read them. A persist captures its
  // records under a shared lock of mu_, and writes and syncs under none (the writes touch only the
  // record logs' files, never their records; queries go on meanwhile: a persist of thousands of
  // new topic files takes seconds on a loaded disk); only what changes records takes it
  // exclusively.
  mutable std::shared_mutex mu_;
  mutable std::mutex write_mu_;
  // Read without mu_ by boundary() (Status, lag and metrics must not wait behind a batch).
  std::atomic<std::uint64_t> boundary_{1};
  std::uint64_t boundary_term_ = 0;
  std::uint64_t last_timestamp_ms_ = 0;
  // The largest running max seed_topic_offsets() was given (0: none): as of an index below the
  // log's start, so a time it reaches was reached before the start (find_by_time).
  std::uint64_t seeded_stamp_ms_ = 0;
  std::map<std::string, std::unique_ptr<RecordLog>> queues_;
  std::unique_ptr<RecordLog> keys_;
  std::unique_ptr<RecordLog> time_;
  std::unordered_multimap<std::uint64_t, std::uint64_t> key_map_;  // hash -> log index
  std::uint64_t unqueued_entries_ = 0;
  std::uint64_t bad_envelopes_ = 0;
  std::uint64_t renumbered_entries_ = 0;
  // The persist begun and not finished (begin_persist): its syncs, the next one to run, and the
  // cursor written once they all ran. Guarded by write_mu_.
  bool persist_pending_ = false;
  // Its records as captured by the begin (one entry per record log, a chunk per segment file),
  // the next chunk to write, and whether a write so far created a topic's directory (topics/ is
  // then synced after the last write).
  struct PendingWrite {
    RecordLog* log = nullptr;  // queues are never removed while a persist is pending
    RecordLog::Captured captured;
    bool had_dir = false;  // the log's directory existed before its first chunk was written
  };
  std::vector<PendingWrite> pending_writes_;
  std::size_t next_write_ = 0;
  std::size_t next_chunk_ = 0;  // of pending_writes_[next_write_]
  bool pending_new_queue_dir_ = false;
  std::vector<SyncStep> pending_steps_;
  std::size_t next_step_ = 0;
  Cursor pending_cursor_;
  // Set by the first failed write or sync of a persist or trim, for good: every later persist,
  // continue or trim returns it without writing, syncing or writing a cursor (fail_for_good).
  // Guarded by write_mu_.
  store::Status broken_;
  // retain_from(): the log's first index; segments wholly below it go at the next persist's begin.
  // Guarded by write_mu_.
  std::uint64_t retain_from_ = 0;
  std::atomic<std::uint64_t> persist_syncs_{0};
  std::atomic<std::uint64_t> persist_write_ns_{0};
  // seed_topic_offsets(): where a topic without a queue starts when its first entry comes.
  std::unordered_map<std::string, std::uint64_t> seeded_next_;
};

}  // namespace raftlog::derived

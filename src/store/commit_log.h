// CommitLog: the segmented, memory-mapped, checksummed log that is raftlog's single source of truth.
// It knows nothing of Raft; the Raft node stores its log entries here.
//
// On disk (one directory; exact byte layouts in docs/storage-format.md):
//   <20-digit base index>.seg   data segment: header (base index, term of base-1) + entries
//   <20-digit base index>.idx   index for that segment: fixed-width records, derived data
//   prealloc-<n>.seg            next segment, created ahead of time, renamed when activated
//   CHECKPOINT                  two-slot durable record: flushed position, commit index, truncation intent
//   ABORT                       abort marker: exists while the log is open
//
// THREADING CONTRACT
//   - append()/append_no_wait()/truncate_suffix()/truncate_prefix() may be called from any threads;
//     they are serialized by one writer mutex (the Raft node uses a single writer thread; the
//     benchmark uses many concurrent appenders, whose sync-mode flushes are group-committed).
//   - read()/term_at()/first_index()/last_index()/written_index()/flushed_index()/stats() may be
//     called concurrently with each other and with writers from any number of threads.
//   - A background flusher thread makes writes durable and calls the flush listener; a waker thread
//     wakes wait_flushed() callers after a flush when many wait (flush_waiters.h); a background
//     allocator thread creates the next segment. All stop in close(). (Stepped mode has none of
//     them; see STEPPED MODE.)
//   - EntryViews returned by read() point into mapped segment memory and stay valid while their
//     ReadBatch lives, even if truncate_prefix() deletes the segment. truncate_suffix(i) zeroes the
//     bytes of entries >= i, so a view of such an entry must not be used after that call (the Raft
//     layer never reads entries it is about to truncate; copy if unsure).
//   - close() must not race with other calls (the owner stops its threads first).
//
// STEPPED MODE (Options::background_work = BackgroundWork::kStepped: the replica in the simulator)
//   open() starts no thread: no flusher, no waker, no allocator. The log changes only inside the
//   calls its owner makes, so the same calls give the same files, flushed indexes and listener calls.
//   - Nothing written becomes durable until the owner asks: run_flush_cycle() (or flush(), the same
//     step) runs one flush cycle on the caller's thread and then calls the flush listener there. As
//     with threads, close() and truncate_prefix() flush what was written first, and recovery
//     flushes what it kept.
//   - The periodic checkpoint is the owner's step too: run_checkpoint() (checkpoint_interval_ms has
//     no effect). set_commit_index(c, true), truncations, recovery and close() write it as with
//     threads.
//   - A roll to a new segment creates that segment inline (preallocate_next_segment has no effect).
//   - Nothing waits for durability, since no other thread would ever provide it: append() in sync
//     flush mode is refused with kFailedPrecondition (nothing written; use append_no_wait() and
//     run_flush_cycle()), and so is wait_flushed() for an index not flushed yet. An append never
//     flushes by itself: every durability point is a step the owner took.
//   - The methods stay thread-safe as above; run_flush_cycle() calls are serialized, listener
//     call included.
//   run_flush_cycle() and run_checkpoint() are refused (kFailedPrecondition) with the log's own
//   threads, which take those steps themselves.
//
// DURABILITY
//   written_index(): last entry written to the mapping (visible to readers, not yet crash-safe).
//   flushed_index(): last entry known durable; higher layers make durability decisions on it.
//   A sync-mode append() returns after flushed_index() >= its last index.
//
// CRASH CASES (what recovery sees after a crash or power loss at any point)
//   1. Mid-append: the tail after the flushed point may be missing, torn at any byte, zero-filled or
//      contain flipped bits (unflushed pages). Recovery scans from the checkpoint, validates each
//      entry (magic, version, CRC32C, index continuity, neither term nor generation decreasing) and
//      truncates at the first invalid one: the invalid run there is zeroed and later segments are
//      deleted. Bytes further on (unflushed sectors that survived past a lost one) are left alone:
//      every open() writes a higher generation and an end marker after each entry, so they can never
//      be read as a continuation (see entry_format.h). Recovery cost is thus independent of the
//      (preallocated) segment size.
//   2. Mid-roll: the new segment may be missing (its rename was not durable), may hold entries while
//      the previous segment's tail was lost, or may have a torn header. Segments whose header is
//      invalid or whose base index does not continue the previous segment are deleted, if they lie
//      after the flushed point.
//   3. Mid-truncate_suffix(i): the truncation intent (i) is written to the checkpoint durably BEFORE
//      any byte is changed. Recovery finding an intent completes the truncation (idempotent), so the
//      result is "after". A crash before the intent is durable leaves everything "before".
//   4. Mid-truncate_prefix: whole segments are unlinked oldest first; a crash leaves a prefix of them
//      deleted, which is a valid (shorter) log. The first remaining segment's header keeps the term
//      of the entry before it, so term_at(first_index() - 1) stays known.
//   5. Mid-checkpoint: two alternating slots; a torn slot fails its CRC and the other one is used.
//   6. Index files are derived: missing, short, torn or inconsistent index files are rebuilt from
//      the segment they describe (before the flushed point any bad entry then is kCorruption).
//   7. Mid-reset(first, prev_term): the reset intent (first, prev_term) is written to the checkpoint
//      durably BEFORE any file is changed; then the old segments are renamed aside (discard-*) and
//      the new empty one is created, flushed and the directory synced; then the intent is cleared.
//      Recovery finding an intent removes every segment and creates the new one again (idempotent),
//      so the result is "after"; a crash before the intent is durable (a torn checkpoint slot falls
//      back to the other) leaves everything "before". The discard-* files are unlinked later
//      by the flusher, one segment's files a wake-up, off the caller's thread; recovery removes any it finds without reading
//      them: after the intent, whatever they held is replaced.
//   Corruption found before the checkpointed flushed point makes open() fail with kCorruption naming
//   file and offset, unless Options::allow_truncate_corrupted_flushed_data is set.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "store/env.h"
#include "store/options.h"
#include "store/status.h"

namespace raftlog::store {

// Same numeric values as raft::EntryType; the store stores the byte and does not interpret it.
enum class EntryType : std::uint8_t {
  kNormal = 0,
  kNoop = 1,
  kConfig = 2,
};

// The fixed fields of an entry.
struct EntryMeta {
  std::uint64_t index = 0;
  std::uint64_t term = 0;
  EntryType type = EntryType::kNormal;
  std::uint16_t flags = 0;      // opaque to the store
  std::uint64_t client_id = 0;  // idempotent appends; 0/0 = none. Opaque to the store.
  std::uint64_t sequence = 0;
  friend bool operator==(const EntryMeta&, const EntryMeta&) = default;
};

// An entry handed to append(). The payload is copied into the log during the call.
struct EntryToAppend {
  EntryMeta meta;
  std::string_view payload;
};

// An entry read from the log. `payload` points into mapped segment memory (no copy); it is valid
// while the ReadBatch that returned it lives (see the threading contract above).
struct EntryView {
  EntryMeta meta;
  std::string_view payload;
};

struct ReadBatch {
  std::vector<EntryView> entries;
  // Keeps the segment mappings the views point into alive. Opaque.
  std::vector<std::shared_ptr<const void>> pins;
};

struct IndexRange {
  std::uint64_t first = 0;  // inclusive
  std::uint64_t last = 0;   // inclusive
};

enum class RecoveryMode : std::uint8_t {
  kFresh = 0,     // the directory held no log
  kNormal = 1,    // clean shutdown: checkpoint trusted, only what lies after it validated
  kAbnormal = 2,  // abort marker present: every entry from the checkpoint on re-validated
};
const char* to_string(RecoveryMode mode);

struct RecoveryReport {
  RecoveryMode mode = RecoveryMode::kFresh;
  std::uint64_t checkpoint_flushed_index = 0;  // flushed index found in the checkpoint (0 = none)
  std::uint64_t bytes_scanned = 0;             // entry bytes whose CRC was verified
  std::uint64_t entries_scanned = 0;
  std::uint64_t entries_dropped = 0;  // valid-looking entries discarded (after a gap / bad entry)
  std::uint64_t bytes_truncated = 0;  // non-zero tail bytes zeroed
  std::uint64_t segments_removed =
      0;  // segments deleted (invalid header, discontinuous, after a cut)
  std::uint64_t index_files_rebuilt = 0;
  bool truncation_intent_completed = false;       // a crashed truncate_suffix was finished
  bool reset_intent_completed = false;            // a crashed reset() was finished
  bool corrupted_flushed_data_truncated = false;  // only with allow_truncate_corrupted_flushed_data
  // Highest index of any valid entry recovery saw, including entries it then dropped (after a bad
  // entry, in removed segments): what the log may have held, hence acknowledged, before the crash.
  std::uint64_t highest_index_seen = 0;
  // Valid entries found (through their index records) after the entry where a scan cut the log. A
  // process crash tears at most the entry being written, so these mean corruption rather than a torn
  // tail (a power cut can tear pages out of order, which looks the same for unsynced data).
  std::uint64_t valid_entries_after_cut = 0;
  std::uint64_t suspect_index = 0;  // the suspect marker recovery found and checked (0 = none)
  std::uint64_t first_index = 0;    // after recovery
  std::uint64_t last_index = 0;
  std::chrono::microseconds duration{0};
  std::string to_string() const;  // one line, for logs and tools
};

struct FlushStats {
  std::uint64_t flushes = 0;          // flush cycles that made new entries durable (group commits)
  std::uint64_t sync_calls = 0;       // msync/fdatasync/fsync-dir calls issued by flushes
  std::uint64_t entries_flushed = 0;  // entries made durable by those cycles
  std::uint64_t bytes_flushed = 0;    // entry bytes made durable
  std::uint64_t checkpoints_written = 0;
  std::uint64_t segments_created = 0;
  std::uint64_t sync_duration_us = 0;  // wall time the flush cycles spent in their sync calls
  std::uint64_t grouped_appends = 0;   // sync appends of auto-indexed batches (append group)
  std::uint64_t group_writes = 0;      // append calls that wrote them (each one pwrite per run)
  double entries_per_flush() const {
    return flushes == 0 ? 0.0 : static_cast<double>(entries_flushed) / static_cast<double>(flushes);
  }
};

class CommitLog {
 public:
  // Called by the flusher thread (stepped mode: by run_flush_cycle() on its caller's thread), holding
  // no store lock, with the new flushed index after flushes that advanced it (successive calls see
  // increasing values, except after truncate_suffix lowered the flushed index). Must be quick (it
  // delays the next flush); it may call CommitLog methods except set_flush_listener(), close(),
  // flush() and run_flush_cycle().
  using FlushListener = std::function<void(std::uint64_t flushed_index)>;

  // What one flush cycle did, for metrics (fsync latency, group-commit batch size).
  struct FlushCycle {
    std::uint64_t entries = 0;                   // entries this cycle made durable
    std::uint64_t bytes = 0;                     // entry bytes it synced
    std::chrono::microseconds sync_duration{0};  // time in msync/fdatasync/fsync-dir calls
  };
  // Called after every flush cycle that issued a sync call, by the thread that ran it (the flusher,
  // run_flush_cycle()'s caller, or a truncate/close), with the store's flush-cycle lock held: it must be quick (an observation
  // into a histogram) and must not call back into the CommitLog.
  using FlushObserver = std::function<void(const FlushCycle& cycle)>;

  // Opens (creating if needed) the log in `dir` and runs recovery. Fails with kCorruption (naming the
  // file and offset) when data before the checkpointed flushed point is damaged, kInvalidArgument for
  // bad options, kIo/kNoSpace for file-system errors.
  static Result<std::unique_ptr<CommitLog>> open(const std::string& dir, const Options& options);

  ~CommitLog();  // calls close()
  CommitLog(const CommitLog&) = delete;
  CommitLog& operator=(const CommitLog&) = delete;

  // --- writing -------------------------------------------------------------------------------
  // Appends a batch. Indexes must be contiguous and continue the log (batch[0].meta.index ==
  // last_index() + 1; on an empty log any index >= 1 may start it). Alternatively every entry may
  // carry index 0: the log then assigns last_index() + 1, ... under its writer lock (for many
  // independent concurrent appenders, e.g. the benchmark); the returned range tells which. In sync
  // mode such batches from concurrent callers are written together by one of them, one write for
  // the group (append_group.h), before each caller waits for its own range. Terms must
  // not decrease (kInvalidArgument). Payloads larger than
  // max_entry_size_bytes, an empty batch, or more than max_batch_entries entries are kInvalidArgument
  // and nothing is written. Sync mode: returns after the batch is durable (group commit); refused
  // with kFailedPrecondition in stepped mode (STEPPED MODE). Async mode: returns after the batch is
  // written to the mapping. kNoSpace when the disk is full (nothing of the
  // failed entry is visible; the log stays readable, and later appends succeed once space is freed).
  // kTruncated (sync mode) when a truncate_suffix() removed some of the batch's entries before the
  // batch was durable or before this call returned: those entries are not in the log, even if
  // later entries at their indexes are durable (truncation_history.h).
  Result<IndexRange> append(std::span<const EntryToAppend> batch);
  // Like append() but never waits for durability, in either mode. In sync mode the flusher is woken
  // at once. Pair with wait_flushed() or the flush listener (the Raft node's non-blocking path).
  Result<IndexRange> append_no_wait(std::span<const EntryToAppend> batch);
  // Blocks until flushed_index() >= index (OK), the log fails (the flush error) or is closed (kClosed).
  // Stepped mode: never blocks; kFailedPrecondition when flushed_index() < index (run a flush step).
  // `index` beyond written_index() waits for a later append. It waits for an index, not for an entry:
  // after a truncate_suffix() at or below `index`, a later entry at `index` satisfies it (sync
  // append() instead checks for its own entries).
  Status wait_flushed(std::uint64_t index);
  // Makes every entry written so far durable, then returns (explicit/manual flush trigger). When a
  // truncate_suffix() removes entries meanwhile, it makes what is left durable instead. Stepped
  // mode: run_flush_cycle().
  Status flush();
  // Asks the flusher to flush soon; does not wait. Stepped mode: does nothing (the owner steps).
  void request_flush();
  // Asks the flusher for a flush cycle and then a checkpoint at its next wake-up (soon, whatever
  // checkpoint_interval_ms says), so that a caller that needs one (a prefix truncation:
  // prefix_checkpointed()) does not pay its syncs on its own thread; does not wait. Stepped mode:
  // the owner's next run_flush_cycle() writes it after its cycle. A checkpoint written for another
  // reason meanwhile answers it too.
  void request_checkpoint();
  // Whether the last durable checkpoint lets truncate_prefix(before_index) go without a flush cycle
  // and a checkpoint of its own (the index files of every segment synced: up to 0.57 s with 90,000
  // topics' segments, docs/benchmarks.md): it vouches for every entry below before_index (or every
  // entry of the log, when it ends below) and for the commit index up to before_index - 1 (or the
  // current one, when lower). Any thread; takes no lock that a flush cycle holds.
  bool prefix_checkpointed(std::uint64_t before_index) const;
  // Registers the flush listener (replaces any previous one; nullptr removes it).
  void set_flush_listener(FlushListener listener);
  // Registers the flush observer (replaces any previous one; nullptr removes it).
  void set_flush_observer(FlushObserver observer);

  // Removes entries [from_index, last_index()]; the next append must carry from_index. Data, index
  // and checkpoint agree afterwards; crash-safe (see CRASH CASES 3). from_index == last_index() + 1 is
  // a no-op. from_index <= commit_index() is kFailedPrecondition unless `force`; from_index below
  // first_index() or above last_index() + 1 is kOutOfRange. Lowers flushed_index() if needed.
  // Sync append() calls still waiting for removed entries fail with kTruncated; a wait_flushed()
  // call for a removed index waits for a later entry there (see wait_flushed()).
  Status truncate_suffix(std::uint64_t from_index, bool force = false);
  // Deletes every segment whose entries all lie below `before_index` (never the active segment).
  // first_index() becomes the base of the first remaining segment (<= before_index). With `more`,
  // asked after each deleted segment (with how many this call deleted) whether to go on: false stops
  // there, the directory synced as always, so that a caller can spread a long deletion over several
  // calls (each a valid shorter log, CRASH CASES 4). Before the first unlink the checkpoint must
  // vouch for what is deleted and for the commit index up to before_index - 1 (a caller that
  // finishes a cut deletion at its next open checks its point against the recovered commit index):
  // unless prefix_checkpointed(before_index) already, the call runs a flush cycle and writes one
  // itself, on the caller's thread.
  using PrefixProgress = std::function<bool(std::size_t deleted)>;
  Status truncate_prefix(std::uint64_t before_index, const PrefixProgress& more = nullptr);
  // Replaces the whole log by an empty one whose first index is `first_index` and in which
  // term_at(first_index - 1) is `prev_term` (a follower installing a leader's snapshot: the entries up
  // to first_index - 1 are replaced by what they amounted to). Afterwards first_index() ==
  // first_index, last_index() == flushed_index() == commit_index() == first_index - 1, and the next
  // append must carry first_index. Atomic across crashes (CRASH CASES 7): recovery yields either the
  // old log, untouched, or the new empty one, never a mix. kInvalidArgument for first_index 0, or 1
  // with a non-zero prev_term; kNoSpace (nothing changed) when the new segment cannot be created; a
  // failure after the reset's durable intent fails the log (the next open completes the reset). Sync
  // append() calls still waiting fail with kTruncated.
  // The old segments' files are renamed aside ("discard-<base>.seg/.idx", a rename each: no blocks
  // freed on the caller's thread), not unlinked: the flusher unlinks them after its cycles, one
  // segment's two files per wake-up (a stepped log: per run_flush_cycle()), and the next open
  // whatever is left (a stop leaves them; docs/storage-format.md, crash case 7).
  Status reset(std::uint64_t first_index, std::uint64_t prev_term);
  // Unlinks every discard-* file the resets left, now (any thread, at any time: they are never read
  // again, and a crash before or during it leaves them for the next open). No directory sync: an
  // unlink a power cut undoes leaves the file for the next open. The first error stops it.
  Status remove_discarded();

  // The upper layer's commit index, stored in the checkpoint (written on the next checkpoint, or at
  // once with persist = true). Must not decrease and must not exceed last_index().
  Status set_commit_index(std::uint64_t commit_index, bool persist = false);
  std::uint64_t commit_index() const;

  // Records durably that a reader found the entry at `index` corrupt (read() answered kCorruption),
  // so that the next open verifies its segment in full and, with
  // Options::allow_truncate_corrupted_flushed_data, cuts the log at the first bad entry instead of
  // trusting the segment (docs/storage-format.md, "Storage faults"). Changes nothing now.
  Status mark_suspect(std::uint64_t index);

  // --- steps (stepped mode only; kFailedPrecondition with the log's own threads) ----------------
  // One flush cycle on the caller's thread, the one the flusher runs: makes every entry written so
  // far durable (its data, then the directory when a segment was created), advances
  // flushed_index() and calls the flush observer; then, holding no store lock, it calls the flush
  // listener if the flushed index moved since the listener last heard (a truncate_prefix() or a
  // truncate_suffix() since the last step may have moved it too). Writes no checkpoint unless one
  // was asked (request_checkpoint()): then it writes it after the cycle, as the flusher does. A failed
  // sync fails the log, as in the flusher, and is returned; a failed log returns its failure;
  // kClosed after close().
  Status run_flush_cycle();
  // Writes the checkpoint when the flushed or the commit index moved since the last one, as the
  // flusher does every checkpoint_interval_ms: it bounds what recovery rescans after a crash and
  // persists the commit index. Fails like run_flush_cycle().
  Status run_checkpoint();

  // --- reading -------------------------------------------------------------------------------
  // Entries from `from_index` on, at most `max_entries`, stopping before the total payload bytes would
  // exceed `max_bytes` (but always at least one entry). kOutOfRange when from_index is outside
  // [first_index(), last_index()]. Every entry's CRC32C is verified (kCorruption naming file and
  // offset on a mismatch); payloads are not copied. max_entries == 0 returns an empty batch.
  Result<ReadBatch> read(std::uint64_t from_index, std::size_t max_entries,
                         std::size_t max_bytes) const;
  // Term of the entry at `index`; term_at(first_index() - 1) is the term of the entry before the
  // log's first (0 when none, e.g. index 0). kOutOfRange outside [first_index() - 1, last_index()].
  Result<std::uint64_t> term_at(std::uint64_t index) const;

  // first_index() > last_index() means empty. A never-written log has first 1, last 0.
  std::uint64_t first_index() const;
  std::uint64_t last_index() const;
  std::uint64_t written_index() const { return last_index(); }
  std::uint64_t flushed_index() const;

  FlushStats stats() const;
  // Space the log takes: segment files count at their full (preallocated) size, index files at
  // their allocated size. For metrics and retention.
  struct DiskUsage {
    std::uint64_t segments = 0;
    std::uint64_t bytes = 0;
  };
  DiskUsage disk_usage() const;
  // The data segments, oldest first, for retention decisions (age from the file's modification
  // time, which the caller reads: a sealed segment is last modified when its last entry was written).
  struct SegmentInfo {
    std::uint64_t base_index = 0;
    std::uint64_t last_index = 0;  // base_index - 1 when empty
    std::uint64_t disk_bytes = 0;  // data + index file
    std::string data_path;
    bool active = false;  // the segment appends go to; never removed by truncate_prefix
  };
  std::vector<SegmentInfo> segments() const;
  // Bytes of the entries after `index` up to last_index() (record bytes: headers included). For
  // replication lag in bytes. `index` below first_index() - 1 counts from the first entry.
  std::uint64_t bytes_after(std::uint64_t index) const;
  const RecoveryReport& recovery_report() const;
  const std::string& dir() const;
  const Options& options() const;

  // Flushes, writes the final checkpoint, stops background threads and removes the abort marker.
  // Later calls fail with kClosed. Idempotent; returns the first error met while closing.
  Status close();

  class Impl;

 private:
  explicit CommitLog(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// --- offline inspection (raftlogctl log verify / dump) ----------------------------------------
struct VerifyReport {
  bool ok = true;
  std::uint64_t first_index = 0;  // first entry found (0 if none)
  std::uint64_t last_index = 0;   // last valid entry found (0 if none)
  std::uint64_t entries = 0;
  std::uint64_t segments = 0;
  std::uint64_t bytes = 0;
  std::string bad_file;          // first bad file (empty when ok)
  std::uint64_t bad_offset = 0;  // byte offset of the first bad record in bad_file
  std::string problem;           // what is wrong there
  std::uint64_t checkpoint_flushed_index = 0;
  bool abort_marker_present = false;
};

// Where an entry lives, for dump output.
struct EntryLocation {
  std::string segment_file;  // file name (no directory)
  std::uint64_t offset = 0;  // byte offset of the entry record in that file
  std::uint32_t record_bytes = 0;
};

// Reads every segment of `dir` WITHOUT modifying anything (no recovery, no abort marker) and checks
// every entry: segment headers, CRC32C, index continuity across segments, non-decreasing terms. A
// segment's zero-filled tail is its normal end. Stops at the first problem (ok = false, bad_file,
// bad_offset, problem). `visitor`, if given, is called for each valid entry in order; returning
// false stops the scan early (ok stays true). The EntryView is valid only during the call.
// Non-OK Status only for I/O errors (e.g. the directory does not exist).
using EntryVisitor = std::function<bool(const EntryView&, const EntryLocation&)>;
Result<VerifyReport> verify_log_directory(const std::string& dir, Env* env = nullptr,
                                          const EntryVisitor& visitor = nullptr);

}  // namespace raftlog::store

// CommitLog::Impl: the state and locks behind CommitLog. One job a file: commit_log.cpp (the public
// class, thread start, close, failure), commit_log_append.cpp, commit_log_group.cpp (grouped
// appends), commit_log_flush.cpp (the flusher and the waits for durability),
// commit_log_stepped.cpp (stepped mode: the owner's flush and checkpoint steps),
// commit_log_reset.cpp (the whole log replaced by an empty one), commit_log_checkpoint.cpp, commit_log_read.cpp, commit_log_truncate.cpp (suffix and prefix),
// recovery.cpp (open), allocator.cpp (segment preallocation) and suspect_marker.cpp.
//
// LOCKS (acquire in this order; never the reverse):
//   step_mu_         stepped mode only: serializes run_flush_cycle() calls (their cycle and
//                    listener call), so that listener calls come in the order of their cycles.
//   write_mu_        serializes writers: append, truncate_suffix/prefix, close.
//   flush_cycle_mu_  held for a whole flush cycle, checkpoint write or truncation; owns
//                    Segment::flushed_offset/index_flushed_bytes and last_checkpoint_.
//   meta_mu_         (shared) guards segments_ and each Segment's write_offset/entry_count/last_term
//                    as seen by readers; writers take it exclusively only to publish.
//   flush_mu_        guards the flusher's wake-up state and failure_.
//   (FlushWaiters has its own leaf locks: threads in wait_flushed() sleep there. AppendGroup has
//   no lock: a group leader calls append() and so takes write_mu_ like any writer.)
//   alloc_mu_        guards the allocator's prepared segments.
//   listener_mu_, stats_mu_  leaf locks.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "store/append_group.h"
#include "store/checkpoint.h"
#include "store/commit_log.h"
#include "store/durable_record.h"
#include "store/flush_waiters.h"
#include "store/segment.h"
#include "store/truncation_history.h"

namespace raftlog::store {

class CommitLog::Impl {
 public:
  Impl(std::string dir, Options options, Env* env);
  ~Impl();

  // recovery.cpp
  Status recover();

  // commit_log.cpp: the flusher, waker and allocator threads, or none in stepped mode.
  void start_background_work();
  // commit_log_append.cpp
  // `before_publish` (may be null) is called with the batch's range once it is written and before
  // the new last index is published (writer lock held): the append group tells its members their
  // ranges there (append_group.h).
  Result<IndexRange> append(std::span<const EntryToAppend> batch, bool wait_durable,
                            const AppendGroup::ResolveWritten* before_publish = nullptr);
  // commit_log_group.cpp: a sync-mode append of an auto-indexed batch, written together with the
  // batches of other threads appending at the same time (append_group.h), then waited for.
  Result<IndexRange> append_grouped(std::span<const EntryToAppend> batch);
  // The checks that fail a batch on its own, before it is written or joins a group.
  Status validate_batch(std::span<const EntryToAppend> batch) const;
  // commit_log_flush.cpp
  Status wait_flushed(std::uint64_t index);
  // Waits until the entries up to `last` that were written while truncations_.count() was
  // `truncations_seen` are durable (OK), were removed by a truncate_suffix() since then
  // (kTruncated), or the log failed or closed first (its failure, or kClosed).
  Status wait_own_entries(std::uint64_t last, std::uint64_t truncations_seen);
  Status flush();
  void request_flush();
  // commit_log_checkpoint.cpp
  void request_checkpoint();
  bool prefix_checkpointed(std::uint64_t before_index) const;
  void set_flush_listener(FlushListener listener);
  void set_flush_observer(FlushObserver observer);
  // commit_log_stepped.cpp (Options::background_work == kStepped; commit_log.h, STEPPED MODE)
  Status run_flush_cycle();
  Status run_checkpoint();
  // What a sync-mode append() gets in stepped mode.
  Status refuse_sync_append() const;
  // wait_flushed() in stepped mode: answers at once.
  Status check_flushed_stepped(std::uint64_t index) const;
  // commit_log_truncate.cpp
  Status truncate_suffix(std::uint64_t from_index, bool force);
  Status truncate_prefix(std::uint64_t before_index, const CommitLog::PrefixProgress& more);
  // commit_log_reset.cpp
  Status reset(std::uint64_t base_index, std::uint64_t prev_term);
  Status remove_discarded();
  // The flusher's (or a stepped owner's flush step's) share of a reset: the old segments it set
  // aside, at most kDiscardFilesPerStep of their files per call (a failure is logged and the rest
  // left to the next open).
  static constexpr std::size_t kDiscardFilesPerStep = 2;
  void remove_discarded_if_pending();
  // Unlinks at most `max_files` discard-* files; *left: some remain.
  Status remove_discarded_files(std::size_t max_files, bool* left);
  // commit_log_checkpoint.cpp
  Status set_commit_index(std::uint64_t commit_index, bool persist);
  // commit_log_read.cpp
  Result<ReadBatch> read(std::uint64_t from_index, std::size_t max_entries,
                         std::size_t max_bytes) const;
  Result<std::uint64_t> term_at(std::uint64_t index) const;
  // commit_log.cpp
  Status close();
  // commit_log_read.cpp
  FlushStats stats() const;
  DiskUsage disk_usage() const;
  std::vector<SegmentInfo> segments() const;
  std::uint64_t bytes_after(std::uint64_t index) const;

  const std::string dir_;
  const Options options_;
  Env* const env_;
  const bool stepped_;  // Options::background_work == BackgroundWork::kStepped

  std::atomic<std::uint64_t> first_index_{1};
  std::atomic<std::uint64_t> last_index_{0};
  std::atomic<std::uint64_t> flushed_index_{0};
  std::atomic<std::uint64_t> commit_index_{0};
  // Generation written into every entry by this instance: one above anything on disk (set by
  // recovery, persisted in the checkpoint before the first append). See entry_format.h.
  std::uint64_t generation_ = 1;
  std::uint64_t max_generation_seen_ = 0;  // recovery only
  RecoveryReport report_;

 private:
  friend class CommitLog;

  // --- lifecycle (commit_log.cpp) ---
  Status check_writable_locked() const;  // write_mu_ held
  void fail(const Status& status);
  Status failure() const;

  // --- appending (commit_log_append.cpp); write_mu_ held ---
  // An append in progress: the segment it writes and how far its entries reach.
  struct AppendCursor {
    std::shared_ptr<Segment> active;  // the log's last segment; null before the first one
    std::uint64_t offset = 0;         // end of the entries written to `active` so far
    std::uint64_t count = 0;          // entries in `active`
    std::uint64_t term = 0;           // term of the last entry
    std::uint64_t staged_offset = 0;  // file offset of staging_[0]
  };
  AppendCursor append_cursor_locked() const;
  // kInvalidArgument when a batch starting at `first_index` does not continue the log.
  Status check_continues_log_locked(std::span<const EntryToAppend> batch,
                                    const AppendCursor& cursor, std::uint64_t first_index) const;
  // Everything the batch needs before a byte is written: a prepared segment for every roll inside
  // it and index blocks for all its records. Nothing is kept on failure (kNoSpace on a full disk).
  Result<std::vector<PreparedSegment>> reserve_for_batch_locked(
      std::span<const EntryToAppend> batch, const AppendCursor& cursor);
  // Encodes and writes the batch (not yet published); returns the record bytes written. Fails the
  // log when it fails.
  Result<std::uint64_t> write_batch_locked(std::span<const EntryToAppend> batch,
                                           std::uint64_t first_index,
                                           std::vector<PreparedSegment>& prepared,
                                           AppendCursor* cursor);
  // Ends `cursor`'s segment (its staged run written and published) and activates `prepared` as
  // the new last segment, starting at `base_index`.
  Status roll_segment_locked(PreparedSegment prepared, std::uint64_t base_index,
                             AppendCursor* cursor);
  // Writes the staged run to the cursor's segment (with the end marker after it if asked).
  Status write_staged_locked(bool with_end_marker, AppendCursor* cursor);
  // Writes one record at cursor->offset (the staging buffer must be empty) without staging it:
  // payload first, then the padding and an end marker, then the header with the magic last.
  Status write_direct_locked(const EntryMeta& meta, std::string_view payload, AppendCursor* cursor);
  // Makes the cursor's position visible to readers and the flusher.
  void publish_locked(const AppendCursor& cursor);

  // --- flushing (commit_log_flush.cpp) ---
  // One flush cycle: make everything published so far durable. flush_cycle_mu_ held. The end
  // marker after the last entry is included only if no append can run concurrently (write_mu_ held).
  Status flush_cycle_locked(bool include_end_marker);
  // What one flush cycle makes durable.
  struct FlushRange {
    std::shared_ptr<Segment> segment;
    std::uint64_t from = 0;
    std::uint64_t to = 0;       // flush end (includes the end marker)
    std::uint64_t written = 0;  // write offset at the snapshot
  };
  struct FlushSnapshot {
    std::vector<FlushRange> ranges;  // newest segment first
    std::uint64_t target = 0;        // the last index when the snapshot was taken
    bool sync_dir = false;           // a segment was created or renamed since the last cycle
  };
  FlushSnapshot snapshot_unflushed_locked(bool include_end_marker, std::uint64_t old_flushed);
  // Syncs the snapshot's ranges (oldest first) and the directory if it needs it; counts the bytes
  // and the sync calls.
  Status sync_snapshot_locked(const FlushSnapshot& snapshot, std::uint64_t* bytes,
                              std::uint64_t* sync_calls);
  void flusher_main();
  // One flush cycle as the flusher runs it (without the end marker: appends may run concurrently),
  // unless the log failed (then its failure). A failed cycle fails the log.
  Status run_flusher_cycle();
  // Why a wait for `index` ended without it being flushed: the log's failure, or kClosed.
  Status stopped_status(std::uint64_t index);
  void call_listener(std::uint64_t* last_reported);

  // --- checkpoints (commit_log_checkpoint.cpp); flush_cycle_mu_ held ---
  // Writes the checkpoint for the current flushed index (index files flushed first).
  Status write_checkpoint_locked(std::uint64_t truncate_from);
  // The flusher's periodic checkpoint: every checkpoint_interval_ms, when it changed.
  void maybe_checkpoint_locked();
  // Writes the checkpoint if the flushed or commit index moved since the last one; a failed write
  // fails the log.
  Status checkpoint_if_changed_locked();
  // last_checkpoint_ = `checkpoint`, and what prefix_checkpointed() reads of it published.
  void set_last_checkpoint_locked(const Checkpoint& checkpoint);
  // Whether `checkpoint` vouches for what truncate_prefix(before_index) deletes (commit_log.h,
  // prefix_checkpointed()), with the log's last and commit index as given.
  static bool covers_prefix(std::uint64_t flushed, std::uint64_t commit, std::uint64_t before_index,
                            std::uint64_t last_index, std::uint64_t commit_index);

  // --- reading (commit_log_read.cpp) ---
  // Segment holding `index` (meta_mu_ held), or nullptr.
  std::shared_ptr<Segment> find_segment_locked(std::uint64_t index) const;

  // --- truncate_suffix (commit_log_truncate.cpp); write_mu_ and flush_cycle_mu_ held ---
  struct SuffixCut {
    std::shared_ptr<Segment> segment;              // holds the first entry removed
    std::uint64_t offset = 0;                      // of that entry in `segment`
    std::vector<std::shared_ptr<Segment>> doomed;  // every later segment
    std::uint64_t old_write_offset = 0;            // `segment`'s shape before the cut
    std::uint64_t old_count = 0;
  };
  Result<SuffixCut> locate_suffix_cut_locked(std::uint64_t from_index) const;
  // Step 2 of CRASH CASES 3: readers stop seeing the suffix. Fails the log when it fails.
  Status unpublish_suffix_locked(std::uint64_t from_index, SuffixCut* cut);
  // Steps 3-5: zero the cut segment's tail, delete the later segments, clear the intent.
  Status erase_suffix_locked(const SuffixCut& cut);

  // --- allocator (allocator.cpp) ---
  void allocator_main();
  // A prepared segment: a spare, the background one, or one created now. kNoSpace on a full disk.
  Result<PreparedSegment> take_prepared_segment();
  void return_prepared_segment(PreparedSegment prepared);
  void stop_allocator();

  // --- recovery (recovery.cpp): one function per step of docs/storage-format.md's algorithm ---
  // 1. Deletes prealloc-* files and index files without a segment; the segments' bases, sorted.
  Result<std::vector<std::uint64_t>> remove_leftovers();
  // 2. Reads the checkpoint (a default one when there is none or it has an unknown version), loads
  // the suspect marker, selects the recovery mode and writes the abort marker.
  Result<Checkpoint> read_checkpoint_and_select_mode(bool segments_exist);
  // 3. Opens the segments `bases` (those at or below a truncation intent's cut) into segments_. A bad
  // header after the flushed point removes that segment and every later one.
  Status open_segments(std::span<const std::uint64_t> bases, const Checkpoint& cp);
  // 4. Removes the segments above a crashed truncate_suffix's cut (`cut_index`, 0 = none).
  // 2b. A reset intent in the checkpoint (a crashed reset): removes every segment in `bases` and
  // creates the empty one the reset leaves; returns the new bases (that one).
  Result<std::vector<std::uint64_t>> complete_reset_intent(std::span<const std::uint64_t> bases,
                                                           const Checkpoint& cp);
  Status complete_truncation_intent(std::span<const std::uint64_t> bases_above_cut,
                                    std::uint64_t cut_index);
  Status remove_segment_files(std::span<const std::uint64_t> bases);
  // Where step 6 starts: the first entry the checkpoint does not vouch for.
  struct TailStart {
    std::size_t position = 0;  // in segments_
    std::uint64_t offset = 0;  // in that segment
    std::uint64_t expected_index = 0;
    std::uint64_t prev_term = 0;
    std::uint64_t prev_generation = 0;
  };
  // 5. Spot-checks what the checkpoint vouches for: the segments before the checkpoint's segment
  // and the checkpoint's own entry. A mismatch is kCorruption, or, with
  // allow_truncate_corrupted_flushed_data, the cut: step 6 then starts at that segment.
  Result<TailStart> spot_check_flushed_segments(const Checkpoint& cp);
  // `full_scan`: verify every entry's CRC instead of spot-checking (the suspect marker names it).
  Status verify_sealed_segment(Segment& segment, std::uint64_t expected_count, bool full_scan);
  Result<TailStart> verify_checkpoint_segment(std::size_t position, const Checkpoint& cp);
  // The checkpoint segment's entries up to the flushed point: the checkpoint's entry spot-checked,
  // or (index rebuilt, a mismatch, or the suspect marker here) every one of them checked.
  Status verify_flushed_prefix(Segment& segment, const Checkpoint& cp, bool rebuilt,
                               std::uint64_t* last_term, std::uint64_t* last_generation);
  bool spot_check_checkpoint_entry(const Segment& segment, const Checkpoint& cp,
                                   std::uint64_t* last_term, std::uint64_t* last_generation);
  // `status` from a check of flushed data in segments_[position]: returned as it is, unless it is
  // kCorruption and allow_truncate_corrupted_flushed_data is set; then step 6 starts at the segment.
  Result<TailStart> cut_at_corrupted_flushed_data(std::size_t position, const Status& status);
  // 6. Validates every entry from `start` on and cuts the log at the first invalid one (or stops
  // at `cut_index`, a truncation intent's cut, when not 0).
  Status scan_tail(const TailStart& start, std::uint64_t cut_index);
  // first_index_/last_index_ from the recovered segments.
  void publish_recovered_range();
  // 7. Flushes what was recovered, syncs the directory, picks the new generation, writes a fresh
  // checkpoint (clearing any intent) and clears the suspect marker.
  Status make_recovery_durable(const Checkpoint& cp);
  Status rebuild_segment_index(Segment& segment, std::uint64_t end_offset_limit,
                               std::uint64_t max_index, std::uint64_t* end_offset,
                               std::uint64_t* entries, std::uint64_t* last_generation);
  Status remove_segments_from(std::size_t position);
  // Highest index of a valid entry (CRC checked) found through the index records after the entry at
  // which the scan of `segment` stopped: evidence that the cut was not a torn tail (RecoveryReport).
  void note_entries_after_cut(const Segment& segment);

  // --- suspect marker (suspect_marker.cpp) ---
  Status load_suspect_marker();   // recovery, before the segments are verified
  Status clear_suspect_marker();  // recovery, after the fresh checkpoint
  bool holds_suspect(const Segment& segment, std::uint64_t entry_count) const {
    return suspect_index_ >= segment.base_index &&
           suspect_index_ < segment.base_index + entry_count;
  }

 public:
  Status mark_suspect(std::uint64_t index);

 private:
  std::mutex suspect_mu_;  // serializes mark_suspect() calls
  std::unique_ptr<DurableRecordFile> suspect_file_;
  std::uint64_t suspect_index_ = 0;  // recovery: the marker's index (0 = none)

  std::mutex step_mu_;
  std::uint64_t stepped_reported_ = 0;  // step_mu_: the flushed index the listener last heard of

  std::mutex write_mu_;
  // write_mu_: encoded entries on their way to the segment file (commit_log_append.cpp). Holds at
  // most kStagingBytes plus one record below Options::direct_write_min_payload_bytes; larger
  // payloads are not staged (write_direct_locked).
  static constexpr std::size_t kStagingBytes = 1U << 20;
  std::vector<char> staging_;
  std::mutex flush_cycle_mu_;
  mutable std::shared_mutex meta_mu_;
  std::vector<std::shared_ptr<Segment>> segments_;  // sorted by base_index; back() is active
  bool dir_dirty_ = false;                          // meta_mu_: a rename/creation awaits sync_dir

  mutable std::mutex flush_mu_;
  std::condition_variable flush_cv_;  // wakes the flusher
  // Set by whoever wants a flush; only the one that flips it from false pays for the wake-up
  // (taking flush_mu_ and signalling), so concurrent sync appenders do not queue on flush_mu_.
  std::atomic<bool> flush_requested_{false};
  FlushWaiters flush_waiters_;     // threads in wait_flushed(); runs the waker thread
  TruncationHistory truncations_;  // truncate_suffix() calls, for sync appends still waiting
  AppendGroup append_group_{options_.max_batch_entries};  // concurrent auto-indexed sync appends
  bool stopping_ = false;
  bool flusher_running_ = false;
  Status failure_;
  std::thread flusher_;
  std::atomic<std::uint64_t> unflushed_bytes_{0};
  // A reset set old segments aside (discard-* files) that no flusher cycle has removed yet.
  std::atomic<bool> discards_pending_{false};

  std::unique_ptr<DurableRecordFile> checkpoint_file_;
  Checkpoint last_checkpoint_;  // flush_cycle_mu_
  // last_checkpoint_'s flushed and commit index, for prefix_checkpointed() on the caller's thread
  // without flush_cycle_mu_ (a flush cycle holds it through its syncs).
  std::atomic<std::uint64_t> checkpointed_flushed_{0};
  std::atomic<std::uint64_t> checkpointed_commit_{0};
  // request_checkpoint(): the flusher's next wake-up (a stepped log's next run_flush_cycle())
  // writes a checkpoint after its cycle, whatever checkpoint_interval_ms says.
  std::atomic<bool> checkpoint_requested_{false};
  std::chrono::steady_clock::time_point last_checkpoint_time_;

  std::mutex alloc_mu_;
  std::condition_variable alloc_cv_;
  std::optional<PreparedSegment> prepared_;
  std::vector<PreparedSegment> spare_prepared_;  // bounded: at most one batch's worth of segments
  bool alloc_wanted_ = false;
  bool alloc_in_progress_ = false;
  bool alloc_stop_ = false;
  std::uint64_t prealloc_sequence_ = 0;
  std::thread allocator_;

  std::mutex listener_mu_;
  FlushListener listener_;
  FlushObserver observer_;  // listener_mu_

  mutable std::mutex stats_mu_;
  FlushStats stats_;

  std::atomic<bool> closed_{false};
  bool abort_marker_written_ = false;
  bool started_ = false;  // set once recovery succeeded (and the threads run, unless stepped)
};

}  // namespace raftlog::store

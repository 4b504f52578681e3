// RecordLog: one derived index's fixed-size, checksummed records in segment files, with an
// in-memory copy for queries (docs/storage-format.md, "Derived indexes").
//
// Record (32 bytes, little-endian):
//   0  4  crc32c over bytes [4, 32)
//   4  1  record format version (kRecordVersion)
//   5  1  kind (RecordKind: which index wrote it; a record of another kind is refused)
//   6  2  zero
//   8  8  log index of the entry it points to
//   16 8  term of that entry (what recovery compares with the log)
//   24 8  value: the timestamp (queue and time index) or the key's 64-bit hash (key index)
// A segment file `<first record number, 20 digits>.rec` holds kRecordsPerSegment records; record
// numbers are dense from 0 (for a ConsumeQueue: the topic offset). Records are appended with
// pwrite (capture_pending, write_chunk) and made durable by their sync steps; the cursor that covers them is written only after that
// (derived_indexes.h). At open, records are read and checked up to the count the cursor names;
// what follows (written after the cursor) is cut.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "store/env.h"

namespace raftlog::derived {

inline constexpr std::uint8_t kRecordVersion = 1;
inline constexpr std::size_t kRecordBytes = 32;
inline constexpr std::uint64_t kRecordsPerSegment = 65536;  // 2 MiB segments

enum class RecordKind : std::uint8_t { kQueue = 1, kKey = 2, kTime = 3 };

// One step of making written records durable: fdatasync `file`, or (file null) sync directory `dir`.
struct SyncStep {
  std::shared_ptr<store::File> file;
  std::string dir;
};
// Runs steps[*next...] in order while `keep_going` (checked before each step; null: all) answers
// true; *next is the first step not run. Counts each step run in *ran.
store::Status run_sync_steps(store::Env* env, const std::vector<SyncStep>& steps, std::size_t* next,
                             const std::function<bool()>& keep_going, std::uint64_t* ran);

struct Record {
  std::uint64_t index = 0;
  std::uint64_t term = 0;
  std::uint64_t value = 0;
  friend bool operator==(const Record&, const Record&) = default;
};

void encode_record(RecordKind kind, const Record& record, char* out);
// False when the checksum, version or kind is wrong (a torn, flipped or foreign record).
bool decode_record(RecordKind kind, const char* in, Record* out);

class RecordLog {
 public:
  // `records_per_segment`: kRecordsPerSegment on every node; tests choose fewer, so that retention
  // drops segments of small logs (0 means the default). Files must be read with the count they
  // were written with.
  RecordLog(store::Env* env, std::string dir, RecordKind kind,
            std::uint64_t records_per_segment = kRecordsPerSegment);
  ~RecordLog();
  RecordLog(const RecordLog&) = delete;
  RecordLog& operator=(const RecordLog&) = delete;

  // Loads the segments of dir: `first_number` and `count` are what the cursor recorded (the first
  // record still kept and one past the last covered). Records past `count` are cut. Fails (with
  // `problem`) when a record below `count` is missing or bad: the caller rebuilds.
  bool load(std::uint64_t first_number, std::uint64_t count, std::string* problem);

  std::uint64_t first_number() const { return first_number_; }
  std::uint64_t end_number() const { return first_number_ + records_.size(); }
  const std::deque<Record>& records() const { return records_; }

  // Appends in memory (captured by capture_pending(), then written by write_chunk()).
  void append(const Record& record);
  // Writing records, in steps, for a persist whose writes run in slices with dispatch between them
  // (DerivedIndexes::begin_persist). capture_pending() encodes the records appended since the last
  // capture into `out`, one chunk per segment file (memory only: 32 bytes a record), and counts
  // them as written, so later changes in memory (appends, continue_at, forget_below) leave the
  // captured bytes as they were. write_chunk() writes one chunk (pwrite: the page cache, no sync;
  // the directory and the segment file created as needed) and adds its file's sync step;
  // finish_chunks(), after the capture's last chunk, adds the directory's sync step when the
  // directory or a segment was created. The caller runs every step (run_sync_steps) before it
  // writes a cursor covering these records; the files stay open through `steps` even when this
  // log moves to another segment meanwhile. Each capture is written whole, in order, before the
  // next capture.
  // A step that fails must never run again, nor may a cursor cover these records: the write
  // position and the directory's dirty flag moved when the step was queued, and after a failed
  // fdatasync the bytes may be gone from the page cache (DerivedIndexes fails for good then).
  struct Captured {
    struct Chunk {
      std::uint64_t segment_first = 0;
      std::uint64_t from = 0;  // the first record number the bytes hold
      std::string bytes;
    };
    std::vector<Chunk> chunks;
  };
  void capture_pending(Captured* out);
  store::Status write_chunk(const Captured::Chunk& chunk, std::vector<SyncStep>* steps);
  void finish_chunks(std::vector<SyncStep>* steps);
  // True once the log's directory exists (created by the first write, or found at load()).
  bool has_dir() const { return dir_created_; }
  // Drops every record numbered `number` or above (memory and files).
  store::Status truncate_to(std::uint64_t number);
  // The queue continues at `number` (a topic offset the log's entry carries) instead of at
  // end_number(), in memory only: below first_number() or above end_number() every record is
  // dropped and the log restarts empty at `number`; in between, the records from `number` on are
  // dropped. The next capture_pending() takes from there; stale records left in the files are
  // outside what the next cursor names and load() cuts or sweeps them.
  void continue_at(std::uint64_t number);
  // Retention, step 1 (memory only): forgets whole segments whose records all point below
  // `log_index` and are already captured (never one capture_pending() has yet to take:
  // written_end_ stays >= first_number(); the captured bytes of a forgotten segment are written
  // from the capture, not from records_, and its file is unlinked only by remove_dropped()). first_number() advances; the files stay until remove_dropped(), which
  // the caller runs once a cursor naming the new first_number() is durable, so no crash leaves a
  // cursor naming a deleted file. True when something was forgotten.
  // With `covers_until_next` (the time index: a record stands for every entry up to the next
  // record's, which carry its timestamp), a segment goes only when the record after it points at or
  // below `log_index`: the record covering `log_index` itself is kept (drills6 M4).
  bool forget_below(std::uint64_t log_index, bool covers_until_next = false);
  // Whether forget_below(log_index, covers_until_next) would forget the first segment once it is
  // written (memory only; cheap: the first segment's last record and the next one).
  bool first_segment_below(std::uint64_t log_index, bool covers_until_next = false) const;
  // Retention, step 2: unlinks the segment files forget_below() released. Files a crash left
  // behind (below first_number()) are swept by load().
  store::Status remove_dropped();
  // Removes every segment (a rebuild).
  store::Status clear();

 private:
  std::string segment_path(std::uint64_t segment_first) const;
  store::Result<store::File*> segment_file(std::uint64_t segment_first);

  store::Env* env_;
  std::string dir_;
  RecordKind kind_;
  std::uint64_t records_per_segment_;
  std::uint64_t first_number_ = 0;
  std::deque<Record> records_;
  std::uint64_t written_end_ = 0;  // records below this number are in the files
  bool dir_created_ = false;
  bool dir_dirty_ = false;
  std::uint64_t open_first_ = UINT64_MAX;  // the segment open_file_ belongs to
  std::shared_ptr<store::File> open_file_;  // shared with the SyncSteps that sync it
  std::vector<std::uint64_t> unsynced_segments_;
  std::vector<std::uint64_t> dropped_segments_;  // forgotten, not yet unlinked (remove_dropped)
};

}  // namespace raftlog::derived

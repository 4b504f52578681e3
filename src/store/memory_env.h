// MemoryEnv: an in-memory Env that simulates power loss, for the store's tests and crash tools.
//
// Every file (inode) keeps two images: the VOLATILE one (what the process sees; mappings point into
// it) and the DURABLE one (what survives power loss). Mapping::flush and File::sync copy ranges from
// volatile to durable. The directory namespace is also kept twice: creations, renames and removals
// become durable only at sync_dir() of their directory (file sizes are treated as journaled
// metadata: allocate/truncate apply to both images at once).
//
// crash() freezes the env (every later operation fails with kIo, so the abandoned CommitLog cannot
// change anything) and snapshots both images. restart(options) then rebuilds the files from the
// durable namespace, treating unflushed bytes (volatile != durable) per CrashMode. The abandoned
// CommitLog must be destroyed between crash() and restart(). The snapshot copies mapped memory that
// the abandoned log's threads may be writing at that instant: a deliberate race that models the
// moment of power loss (ThreadSanitizer: suppress with tests/store/tsan.supp).
//
// Renames: by default a rename not yet followed by a sync_dir() of its directory is lost whole at a
// power cut (the namespace is durable only as of the last sync_dir). keep_unsynced_renames() opts
// into a file system that commits renames in order without a directory fsync: a power cut then
// keeps the first N un-synced renames of each directory, so a test can cut a series of renames
// (a reset's old segments set aside) after each one. Only renames take part in the kept prefix:
// un-synced creations and unlinks are lost as without it, so a cut can keep a rename that came
// after a lost creation or unlink (a state a real journal would not leave: a false alarm at worst,
// and no state of the default model is taken away). The prefix is counted per target directory
// (the store never renames across directories). Renames are recorded only while opted in: opt in
// before the renames the cut should keep.
//
// Fault injection: a capacity limit (allocate() beyond it fails with kNoSpace, like ENOSPC) and
// direct byte corruption of both images (bit rot).
//
// Thread-safe (one mutex). Files are bounded by memory: use small segments.
#pragma once

#include <functional>

#include <chrono>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "store/env.h"

namespace raftlog::store {

enum class CrashMode : std::uint8_t {
  kLoseUnflushed = 0,      // power loss: every unflushed byte is lost
  kTornWrite = 1,          // the unflushed span is kept up to a random byte (a torn last write)
  kKeepRandomSectors = 2,  // each unflushed 512-byte sector independently kept or lost
  kFlipBits = 3,           // unflushed bytes kept but a few random bits in them flipped
  kKeepAll = 4,            // process crash (kill -9): the page cache survives, nothing is lost
};
const char* to_string(CrashMode mode);

struct CrashOptions {
  CrashMode mode = CrashMode::kLoseUnflushed;
  std::uint64_t seed = 1;
};

class MemoryEnv final : public Env {
 public:
  MemoryEnv();
  ~MemoryEnv() override;

  Status create_dir(const std::string& path) override;
  Result<std::vector<std::string>> list_dir(const std::string& dir) const override;
  bool exists(const std::string& path) const override;
  Result<std::unique_ptr<File>> open(const std::string& path, bool create) override;
  // Same as open(path, false): MemoryEnv does not enforce read-only mappings.
  Result<std::unique_ptr<File>> open_read_only(const std::string& path) override {
    return open(path, /*create=*/false);
  }
  Status rename(const std::string& from, const std::string& to) override;
  Status remove(const std::string& path) override;
  Status remove_dir(const std::string& path) override;
  Status sync_dir(const std::string& dir) override;
  Result<std::string> read_file(const std::string& path, std::size_t max_bytes) const override;
  Status write_file(const std::string& path, std::string_view content) override;
  // The time of the last write, resize or creation by this env's clock (a file recreated by restart()
  // counts as modified then).
  Result<std::chrono::system_clock::time_point> modified_at(const std::string& path) const override;

  // The clock that stamps modifications (default: a fixed instant, so runs stay deterministic). The
  // simulator and tests set it to their own clock.
  void set_clock(std::function<std::chrono::system_clock::time_point()> clock);

  // --- simulation controls ---
  void crash();
  // Arms a crash inside a later operation: the sync-type call (Mapping::flush, File::sync, sync_dir,
  // write_file) after `syncs_before_crash` more successful ones does not happen; the env crashes
  // instead (as crash()) and the call fails. Lets tests cut multi-step operations at every step.
  void crash_after_syncs(std::uint64_t syncs_before_crash);
  // The next `count` sync-type calls fail with kIo without crashing and make nothing durable, like
  // an fsync that reports a writeback error (after which Linux may drop the dirty data). Lets tests
  // check that the log fails for good on the first sync error instead of trusting a later sync.
  // With `drop_dirty`, a File::sync failed so also drops that file's unsynced bytes (its image
  // reverts to the durable one, sizes unchanged), as Linux may: a later sync then "succeeds" over
  // bytes that are gone, which a caller retrying the sync without rewriting would trust.
  void fail_next_syncs(std::uint64_t count, bool drop_dirty = false);
  // Arms a crash inside a later remove(): the `removes_before_crash` removes before it become
  // durable as they happen (a journaling file system commits namespace changes in order, so a
  // power cut can leave any prefix of a series of unlinks done, before their directory's fsync),
  // and the next one does not happen: the env crashes instead (as crash()) and the call fails. Lets
  // tests cut a series of deletions (a prefix truncation's segments) after each one.
  void crash_after_removes(std::uint64_t removes_before_crash);
  // The remove() after `removes_before_failure` more successful ones fails with kIo and removes
  // nothing (once; no crash), like an unlink the file system refuses. Lets tests stop a series of
  // deletions part-way with a store error.
  void fail_remove_after(std::uint64_t removes_before_failure);
  // Opt-in (see above): at every later power cut (crash(), an armed crash), the first `count`
  // renames of each directory made since its last sync_dir() become durable, in the order they were
  // made, the rest lost (as if the journal committed that prefix); std::nullopt (the default): none
  // survive. Stays set across restart().
  void keep_unsynced_renames(std::optional<std::size_t> count);
  // How many un-synced renames the directory with the most of them had at the last power cut
  // (while opted in; 0 before any): the prefixes a test must try to cover that cut.
  std::size_t unsynced_renames_at_last_crash() const;
  bool crashed() const;
  void restart(const CrashOptions& options);
  // Total bytes all files may occupy; allocate() past it fails with kNoSpace. 0 = unlimited.
  void set_capacity_bytes(std::uint64_t capacity_bytes);
  std::uint64_t used_bytes() const;
  // Flips bit `bit` of byte `offset` of `path` in both images (simulated bit rot on durable data).
  Status corrupt_byte(const std::string& path, std::uint64_t offset, int bit = 0);
  // Overwrites bytes of `path` in both images.
  Status overwrite(const std::string& path, std::uint64_t offset, const std::string& bytes);
  // Current (volatile) content of a file, for assertions.
  Result<std::string> content(const std::string& path) const;
  // Number of flush/sync/sync_dir calls served.
  std::uint64_t sync_calls() const;

  struct Inode;

 private:
  Status check_alive_locked() const;
  void crash_locked();
  // Counts one sync-type call; false when it must fail: an armed crash is due (the env crashes) or
  // an injected sync error is pending.
  bool admit_sync_locked();
  std::uint64_t used_bytes_locked() const;

  mutable std::mutex mu_;
  std::function<std::chrono::system_clock::time_point()> clock_ = [] {
    return std::chrono::system_clock::time_point();
  };
  bool crashed_ = false;
  bool crash_armed_ = false;
  std::uint64_t syncs_until_crash_ = 0;
  std::uint64_t failing_syncs_ = 0;  // fail_next_syncs()
  bool drop_dirty_on_failed_sync_ = false;
  bool remove_crash_armed_ = false;  // crash_after_removes()
  std::uint64_t removes_until_crash_ = 0;
  bool remove_failure_armed_ = false;  // fail_remove_after()
  std::uint64_t removes_until_failure_ = 0;
  std::uint64_t capacity_bytes_ = 0;
  std::uint64_t sync_calls_ = 0;
  std::uint64_t generation_ = 1;  // bumped by restart(); stale File/Mapping objects then fail
  std::set<std::string> dirs_;
  std::map<std::string, std::shared_ptr<Inode>> volatile_names_;
  std::map<std::string, std::shared_ptr<Inode>> durable_names_;
  // keep_unsynced_renames(): renames since their directory's last sync_dir(), in order, recorded
  // only while opted in (bounded by the renames a test makes between two syncs; cleared by
  // sync_dir(), a power cut and restart()).
  struct UnsyncedRename {
    std::string from;
    std::string to;
    std::shared_ptr<Inode> inode;
  };
  std::vector<UnsyncedRename> unsynced_renames_;
  std::optional<std::size_t> renames_kept_at_crash_;
  std::size_t unsynced_renames_at_last_crash_ = 0;
  // Snapshot taken by crash(): path -> (durable image, volatile image).
  std::map<std::string, std::pair<std::vector<char>, std::vector<char>>> crash_snapshot_;

  friend class MemoryFile;
  friend class MemoryMapping;
};

}  // namespace raftlog::store

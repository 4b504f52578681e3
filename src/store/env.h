// The store's only path to the file system. PosixEnv is the production implementation; tests use
// MemoryEnv (src/store/memory_env.h), which simulates power loss. Keeping every file operation behind
// this interface is what lets the power-loss tests exercise the real recovery code.
//
// Paths are plain strings; the store joins directory and file names with '/'.
// All methods are thread-safe.
#pragma once

#include <chrono>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "store/status.h"

namespace raftlog::store {

// A memory mapping of (a prefix of) a file. Stays valid after the file is closed, renamed or unlinked,
// until the last shared_ptr to it is dropped (readers hold one to keep segment memory alive).
class Mapping {
 public:
  virtual ~Mapping() = default;
  virtual char* data() = 0;
  virtual const char* data() const = 0;
  virtual std::size_t size() const = 0;
  // Makes bytes [offset, offset + length) durable (msync MS_SYNC; the range is widened to pages).
  virtual Status flush(std::uint64_t offset, std::uint64_t length) = 0;
};

class File {
 public:
  virtual ~File() = default;
  // Reserves disk blocks for [offset, offset + length), growing the file if needed (posix_fallocate).
  // Fails with kNoSpace when the disk is full; after success, writes into that range via a mapping
  // cannot fail for lack of space.
  virtual Status allocate(std::uint64_t offset, std::uint64_t length) = 0;
  // Sets the file size (sparse growth or shrink).
  virtual Status truncate(std::uint64_t size_bytes) = 0;
  virtual Result<std::uint64_t> size() const = 0;
  // Maps [0, length) shared (writable unless opened with Env::open_read_only). The file must already
  // be at least `length` bytes long.
  virtual Result<std::shared_ptr<Mapping>> map(std::uint64_t length) = 0;
  // Writes `data` at `offset` through the page cache (pwrite). Writable mappings of the file see the
  // bytes at once (Linux has one page cache for both). Not durable until a sync or a mapping flush
  // of the range.
  virtual Status write_at(std::uint64_t offset, std::string_view data) = 0;
  // fdatasync.
  virtual Status sync() = 0;
};

class Env {
 public:
  virtual ~Env() = default;

  // The process-wide POSIX implementation.
  static Env* posix();

  virtual Status create_dir(const std::string& path) = 0;  // OK if it already exists
  // Names (not paths) of the entries of `dir`, excluding "." and "..", unsorted.
  virtual Result<std::vector<std::string>> list_dir(const std::string& dir) const = 0;
  virtual bool exists(const std::string& path) const = 0;
  // Opens an existing file, or creates it when `create` is set (an existing file is then opened).
  virtual Result<std::unique_ptr<File>> open(const std::string& path, bool create) = 0;
  // Opens an existing file read-only (O_RDONLY); its mappings are PROT_READ, so writing through
  // Mapping::data() faults. The offline verifier uses it: it cannot modify a directory by construction
  // and works on read-only copies.
  virtual Result<std::unique_ptr<File>> open_read_only(const std::string& path) = 0;
  virtual Status rename(const std::string& from, const std::string& to) = 0;
  virtual Status remove(const std::string& path) = 0;  // OK if it does not exist
  // Removes an empty directory (rmdir). OK if it does not exist; fails when it is not empty.
  // remove() cannot do this: unlink() of a directory is EISDIR.
  virtual Status remove_dir(const std::string& path) = 0;
  // fsync on the directory: makes creations, renames and removals inside it durable.
  virtual Status sync_dir(const std::string& dir) = 0;
  // Whole content of a small file (bounded by `max_bytes`; larger files are kInvalidArgument).
  virtual Result<std::string> read_file(const std::string& path, std::size_t max_bytes) const = 0;
  // Creates/replaces `path` with `content` and fdatasyncs it (the directory is not synced).
  virtual Status write_file(const std::string& path, std::string_view content) = 0;
  // When the file's content last changed (its mtime), for age-based retention.
  virtual Result<std::chrono::system_clock::time_point> modified_at(
      const std::string& path) const = 0;
};

inline std::string join_path(const std::string& dir, const std::string& name) {
  if (dir.empty() || dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

}  // namespace raftlog::store

// The derived cursor (docs/storage-format.md, "Derived cursor"): how far the derived indexes cover
// the log, and for which log. One file, derived/CURSOR, for every index of the node: one
// dispatcher advances them all together, so one boundary covers them all.
//
//   0  4  magic 0x43444C52 ("RLDC" in file order)
//   4  4  crc32c over bytes [8, end)
//   8  4  format version (kCursorVersion)
//   12 4  zero
//   16 8  node id          } the log's identity: an index from another node's or cluster's
//   24 4  cluster id size  } directory is foreign, and rebuilt
//   28 n  cluster id
//   .. 8  boundary: the exclusive log index the indexes cover (every entry below it is indexed)
//   .. 8  boundary term: the term of entry boundary - 1 (0 when boundary is 1 or the log's start)
//   .. 8  the newest timestamp dispatched (timestamps are clamped to never go backwards)
//   .. 4  number of record logs, then per log: kind (1 byte), name size (2), name, first record
//         number (8), end record number (8): the records the cursor vouches for
//
// Written only after the records it covers are durable: write CURSOR.tmp (fdatasync), rename over
// CURSOR, fsync the directory. A cursor is not a consumer's offset: nothing but the dispatcher
// moves it, and recovery may only move it back (to what the log proves) or rebuild.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "derived/record_log.h"
#include "store/env.h"

namespace raftlog::derived {

inline constexpr std::uint32_t kCursorMagic = 0x43444C52U;
// Version 2 since 2026-12-07: the time records follow the rule that a stamped entry after a plain
// one has a record (DerivedIndexes::index_entry), which time lookups after a trim rely on. A
// version-1 cursor's time records do not, and the format does not tell them apart: it is refused,
// so the first start of a binary with version 2 rebuilds the indexes once from the log (review of
// dispatch3, M1: a lookup on the resumed old records skipped stamped entries).
// Version 3 since since4: time records only where the running max rises (the lookup of SNAPSHOT
// version 5 needs no more). The same layout; this binary reads version 2 too (its extra records
// carry equal values: harmless), but writes 3, so that a binary of version 2 (dispatch3's, whose
// lookup relies on the extra record) rebuilds the indexes when rolled back to, instead of resuming
// on records it misreads (review of since4, M1: it skipped a millisecond's stamped entries).
inline constexpr std::uint32_t kCursorVersion = 3;
inline constexpr std::uint32_t kCursorVersionAlsoRead = 2;
inline constexpr std::size_t kMaxCursorBytes = 4U << 20;

struct CursorLog {
  RecordKind kind = RecordKind::kQueue;
  std::string name;  // the topic for a queue; "keys", "time"
  std::uint64_t first_number = 0;
  std::uint64_t end_number = 0;
  friend bool operator==(const CursorLog&, const CursorLog&) = default;
};

struct Cursor {
  std::uint64_t node_id = 0;
  std::string cluster_id;
  std::uint64_t boundary = 1;
  std::uint64_t boundary_term = 0;
  std::uint64_t last_timestamp_ms = 0;
  std::vector<CursorLog> logs;
  friend bool operator==(const Cursor&, const Cursor&) = default;
};

std::string encode_cursor(const Cursor& cursor);
// nullopt with `problem` when the bytes are not a valid cursor of this version.
std::optional<Cursor> decode_cursor(const std::string& bytes, std::string* problem);

// Atomic replace of dir/CURSOR (see above).
store::Status write_cursor(store::Env* env, const std::string& dir, const Cursor& cursor);
// kNotFound-like: nullopt with problem "missing" when there is none.
std::optional<Cursor> read_cursor(store::Env* env, const std::string& dir, std::string* problem);

}  // namespace raftlog::derived

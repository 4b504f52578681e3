// The follower's partial snapshot on disk, `<data_dir>/SNAPSHOT.partial` (docs/storage-format.md,
// "SNAPSHOT.partial"), so that a restart of the follower (kill -9, power cut, upgrade) resumes its
// snapshot transfer from the bytes it held instead of offset 0 (docs/design.md, "Snapshot
// transfer", "Resuming").
//
// The file mirrors one partial of the SnapshotReassembler (snapshot_chunks.h): a versioned,
// checksummed header naming this node (cluster and node id), the snapshot's identity (index, term,
// total bytes, CRC-32C of the whole data), its configuration and its sender, then the data as framed
// records (offset, length, bytes, each with its own CRC-32C) appended in order as the chunks arrive.
// Nothing is synced: a lost tail only costs a resend, because the install checks the CRC-32C of the
// whole data and every restored record was checked on its own. Recovery trusts no byte it did not
// check: a torn tail or a bad record ends the data at the last good record; a bad header, another
// cluster's or node's file, a total above the receive bound, or anything malformed drops the file.
//
// Bound: one file (one partial: the one whose chunk arrived last; another sender's replaces it only
// at a higher term), at most the receive bound of data (64 MiB in raftlogd) plus 16 bytes per record
// (max_snapshot_partial_file_bytes).
//
// Not synchronized: the transport's inbound side calls it under its reassembly lock, on the gRPC
// threads that reassemble chunks, never on the Raft loop.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "raft/types.h"
#include "server/snapshot_chunks.h"

namespace raftlog::server {

inline constexpr std::string_view kSnapshotPartialFileName = "SNAPSHOT.partial";
// Version 2 (since data digests) adds the whole data's digest to the header (SnapshotIdentity):
// a restart restores the partial's full identity, so its receipt names the digest and the leader
// resumes it. A version-1 file (from before digests) is still read: its partial has no digest,
// which only its own sender's digest-less chunks continue (a leader of this version starts at 0).
inline constexpr std::uint32_t kSnapshotPartialFormatVersion = 2;
// Header: magic, version, body length, body, CRC-32C. The body holds a cluster id (at most 256
// bytes) and a configuration (at most raft::kMaxConfigBytes) beside fixed fields.
inline constexpr std::size_t kSnapshotPartialMaxHeaderBodyBytes = 4096;
// A record: CRC-32C (4), offset (8), length (4), then the bytes (1..kSnapshotChunkBytes).
inline constexpr std::size_t kSnapshotPartialRecordHeaderBytes = 16;
// New bytes of the partial are written once at least this many wait (or the file is started):
// records are few whatever the chunk size, and the bytes not written yet only cost a resend.
inline constexpr std::size_t kSnapshotPartialMinWriteBytes = 64 << 10;
// The largest file a partial of at most `max_total_bytes` makes: the header, the data, and a
// record header per kSnapshotPartialMinWriteBytes written (each write's last record may be
// short). A larger file is not ours: it is dropped unread.
std::uint64_t max_snapshot_partial_file_bytes(std::uint64_t max_total_bytes);

// What the header says.
struct SnapshotPartialHeader {
  std::string cluster_id;
  raft::NodeId node_id = raft::kNoNode;  // the receiver: this node
  // The kSnapshot of the sender's chunk that started the file: from, to, term, commit, the
  // snapshot's index, term and configuration; no data.
  raft::Message message;
  SnapshotChunkPlace place;  // total bytes and CRC-32C of the whole data; offset 0

  friend bool operator==(const SnapshotPartialHeader&, const SnapshotPartialHeader&) = default;
};

// What a reader expects: this node's identity and the receive bound.
struct SnapshotPartialExpectations {
  std::string cluster_id;
  raft::NodeId node_id = raft::kNoNode;
  std::uint64_t max_total_bytes = kMaxSnapshotBytes;
  // The disk's high watermark (raftlogd: --disk-high-watermark; 1: none): the file is not written
  // when the partial's total would take its file system to it, and dropped at start when the file
  // system is past it, so the partial never takes the room the store's own writes need.
  double max_disk_used_ratio = 1.0;
};

// The file system the file lives on, as far as the file cares.
struct SnapshotPartialDisk {
  std::uint64_t free_bytes = 0;
  std::uint64_t total_bytes = 1;
  double used_ratio = 0.0;
};
// nullopt: unknown (the write itself then tells).
using SnapshotPartialDiskProbe = std::function<std::optional<SnapshotPartialDisk>()>;
// The free space the file always leaves its file system beyond the partial's whole total.
inline constexpr std::uint64_t kSnapshotPartialDiskReserveBytes = 64u << 20;

// The encodings. Preconditions (RAFTLOG_CHECK): a kSnapshot header with a valid configuration;
// a record of 1..kSnapshotChunkBytes bytes.
std::string encode_snapshot_partial_header(const SnapshotPartialHeader& header);
// A record's CRC-32C covers the file's header CRC too (snapshot_partial_header_crc of the encoded
// header): a record of another file, left behind a new header, does not pass as this file's.
std::string encode_snapshot_partial_record(std::uint32_t header_crc, std::uint64_t offset,
                                           std::string_view bytes);
std::uint32_t snapshot_partial_header_crc(std::string_view encoded_header);

// A file as read back.
struct DecodedSnapshotPartial {
  SnapshotPartialHeader header;
  std::string data;               // the valid records' bytes, contiguous from offset 0
  std::uint64_t valid_bytes = 0;  // of the file: the header and the valid records
  std::uint32_t header_crc = 0;
  // Why the records ended before the file did ("" when the file ended after a whole record): a
  // torn or corrupt record, or one out of order.
  std::string tail_problem;
};

// Decodes `file`. nullopt (with *problem set) when the file must be dropped: shorter than its
// header, another magic, an unknown version, a header whose CRC does not match or whose fields are
// out of bounds (as the peer codec bounds a chunk: index 1..2^62, terms, a configuration that
// decodes, a total 1..max_total_bytes), another cluster's or node's, or records that hold the whole
// data (the file is removed when a partial completes: such a file is not ours). The records end at
// the first one that is short, fails its CRC, does not start where the data ends (out of order,
// overlapping) or runs past the total.
std::optional<DecodedSnapshotPartial> decode_snapshot_partial(
    std::string_view file, const SnapshotPartialExpectations& expect, std::string* problem);

// Keeps one partial of a reassembler on disk. Every error is reported in the returned sentence
// (for the caller's log) and counted; none is fatal: the transfer goes on in memory.
class SnapshotPartialFile {
 public:
  // `path`: the file; empty: nothing is kept on disk (every call does nothing). `disk`: its file
  // system's space (tests); by default statvfs of the file's directory.
  SnapshotPartialFile(std::string path, SnapshotPartialExpectations expect,
                      SnapshotPartialDiskProbe disk = {});
  ~SnapshotPartialFile();
  SnapshotPartialFile(const SnapshotPartialFile&) = delete;
  SnapshotPartialFile& operator=(const SnapshotPartialFile&) = delete;

  // At start, before any chunk: reads the file and restores its partial into `reassembler`, unless
  // it names a snapshot at or below `stale_through` (the log's start or commit index: the install
  // happened, or the entries arrived; the file is removed) or must be dropped (removed, counted):
  // not a regular file, or a disk past the watermark, besides decode_snapshot_partial's reasons.
  // A torn tail is cut off. Returns what happened for the log ("" when there was no file).
  std::string load(SnapshotReassembler& reassembler, raft::Index stale_through,
                   SnapshotReassembler::Clock::time_point now);
  // After the reassembler took a chunk from `sender` (or expired partials): the file follows the
  // partial it holds (new bytes appended), is removed once that partial is gone (completed,
  // dropped, expired), and is written anew for `sender`'s partial when it holds another. Returns a
  // sentence when a write failed or the disk lacks room (the file is then removed and not written
  // again for that partial; counted as a write failure), else "".
  std::string follow(const SnapshotReassembler& reassembler,
                     std::optional<raft::NodeId> sender = std::nullopt);

  std::uint64_t files_dropped() const { return files_dropped_; }
  std::uint64_t write_failures() const { return write_failures_; }
  bool holds_file() const { return fd_ >= 0; }

 private:
  // Writes a new file for `partial`: its header and every byte it holds.
  std::string start(const SnapshotReassembler::PartialView& partial);
  std::string append(std::string_view data, std::uint64_t total_bytes);
  // "" when the file system can take `more_bytes` more (beyond the reserve, below the watermark).
  std::string room_for(std::uint64_t more_bytes) const;
  // Removes what is at the path: a file, a link, a FIFO, or an empty directory.
  void remove_file();
  // A sentence when a directory remove_file could not remove (it has contents) is at the path,
  // else "". The transfer then goes on in memory only, and every log line says why.
  std::string occupied_by_directory() const;
  std::string fail(const std::string& what);

  const std::string path_;
  const SnapshotPartialExpectations expect_;
  SnapshotPartialDiskProbe disk_;
  int fd_ = -1;
  std::uint32_t header_crc_ = 0;         // of the file's header: seeds its records' CRCs
  std::uint64_t generation_ = 0;         // of the partial the file holds (fd_ >= 0)
  std::uint64_t bytes_held_ = 0;         // data bytes in the file
  std::uint64_t failed_generation_ = 0;  // a write of this partial failed: not written again
  std::uint64_t files_dropped_ = 0;
  std::uint64_t write_failures_ = 0;
};

}  // namespace raftlog::server

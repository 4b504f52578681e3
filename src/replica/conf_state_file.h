// The configurations a node's log holds that still matter, kept durably in <data_dir>/CONFSTATE, so
// that opening a data directory never scans the log for kConfig entries (docs/storage-format.md,
// "CONFSTATE").
//
// The record is a short list, oldest first: a base configuration, whose entry is committed and
// durable (or the bootstrap one, index 0), then every configuration entry after it that a crash (not
// yet flushed) or a truncation (not yet committed) could still remove, each one change away from the
// one before it. The replica rewrites it, durably, whenever a batch appends a kConfig entry or cuts
// one, after the batch's truncation and before the batch's entries reach the store: the log
// therefore never holds a kConfig entry the record does not list. At open the replica walks the list
// and keeps each configuration whose entry is still in the log (one read each); the first one that is
// gone ends the walk (nothing after it can have survived it), so a lost or cut entry rolls the
// configuration back to the one before it.
//
// It uses the store's DurableRecordFile (two alternating CRC32C-checked slots, each write synced),
// like HARDSTATE. Payload layout (little-endian): u32 format version (3; 1 and 2 still decode); the base:
// u64 index, u64 term, u32 length, the configuration (raft::encode_config, with its own CRC-32C and,
// from version 2, its members' addresses); u32 count (at most kMaxPendingRecords) of later records,
// each u64 index, u64 term, u64 node, u8 that node's role from then on (0 not a member, 1 voter, 2
// learner). A later record keeps no addresses: decoded, it carries the previous record's for the
// members that stay, and the replica's open takes the real ones from its log entry (which it reads
// anyway to check that the entry is still there). From version 3: u32 count (at most kMaxRetiredIds)
// of retired ids, then each u64, oldest retirement first: the ids a committed configuration listed
// and the base no longer does (tombstones: the leader refuses to add them again, ID_RETIRED). At
// most 3500 bytes without them (raft::kMaxConfigBytes for the base); the retired ids fill the rest
// of the record's 4072 bytes at most.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "raft/types.h"
#include "store/durable_record.h"
#include "store/env.h"
#include "store/status.h"

namespace raftlog::replica {

class ConfStateFile {
 public:
  // Records after the base that one CONFSTATE holds: configuration entries written but not yet
  // flushed or not yet committed. The replica keeps within it: it takes an append only up to the
  // configuration entry that would leave more uncommitted (Replica::hold_back_config_entries), and
  // flushes the log when committed but unflushed records would exceed it (Replica::persist_conf).
  static constexpr std::size_t kMaxPendingRecords = 16;
  // Retired ids one CONFSTATE keeps: at most this many, and only as many as fit beside the
  // configurations (at least 71 next to the largest configuration with 16 pending records, about
  // 460 next to a five-member one). Beyond, the oldest retirements are forgotten (logged): adding
  // such an id again is no longer refused.
  static constexpr std::size_t kMaxRetiredIds = 1024;

  // Opens or creates <data_dir>/CONFSTATE through `env` (nullptr: the process-wide PosixEnv; not
  // owned). kCorruption when the file holds neither a valid record nor only zeros, a record that
  // does not decode, or a valid record in a file shorter than DurableRecordFile::kFileBytes (cut
  // short after a write: the slot it lost may have held the newest record). No record at all is
  // for the replica's open to judge (Replica::check_conf_record_against_disk).
  static store::Result<std::unique_ptr<ConfStateFile>> open(const std::string& data_dir,
                                                            store::Env* env = nullptr);

  // The records last written, oldest first; empty when never written.
  const std::vector<raft::ConfRecord>& current() const { return current_; }
  // Ids removed by a committed configuration change (never reused: a node under such an id with an
  // empty directory could vote without its memory), oldest retirement first.
  const std::vector<raft::NodeId>& retired() const { return retired_; }
  // Durably replaces the record (returns after the sync). kInvalidArgument when `records` is empty,
  // longer than 1 + kMaxPendingRecords, not increasing in index, or two neighbours are not one change
  // apart. The retired ids carry over, joined by the members of the previous base and of
  // `committed_between` (committed configurations the new base moved past) that the new base no
  // longer lists, and by `known_retired` (an installed snapshot's, oldest first: they go before
  // this node's own).
  store::Status write(const std::vector<raft::ConfRecord>& records,
                      const std::vector<raft::ConfState>& committed_between = {},
                      const std::vector<raft::NodeId>& known_retired = {});
  // Counts every successful write(): what a cache of values derived from the record compares.
  std::uint64_t generation() const { return generation_; }

  static store::Result<std::string> encode(const std::vector<raft::ConfRecord>& records,
                                           const std::vector<raft::NodeId>& retired = {});
  struct Decoded {
    std::vector<raft::ConfRecord> records;
    std::vector<raft::NodeId> retired;  // empty before version 3
  };
  // kCorruption for a payload that does not decode, or whose configurations are invalid.
  static store::Result<Decoded> decode_all(const std::string& payload);
  static store::Result<std::vector<raft::ConfRecord>> decode(const std::string& payload);

 private:
  explicit ConfStateFile(std::unique_ptr<store::DurableRecordFile> file) : file_(std::move(file)) {}
  std::unique_ptr<store::DurableRecordFile> file_;
  std::vector<raft::NodeId> retired_after(const std::vector<raft::ConfRecord>& records,
                                          const std::vector<raft::ConfState>& committed_between,
                                          const std::vector<raft::NodeId>& known_retired) const;

  std::vector<raft::ConfRecord> current_;
  std::vector<raft::NodeId> retired_;
  std::uint64_t generation_ = 0;
};

}  // namespace raftlog::replica

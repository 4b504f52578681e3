// The configurations a node's log holds that still matter, kept durably in <data_dir>/CONFSTATE, so
// that opening a data directory never scans the log for kConfig entries (docs/storage-format.md,
// "CONFSTATE").
//
// It holds the newest configuration (the one in force) with the index and term of the log entry that
// holds it, and, when that entry may still be cut, the configuration before it (which a truncation of
// the newest rolls back to; a log holds at most one uncommitted configuration, so the one before it is
// committed and never cut). The replica rewrites it, durably, whenever the newest configuration of
// its log changes (a kConfig entry appended or cut), after the batch's truncation and before the
// batch's entries reach the store: the log therefore never holds a kConfig entry newer than the
// record. At open the replica checks the newest record against the entry at its index (one read);
// when that entry is gone the configuration rolls back to the previous record.
//
// It uses the store's DurableRecordFile (two alternating CRC32C-checked slots, each write synced),
// like HARDSTATE. Payload layout (little-endian): u32 format version (1), u64 index, u64 term, u32
// length, the configuration (raft::encode_config, with its own CRC-32C), u8 has_previous, and if 1:
// u64 previous index, u64 previous term, u64 node, u8 that node's role before (0 not a member, 1
// voter, 2 learner): the previous configuration is the newest one with that node's role set back.
// At most 575 bytes (64 members).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "raft/types.h"
#include "store/durable_record.h"
#include "store/env.h"
#include "store/status.h"

namespace raftlog::replica {

class ConfStateFile {
 public:
  // Opens or creates <data_dir>/CONFSTATE through `env` (nullptr: the process-wide PosixEnv; not
  // owned). kCorruption when the file holds neither a valid record nor only zeros.
  static store::Result<std::unique_ptr<ConfStateFile>> open(const std::string& data_dir,
                                                            store::Env* env = nullptr);

  // The records last written, oldest first (1 or 2); empty when never written.
  const std::vector<raft::ConfRecord>& current() const { return current_; }
  // Durably records the newest of `history` and, when it is one change away, the one before it
  // (returns after the sync). Precondition: history is non-empty with valid configurations.
  store::Status write(const std::vector<raft::ConfRecord>& history);

  // The records `history` is stored as (its last one, and the one before it if one change away).
  static std::vector<raft::ConfRecord> kept_records(const std::vector<raft::ConfRecord>& history);
  static std::string encode(const std::vector<raft::ConfRecord>& records);
  // kCorruption for a payload that does not decode, or whose configurations are invalid.
  static store::Result<std::vector<raft::ConfRecord>> decode(const std::string& payload);

 private:
  explicit ConfStateFile(std::unique_ptr<store::DurableRecordFile> file) : file_(std::move(file)) {}
  std::unique_ptr<store::DurableRecordFile> file_;
  std::vector<raft::ConfRecord> current_;
};

}  // namespace raftlog::replica

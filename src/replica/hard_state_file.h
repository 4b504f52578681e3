// The Raft hard state (term, vote) of a node, kept durably in <data_dir>/HARDSTATE.
//
// It uses the store's DurableRecordFile (two alternating CRC32C-checked slots, each write synced
// before it returns), so a crash mid-write leaves the previous hard state readable. Payload layout
// (little-endian): u32 format version (3), u64 term, u64 vote, u64 the leader this node knows for
// the term (0: none; docs/raft.md, "A second leader of a term"), u64 the nonce of that leader's
// leadership (0: not known). Versions 2 (without the nonce: none known) and 1 (without the leader:
// none known), written by older binaries, still read. The commit index is NOT kept here:
// it is a hint only, recorded in the store's checkpoint without an extra fsync per commit.
//
// Every file operation goes through a store::Env, so that the hard state can live where the log
// lives: on disk (PosixEnv) in raftlogd, in a MemoryEnv in the simulator, whose power loss then
// treats it like the log (a write is durable once write() returned, not before).
#pragma once

#include <memory>
#include <string>

#include "raft/types.h"
#include "store/durable_record.h"
#include "store/env.h"
#include "store/status.h"

namespace raftlog::replica {

class HardStateFile {
 public:
  // Opens or creates <data_dir>/HARDSTATE through `env` (nullptr: the process-wide PosixEnv; not
  // owned, must outlive the HardStateFile). kCorruption when the file holds neither a valid record
  // nor only zeros (see hard_state_file.cpp).
  static store::Result<std::unique_ptr<HardStateFile>> open(const std::string& data_dir,
                                                            store::Env* env = nullptr);

  // The last hard state written (term 0, no vote for a new node). `commit` is always 0.
  raft::HardState current() const { return current_; }
  // Durably records term, vote, the term's leader and its nonce (returns after fdatasync).
  store::Status write(const raft::HardState& hard_state);

  static std::string encode(const raft::HardState& hard_state);
  // Fails with kCorruption for a payload of an unknown version or the wrong size for its version.
  static store::Result<raft::HardState> decode(const std::string& payload);

 private:
  explicit HardStateFile(std::unique_ptr<store::DurableRecordFile> file) : file_(std::move(file)) {}
  std::unique_ptr<store::DurableRecordFile> file_;
  raft::HardState current_;
};

}  // namespace raftlog::replica

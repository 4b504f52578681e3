// DATA_DIR/UNVOUCHED: this node started on an empty data directory in a configuration with other
// members, and no leader has caught it up since (docs/storage-format.md, "Unvouched data
// directories"; docs/raft.md, "Unvouched nodes").
//
// An empty directory cannot tell a brand-new cluster from a node that lost its disk (or had it
// replaced under a supervisor) and restarted under its old id: such a node may have acknowledged
// entries it no longer holds, and a vote of it could elect a leader without them. The replica
// writes this record before the Raft core can vote, starts the core unvouched
// (raft::Config::unvouched) while the record exists, and removes it (unlink, then a directory sync)
// only after the core reports that a leader caught the node up. A crash in between repeats the
// catch-up; it never skips it.
//
// Layout: a store::DurableRecordFile (two CRC32C-checked slots). Payload (28 bytes, little-endian):
// u32 format version (1), u64 the node id the directory was created for, u64 the term and u64 the
// commit index of the first leader's word to the node (raft::Raft::vouching(); 0 and 0 before one),
// rewritten when the core first reports it. A file that exists but holds no valid record (damaged,
// torn, another version) counts as present without a leader's word: forgetting it would let the node
// vote unvouched, and keeping it costs one catch-up.
#pragma once

#include <cstdint>
#include <string>

#include "store/env.h"
#include "store/status.h"

namespace raftlog::replica {

class UnvouchedMarker {
 public:
  static constexpr const char* kFileName = "UNVOUCHED";

  // What open() found.
  struct Found {
    bool present = false;
    // Why a file that exists counts as present without a valid record ("" when it held one or
    // when there is none): said in the node's log.
    std::string damage;
    std::uint64_t vouching_term = 0;  // the recorded first leader's word (0, 0: none)
    std::uint64_t vouching_index = 0;
  };
  // Whether DATA_DIR/UNVOUCHED exists (env: not owned; nullptr is the process-wide PosixEnv).
  static store::Result<Found> find(store::Env* env, const std::string& data_dir);
  // Creates DATA_DIR/UNVOUCHED with a valid record for `node_id`, durably (the record synced, the
  // directory synced) before it returns.
  static store::Status write(store::Env* env, const std::string& data_dir, std::uint64_t node_id,
                             std::uint64_t vouching_term = 0, std::uint64_t vouching_index = 0);
  // Removes DATA_DIR/UNVOUCHED and syncs the directory (OK when it does not exist).
  static store::Status remove(store::Env* env, const std::string& data_dir);

  static std::string encode(std::uint64_t node_id, std::uint64_t vouching_term,
                            std::uint64_t vouching_index);
};

}  // namespace raftlog::replica

// DATA_DIR/REMOVED: a member's binding word that this node's id is retired (raft::Raft::
// removed_word(), told_removed(); docs/raft.md, "Membership changes"; docs/storage-format.md,
// "REMOVED"). Before this record the word lived in memory only: a restart forgot it, and the node
// campaigned again until a member told it once more (or, with no member reachable, for good:
// retired founders re-created on empty disks and told once re-elected each other after a restart).
//
// Written durably when the core's word binds or changes (the record synced, the directory synced),
// read at open into raft::Config::removed_word, removed (unlink, then a directory sync) once the core
// drops the word (its log holds the named configuration and a later one lists it again, or a
// majority elected it). A crash before the write began loses the word, as before the record existed:
// the next member to hear from the node tells it again. A power cut during the record's first write
// (DurableRecordFile::open creates the file with two empty slots, then write() fills one) leaves a
// file without a valid record: the node then does not start (below); it had been told its id is
// retired, so it is stopped for good and wiped.
//
// Layout: a store::DurableRecordFile (two CRC32C-checked slots). Payload (36 bytes, little-endian):
// u32 format version (1), u64 the node id the directory belongs to, u64 the member that said so,
// u64 the index and u64 the term of that member's newest committed configuration entry. A file
// that exists but holds no valid record (damaged, torn, another version, another node's id or an
// impossible word) is refused at open with the reason: guessing "no word" would let a retired node
// campaign, guessing a word would need one; the operator checks the member list (docs/operations.md,
// "Membership") and wipes the node.
#pragma once

#include <optional>
#include <string>

#include "raft/types.h"
#include "store/env.h"
#include "store/status.h"

namespace raftlog::replica {

class RemovedWordRecord {
 public:
  static constexpr const char* kFileName = "REMOVED";

  struct Found {
    bool present = false;
    std::string damage;  // why a present file holds no usable record ("" when it holds one)
    raft::RemovedWord word;  // when present and not damaged
  };
  // Reads DATA_DIR/REMOVED (env: not owned; nullptr is the process-wide PosixEnv). `node_id`: the
  // directory's node; a record for another is damage.
  static store::Result<Found> find(store::Env* env, const std::string& data_dir,
                                   std::uint64_t node_id);
  // Creates or rewrites DATA_DIR/REMOVED with `word` (conf_index > 0), durably.
  static store::Status write(store::Env* env, const std::string& data_dir, std::uint64_t node_id,
                             const raft::RemovedWord& word);
  // Removes DATA_DIR/REMOVED and syncs the directory (OK when it does not exist).
  static store::Status remove(store::Env* env, const std::string& data_dir);

  static std::string encode(std::uint64_t node_id, const raft::RemovedWord& word);
  // The payload's word, or why it is none (`node_id`: the directory's node).
  static std::optional<raft::RemovedWord> decode(const std::string& payload, std::uint64_t node_id,
                                                 std::string* why);
};

}  // namespace raftlog::replica

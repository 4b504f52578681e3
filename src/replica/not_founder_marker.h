// DATA_DIR/NOT_FOUNDER: this node never founds a cluster (docs/storage-format.md, "NOT_FOUNDER";
// docs/raft.md, "Unvouched nodes", "Nodes that never found a cluster").
//
// An empty log may belong to a founder of a brand-new cluster, whose first leader is elected by
// empty logs; every other empty log is a node that joined a running cluster (and has not received
// its log yet) or one that lost its log. A cluster that has committed an entry never needs an
// empty leader again (an empty log lacks that entry), and a node that joins one is added by a
// configuration change, which its leader proposes only after it committed an entry of its own
// term. So a node that knows it is no founder of a new cluster records it here, and while the
// record exists the core (raft::Config::never_founds) grants no (pre-)vote to a candidate whose log
// is empty and does not campaign with an empty log. It is written:
//   - when the directory is created for a node that is not a voter of its bootstrap configuration
//     (raftlogd --join, whose bootstrap is the cluster's founders; the simulator's spare slots);
//   - once the node knows a commit index above 0 (a founder after its cluster's first commit).
// It survives what an unvouched node loses with its log/ alone (review amnesia2 H2's cheap half:
// a re-added or joined node that lost its log refused nothing to an empty candidate and could
// elect a founder that restarted empty with its bootstrap configuration). It is never removed.
//
// Layout: a store::DurableRecordFile (two CRC32C-checked slots). Payload (16 bytes, little-endian):
// u32 format version (1), u64 the node id the directory belongs to, u32 why (Why below). A file
// that exists but holds no valid record (damaged, torn, another version) counts as present:
// refusing an empty candidate costs nothing once a cluster has committed an entry, and the file is
// only ever written then or for a joiner.
#pragma once

#include <cstdint>
#include <string>

#include "store/env.h"
#include "store/status.h"

namespace raftlog::replica {

class NotFounderMarker {
 public:
  static constexpr const char* kFileName = "NOT_FOUNDER";

  enum class Why : std::uint32_t {
    kUnknown = 0,    // a damaged record (found only)
    kJoined = 1,     // created outside its bootstrap configuration's voters
    kCommitted = 2,  // it knew a commit index above 0
  };

  struct Found {
    bool present = false;
    // Why a file that exists counts as present without a valid record ("" when it held one or when
    // there is none): said in the node's log.
    std::string damage;
    Why why = Why::kUnknown;
  };
  // Whether DATA_DIR/NOT_FOUNDER exists (env: not owned; nullptr is the process-wide PosixEnv).
  static store::Result<Found> find(store::Env* env, const std::string& data_dir);
  // Creates DATA_DIR/NOT_FOUNDER with a valid record, durably (the record synced, the directory
  // synced) before it returns.
  static store::Status write(store::Env* env, const std::string& data_dir, std::uint64_t node_id,
                             Why why);

  static std::string encode(std::uint64_t node_id, Why why);
};

const char* to_string(NotFounderMarker::Why why);

}  // namespace raftlog::replica

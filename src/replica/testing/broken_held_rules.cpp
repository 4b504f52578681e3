// TEST-ONLY (target raftlog_replica_broken_held): append responses and votes leave at once instead of
// waiting for the flush that makes what they vouch for durable, so a follower counts toward a commit
// with entries a power loss can still take. Exists to prove the simulator catches a durability bug
// in the driver. Never linked into production targets.
#include "replica/durability_rules.h"

#include <algorithm>

namespace raftlog::replica::rules {

std::uint64_t persisted_index_for_core(std::uint64_t written_index, std::uint64_t flushed_index,
                                       bool async) {
  return async ? written_index : std::min(flushed_index, written_index);
}

bool may_release_held(std::uint64_t, std::uint64_t) { return true; }

bool install_rewrites_conf_state() { return true; }

}  // namespace raftlog::replica::rules

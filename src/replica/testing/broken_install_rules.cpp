// TEST-ONLY (target raftlog_replica_broken_install): a snapshot install that skips CONFSTATE (step 4
// of replica_snapshot.cpp, and its completion at open): the node runs the snapshot's configuration
// until it restarts, then the one it had before the snapshot. Exists to prove the simulator's
// retention runs catch an install that skips a step. Never linked into production targets.
#include <algorithm>

#include "replica/durability_rules.h"

namespace raftlog::replica::rules {

std::uint64_t persisted_index_for_core(std::uint64_t written_index, std::uint64_t flushed_index,
                                       bool async) {
  return async ? written_index : std::min(flushed_index, written_index);
}

bool may_release_held(std::uint64_t required_index, std::uint64_t durable_index) {
  return required_index <= durable_index;
}

bool install_rewrites_conf_state() { return false; }

}  // namespace raftlog::replica::rules

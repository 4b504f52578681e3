// TEST-ONLY (target raftlog_replica_broken_ack, in place of durability_rules_ack.cpp): the core
// counts this node's written entries as persisted before a flush covers them, so a leader
// acknowledges an append that only the leader's page cache and one follower hold (3 nodes): a power
// loss of the leader can then lose it. Exists to prove the simulator catches a durability bug in the
// driver. Never linked into production targets.
#include "replica/durability_rules.h"

namespace raftlog::replica::rules {

std::uint64_t persisted_index_for_core(std::uint64_t written_index, std::uint64_t, bool) {
  return written_index;
}

}  // namespace raftlog::replica::rules

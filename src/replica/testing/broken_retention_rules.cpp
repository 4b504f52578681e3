// TEST-ONLY (target raftlog_replica_broken_retention, in place of durability_rules_retention.cpp): a
// follower that ignores its leader's retention hold and trims by its own commit index, as before
// the hold existed. Exists to prove the simulator's retention runs catch it (the check
// "retention-hold", src/sim/cluster_faults.cpp). Never linked into production targets.
#include "replica/durability_rules.h"

namespace raftlog::replica::rules {

std::uint64_t follower_trim_limit(std::uint64_t own_limit, std::uint64_t /*leader_hold*/) {
  return own_limit;
}

}  // namespace raftlog::replica::rules

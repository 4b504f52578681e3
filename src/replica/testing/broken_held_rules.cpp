// TEST-ONLY (target raftlog_replica_broken_held, in place of durability_rules_held.cpp): append
// responses and votes leave at once instead of waiting for the flush that makes what they vouch for
// durable, so a follower counts toward a commit with entries a power loss can still take. Exists to
// prove the simulator catches a durability bug in the driver. Never linked into production targets.
#include "replica/durability_rules.h"

namespace raftlog::replica::rules {

bool may_release_held(std::uint64_t, std::uint64_t) { return true; }

}  // namespace raftlog::replica::rules

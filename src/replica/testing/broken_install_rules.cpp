// TEST-ONLY (target raftlog_replica_broken_install, in place of durability_rules_install.cpp): a
// snapshot install that skips CONFSTATE (step 4 of replica_snapshot.cpp, and its completion at
// open): the node runs the snapshot's configuration until it restarts, then the one it had before
// the snapshot. Exists to prove the simulator's retention runs catch an install that skips a step.
// Never linked into production targets.
#include "replica/durability_rules.h"

namespace raftlog::replica::rules {

bool install_rewrites_conf_state() { return false; }

}  // namespace raftlog::replica::rules

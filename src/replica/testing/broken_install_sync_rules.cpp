// TEST-ONLY (target raftlog_replica_broken_install_sync, in place of
// durability_rules_install_sync.cpp): the preparation of a received snapshot writes SNAPSHOT.install
// without syncing it, and the install renames it into place (with the directory's fsync) and resets
// the log: a power cut then leaves the log starting after a SNAPSHOT whose bytes were never made
// durable. Exists to prove the simulator's retention runs catch a rename before the fsync. Never
// linked into production targets.
#include "replica/durability_rules.h"

namespace raftlog::replica::rules {

bool install_syncs_prepared_snapshot() { return false; }

}  // namespace raftlog::replica::rules

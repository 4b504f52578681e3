// Production rule (see durability_rules.h for the seam): a received snapshot's SNAPSHOT.install is
// synced before the install renames it into place.
#include "replica/durability_rules.h"

namespace raftlog::replica::rules {

bool install_syncs_prepared_snapshot() { return true; }

}  // namespace raftlog::replica::rules

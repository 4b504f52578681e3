// Production rule (see durability_rules.h for the seam): a snapshot install rewrites CONFSTATE.
#include "replica/durability_rules.h"

namespace raftlog::replica::rules {

bool install_rewrites_conf_state() { return true; }

}  // namespace raftlog::replica::rules

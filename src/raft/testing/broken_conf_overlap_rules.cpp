// TEST-ONLY (target raftlog_raft_broken_conf_overlap): a leader starts a membership change while the
// previous one is not committed yet, so two uncommitted configurations can be in one log and a
// truncation can undo both. Exists to prove the simulator catches it. Never linked into production.
#include "raft/rules.h"

namespace raftlog::raft::rules {

bool conf_change_may_start(Index, Index) { return true; }

}  // namespace raftlog::raft::rules

// TEST-ONLY (target raftlog_raft_broken_commit): the leader commits entries of earlier terms by counting
// replicas (the Raft paper's Figure 8 bug). Exists to prove the simulator catches a real safety bug.
// Never linked into production targets.
#include "raft/rules.h"

namespace raftlog::raft::rules {

bool leader_may_commit_by_count(Term, Term) { return true; }

}  // namespace raftlog::raft::rules

// TEST-ONLY (target raftlog_raft_broken_vote): votes are granted without the up-to-date log check, so a
// candidate missing committed entries can win and overwrite them. Exists to prove the simulator catches
// a real safety bug. Never linked into production targets.
#include "raft/rules.h"

namespace raftlog::raft::rules {

bool vote_log_is_up_to_date(Term, Index, Term, Index) { return true; }

}  // namespace raftlog::raft::rules

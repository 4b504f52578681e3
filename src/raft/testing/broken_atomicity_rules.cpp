// TEST-ONLY (target raftlog_raft_broken_atomicity): the leader's commit index may stop inside a
// multi-entry proposal, so a leader change can leave a client's append committed in part. Exists to
// prove the simulator catches it. Never linked into production targets.
#include "raft/rules.h"

namespace raftlog::raft::rules {

bool commit_may_stop_at(bool) { return true; }

}  // namespace raftlog::raft::rules

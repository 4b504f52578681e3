// Production rule (see rules.h for the seam): a commit index stops only at a proposal's end.
#include "raft/rules.h"

namespace raftlog::raft::rules {

bool commit_may_stop_at(bool entry_continues_proposal) { return !entry_continues_proposal; }

}  // namespace raftlog::raft::rules

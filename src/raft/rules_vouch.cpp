// Production rule (see rules.h for the seam): what an unvouched node must hold rises with the
// commits its leaders name after their first word (docs/raft.md, "Unvouched nodes").
#include "raft/rules.h"

namespace raftlog::raft::rules {

bool later_commits_raise_the_vouch_index() { return true; }

}  // namespace raftlog::raft::rules

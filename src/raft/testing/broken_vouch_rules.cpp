// BROKEN rule, TEST ONLY (see rules.h): an unvouched node is vouched at the commit index of its
// first leader's first message, as before review amnesia H2; later commits of that leader, which
// may count the node's acknowledgements from before it lost its data directory, are not waited for.
// Linked only into raftlog_raft_broken_vouch.
#include "raft/rules.h"

namespace raftlog::raft::rules {

bool later_commits_raise_the_vouch_index() { return false; }

}  // namespace raftlog::raft::rules

// TEST-ONLY (target raftlog_raft_broken_commit): the leader commits entries of earlier terms by counting
// replicas (the Raft paper's Figure 8 bug). Exists to prove the simulator catches a real safety bug.
// Never linked into production targets.
#include "raft/rules.h"

namespace raftlog::raft::rules {

bool vote_log_is_up_to_date(Term candidate_last_term, Index candidate_last_index, Term voter_last_term,
                            Index voter_last_index) {
  if (candidate_last_term != voter_last_term) return candidate_last_term > voter_last_term;
  return candidate_last_index >= voter_last_index;
}

bool leader_may_commit_by_count(Term, Term) { return true; }

bool commit_may_stop_at(bool entry_continues_proposal) { return !entry_continues_proposal; }

}  // namespace raftlog::raft::rules

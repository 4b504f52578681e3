// Production Raft rules (see rules.h for the seam).
#include "raft/rules.h"

namespace raftlog::raft::rules {

bool vote_log_is_up_to_date(Term candidate_last_term, Index candidate_last_index, Term voter_last_term,
                            Index voter_last_index) {
  if (candidate_last_term != voter_last_term) return candidate_last_term > voter_last_term;
  return candidate_last_index >= voter_last_index;
}

bool leader_may_commit_by_count(Term entry_term, Term leader_term) { return entry_term == leader_term; }

bool commit_may_stop_at(bool entry_continues_proposal) { return !entry_continues_proposal; }

}  // namespace raftlog::raft::rules

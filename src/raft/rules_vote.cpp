// Production rule (see rules.h for the seam): Raft §5.4.1 election restriction.
#include "raft/rules.h"

namespace raftlog::raft::rules {

bool vote_log_is_up_to_date(Term candidate_last_term, Index candidate_last_index,
                            Term voter_last_term, Index voter_last_index) {
  if (candidate_last_term != voter_last_term) return candidate_last_term > voter_last_term;
  return candidate_last_index >= voter_last_index;
}

}  // namespace raftlog::raft::rules

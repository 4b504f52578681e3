// Production rule (see rules.h for the seam): Raft §5.4.2, commit by count only in the own term.
#include "raft/rules.h"

namespace raftlog::raft::rules {

bool leader_may_commit_by_count(Term entry_term, Term leader_term) {
  return entry_term == leader_term;
}

}  // namespace raftlog::raft::rules

// Production rule (see rules.h): whether a candidate's log meets a leader's word, for an unvouched
// node (docs/raft.md, "Unvouched nodes"). No variant breaks it; it has its own file so that every
// variant links this one copy, also raftlog_raft_broken_vouch, which replaces rules_vouch.cpp.
#include "raft/rules.h"

namespace raftlog::raft::rules {

bool log_meets_vouching_word(Term candidate_last_term, Index candidate_last_index, Term word_term,
                             Index word_index) {
  return candidate_last_term > word_term ||
         (candidate_last_term == word_term && candidate_last_index >= word_index);
}

}  // namespace raftlog::raft::rules

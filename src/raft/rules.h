// The Raft safety rules that the simulator's self-test deliberately breaks.
//
// This is a LINK-TIME seam, not a runtime flag: production builds (target raftlog_raft) link rules_*.cpp;
// the test-only targets raftlog_raft_broken_{vote,commit,atomicity,...,vouch} link the same core objects with
// one rule replaced by src/raft/testing/broken_*_rules.cpp. No production code path can select a broken rule.
// It also holds a rule that no variant breaks but that the core and its driver must judge alike
// (log_meets_vouching_word, in rules_vouch_grant.cpp, which every variant links): one copy serves
// both.
#pragma once

#include <cstddef>
#include <vector>

#include "raft/types.h"

namespace raftlog::raft::rules {

// Raft §5.4.1 election restriction: grant a (pre-)vote only if the candidate's log is at least as
// up-to-date as the voter's (higher last term, or same last term and last index >= the voter's).
bool vote_log_is_up_to_date(Term candidate_last_term, Index candidate_last_index,
                            Term voter_last_term, Index voter_last_index);

// Raft §5.4.2: a leader commits by counting replicas only entries of its own term; earlier entries
// commit indirectly, through a later own-term entry.
bool leader_may_commit_by_count(Term entry_term, Term leader_term);
// Proposals are atomic: a commit index may stop at an entry only if no entry of the same proposal
// follows it (Entry::proposal_continues is false).
bool commit_may_stop_at(bool entry_continues_proposal);

// Single-server membership changes go one at a time: a leader may start a change only once the
// newest configuration entry of its log is committed (Raft dissertation §4.1).
bool conf_change_may_start(Index newest_conf_index, Index commit_index);
// A configuration is in force from the moment its entry is in the log, committed or not (§4.1): of
// `history` (oldest first, the newest committed one first; never empty), the position of the one in
// force.
std::size_t conf_in_force(const std::vector<ConfRecord>& history, Index commit_index);

// Unvouched nodes (docs/raft.md, "Unvouched nodes"): the commit index an unvouched node must hold
// before it is vouched rises with every commit its leaders name after the first word (a leader may
// count the node's acknowledgements from before it lost its data, review amnesia H2).
bool later_commits_raise_the_vouch_index();
// Unvouched nodes: a candidate's log meets a leader's word (term T, commit c) when its last term is
// above T, or T with its last index >= c. Such a log holds that leader's log up to c and up to its
// first entry of term T, so every entry committed before. The core grants by it
// (Raft::Impl::unvouched_may_grant) and the replica says loudly when --unvouched-may-elect grants a
// named candidate without it (Replica::note_vote_request_while_unvouched): one function, so the
// two never judge a log differently. No broken twin: every variant links rules_vouch_grant.cpp.
// (The same comparison as vote_log_is_up_to_date, but another rule: breaking the vote rule must not
// break this one.)
bool log_meets_vouching_word(Term candidate_last_term, Index candidate_last_index, Term word_term,
                             Index word_index);

}  // namespace raftlog::raft::rules

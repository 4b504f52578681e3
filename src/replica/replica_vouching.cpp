// Replica: the guards against a node that lost what it acknowledged without knowing it
// (docs/raft.md, "Unvouched nodes"): DATA_DIR/UNVOUCHED from an empty open until a leader caught the
// node up, and the loud report of a leader's append that contradicts a committed entry.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "raft/rules.h"
#include "replica/not_founder_marker.h"
#include "replica/replica.h"
#include "replica/unvouched_marker.h"

namespace raftlog::replica {

bool Replica::open_unvouched_marker(raft::Config* raft_config, NodeError* error) {
  if (config_.ignore_unvouched_marker) return true;
  auto found = UnvouchedMarker::find(config_.store.env, config_.data_dir);
  if (!found.ok()) {
    *error = make_error(ErrorCode::kInternal, "reading " + config_.data_dir + "/" +
                                                  UnvouchedMarker::kFileName + ": " +
                                                  found.status().to_string());
    return false;
  }
  if (found->present && !has_peers()) {
    // The configuration shrank to this node alone since: nobody to lose an entry against, and an
    // unvouched single member with entries would never campaign.
    if (store::Status st = UnvouchedMarker::remove(config_.store.env, config_.data_dir); !st.ok()) {
      *error = make_error(ErrorCode::kInternal, "removing " + config_.data_dir + "/" +
                                                    UnvouchedMarker::kFileName + ": " +
                                                    st.to_string());
      return false;
    }
    return true;
  }
  // What the open found, for status and health (review amnesia2 L4): a directory without any
  // configuration record or term is new (or wholly lost); one with them lost only its log/.
  unvouched_cause_ = found->present ? kUnvouchedResumedReason
                     : conf_record_missing_at_open_ && persisted_hard_state_.term == 0
                         ? kUnvouchedReason
                         : kUnvouchedLogLostReason;
  if (found->present) {
    if (!found->damage.empty()) {
      spdlog::warn("node {}: {}/{}: {}; treated as present: this node still waits for a leader to "
                   "catch it up before it votes",
                   config_.node_id, config_.data_dir, UnvouchedMarker::kFileName, found->damage);
    }
  } else {
    // No entry and no snapshot (a log reset by an install starts above index 1), whatever else the
    // directory holds: a HARDSTATE with a term, TOPICSTATE or CONFSTATE beside a lost log/ is the same
    // amnesia (drills6 H1's second repro). A vouched node always holds an entry (vouching needs one),
    // so the only other such directory is a leader elected with an empty log that crashed before its
    // no-op was durable: unvouched again, it loses nothing. A single member has nobody to have lost
    // an entry against.
    const bool empty = log_->first_index() == 1 && log_->last_index() == 0;
    if (!empty || !has_peers()) return true;
    if (store::Status st =
            UnvouchedMarker::write(config_.store.env, config_.data_dir, config_.node_id);
        !st.ok()) {
      *error = make_error(ErrorCode::kInternal, "writing " + config_.data_dir + "/" +
                                                    UnvouchedMarker::kFileName + ": " +
                                                    st.to_string());
      return false;
    }
  }
  unvouched_marker_ = true;
  raft_config->unvouched = true;
  if (found->vouching_term <= raft::kMaxTerm) {  // a damaged word is no word
    raft_config->vouching_term = found->vouching_term;
    raft_config->vouching_index = found->vouching_index;
    recorded_vouching_ = {found->vouching_term, found->vouching_index};
  }
  if (raft_config->unvouched_may_elect != raft::kNoNode) {
    // A typo would leave the wedge in place with nothing said (review of bootstrap5, L7).
    const raft::ConfState& conf = raft_config->conf_history.empty()
                                 ? raft_config->initial_conf
                                 : raft_config->conf_history.back().conf;
    if (!raft::is_voter(conf, raft_config->unvouched_may_elect)) {
      *error = make_error(ErrorCode::kInvalidArgument,
                          "--unvouched-may-elect " +
                              std::to_string(raft_config->unvouched_may_elect) +
                              " is no voter of this node's configuration: it could elect nobody");
      return false;
    }
    // The operator's word replaces a leader's for one candidate (raftlogd --unvouched-may-elect):
    // loud, because it is only as safe as the operator's check that this candidate holds the log.
    spdlog::critical("node {}: unvouched, and told to vote for node {} by the ordinary up-to-date "
                     "rule (--unvouched-may-elect): any entry this node acknowledged before it "
                     "lost its log that node {} lacks is lost if it wins; remove the flag once "
                     "this node serves (docs/operations.md, \"Unvouched nodes\")",
                     config_.node_id, raft_config->unvouched_may_elect,
                     raft_config->unvouched_may_elect);
  }
  // "An empty log", not "an empty directory": a node that lost only log/ keeps its other files.
  spdlog::info("node {}: {}: this node grants no vote to a candidate with entries until a leader "
               "has caught it up (docs/operations.md, \"Unvouched nodes\")",
               config_.node_id,
               found->present ? "an unvouched data directory" : "an empty log (no entry, no snapshot)");
  return true;
}

bool Replica::open_not_founder_marker(raft::Config* raft_config, NodeError* error) {
  if (config_.ignore_not_founder_marker) return true;
  const std::string path = config_.data_dir + "/" + NotFounderMarker::kFileName;
  auto found = NotFounderMarker::find(config_.store.env, config_.data_dir);
  if (!found.ok()) {
    *error = make_error(ErrorCode::kInternal, "reading " + path + ": " + found.status().to_string());
    return false;
  }
  not_founder_recorded_ = found->present;
  if (!found->present && !raft::is_voter(config_.raft.initial_conf, config_.node_id)) {
    // Not a voter of its bootstrap configuration: it joined (raftlogd --join, whose bootstrap is the
    // founders'), or will be added by a change. Either way a cluster that committed an entry.
    if (store::Status st = NotFounderMarker::write(config_.store.env, config_.data_dir,
                                                   config_.node_id, NotFounderMarker::Why::kJoined);
        !st.ok()) {
      *error = make_error(ErrorCode::kInternal, "writing " + path + ": " + st.to_string());
      return false;
    }
    not_founder_recorded_ = true;
  }
  if (!found->damage.empty()) {
    spdlog::warn("node {}: {}: {}; treated as present: this node never founds a cluster",
                 config_.node_id, path, found->damage);
  }
  // A sole member has nobody to be elected by: with an empty log it would never lead again.
  raft_config->never_founds = not_founder_recorded_ && has_peers();
  return true;
}

void Replica::record_not_founder_once_committed() {
  if (not_founder_recorded_ || commit_ == 0 || config_.ignore_not_founder_marker) return;
  // Once the cluster committed an entry, an empty leader would lack it: the record lets a restart
  // on a lost log/ know that (raft::Config::never_founds). Not fatal when it fails: the node is as
  // guarded as before it existed, and the next round retries.
  if (store::Status st = NotFounderMarker::write(config_.store.env, config_.data_dir,
                                                 config_.node_id,
                                                 NotFounderMarker::Why::kCommitted);
      !st.ok()) {
    if (not_founder_log_.admit(deps_.clock())) {
      spdlog::error("node {}: writing {}/{}: {} (retried)", config_.node_id, config_.data_dir,
                    NotFounderMarker::kFileName, st.to_string());
    }
    return;
  }
  not_founder_recorded_ = true;
}

bool Replica::record_vouching_word() {
  if (!unvouched_marker_ || !raft_->unvouched()) return true;
  // The leader's word (raft::Raft::vouching()): a restart in the middle of the catch-up resumes from
  // it (raft::Config::vouching_term). Its index rises with what leaders name while the node catches
  // up, and must be durable before the entries that came with it are: a restart that found those
  // entries beside an older word vouched the node below a commit it had been told. Hence at the
  // start of every Ready (apply_ready), before its snapshot and entries are written.
  const std::pair<raft::Term, raft::Index> word = raft_->vouching();
  if (word.first == 0 || word == recorded_vouching_) return true;
  if (store::Status st = UnvouchedMarker::write(config_.store.env, config_.data_dir, config_.node_id,
                                                word.first, word.second);
      !st.ok()) {
    fatal("recording the leader's word in " + config_.data_dir + "/" + UnvouchedMarker::kFileName +
          ": " + st.to_string());
    return false;
  }
  recorded_vouching_ = word;
  return true;
}

void Replica::forget_unvouched_marker_once_vouched() {
  if (!unvouched_marker_) return;
  if (raft_->unvouched()) {
    (void)record_vouching_word();
    return;
  }
  if (raft_->installing_snapshot()) return;
  if (store::Status st = UnvouchedMarker::remove(config_.store.env, config_.data_dir); !st.ok()) {
    if (unvouched_removal_log_.admit(deps_.clock())) {
      spdlog::error("node {}: removing {}/{}: {} (retried; until it is gone a restart repeats the "
                    "catch-up)",
                    config_.node_id, config_.data_dir, UnvouchedMarker::kFileName, st.to_string());
    }
    return;
  }
  unvouched_marker_ = false;
  spdlog::info("node {}: a leader caught this node up (log [{}, {}]): it votes again", config_.node_id,
               log_->first_index(), log_->last_index());
}

std::string Replica::catch_up_reason() const {
  switch (raft_->catch_up_cause()) {
    case raft::Raft::CatchUpCause::kConfig:
      return storage_fault_;
    case raft::Raft::CatchUpCause::kLeaderCommit:
      return "its leader named commit index " + std::to_string(raft_->catching_up_to()) +
             " beyond this node's log: the node lost entries it had acknowledged (a data "
             "directory lost or replaced under its id?)";
    case raft::Raft::CatchUpCause::kUnvouched:
      return unvouched_reason();
    case raft::Raft::CatchUpCause::kNone:
      break;
  }
  return "";
}

void Replica::report_committed_conflict() {
  const raft::CommittedConflict& conflict = raft_->committed_conflict();
  const std::optional<std::uint64_t> held_back =
      committed_conflict_alarm_.note(conflict.count, deps_.clock());
  if (!held_back) return;
  spdlog::critical(
      "node {}: leader {} (term {}) holds an entry of term {} at index {} where this node holds a "
      "COMMITTED entry of term {}: two nodes disagree on a committed entry (a safety violation: a "
      "data directory lost or copied under a node's id?). This node keeps its log, cannot be caught "
      "up and serves nothing (NOT_SERVING); see docs/operations.md, \"A committed entry conflicts "
      "with the leader\"{}",
      config_.node_id, conflict.leader, raft_->term(), conflict.leader_term, conflict.index,
      conflict.own_term,
      *held_back == 0 ? std::string()
                      : " (" + std::to_string(*held_back) + " more such append(s) not logged)");
}

void Replica::note_catch_up_for_unvouched_hint() {
  const std::uint64_t moves = raft_->catch_up_moves();
  if (!unvouched_still_since_ || !raft_->unvouched() || moves != unvouched_moves_seen_) {
    unvouched_still_since_ = deps_.clock();
    unvouched_moves_seen_ = moves;
  }
}

void Replica::note_vote_request_while_unvouched(const raft::Message& m) {
  if (!raft_->unvouched() || m.index == 0) return;
  candidate_with_entries_at_ = deps_.clock();
  const raft::NodeId named = config_.raft.unvouched_may_elect;
  const auto [word_term, word_index] = raft_->vouching();
  if (named == raft::kNoNode || m.from != named || word_term == 0) return;
  if (raft::rules::log_meets_vouching_word(m.log_term, m.index, word_term, word_index)) return;
  // The core grants the named candidate whatever the word says (raft::Config::unvouched_may_elect):
  // the operator's word stands above a leader's. But this node knows the candidate lacks entries
  // that leader committed, and they are lost if it wins: said at every such request (bounded).
  if (may_elect_override_log_.admit(deps_.clock())) {
    spdlog::critical(
        "node {}: --unvouched-may-elect {}: node {} asks for a vote with a log ending at index {} "
        "of term {}, but the leader of term {} told this node that entries up to {} are "
        "committed: if it wins, the committed entries it lacks are lost (the operator's word "
        "grants it where the ordinary rules allow; docs/operations.md, \"Unvouched nodes\")",
        config_.node_id, named, m.from, m.index, m.log_term, word_term, word_index);
  }
}

std::string Replica::unvouched_hint() const {
  if (!unvouched_still_since_ || !raft_->unvouched() || !candidate_with_entries_at_) return "";
  // Long past any election a healthy cluster holds: ten of the longest election timeouts, and at
  // least kUnvouchedHintAfter (a node's first seconds after a start often pass without a leader).
  const auto election_timeout = std::chrono::milliseconds(
      2 * static_cast<std::uint64_t>(config_.election_ticks) * config_.tick_ms);
  const Clock::duration after =
      std::max<Clock::duration>(kUnvouchedHintAfter, 10 * election_timeout);
  const Clock::time_point now = deps_.clock();
  const Clock::duration still = now - *unvouched_still_since_;
  // Only while candidates with entries keep asking (within the last span): the evidence of a
  // wedge. A node waiting to be added, or for its peers to start, is asked by nobody.
  if (still < after || now - *candidate_with_entries_at_ >= after) return "";
  return "nothing has moved for " +
         std::to_string(std::chrono::duration_cast<std::chrono::seconds>(still).count()) +
         " s (no leader caught it up) while candidates with entries ask for its vote: if nodes "
         "are down, bring them back; if a majority of the nodes lost their logs and the node "
         "that holds the log is up, it may be waiting for an operator (docs/operations.md, "
         "\"Unvouched nodes\": check which node holds the log, then --unvouched-may-elect)";
}

}  // namespace raftlog::replica

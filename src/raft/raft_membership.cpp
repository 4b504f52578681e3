// Configurations in the log and single-server membership changes (Raft dissertation ch. 4; the choice
// and its rules: docs/raft.md, "Membership changes").
//
// A configuration is in force on a node from the moment its kConfig entry is in the node's log
// (rules::conf_in_force), committed or not; cutting the entry rolls the node back to the
// configuration before it. A leader starts a change only once the previous one committed
// (rules::conf_change_may_start) and once it committed an entry of its own term, so a log never holds
// more than one uncommitted configuration and any two successive configurations share a majority.
#include <algorithm>
#include <set>

#include "raft/assert.h"
#include "raft/quorum.h"
#include "raft/raft_impl.h"
#include "raft/rules.h"

namespace raftlog::raft {

void Raft::Impl::append_to_log(std::vector<Entry>&& entries) {
  if (entries.empty()) return;
  const Index first_new = entries.front().index;
  bool history_changed = false;
  // The entries from first_new on are replaced: so are the configurations they held. The oldest
  // record stays (it is committed, or the bootstrap one: a truncation never reaches it).
  while (conf_history_.size() > 1 && conf_history_.back().index >= first_new) {
    conf_history_.pop_back();
    history_changed = true;
  }
  for (const Entry& entry : entries) {
    if (entry.type != EntryType::kConfig) continue;
    std::optional<ConfState> conf = decode_config(entry.payload);
    // Leaders encode valid configurations; appends from peers were checked by
    // conf_entries_acceptable before they got here.
    RAFT_ASSERT(conf.has_value(), "a kConfig entry reached the log without a valid configuration");
    if (conf_history_.back().index >= entry.index)
      conf_history_.pop_back();  // the oldest, replaced
    conf_history_.push_back(ConfRecord{entry.index, entry.term, std::move(*conf)});
    history_changed = true;
  }
  log_.append(std::move(entries));
  if (history_changed) refresh_conf();
}

void Raft::Impl::commit_to(Index index) {
  log_.commit_to(index);
  // Only the newest configuration at or below the commit index can still matter for a rollback.
  std::size_t newest_committed = 0;
  for (std::size_t i = 1; i < conf_history_.size(); ++i) {
    if (conf_history_[i].index <= log_.committed()) newest_committed = i;
  }
  if (newest_committed == 0) return;
  for (std::size_t i = 0; i < newest_committed; ++i)
    retire_members_of(conf_history_[i].conf, conf_history_[newest_committed].conf);
  conf_history_.erase(conf_history_.begin(),
                      conf_history_.begin() + static_cast<std::ptrdiff_t>(newest_committed));
  refresh_conf();
}

void Raft::Impl::retire_members_of(const ConfState& committed, const ConfState& newest_committed) {
  for (const std::vector<NodeId>* ids : {&committed.voters, &committed.learners}) {
    for (NodeId node : *ids) {
      if (raft::is_member(newest_committed, node) || node == id()) continue;
      if (std::find(retired_.begin(), retired_.end(), node) != retired_.end()) continue;
      if (retired_.size() >= kMaxRetiredIds) retired_.erase(retired_.begin());
      retired_.push_back(node);
    }
  }
  // A member again (only where ids were reused before they were retired): no longer retired.
  std::erase_if(retired_, [&](NodeId node) { return raft::is_member(newest_committed, node); });
}

bool Raft::Impl::retired_here(NodeId node) const {
  if (std::find(retired_.begin(), retired_.end(), node) == retired_.end()) return false;
  return std::none_of(conf_history_.begin(), conf_history_.end(),
                      [&](const ConfRecord& record) { return raft::is_member(record.conf, node); });
}

// The word is stale only where our own history shows it: our log holds, at the position it names,
// the configuration entry that retired us (a configuration that does not list us), and our
// configuration in force lists us again (a later change re-added us). An entry of the same term
// that is no configuration (another history that reused the term, review of retired5 #1) or a
// compacted one does not: the word binds.
bool Raft::Impl::word_is_stale(Index index, Term term) const {
  if (index == 0 || index < log_.first_index() || index > log_.last_index()) return false;
  if (log_.term_at(index) != std::optional<Term>(term)) return false;
  const std::vector<Entry> entry = log_.entries(index, index, 0);
  if (entry.empty() || entry.front().type != EntryType::kConfig) return false;
  const std::optional<ConfState> retiring = decode_config(entry.front().payload);
  return retiring.has_value() && !raft::is_member(*retiring, id()) && raft::is_member(conf_, id());
}

// A retired id is told so (kRemovedContext), before the term rules: neither our term, our vote nor
// our leader moves for it. Its (pre-)vote requests, and its appends, heartbeats and snapshots of our
// term or later, are all answered so (a stale sender of an earlier term is told our term by the
// ordinary rules), and its TimeoutNow is dropped. Ids are never reused: the replica refuses to add
// a retired one (ID_RETIRED), so a retired id is never a member again and nothing it sends may
// count. Before 2026-12-07 only vote requests whose log was behind were answered so, on the theory
// that a retired id whose log was ahead might have been re-added by a change our log lacked; with
// such escapes, retired founders restarted on empty disks with the founders' --members (drills7
// H2) were followed by a real member whenever their log looked ahead or matched ours at an index
// (two histories of one term: review of retired5 #1, #2). A driver that re-added retired ids (none
// does) would have such an id refused by every member that knows the retirement until their logs
// hold the re-adding.
// The answer names our newest committed configuration (commit, log_term): the sender's word binds
// it unless its own history shows the word stale (word_is_stale).
bool Raft::Impl::answer_retired(const Message& m) {
  const bool vote = m.type == MessageType::kPreVote || m.type == MessageType::kVote;
  const bool leads = m.type == MessageType::kAppend || m.type == MessageType::kHeartbeat ||
                     m.type == MessageType::kSnapshot;
  // A TimeoutNow makes us campaign at a higher term: never for a retired id.
  if (m.type == MessageType::kTimeoutNow) return retired_here(m.from);
  if (!vote && !leads) return false;
  // The common case first, before the retired list is searched: our own leader's messages.
  if (leads && (m.term < term_ || (m.term == term_ && leader_ == m.from))) return false;
  if (!retired_here(m.from)) return false;
  const ConfRecord& committed = conf_history_.front();
  Message reply;
  if (vote) {
    reply.type =
        m.type == MessageType::kPreVote ? MessageType::kPreVoteResponse : MessageType::kVoteResponse;
  } else {
    reply.type = MessageType::kAppendResponse;
    reply.index = m.type == MessageType::kAppend ? m.index : 0;
  }
  reply.to = m.from;
  reply.term = m.term;  // kept on vote answers; send() puts our own term on the others
  reply.reject = true;
  reply.context = kRemovedContext;
  reply.commit = committed.index;
  reply.log_term = committed.term;
  send(std::move(reply), /*after_persist=*/false);
  return true;
}

// A member's word that our id is retired. It binds unless our history shows it stale (we hold the
// configuration that retired us and a later one lists us: word_is_stale). A binding word stops
// campaigns and leadership (promotable; a leader steps down) and grants only candidates that may
// hold the named entry, until our history makes the word stale: a node whose log lacks a committed
// entry cannot win an election anyway, so nothing a live cluster needs is lost, and a forged word
// needs the cluster's peer credentials. A word without a position (commit 0: a member from before
// 2026-12-07) is information only, as before.
bool Raft::Impl::note_removed(const Message& m) {
  if (m.context != kRemovedContext || !m.reject) return false;
  if (m.type != MessageType::kPreVoteResponse && m.type != MessageType::kVoteResponse &&
      m.type != MessageType::kAppendResponse) {
    return false;
  }
  if (m.commit != 0 && word_is_stale(m.commit, m.log_term)) return true;  // dropped
  // A word without a position (an older member's) never replaces a binding one: it would loosen
  // the node, and its driver would then remove the binding word's record (DATA_DIR/REMOVED).
  if (m.commit == 0 && told_removed()) return true;
  removed_word_ = RemovedWord{m.from, m.commit, m.log_term};
  if (m.commit == 0) return true;  // information only
  if (role_ == Role::kLeader) {
    step_down_in_term(StepDownReason::kToldRemoved, m.from);
  } else if (role_ != Role::kFollower) {
    become_follower(term_, kNoNode);
  }
  return true;
}

bool Raft::Impl::told_removed_may_grant(const Message& m) const {
  if (!told_removed()) return true;
  return m.index >= removed_word_->conf_index && m.log_term >= removed_word_->conf_term;
}

void Raft::Impl::clear_removed_if_answered() {
  if (told_removed() && word_is_stale(removed_word_->conf_index, removed_word_->conf_term)) {
    removed_word_.reset();
  }
}

void Raft::Impl::refresh_conf() {
  RAFT_ASSERT(!conf_history_.empty(), "the configuration history is never empty");
  const std::size_t in_force = rules::conf_in_force(conf_history_, log_.committed());
  RAFT_ASSERT(in_force < conf_history_.size(), "rules::conf_in_force named no configuration");
  conf_ = conf_history_[in_force].conf;
  if (role_ != Role::kLeader) return;
  // A leader replicates to every member of every configuration in its history: new members start
  // probing at the end of its log; a member removed by a change not committed yet still receives
  // the log, so that it learns of its removal rather than time out; members of no such
  // configuration are forgotten (their answers are ignored from now on).
  std::set<NodeId> tracked;
  for (const ConfRecord& record : conf_history_) {
    tracked.insert(record.conf.voters.begin(), record.conf.voters.end());
    tracked.insert(record.conf.learners.begin(), record.conf.learners.end());
  }
  tracked.erase(id());
  for (auto it = progress_.begin(); it != progress_.end();) {
    if (tracked.contains(it->first)) {
      ++it;
      continue;
    }
    // A last heartbeat tells a removed node that its removal committed (as far as it matched), so
    // that it stops campaigning (promotable); lost, it only costs that node's pre-votes.
    send_heartbeat(it->first, 0);
    it = progress_.erase(it);
  }
  for (NodeId member : tracked) {
    if (progress_.contains(member)) continue;
    Progress pr(config_.max_inflight_messages, config_.max_inflight_bytes);
    pr.next = log_.last_index();  // probe first at the entry before the configuration
    pr.recent_active = true;      // a full election timeout before check-quorum judges it
    progress_.emplace(member, std::move(pr));
  }
  if (transfer_target_ != kNoNode && !is_voter(transfer_target_)) abort_transfer();
}

bool Raft::Impl::conf_entries_acceptable(const std::vector<Entry>& entries,
                                         std::size_t first) const {
  // The configuration before entries[first]: the newest record below its index, when we have one
  // (a node that lost part of its log to a storage fault may not).
  const ConfState* previous = nullptr;
  if (first < entries.size()) {
    for (const ConfRecord& record : conf_history_) {
      if (record.index < entries[first].index) previous = &record.conf;
    }
  }
  std::optional<ConfState> decoded_previous;
  for (std::size_t i = first; i < entries.size(); ++i) {
    if (entries[i].type != EntryType::kConfig) continue;
    std::optional<ConfState> conf = decode_config(entries[i].payload);
    if (!conf) return false;  // malformed payload, unknown version, empty voter set, node 0, ...
    if (previous != nullptr && !single_change_between(*previous, *conf)) return false;
    decoded_previous = std::move(conf);
    previous = &*decoded_previous;
  }
  return true;
}

bool Raft::Impl::peer_recently_heard(NodeId peer) const {
  if (peer == id()) return true;
  const auto it = progress_.find(peer);
  return it != progress_.end() && it->second.heard_this_term &&
         it->second.ticks_since_contact < static_cast<std::uint64_t>(config_.election_ticks);
}

ConfChangeResult Raft::Impl::propose_conf_change(const ConfChange& change) {
  ConfChangeResult result;
  result.leader_hint = leader_;
  if (role_ != Role::kLeader) {
    result.status = ConfChangeStatus::kNotLeader;
    return result;
  }
  if (transfer_target_ != kNoNode) {
    result.status = ConfChangeStatus::kTransferring;
    return result;
  }
  // The leader-change bug (dissertation §4.1, and its fix): a configuration entry of an earlier
  // term that this leader holds uncommitted may still be cut, and a change based on it could then
  // produce two majorities that do not overlap. Committing an entry of its own term settles that.
  if (!own_term_committed()) {
    result.status = ConfChangeStatus::kNotReady;
    return result;
  }
  if (!rules::conf_change_may_start(conf_history_.back().index, log_.committed())) {
    result.status = ConfChangeStatus::kInProgress;
    return result;
  }
  result.problem = check_conf_change(conf_, change);
  if (result.problem != ConfChangeProblem::kNone) {
    result.status = ConfChangeStatus::kInvalid;
    return result;
  }
  // A learner becomes a voter once it holds everything committed: promoted earlier, it could be
  // part of every majority while it is still far behind, and commits would wait for it.
  if (change.type == ConfChangeType::kPromoteLearner) {
    const auto learner = progress_.find(change.node);
    if (learner == progress_.end() || learner->second.match < log_.committed()) {
      result.status = ConfChangeStatus::kLearnerBehind;
      return result;
    }
  }
  const ConfState next = apply_conf_change(conf_, change);
  // The new configuration must be able to commit (this change first): a quorum of its voters must
  // be reachable now. A voter that is new to the cluster has not been heard from: add it as a
  // learner, let it catch up, then promote it. Nor does a voter count unless its latest accepted
  // append response of this term was not marked catching up (it lost its log, or a storage fault;
  // a heartbeat answer or a rejection says nothing about that): a change that needs it for
  // every majority (two voters, say) left a cluster that elected nobody once the leader was gone
  // before it was caught up, its vote being one it may give no candidate with entries yet
  // (docs/raft.md, "Unvouched nodes"; the simulator's --wipe --reconfigure, seed 27).
  std::size_t reachable = 0;
  std::vector<UncountedVoter> uncounted;
  for (NodeId voter : next.voters) {
    const auto pr = progress_.find(voter);
    const bool counts = voter == id() || (pr != progress_.end() && pr->second.counts_for_changes);
    if (peer_recently_heard(voter) && counts) {
      ++reachable;
      continue;
    }
    UncountedVoter standing;
    standing.node = voter;
    if (pr != progress_.end()) {
      standing.ticks_since_contact = pr->second.ticks_since_contact;
      standing.heard_this_term = pr->second.heard_this_term;
      if (peer_recently_heard(voter)) {
        standing.why = pr->second.catching_up ? UncountedVoter::Why::kCatchingUp
                                              : UncountedVoter::Why::kNoAcknowledgement;
      }
    }
    uncounted.push_back(standing);
  }
  if (reachable < quorum_size(next.voters.size())) {
    result.status = ConfChangeStatus::kWouldLoseQuorum;
    result.quorum = quorum_size(next.voters.size());
    result.reachable = reachable;
    result.uncounted = std::move(uncounted);
    return result;
  }
  Entry entry;
  entry.index = log_.last_index() + 1;
  entry.term = term_;
  entry.type = EntryType::kConfig;
  entry.payload = encode_config(next);
  if (uncommitted_.size() + 1 > config_.max_uncommitted_entries ||
      uncommitted_bytes_ + entry.byte_size() > config_.max_uncommitted_bytes) {
    result.status = ConfChangeStatus::kTooManyPending;
    return result;
  }
  uncommitted_.push_back(Uncommitted{entry.index, entry.byte_size(), false});
  uncommitted_bytes_ += entry.byte_size();
  result.status = ConfChangeStatus::kOk;
  result.index = entry.index;
  result.term = term_;
  append_to_log({std::move(entry)});
  broadcast_append(/*send_if_empty=*/false);
  // A single remaining voter (this leader) commits as soon as the entry is durable: on_persisted.
  return result;
}

void Raft::Impl::step_down_if_removed() {
  if (role_ != Role::kLeader || is_voter(id())) return;
  if (conf_history_.back().index > log_.committed()) return;  // keeps leading until it commits
  // Hand over to the most caught-up voter whose log is complete, so the cluster need not wait an
  // election timeout; without one, the voters elect a leader on their own.
  NodeId successor = kNoNode;
  for (const auto& [peer, pr] : progress_) {
    if (is_voter(peer) && pr.match == log_.last_index() && !pr.catching_up) {
      successor = peer;
      break;
    }
  }
  step_down_in_term(StepDownReason::kRemoved, successor);
  if (successor != kNoNode) {
    Message m;
    m.type = MessageType::kTimeoutNow;
    m.to = successor;
    send(std::move(m), /*after_persist=*/false);
  }
}

}  // namespace raftlog::raft

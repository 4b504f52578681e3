// Log replication: sending and answering AppendEntries and heartbeats, fast backtracking, the commit
// rule, durability reports and proposals.
#include <algorithm>

#include "raft/assert.h"
#include "raft/quorum.h"
#include "raft/raft_impl.h"
#include "raft/rules.h"

namespace raftlog::raft {
namespace {

bool is_vote_message(MessageType type) {
  return type == MessageType::kPreVote || type == MessageType::kPreVoteResponse ||
         type == MessageType::kVote || type == MessageType::kVoteResponse;
}

// An append is well formed when its entries continue m.index contiguously with terms between
// m.log_term and m.term. Anything else is ignored rather than allowed to corrupt the log.
bool well_formed_append(const Message& m) {
  Term previous_term = m.log_term;
  for (std::size_t i = 0; i < m.entries.size(); ++i) {
    const Entry& e = m.entries[i];
    if (e.index != m.index + 1 + i || e.term < previous_term || e.term > m.term) return false;
    previous_term = e.term;
  }
  return m.log_term <= m.term;
}

}  // namespace

void Raft::Impl::send(Message m, bool after_persist) {
  m.from = id();
  // Vote traffic names its term explicitly (a pre-vote asks about term + 1); everything else is ours.
  if (!is_vote_message(m.type)) m.term = term_;
  if (m.type == MessageType::kAppendResponse || m.type == MessageType::kHeartbeatResponse) {
    m.disk_over_watermark = disk_over_watermark_;
  }
  // Every leader message of our leadership of this term names it (Message::leader_nonce), also the
  // TimeoutNow a leader that removed itself sends after stepping down; a refusal names the known
  // one itself (refuse_second_leader).
  if (term_leader() == id() &&
      (m.type == MessageType::kAppend || m.type == MessageType::kHeartbeat ||
       m.type == MessageType::kSnapshot || m.type == MessageType::kTimeoutNow)) {
    m.leader_nonce = term_leader_nonce();
  }
  std::vector<Message>& queue = after_persist ? messages_after_persist_ : messages_;
  RAFT_ASSERT(messages_.size() + messages_after_persist_.size() < kMaxOutboxMessages,
              "outbox full: the driver must drain ready() after its inputs");
  queue.push_back(std::move(m));
}

bool Raft::Impl::send_append(NodeId peer, bool send_if_empty) {
  Progress& pr = progress_.at(peer);
  if (pr.is_paused()) return false;
  // Only the peer's own answer shows that it needs entries we trimmed (Progress::answered_append):
  // a guess below our first index without one probes at our first index instead, and its answer
  // decides. A deposed leader or any follower holding the retained log then catches up by appends.
  if (pr.next < log_.first_index() && !pr.answered_append) pr.next = log_.first_index();
  const Index previous_index = pr.next - 1;
  const std::optional<Term> previous_term = log_.term_at(previous_index);
  // The entries this peer needs were trimmed from our log: a snapshot replaces them.
  if (!previous_term || pr.next < log_.first_index()) return send_snapshot(peer);
  Message m;
  m.type = MessageType::kAppend;
  m.to = peer;
  m.index = previous_index;
  m.log_term = *previous_term;
  m.commit = log_.committed();
  if (pr.next <= log_.last_index()) {
    const Index last_wanted =
        std::min(log_.last_index(), pr.next + config_.max_entries_per_message - 1);
    m.entries = log_.entries(pr.next, last_wanted, append_byte_budget(pr));
  }
  if (m.entries.empty() && !send_if_empty) return false;
  if (!m.entries.empty()) {
    std::size_t bytes = 0;
    for (const Entry& e : m.entries) bytes += e.byte_size();
    pr.on_entries_sent(m.entries.back().index, bytes);
  } else if (pr.state == ReplicationState::kProbe) {
    pr.probe_sent = true;
  }
  send(std::move(m), /*after_persist=*/false);
  return true;
}

// What the next append to `pr` may read and carry: a full message, or in replicate state only the
// room left in its in-flight window (at least one entry is always read), so the window holds at most
// max_inflight_bytes plus the one entry that did not fit, and a follower far behind costs each
// loop round at most that much reading and sending however long its log's gap.
std::size_t Raft::Impl::append_byte_budget(const Progress& pr) const {
  if (pr.state != ReplicationState::kReplicate) return config_.max_bytes_per_message;
  const std::size_t in_flight = pr.inflights.bytes();
  const std::size_t room =
      in_flight < config_.max_inflight_bytes ? config_.max_inflight_bytes - in_flight : 1;
  return std::min(config_.max_bytes_per_message, room);
}

void Raft::Impl::broadcast_append(bool send_if_empty) {
  for (auto& [peer, pr] : progress_) send_append(peer, send_if_empty);
}

void Raft::Impl::send_heartbeat(NodeId peer, std::uint64_t context) {
  Message m;
  m.type = MessageType::kHeartbeat;
  m.to = peer;
  // Never tell a follower to commit beyond what it is known to hold: its tail past `match` may still
  // be a stale leader's entries.
  m.commit = std::min(progress_.at(peer).match, log_.committed());
  // Unclamped, so that a follower knows how far behind it is from the first heartbeat on (a
  // restarted or newly led learner otherwise looked caught up until an append arrived).
  m.leader_commit = log_.committed();
  // Our first retained index, so that a follower that needs trimmed entries knows it is stranded
  // (stranded_below). 0 while we hold everything from index 1: then no follower can be.
  m.index = log_.first_index() > 1 ? log_.first_index() : 0;
  // A peer we send a snapshot to needs entries we trimmed, whatever its own log shows: it is
  // stranded until it installs one (its health NOT_SERVING while our snapshot is encoded and sent).
  m.sending_snapshot = progress_.at(peer).state == ReplicationState::kSnapshot;
  m.context = context;
  send(std::move(m), /*after_persist=*/false);
}

void Raft::Impl::broadcast_heartbeat(std::uint64_t context) {
  for (auto& [peer, pr] : progress_) send_heartbeat(peer, context);
}

void Raft::Impl::step_follower(Message& m) {
  switch (m.type) {
    case MessageType::kAppend:
      election_elapsed_ticks_ = 0;
      leader_ = m.from;
      handle_append(m);
      return;
    case MessageType::kHeartbeat:
      election_elapsed_ticks_ = 0;
      leader_ = m.from;
      handle_heartbeat(m);
      return;
    case MessageType::kSnapshot:
      election_elapsed_ticks_ = 0;
      leader_ = m.from;
      handle_snapshot(m);
      return;
    case MessageType::kTimeoutNow:
      if (promotable()) start_election(CampaignKind::kTransfer);
      return;
    default:
      return;  // responses meant for a leader or candidate we no longer are
  }
}

void Raft::Impl::step_candidate(Message& m) {
  switch (m.type) {
    case MessageType::kAppend:
      become_follower(m.term, m.from);  // someone won this term
      handle_append(m);
      return;
    case MessageType::kHeartbeat:
      become_follower(m.term, m.from);
      handle_heartbeat(m);
      return;
    case MessageType::kSnapshot:
      become_follower(m.term, m.from);
      handle_snapshot(m);
      return;
    case MessageType::kPreVoteResponse:
    case MessageType::kVoteResponse:
      handle_vote_response(m);
      return;
    default:
      return;
  }
}

void Raft::Impl::step_leader(const Message& m) {
  switch (m.type) {
    case MessageType::kAppendResponse:
      handle_append_response(m);
      return;
    case MessageType::kHeartbeatResponse:
      handle_heartbeat_response(m);
      return;
    default:
      return;  // another leader of our term cannot exist; vote answers are late
  }
}

void Raft::Impl::handle_append(Message& m) {
  if (!well_formed_append(m)) return;
  note_leader_contact_while_unvouched(m);
  leader_commit_seen_ = std::max(leader_commit_seen_, m.commit);
  Message reply;
  reply.type = MessageType::kAppendResponse;
  reply.to = m.from;
  if (m.index < log_.committed()) {
    // Everything up to our commit index matches any leader's log; tell the leader where we stand.
    // An entry of it there with another term says otherwise: a safety violation, said loudly.
    if (const Index conflict = first_committed_conflict(m); conflict != 0) {
      note_committed_conflict(conflict, log_.term_at(conflict).value_or(0),
                              m.entries[conflict - m.index - 1].term, m.from);
    }
    reply.index = log_.committed();
    // Marked while catching up, like any other acknowledgement: unmarked, it made the leader count
    // the node's match toward commit again, and toward a change's quorum (review amnesia3 M1, H1).
    mark_if_catching_up(reply);
    send(std::move(reply), /*after_persist=*/true);
    return;
  }
  if (log_.matches(m.index, m.log_term)) {
    const Index last_new_index = m.index + m.entries.size();
    const Index conflict = log_.find_conflict(m.entries);
    if (conflict != 0) {
      // A leader's entries never conflict with a committed entry: one that does comes from a forged
      // or corrupted message (or a leader whose storage failed). Dropping it keeps our log intact.
      if (conflict <= log_.committed()) {
        note_committed_conflict(conflict, log_.term_at(conflict).value_or(0),
                                m.entries[conflict - m.index - 1].term, m.from);
        return;
      }
      // So is an append whose configurations do not decode or skip a change.
      if (!conf_entries_acceptable(m.entries, conflict - m.index - 1)) return;
      // Moved, not copied: a multi-MiB append would otherwise be copied twice more on the loop thread.
      std::vector<Entry> suffix(
          std::make_move_iterator(m.entries.begin() +
                                  static_cast<std::ptrdiff_t>(conflict - m.index - 1)),
          std::make_move_iterator(m.entries.end()));
      append_to_log(std::move(suffix));
    }
    leader_match_ = std::max(leader_match_, last_new_index);
    stale_match_ruled_out_ = unvouched_;
    rejected_leaders_first_probe_ = false;
    leader_sending_snapshot_ = false;
    commit_to(std::min(m.commit, last_new_index));
    reply.index = last_new_index;  // acknowledged only once durable (after persist)
    mark_if_catching_up(reply);
    send(std::move(reply), /*after_persist=*/true);
    return;
  }
  // Our committed entry at m.index (m.index == our commit: below it was answered above) has
  // another term than the leader's: no hint can lead it to a match below.
  if (m.index == log_.committed() && m.index > 0) {
    const std::optional<Term> own = log_.term_at(m.index);
    if (own.has_value() && *own != m.log_term) {
      note_committed_conflict(m.index, *own, m.log_term, m.from);
    }
  }
  // Mismatch: hint the highest index that could match, skipping whole terms the leader cannot share
  // (fast backtracking): the largest index <= min(m.index, last) whose term is <= m.log_term.
  // The leader probes at its first retained index when it cannot go lower (handle_heartbeat_response):
  // a mismatch there leaves this node stranded. Only that exact probe counts, so a heartbeat naming
  // some other first index (stale, or forged) cannot make any other mismatch look like one.
  if (leader_first_index_ > 0 && m.index + 1 == leader_first_index_ && !leaders_word_inherited_) {
    rejected_leaders_first_probe_ = true;
  }
  const Index probe_from = std::min(m.index, log_.last_index());
  const auto [hint_index, hint_term] = log_.find_conflict_by_term(probe_from, m.log_term);
  reply.index = m.index;
  reply.reject = true;
  reply.reject_hint = hint_index;
  reply.hint_term = hint_term;
  send(std::move(reply), /*after_persist=*/true);
}

void Raft::Impl::handle_heartbeat(const Message& m) {
  note_leader_contact_while_unvouched(m);
  // A clamped commit below the leader's own is its match for us (send_heartbeat): no stale one if
  // our log reaches it (unvouched_may_grant).
  if (unvouched_ && m.commit < m.leader_commit && m.commit <= log_.last_index()) {
    stale_match_ruled_out_ = true;
  }
  Message reply;
  reply.type = MessageType::kHeartbeatResponse;
  reply.to = m.from;
  reply.context = m.context;
  leader_first_index_ = m.index;
  if (leaders_word_inherited_) {  // this leader's word replaces the previous one's (reset())
    leaders_word_inherited_ = false;
    rejected_leaders_first_probe_ = false;
  }
  leader_sending_snapshot_ = m.sending_snapshot && snapshot_held_through_ + 1 < m.index;
  leader_commit_seen_ = std::max({leader_commit_seen_, m.commit, m.leader_commit});
  if (m.commit > log_.last_index()) {
    // A leader names at most what we acknowledged (send_heartbeat), so our log lost entries it
    // already vouched for (storage fault), or the message is forged. Commit what we hold, tell the
    // leader where our log ends so it re-sends from there, and stop voting until we hold it again.
    commit_to(std::min(log_.last_index(), leader_match_));
    enter_catching_up(m.commit, term_, Raft::CatchUpCause::kLeaderCommit);
    reply.reject = true;
    reply.reject_hint = log_.last_index();
  } else {
    commit_to(std::min(m.commit, leader_match_));
  }
  send(std::move(reply), /*after_persist=*/false);
}

Index Raft::Impl::first_committed_conflict(const Message& m) const {
  for (const Entry& e : m.entries) {
    if (e.index > log_.committed()) break;
    const std::optional<Term> own = log_.term_at(e.index);
    if (own.has_value() && *own != e.term) return e.index;  // trimmed entries are not compared
  }
  return 0;
}

void Raft::Impl::note_committed_conflict(Index index, Term own_term, Term leader_term,
                                         NodeId leader) {
  const std::uint64_t count = committed_conflict_.count + 1;
  committed_conflict_ = CommittedConflict{index, own_term, leader_term, leader, count};
}

Index Raft::Impl::behind_leader_commit() const {
  if (role_ != Role::kFollower || leader_ == kNoNode) return 0;
  return leader_commit_seen_ > log_.last_index() ? leader_commit_seen_ : 0;
}

Index Raft::Impl::stranded_below() const {
  if (role_ != Role::kFollower || leader_ == kNoNode) return 0;
  return stranded_by_leaders_word() ? leader_first_index_ : 0;
}

bool Raft::Impl::stranded_by_leaders_word() const {
  if (leader_first_index_ == 0) return false;
  const bool gap = leader_first_index_ > log_.last_index() + 1;
  return gap || rejected_leaders_first_probe_ || leader_sending_snapshot_;
}

// A node this leader no longer tracks acknowledged entries: a removed node whose acknowledgement of
// its own removal arrived after the removal committed (refresh_conf forgot it, and the last heartbeat
// it sent then could name only what the node had acknowledged before). Tell it how far the commit
// reaches within what it acknowledged, so that it learns its removal committed and stops
// campaigning. Only a plain acknowledgement (not a refusal, not a catching-up node's marked one):
// its log matches ours up to m.index in this term, which is what any heartbeat's commit relies on.
// One heartbeat per acknowledgement, and nothing is tracked, so it never counts toward a majority.
void Raft::Impl::answer_untracked_ack(const Message& m) {
  if (m.reject || m.context == kCatchingUpContext || m.index == 0 || m.index > log_.last_index())
    return;
  if (raft::is_member(conf_, m.from)) return;  // a member is tracked (refresh_conf); none here
  Message reply;
  reply.type = MessageType::kHeartbeat;
  reply.to = m.from;
  reply.commit = std::min(m.index, log_.committed());
  reply.index = log_.first_index() > 1 ? log_.first_index() : 0;
  send(std::move(reply), /*after_persist=*/false);
}

void Raft::Impl::handle_append_response(const Message& m) {
  const auto found = progress_.find(m.from);
  if (found == progress_.end()) {  // not a member (any more, or yet)
    answer_untracked_ack(m);
    return;
  }
  Progress& pr = found->second;
  pr.heard_this_term = true;
  pr.recent_active = true;
  pr.ticks_since_contact = 0;
  pr.ticks_since_append_response = 0;
  pr.disk_over_watermark = m.disk_over_watermark;
  if (m.index > log_.last_index()) return;  // malformed: cannot acknowledge what we never had
  // An acknowledgement of index 0 says nothing about the peer's log (every log matches there): it
  // is the answer a node in our term gives to a message of an earlier term (handle_term: a deposed
  // leader receiving this node's own late messages from before it led), or to a probe at index 0
  // carrying nothing. Taken as an acknowledgement it turned a probe into replicate state at next
  // index 1, and the follower got a snapshot it did not need.
  if (!m.reject && m.index == 0) return;
  pr.answered_append = true;
  if (m.reject) {
    // Its log is not where this leader thought (lost, or diverging): an acknowledgement of its
    // previous life still in flight said nothing about it (review amnesia3 H1).
    pr.counts_for_changes = false;
    Index match_hint = std::min(m.reject_hint, log_.last_index());
    if (m.hint_term > 0) match_hint = log_.find_conflict_by_term(match_hint, m.hint_term).first;
    if (pr.on_reject(m.index, match_hint)) {
      if (pr.state == ReplicationState::kReplicate) pr.become_probe();
      send_append(m.from, /*send_if_empty=*/true);
    }
    return;
  }
  // A node catching up after a storage fault has its acknowledgements tracked but not counted; the
  // first unmarked one (possibly a repeat, see maybe_finish_catching_up) makes its match count.
  const bool finished_catching_up = pr.catching_up && m.context != kCatchingUpContext;
  pr.catching_up = m.context == kCatchingUpContext;
  pr.counts_for_changes = !pr.catching_up;
  const bool was_paused = pr.is_paused();
  const bool advanced = pr.on_ack(m.index);
  // The snapshot in flight is installed (or the follower had its entries already): replicate from
  // its new match point on (the probe below turns into replicate at once).
  if (pr.state == ReplicationState::kSnapshot && pr.match >= pr.pending_snapshot) pr.become_probe();
  // A commit may end this leadership (step_down_if_removed) or forget the sender (its removal
  // committed, refresh_conf): `pr` is then gone.
  auto still_tracked = [&] { return role_ == Role::kLeader && progress_.contains(m.from); };
  if (finished_catching_up && !advanced && maybe_commit()) {
    if (!still_tracked()) return;
    broadcast_append(/*send_if_empty=*/true);
  }
  if (!advanced && !(pr.match == m.index && pr.state == ReplicationState::kProbe))
    return;  // stale ack
  if (pr.state == ReplicationState::kProbe) {
    pr.become_replicate();
  } else {
    pr.inflights.free_up_to(m.index);
  }
  if (maybe_commit()) {
    if (!still_tracked()) return;
    broadcast_append(/*send_if_empty=*/true);  // carry the new commit index to everyone
  } else if (was_paused) {
    send_append(m.from, /*send_if_empty=*/true);
  }
  // Fill the in-flight window; each iteration sends one message or stops, so the window (messages
  // and bytes, Inflights) bounds it.
  for (std::size_t i = 0; i < config_.max_inflight_messages; ++i) {
    if (!send_append(m.from, /*send_if_empty=*/false)) break;
  }
  if (m.from == transfer_target_ && pr.match == log_.last_index()) send_timeout_now(m.from);
}

void Raft::Impl::handle_heartbeat_response(const Message& m) {
  const auto found = progress_.find(m.from);
  if (found == progress_.end()) return;  // not a member (any more, or yet)
  Progress& pr = found->second;
  pr.heard_this_term = true;
  pr.recent_active = true;
  pr.ticks_since_contact = 0;
  pr.disk_over_watermark = m.disk_over_watermark;
  pr.probe_sent = false;  // the peer is alive: allow the next probe
  if (m.reject && m.reject_hint < pr.match) {
    // The follower's log ends below what it acknowledged (it lost durable entries): lower our view of
    // it and probe from its real end, or replication to it would wait forever for a gap it cannot see.
    pr.match = m.reject_hint;
    pr.answered_append = true;
    pr.counts_for_changes = false;  // until it acknowledges again, unmarked
    pr.become_probe();
  }
  // A full window whose appends all went unanswered for an election timeout (lost, or their answers
  // were) gets one slot back, so replication cannot stall: the next append exposes the gap. Not
  // sooner: heartbeats answer on the control lane while a follower far behind still receives and
  // syncs the window's appends, and freeing a slot per heartbeat answer would pace the leader's
  // reads by heartbeats instead of acknowledgements, past the byte window and the transport's queue.
  if (pr.state == ReplicationState::kReplicate && pr.inflights.full() &&
      pr.ticks_since_append_response >= static_cast<std::uint64_t>(config_.election_ticks)) {
    pr.inflights.free_first();
  }
  // A peer that needs entries trimmed from our log gets a snapshot from send_append() (one in flight
  // at a time: a peer in snapshot state is paused until it answers or retry_lost_snapshots()).
  // Without snapshots (Config::snapshots), it is probed at our first index instead, once per
  // heartbeat answer: a peer rebuilt from a copy of a healthy node's log accepts and catches up; any
  // other rejects, its next index falls below our first again, and send_append() stays silent until
  // the next heartbeat answer.
  if (!config_.snapshots && pr.next < log_.first_index()) {
    pr.become_probe();
    pr.next = log_.first_index();
  }
  if (pr.match < log_.last_index()) send_append(m.from, /*send_if_empty=*/true);
  read_only_.record_ack(m.from, m.context);
  release_confirmed_reads();
}

bool Raft::Impl::own_term_committed() const { return log_.term_at(log_.committed()) == term_; }

bool Raft::Impl::maybe_commit() {
  if (role_ != Role::kLeader) return false;
  std::vector<std::uint64_t> durable_match;
  durable_match.reserve(conf_.voters.size());
  for (NodeId voter : conf_.voters) {
    // The leader's own entries count only once durable, exactly like a follower's acknowledgement.
    if (voter == id()) {
      durable_match.push_back(log_.persisted_index());
    } else {
      const Progress& pr = progress_.at(voter);
      durable_match.push_back(pr.catching_up ? 0 : pr.match);
    }
  }
  const Index majority_index = highest_commit_point(quorum_value(std::move(durable_match)));
  if (majority_index <= log_.committed()) return false;
  const std::optional<Term> majority_term = log_.term_at(majority_index);
  RAFT_ASSERT(majority_term.has_value(), "an index above commit has a known term");
  if (!rules::leader_may_commit_by_count(*majority_term, term_)) return false;
  commit_to(majority_index);
  on_commit_advanced();
  return true;
}

// The highest index <= majority_index at which a proposal ends. Only this leader's own proposals are
// looked at: a commit by count lands on an entry of its own term (leader_may_commit_by_count), and
// every such entry but the no-op is in uncommitted_, whose indexes only grow. Steps back at most one
// proposal (max_entries_per_message entries).
Index Raft::Impl::highest_commit_point(Index majority_index) const {
  auto it = std::upper_bound(uncommitted_.begin(), uncommitted_.end(), majority_index,
                             [](Index index, const Uncommitted& u) { return index < u.index; });
  Index point = majority_index;
  while (it != uncommitted_.begin()) {
    --it;
    if (it->index != point || rules::commit_may_stop_at(it->proposal_continues)) break;
    --point;
  }
  return point;
}

void Raft::Impl::on_commit_advanced() {
  while (!uncommitted_.empty() && uncommitted_.front().index <= log_.committed()) {
    uncommitted_bytes_ -= uncommitted_.front().bytes;
    uncommitted_.pop_front();
  }
  if (read_only_.has_deferred() && own_term_committed()) start_deferred_reads();
  step_down_if_removed();
}

void Raft::Impl::on_persisted(Index index, Term term) {
  if (!log_.stable_to(index, term)) return;  // stale or unknown report
  maybe_finish_catching_up();
  if (maybe_commit()) broadcast_append(/*send_if_empty=*/true);
}

ProposeResult Raft::Impl::propose(std::vector<Entry> entries) {
  ProposeResult result;
  result.leader_hint = leader_;
  if (role_ != Role::kLeader) {
    result.status = ProposeStatus::kNotLeader;
    return result;
  }
  if (transfer_target_ != kNoNode) {
    result.status = ProposeStatus::kTransferring;
    return result;
  }
  if (entries.empty()) {
    result.status = ProposeStatus::kEmpty;
    return result;
  }
  std::size_t batch_bytes = 0;
  for (const Entry& e : entries) {
    if (e.type == EntryType::kConfig) {
      result.status = ProposeStatus::kInvalidEntry;
      return result;
    }
    batch_bytes += e.byte_size();
  }
  if (entries.size() > config_.max_entries_per_message ||
      batch_bytes > config_.max_bytes_per_message) {
    result.status = ProposeStatus::kTooLarge;
    return result;
  }
  if (uncommitted_.size() + entries.size() > config_.max_uncommitted_entries ||
      uncommitted_bytes_ + batch_bytes > config_.max_uncommitted_bytes) {
    result.status = ProposeStatus::kTooManyPending;
    return result;
  }
  result.first_index = log_.last_index() + 1;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    entries[i].index = result.first_index + i;
    entries[i].term = term_;
    entries[i].proposal_continues = i + 1 < entries.size();
    uncommitted_.push_back(
        Uncommitted{entries[i].index, entries[i].byte_size(), entries[i].proposal_continues});
  }
  uncommitted_bytes_ += batch_bytes;
  append_to_log(std::move(entries));
  result.status = ProposeStatus::kOk;
  result.last_index = log_.last_index();
  result.term = term_;
  broadcast_pending_ = true;  // sent by ready(), together with the round's other proposals
  return result;
}

}  // namespace raftlog::raft

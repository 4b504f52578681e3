// Roles, logical time, pre-vote and vote handling, and the term rules every message passes first.
#include <algorithm>

#include "raft/assert.h"
#include "raft/quorum.h"
#include "raft/raft_impl.h"
#include "raft/rules.h"

namespace raftlog::raft {

void Raft::Impl::randomize_election_timeout() {
  const auto span = static_cast<std::uint64_t>(config_.election_ticks);
  randomized_election_ticks_ = config_.election_ticks + static_cast<int>(prng_.below(span));
}

bool Raft::Impl::is_voter(NodeId node) const { return raft::is_voter(conf_, node); }

// Only a voter campaigns: a learner, or a node outside the configuration (not added yet, or removed
// by a committed change), never does. One exception keeps a cluster live: a node whose newest
// configuration removes it but is not committed yet may still be needed (a leader that removed
// itself and lost its quorum before the change reached anyone: the others need its vote and their
// logs are behind it), so it campaigns while it was a voter of the configuration before. It counts
// votes by its newest configuration, excluding itself; either configuration's majorities overlap the
// other's (one change apart), so no two leaders of a term can arise. A node catching up after lost
// durable state must not lead: its log may lack entries it promised. Nor may an unvouched one whose
// log holds entries (a crash in the middle of its first catch-up): it knows the cluster has a log, and
// its own vote for itself could complete a majority without entries it acknowledged before its data
// directory was lost. With an empty log it may campaign, even while a leader's contact has it catching
// up: only nodes holding nothing grant it a vote (a brand-new cluster whose first leader died before
// its first entry reached anyone elects the next one so).
bool Raft::Impl::promotable() const {
  if (fault_catch_up_) return false;
  if (told_removed()) return false;  // its log lacks a committed configuration that retired it
  if (unvouched_ && (log_.last_index() > 0 || vouch_index_ > 0)) return false;
  // A node that never founds a cluster (Config::never_founds) wins only with the log it was given:
  // empty, it is one that lost its log or has not received it yet, in a cluster that committed.
  if (config_.never_founds && log_.last_index() == 0) return false;
  if (is_voter(id())) return true;
  const std::size_t records = conf_history_.size();
  return records >= 2 && conf_history_.back().index > log_.committed() &&
         raft::is_voter(conf_history_[records - 2].conf, id());
}

VoteOutcome Raft::Impl::tally() const {
  std::size_t granted = 0;
  std::size_t rejected = 0;
  for (const auto& [voter, grant] : votes_) {
    if (is_voter(voter)) (grant ? granted : rejected) += 1;  // our own vote counts if we are one
  }
  return tally_votes(conf_.voters.size(), granted, rejected);
}

bool Raft::Impl::in_leader_lease() const {
  return config_.check_quorum && leader_ != kNoNode &&
         election_elapsed_ticks_ < config_.election_ticks;
}

bool Raft::Impl::quorum_recently_active() const {
  std::size_t active = 0;
  for (NodeId voter : conf_.voters) {
    if (voter == id()) {
      ++active;
    } else if (progress_.at(voter).recent_active) {
      ++active;
    }
  }
  return active >= quorum_size(conf_.voters.size());
}

void Raft::Impl::reset(Term term) {
  if (term != term_) {
    RAFT_ASSERT(term > term_, "terms never go backwards");
    term_ = term;
    vote_ = kNoNode;
  }
  if (role_ == Role::kLeader) {
    // Leadership ends here: a pending read can no longer be confirmed by this node.
    std::vector<std::uint64_t> aborted = read_only_.abort_all();
    aborted_reads_.insert(aborted_reads_.end(), aborted.begin(), aborted.end());
  }
  leader_ = kNoNode;
  leader_match_ = 0;
  // A follower stranded below its leader's first index stays so across a leader change until the
  // new leader says otherwise: its first heartbeat names its own first index (0 when it holds
  // everything), or its append connects to this log. Cleared here, it read as not stranded (health
  // SERVING) from the new leader's first append to its first heartbeat (drills4 L5).
  leaders_word_inherited_ = stranded_by_leaders_word();
  if (!leaders_word_inherited_) {
    leader_first_index_ = 0;
    rejected_leaders_first_probe_ = false;
    leader_sending_snapshot_ = false;
  }
  snapshot_held_through_ = 0;  // the previous leader's snapshots say nothing about this one's log
  leader_commit_seen_ = 0;
  election_elapsed_ticks_ = 0;
  heartbeat_elapsed_ticks_ = 0;
  randomize_election_timeout();
  votes_.clear();
  progress_.clear();
  transfer_target_ = kNoNode;
  uncommitted_.clear();
  uncommitted_bytes_ = 0;
}

void Raft::Impl::become_follower(Term term, NodeId leader) {
  if (role_ == Role::kLeader && term > term_) {
    last_step_down_ = StepDown{StepDownReason::kNewerTerm, term, kNoNode};
  }
  reset(term);
  role_ = Role::kFollower;
  leader_ = leader;
}

void Raft::Impl::step_down_in_term(StepDownReason reason, NodeId successor) {
  RAFT_ASSERT(role_ == Role::kLeader, "only a leader steps down");
  last_step_down_ = StepDown{reason, term_, successor};
  become_follower(term_, kNoNode);
}

void Raft::Impl::become_pre_candidate() {
  RAFT_ASSERT(role_ != Role::kLeader, "a leader never pre-campaigns");
  // Pre-vote changes neither term nor vote: a node that cannot win leaves the cluster undisturbed.
  role_ = Role::kPreCandidate;
  leader_ = kNoNode;
  votes_.clear();
  votes_[id()] = true;
  election_elapsed_ticks_ = 0;
  randomize_election_timeout();
}

void Raft::Impl::become_candidate() {
  RAFT_ASSERT(role_ != Role::kLeader, "a leader never campaigns");
  RAFT_ASSERT(term_ < kMaxTerm, "campaigning past kMaxTerm (start_election checks it)");
  reset(term_ + 1);
  role_ = Role::kCandidate;
  vote_ = id();
  votes_[id()] = true;
}

void Raft::Impl::become_leader() {
  RAFT_ASSERT(role_ == Role::kCandidate, "only a candidate becomes leader");
  reset(term_);
  role_ = Role::kLeader;
  leader_ = id();
  // A fresh nonce per leadership, carried on every leader message of it (send()): a node that
  // lost its state and is elected again in a term it led draws another one, which its peers that
  // knew the first refuse (docs/raft.md, "A second leader of a term").
  know_term_leader(id(), draw_leadership_nonce());
  removed_word_.reset();  // a majority of our configuration elected us: whoever said so was wrong
  // Elected with an empty log (promotable), by voters whose logs were no longer: a new cluster as far
  // as any majority can tell. This leader's log is the one everybody catches up to from now on.
  unvouched_ = false;
  // A no-op of the new term lets entries of earlier terms commit through it (Raft §5.4.2).
  Entry noop;
  noop.index = noop_index_after_unfinished_proposal();
  noop.term = term_;
  noop.type = EntryType::kNoop;
  for (const ConfRecord& record : conf_history_) {
    for (const std::vector<NodeId>* members : {&record.conf.voters, &record.conf.learners}) {
      for (NodeId member : *members) {
        if (member == id() || progress_.contains(member)) continue;
        Progress pr(config_.max_inflight_messages, config_.max_inflight_bytes);
        pr.next = noop.index;
        pr.recent_active =
            true;  // give every peer a full election timeout before check-quorum judges it
        progress_.emplace(member, std::move(pr));
      }
    }
  }
  append_to_log({noop});  // cuts the unfinished proposal, if any, from the no-op's index on
  broadcast_append(false);
  maybe_commit();  // a single-voter cluster commits as soon as its own log is durable
}

// Where this leader's no-op goes: after its log, or in place of an unfinished proposal at the log's
// end. A log whose last entries say more of their proposal follows (Entry::proposal_continues) holds
// only the first entries of a client's append: its old leader was lost before the rest reached us,
// and the no-op would commit them, leaving the append committed in part. None of them is committed
// anywhere: a commit index stops only at a proposal's end (rules::commit_may_stop_at), and a
// committed end would be in this leader's log (leader completeness) at or below its last index, yet
// every entry there continues. So they may go, as if they had never reached us; the no-op takes the
// place of the first. Never below the commit index. At most kMaxProposalEntries entries are read
// back, the largest proposal any node may have made (whatever this node's own max_entries_per_message):
// longer runs (not written by an honest leader) are cut that far.
Index Raft::Impl::noop_index_after_unfinished_proposal() const {
  const Index last = log_.last_index();
  Index first_unfinished = last + 1;
  for (Index index = last; index > log_.committed() && last - index < kMaxProposalEntries;
       --index) {
    const std::vector<Entry> entry = log_.entries(index, index, 0);
    if (!entry.front().proposal_continues) break;
    first_unfinished = index;
  }
  return first_unfinished;
}

void Raft::Impl::tick() {
  if (role_ == Role::kLeader) {
    tick_heartbeat();
  } else {
    tick_election();
  }
}

void Raft::Impl::tick_election() {
  ++election_elapsed_ticks_;
  clear_removed_if_answered();
  if (promotable() && election_elapsed_ticks_ >= randomized_election_ticks_) {
    election_elapsed_ticks_ = 0;
    start_election(config_.pre_vote ? CampaignKind::kPreElection : CampaignKind::kElection);
  }
}

void Raft::Impl::tick_heartbeat() {
  ++heartbeat_elapsed_ticks_;
  ++election_elapsed_ticks_;
  for (auto& [peer, pr] : progress_) {
    ++pr.ticks_since_contact;
    ++pr.ticks_since_append_response;
  }
  retry_lost_snapshots();
  if (election_elapsed_ticks_ >= config_.election_ticks) {
    election_elapsed_ticks_ = 0;
    if (config_.check_quorum) {
      if (!quorum_recently_active()) {
        // Cannot reach a majority: stop serving as leader.
        step_down_in_term(StepDownReason::kCheckQuorum, kNoNode);
        return;
      }
      for (auto& [peer, pr] : progress_) pr.recent_active = false;
    }
    if (transfer_target_ != kNoNode) abort_transfer();  // the target did not take over in time
  }
  if (heartbeat_elapsed_ticks_ >= config_.heartbeat_ticks) {
    heartbeat_elapsed_ticks_ = 0;
    broadcast_heartbeat(read_only_.latest_context());
  }
}

void Raft::Impl::won_votes() {
  RAFT_ASSERT(role_ == Role::kPreCandidate || role_ == Role::kCandidate,
              "only a campaigning node wins votes");
  // A won pre-vote only shows the real election can succeed; a won vote makes this node the leader.
  if (role_ == Role::kPreCandidate) {
    start_election(CampaignKind::kElection);
  } else {
    become_leader();
  }
}

void Raft::Impl::start_election(CampaignKind kind) {
  if (term_ >= kMaxTerm) return;  // unreachable for honest terms; never overflow
  const bool pre_vote = kind == CampaignKind::kPreElection;
  const bool transfer = kind == CampaignKind::kTransfer;
  Term campaign_term = 0;
  if (pre_vote) {
    become_pre_candidate();
    campaign_term = term_ + 1;
  } else {
    become_candidate();
    campaign_term = term_;
  }
  if (tally() == VoteOutcome::kWon) {
    // Single voter: its own vote is a majority.
    won_votes();
    return;
  }
  for (NodeId voter : conf_.voters) {
    if (voter == id()) continue;
    Message m;
    m.type = pre_vote ? MessageType::kPreVote : MessageType::kVote;
    m.to = voter;
    m.term = campaign_term;
    m.index = log_.last_index();
    m.log_term = log_.last_term();
    m.context = transfer ? kTransferCampaignContext : 0;
    // A vote request vouches for our own durable vote; a pre-vote request vouches for nothing.
    send(std::move(m), /*after_persist=*/!pre_vote);
  }
}

bool Raft::Impl::handle_term(const Message& m) {
  if (m.term > term_) {
    if (m.type == MessageType::kPreVote || m.type == MessageType::kVote) {
      const bool forced = m.type == MessageType::kVote && m.context == kTransferCampaignContext;
      // Leader lease: while we still hear from a leader, a (pre-)candidate is either partitioned-and-
      // rejoining or too impatient; ignoring it keeps it from deposing a healthy leader.
      if (!forced && in_leader_lease()) return false;
    }
    if (m.type == MessageType::kPreVote) {
      // A pre-vote is a question about term m.term; our term stays as it is.
    } else if (m.type == MessageType::kPreVoteResponse && !m.reject) {
      // A granted pre-vote carries the term we would campaign at, not a term anyone is in.
    } else if (m.type == MessageType::kAppend || m.type == MessageType::kHeartbeat ||
               m.type == MessageType::kSnapshot) {
      become_follower(m.term, m.from);
    } else {
      become_follower(m.term, kNoNode);
    }
    return true;
  }
  if (m.term < term_) {
    if ((config_.check_quorum || config_.pre_vote) &&
        (m.type == MessageType::kAppend || m.type == MessageType::kHeartbeat ||
         m.type == MessageType::kSnapshot)) {
      // A stale leader (e.g. back from a partition) learns our term from this and steps down. Without
      // it, with pre-vote, a node that advanced its term could never be heard by that leader.
      Message reply;
      reply.type = MessageType::kAppendResponse;
      reply.to = m.from;
      send(std::move(reply), /*after_persist=*/false);
    } else if (m.type == MessageType::kPreVote) {
      Message reply;
      reply.type = MessageType::kPreVoteResponse;
      reply.to = m.from;
      reply.term = term_;
      reply.reject = true;
      send(std::move(reply), /*after_persist=*/false);
    }
    return false;
  }
  return true;
}

void Raft::Impl::step(Message& m) {
  // Messages are handled whatever the sender's place in our configuration (dissertation §4.1): a
  // leader or voter we do not know of yet is newer than our log, not a stranger. Votes count only
  // from voters of our configuration, and a leader tracks only its members.
  if (m.to != id() || m.from == id() || m.from == kNoNode) return;  // not for us
  if (m.term > kMaxTerm) return;  // adopting it would leave no term to campaign at (kMaxTerm)
  // Before the term rules: a removed node's requests must not move our term, and the answer that
  // it was removed may come from a member in any term.
  if (note_removed(m) || answer_retired(m)) return;
  // A leader replicates only to the members it tracks: one that does so is in a configuration that
  // lists us again (an id re-added where its retirement was not known), and we may campaign.
  // A binding word (removed_word_ names a position) is cleared only once our log holds it.
  if (removed_word_ && !told_removed() && m.term >= term_ &&
      (m.type == MessageType::kAppend || m.type == MessageType::kSnapshot)) {
    removed_word_.reset();
  }
  clear_removed_if_answered();
  if (!handle_term(m)) return;
  if (refuse_second_leader(m)) return;
  switch (m.type) {
    case MessageType::kPreVote:
    case MessageType::kVote:
      handle_vote_request(m);
      return;
    default:
      break;
  }
  switch (role_) {
    case Role::kLeader:
      step_leader(m);
      return;
    case Role::kPreCandidate:
    case Role::kCandidate:
      step_candidate(m);
      return;
    case Role::kFollower:
      step_follower(m);
      return;
  }
}

// An unvouched node (Config::unvouched) grants a candidate whose log is empty (an empty log is
// granted only by empty logs, the up-to-date rule: a new cluster, also one whose first leader died
// before its first entry was durable anywhere), or, once a leader of term T named commit c to it,
// one whose log meets that word (rules::log_meets_vouching_word, which the replica's warning about
// --unvouched-may-elect judges by too): last term above T, or T with last index >= c. Such a log holds
// that leader's log up to c and up to its first entry of term T, so every entry committed before
// (Leader Completeness and Log Matching, docs/raft.md, "Unvouched nodes"). Any other candidate may
// lack an entry this node acknowledged before it lost its durable state. Without the second case a
// voter added while empty, whose leader died before it was caught up, blocked every election its
// vote was needed for (the simulator's --reconfigure runs).
bool Raft::Impl::unvouched_may_grant(const Message& m) const {
  // An empty log only while no leader named a commit above 0: after that, entries 1..c are known
  // to be committed, and an empty candidate lacks them all.
  if (m.index == 0) return vouch_index_ == 0;
  // The operator's word (Config::unvouched_may_elect; drills7 H4): this candidate is granted as if a
  // leader's word vouched for its log, by the ordinary rules that follow (one vote per term, the
  // up-to-date rule). The operator checked that it holds the cluster's log; nobody else can know.
  if (config_.unvouched_may_elect != kNoNode && m.from == config_.unvouched_may_elect) return true;
  // The word counts only once a stale match is ruled out (review amnesia2 H1): until then the
  // leader may still hold this node's match from before the loss and count it toward commits this
  // node never hears of (a heartbeat naming commit 0 engages no catch-up, and the rejections of its
  // appends fall at or below that stale match and are dropped as stale). An append this node
  // accepts left the leader after that match was lowered, and names every commit counted with it; a
  // heartbeat whose clamped commit is below the leader's own names the leader's match itself.
  if (vouching_term_ == 0 || !stale_match_ruled_out_) return false;
  return rules::log_meets_vouching_word(m.log_term, m.index, vouching_term_, vouch_index_);
}

void Raft::Impl::handle_vote_request(const Message& m) {
  const bool pre_vote = m.type == MessageType::kPreVote;
  // We can vote for m.from if we already did (a retransmission), if we have neither voted nor know a
  // leader in this term, or, for a pre-vote, if it is about a later term than ours.
  // A node catching up after lost durable state grants nothing: its log may lack entries it promised,
  // so its "up to date" judgement could elect a leader without them.
  // Nor does a node that never founds a cluster grant an empty candidate (Config::never_founds): it
  // knows of a cluster that committed an entry, which an empty log lacks. (With entries of its own
  // it refuses one anyway, by the up-to-date rule below.)
  const bool can_vote =
      !fault_catch_up_ && (!unvouched_ || unvouched_may_grant(m)) && told_removed_may_grant(m) &&
      !(config_.never_founds && m.index == 0) &&
      (vote_ == m.from || (vote_ == kNoNode && leader_ == kNoNode) || (pre_vote && m.term > term_));
  const bool up_to_date =
      rules::vote_log_is_up_to_date(m.log_term, m.index, log_.last_term(), log_.last_index());
  Message reply;
  reply.type = pre_vote ? MessageType::kPreVoteResponse : MessageType::kVoteResponse;
  reply.to = m.from;
  if (can_vote && up_to_date) {
    reply.term = m.term;  // for a pre-vote, the term the candidate asked about
    if (!pre_vote) {
      election_elapsed_ticks_ = 0;
      vote_ = m.from;
    }
  } else {
    reply.term = term_;
    reply.reject = true;
  }
  // A vote grant must survive a crash (or we might vote twice in one term): it leaves after persist.
  send(std::move(reply), /*after_persist=*/!pre_vote);
}

void Raft::Impl::handle_vote_response(const Message& m) {
  const bool counts = (role_ == Role::kPreCandidate && m.type == MessageType::kPreVoteResponse) ||
                      (role_ == Role::kCandidate && m.type == MessageType::kVoteResponse);
  if (!counts || !is_voter(m.from)) return;
  votes_.emplace(m.from, !m.reject);  // the first answer of each voter counts
  switch (tally()) {
    case VoteOutcome::kWon:
      won_votes();
      return;
    case VoteOutcome::kLost:
      become_follower(term_, kNoNode);
      return;
    case VoteOutcome::kPending:
      return;
  }
}

}  // namespace raftlog::raft

namespace raftlog::raft {

void Raft::Impl::enter_catching_up(Index promised_index, Term promised_term,
                                   Raft::CatchUpCause cause) {
  if (!fault_catch_up_) {
    fault_catch_up_ = true;
    promised_index_ = promised_index;
    promised_term_ = promised_term;
  } else {
    promised_index_ = std::max(promised_index_, promised_index);
    promised_term_ = std::max(promised_term_, promised_term);
  }
  if (!catching_up_) catch_up_cause_ = cause;
  catching_up_ = true;
  maybe_finish_catching_up();
}

void Raft::Impl::note_leader_contact_while_unvouched(const Message& m) {
  // Only the first leader's word sets the term (the driver records the word, so a restart keeps it).
  // A later leader's log satisfies it as well: it holds every entry committed before its own term at
  // the same indexes, the first leader's committed prefix and entries of its term included. Raising
  // the term with every new leader chased leader changes: a node (a voter whose vote was needed)
  // stayed unvouched through a run of short-lived leaders, and then nobody could be elected.
  if (!unvouched_) return;
  if (vouching_term_ != 0) {
    // Later commits raise the index (review amnesia H2): a leader may have counted this node's
    // forgotten acknowledgements (its match from before the loss) for them until our answer lowered
    // that match. An append or a snapshot names its commit as is, a committed index every later
    // leader holds too. Any append that extends our log left its leader after that lowering, so it
    // names every commit counted with the stale match. A heartbeat's clamped `commit` is what its
    // leader believes we hold: beyond our log it is the storage-fault catch-up's promise, folded in
    // here because the driver records this word durably and the promise is not (a restart kept the
    // word only and vouched the node without what it had promised). Its unclamped leader_commit is
    // not used: under load it keeps running ahead of what any append has brought us, and the
    // catch-up would never end.
    if (rules::later_commits_raise_the_vouch_index()) {
      vouch_index_ = std::max(vouch_index_, m.commit);
    }
    return;
  }
  vouching_term_ = m.term;
  // What the leader counts committed: an append or a snapshot names it as is; a heartbeat clamps
  // `commit` to what it believes we hold (our lost acknowledgements), and also says its own.
  Index commit = m.commit;
  if (m.type == MessageType::kHeartbeat) commit = std::max(m.commit, m.leader_commit);
  vouch_index_ = std::max(vouch_index_, commit);
  if (!catching_up_) catch_up_cause_ = Raft::CatchUpCause::kUnvouched;
  catching_up_ = true;
  maybe_finish_catching_up();
}

void Raft::Impl::count_catch_up_move() {
  if (!unvouched_) return;
  // What ready() is about to report: a new term or leader (soft state), a new commit index (hard
  // state), entries, a truncation or a snapshot (the log's handout); and the leader's word, which
  // no Ready carries. A vote, or a role (an empty node pre-campaigns in vain every election
  // timeout), is no move: counting them, a wedged node would never look still.
  const SoftState soft = soft_state();
  const bool moved = soft.term != reported_soft_state_.term ||
                     soft.leader != reported_soft_state_.leader ||
                     log_.committed() != reported_hard_state_.commit || log_.has_handout() ||
                     vouching() != counted_vouching_;
  counted_vouching_ = vouching();
  if (moved) ++catch_up_moves_;
}

void Raft::Impl::mark_if_catching_up(Message& reply) {
  if (!catching_up_) return;
  const std::optional<Term> term = log_.term_at(reply.index);
  const bool vouched_once_durable = !fault_catch_up_ && unvouched_ && vouching_term_ > 0 &&
                                    reply.index >= vouch_index_ && term.has_value() &&
                                    *term >= vouching_term_;
  if (vouched_once_durable) return;
  reply.context = kCatchingUpContext;
  marked_acks_sent_ = true;
}

void Raft::Impl::maybe_finish_catching_up() {
  if (!catching_up_) return;
  const Index durable = log_.persisted_index();
  const std::optional<Term> durable_term = log_.term_at(durable);
  // After a storage fault: either the durable log again reaches everything the node may have
  // promised, or it holds an entry a leader of a later term sent: that leader's log has every
  // committed entry the node promised, and ours is a prefix of it up to there, exactly as after an
  // ordinary conflicting append.
  if (fault_catch_up_ && (durable >= promised_index_ ||
                          (durable_term.has_value() && *durable_term > promised_term_))) {
    fault_catch_up_ = false;
    promised_index_ = 0;
    promised_term_ = 0;
  }
  // Unvouched: the node knows neither the index nor the term it may have promised (it lost both),
  // so it needs both halves from its leader of term vouching_term_ (docs/raft.md, "Unvouched
  // nodes"): an entry of that term (the leader's own entries follow every entry committed in an
  // earlier term, which its log holds, however far behind its commit index still is) and the commit
  // index the leader named (entries of that term it may have counted this node's lost
  // acknowledgements for).
  if (!fault_catch_up_ && unvouched_ && vouching_term_ > 0 && durable >= vouch_index_ &&
      durable_term.has_value() && *durable_term >= vouching_term_) {
    unvouched_ = false;
    vouch_index_ = 0;
  }
  if (fault_catch_up_ || (unvouched_ && vouching_term_ > 0)) return;
  catching_up_ = false;
  catch_up_cause_ = Raft::CatchUpCause::kNone;
  const bool repeat = marked_acks_sent_;
  marked_acks_sent_ = false;
  // Our acknowledgements so far were marked: repeat the latest one unmarked, or the leader would
  // not count us until its next append.
  const Index acknowledged = std::min(leader_match_, durable);
  if (repeat && role_ == Role::kFollower && leader_ != kNoNode && acknowledged > 0) {
    Message ack;
    ack.type = MessageType::kAppendResponse;
    ack.to = leader_;
    ack.index = acknowledged;
    send(std::move(ack), /*after_persist=*/true);
  }
}

}  // namespace raftlog::raft

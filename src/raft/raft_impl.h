// Private: the Raft core's state and the declarations of its handlers. The definitions are split by
// job: raft.cpp (construction, public forwarding, Ready), raft_election.cpp (roles, ticks, votes),
// raft_replication.cpp (appends, commit, persistence), raft_read_transfer.cpp (ReadIndex, transfer),
// raft_membership.cpp (configurations in the log, membership changes).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <vector>

#include "raft/log_reader.h"
#include "raft/progress.h"
#include "raft/quorum.h"
#include "raft/raft.h"
#include "raft/raft_log.h"
#include "raft/read_only.h"
#include "util/prng.h"

namespace raftlog::raft {

// Upper bound on messages queued between two ready() calls. Each input queues O(voters) messages (one
// broadcast, plus at most max_inflight_messages appends to the peer that answered), so a driver that
// drains after every input stays far below it; reaching it means the driver stopped draining.
inline constexpr std::size_t kMaxOutboxMessages = 1 << 16;

class Raft::Impl {
 public:
  Impl(const Config& config, const LogReader& log, const HardState& hard_state);

  // Inputs.
  void tick();
  // `message` is the core's own (Raft::step took it by value): an append's entries are moved out.
  void step(Message& message);
  ProposeResult propose(std::vector<Entry> entries);
  ReadIndexStatus read_index(std::uint64_t request_id);
  TransferStatus transfer_leadership(NodeId target);
  ConfChangeResult propose_conf_change(const ConfChange& change);
  void on_persisted(Index index, Term term);

  // Outputs.
  bool has_ready() const;
  Ready ready();

  // Views.
  NodeId id() const { return config_.id; }
  Role role() const { return role_; }
  Term term() const { return term_; }
  NodeId leader() const { return leader_; }
  Index commit_index() const { return log_.committed(); }
  Index last_index() const { return log_.last_index(); }
  Index persisted_index() const { return log_.persisted_index(); }
  const ConfState& conf() const { return conf_; }
  const std::vector<ConfRecord>& conf_history() const { return conf_history_; }
  std::vector<PeerProgress> progress() const;
  HardState hard_state() const {
    return HardState{term_, vote_, log_.committed(), term_leader(), term_leader_nonce()};
  }
  SoftState soft_state() const { return SoftState{role_, leader_, term_}; }
  NodeId transfer_target() const { return transfer_target_; }
  std::size_t pending_reads() const { return read_only_.pending(); }
  bool catching_up() const { return catching_up_; }
  Index catching_up_to() const {
    if (!catching_up_) return 0;
    return std::max(fault_catch_up_ ? promised_index_ : 0, unvouched_ ? vouch_index_ : 0);
  }
  bool unvouched() const { return unvouched_; }
  // Only once a stale match is ruled out (unvouched_may_grant): the driver records what this
  // returns, and a word found at start counts as ruled out.
  std::pair<Term, Index> vouching() const {
    return unvouched_ && stale_match_ruled_out_ ? std::pair<Term, Index>{vouching_term_, vouch_index_}
                                                : std::pair<Term, Index>{};
  }
  std::uint64_t catch_up_moves() const { return catch_up_moves_; }
  const CommittedConflict& committed_conflict() const { return committed_conflict_; }
  NodeId term_leader() const;  // raft_term_leader.cpp
  std::uint64_t term_leader_nonce() const;
  bool is_second_leader_message(const Message& message) const;
  const TermLeaderClash& second_leader() const { return second_leader_; }
  const TermLeaderClash& leadership_refused() const { return leadership_refused_; }
  Raft::CatchUpCause catch_up_cause() const {
    return catching_up_ ? catch_up_cause_ : Raft::CatchUpCause::kNone;
  }
  bool removed() const { return removed_word_.has_value(); }
  // A member's word that binds (it named its newest committed configuration, which our log lacks):
  // this node neither campaigns nor leads while it holds (promotable, note_removed).
  bool told_removed() const { return removed_word_ && removed_word_->conf_index != 0; }
  NodeId removed_by() const { return removed_word_ ? removed_word_->by : kNoNode; }
  const std::optional<RemovedWord>& removed_word() const { return removed_word_; }
  const StepDown& last_step_down() const { return last_step_down_; }
  const std::vector<NodeId>& retired_ids() const { return retired_; }
  Index stranded_below() const;
  // The last leader's first index and this log say this node needs entries it trimmed (whatever
  // the role now: kept across a leader change until the next leader's word, reset()).
  bool stranded_by_leaders_word() const;
  Index behind_leader_commit() const;
  const std::optional<Snapshot>& installing_snapshot() const { return log_.installing(); }
  void set_disk_over_watermark(bool over) { disk_over_watermark_ = over; }
  void snapshot_progress(NodeId peer);  // raft_snapshot.cpp
  void set_trim_point_conf(Index point, const ConfState& conf);  // raft_snapshot.cpp
  void forget_trim_point_conf() { trim_point_conf_.reset(); }

 private:
  // --- roles and elections (raft_election.cpp) ---
  void reset(Term term);
  void become_follower(Term term, NodeId leader);
  // A leader that stops leading in its own term (check-quorum, its removal committed): noted for
  // last_step_down(), then a follower without a leader.
  void step_down_in_term(StepDownReason reason, NodeId successor);
  void become_pre_candidate();
  void become_candidate();
  void become_leader();
  Index noop_index_after_unfinished_proposal() const;
  void randomize_election_timeout();
  bool promotable() const;
  VoteOutcome tally() const;  // this campaign's votes, counted over the voters of conf_
  bool is_voter(NodeId node) const;
  bool in_leader_lease() const;
  bool quorum_recently_active() const;
  void tick_election();
  void tick_heartbeat();
  enum class CampaignKind : std::uint8_t {
    kPreElection,  // pre-vote round at term + 1 without changing our term
    kElection,     // real election: term + 1, vote for ourselves
    kTransfer,     // real election ordered by TimeoutNow: voters ignore their leader lease
  };
  void start_election(CampaignKind kind);
  void won_votes();  // a majority granted this campaign (pre-vote or vote)
  void handle_vote_request(const Message& message);
  bool unvouched_may_grant(const Message& vote_request) const;  // Config::unvouched's vote rule
  void handle_vote_response(const Message& message);
  // Returns false when the message must be dropped (stale term, or a vote request inside the lease).
  bool handle_term(const Message& message);

  // --- replication and commit (raft_replication.cpp) ---
  void send(Message message, bool after_persist);
  bool send_append(NodeId peer, bool send_if_empty);
  std::size_t append_byte_budget(const Progress& pr) const;
  void broadcast_append(bool send_if_empty);
  void send_heartbeat(NodeId peer, std::uint64_t context);
  void broadcast_heartbeat(std::uint64_t context);
  void handle_append(Message& message);  // moves the entries it appends out of `message`
  void handle_heartbeat(const Message& message);
  // An append of `leader` says its entry at `index` has `leader_term` (0: only that it is not ours)
  // where this node holds a committed entry of `own_term`: noted for committed_conflict().
  void note_committed_conflict(Index index, Term own_term, Term leader_term, NodeId leader);
  // The first entry of `m` at or below our commit index whose term differs from ours (0: none).
  Index first_committed_conflict(const Message& m) const;
  void handle_append_response(const Message& message);
  void answer_untracked_ack(const Message& message);
  // A request from a retired id: answered with kRemovedContext, or a TimeoutNow from one dropped
  // (true), or nothing to do (false).
  bool answer_retired(const Message& message);
  // A kRemovedContext answer: noted in removed_word_ unless stale (true when it was one: dropped).
  bool note_removed(const Message& message);
  // `node` is retired here: removed by a committed change and listed by no configuration of our
  // history (an uncommitted one may list it again).
  bool retired_here(NodeId node) const;
  // Our log holds at `index` a configuration entry of `term` that does not list us, and our
  // configuration in force lists us again: a word naming it is stale.
  bool word_is_stale(Index index, Term term) const;
  // A binding word no longer holds once our history makes it stale (a leader that re-added us
  // replicated the retiring configuration and the re-adding): cleared then.
  void clear_removed_if_answered();
  // A node told it is retired (told_removed) grants only a candidate whose last entry is at or past
  // the configuration the word named: one that may hold it (a leader that re-added us needs our
  // vote), not another node of the history that lacks it (drills7 H2's retired pair re-electing).
  bool told_removed_may_grant(const Message& request) const;
  void retire_members_of(const ConfState& committed, const ConfState& newest_committed);
  void handle_heartbeat_response(const Message& message);
  // Snapshots (raft_snapshot.cpp): a leader sends one instead of an append that would need trimmed
  // entries; a follower installs it when that is safe, or answers it like an append.
  bool send_snapshot(NodeId peer);
  Snapshot snapshot_to_send() const;
  void handle_snapshot(Message& message);
  void install_snapshot(Snapshot snapshot);
  void retry_lost_snapshots();  // leader, each tick
  bool maybe_commit();
  Index highest_commit_point(Index majority_index) const;
  void on_commit_advanced();
  bool own_term_committed() const;
  void step_leader(const Message& message);
  void step_candidate(Message& message);
  void step_follower(Message& message);

  // Storage-fault recovery: see Config::promised_index.
  void enter_catching_up(Index promised_index, Term promised_term, Raft::CatchUpCause cause);
  void maybe_finish_catching_up();
  // Unvouched nodes (Config::unvouched): the first message of each new leader (append, heartbeat,
  // snapshot) starts or extends the catch-up to the commit it names and its term.
  void note_leader_contact_while_unvouched(const Message& message);
  void count_catch_up_move();  // at each ready(): raises catch_up_moves_ (Raft::catch_up_moves)
  // An acknowledgement (sent after persist) of our log up to reply.index: marked kCatchingUpContext
  // while catching up, unless the node is caught up by the time it leaves (only an unvouched catch-up
  // can tell: its rule is about the log up to reply.index). A new cluster's founders then answer
  // their first leader's first append as before, without a marked answer and its repeat.
  void mark_if_catching_up(Message& reply);

  // --- the term's leader (raft_term_leader.cpp) ---
  void know_term_leader(NodeId leader, std::uint64_t nonce);  // for the current term
  // A new leadership's nonce: non-zero, from nonce_prng_.
  std::uint64_t draw_leadership_nonce();
  // After the term rules: a leader message of our term from another node than the term's leader we
  // know is refused and answered so (true: handled); a refusal of our own leadership is noted.
  bool refuse_second_leader(const Message& message);
  void note_leadership_refused(const Message& message);

  // --- configurations (raft_membership.cpp) ---
  // Every change to the log goes through here: configuration records at or above the first new
  // index are rolled back (the entries holding them are replaced), kConfig entries among the new ones
  // are recorded, and the configuration in force follows.
  void append_to_log(std::vector<Entry>&& entries);
  // Every commit advance goes through here (the history's committed prefix is pruned).
  void commit_to(Index index);
  // conf_ = the configuration in force (rules::conf_in_force); a leader's progress follows it.
  void refresh_conf();
  // True when every kConfig entry of an append, from position `first` on, holds a valid
  // configuration one change away from the one before it (otherwise the append is dropped).
  bool conf_entries_acceptable(const std::vector<Entry>& entries, std::size_t first) const;
  // A leader that is no longer a voter steps down once the configuration removing it committed,
  // first handing leadership to a caught-up voter when there is one.
  void step_down_if_removed();
  bool peer_recently_heard(NodeId peer) const;

  // --- reads and transfer (raft_read_transfer.cpp) ---
  void release_confirmed_reads();
  void start_deferred_reads();
  void send_timeout_now(NodeId peer);
  void abort_transfer();

  Config config_;
  RaftLog log_;
  // Oldest first: the newest configuration at or below the commit index (index 0: the bootstrap one),
  // then every newer one in the log. Never empty. Honest leaders leave at most one record above the
  // commit index (one change at a time); in any case at most one per kConfig entry of the
  // uncommitted log, each below kMaxMembers ids.
  std::vector<ConfRecord> conf_history_;
  ConfState conf_;  // the one in force (rules::conf_in_force of conf_history_)
  // Election-timeout jitter only. splitmix64, the core's generator since its first version: the same
  // (random_seed, id) must keep giving the same timeouts so that a simulator seed keeps naming one run.
  util::SplitMix64Prng prng_;
  // Leadership nonces only (Config::leadership_nonce_seed), apart from prng_: drawing one moves no
  // election timeout, so a simulator seed names the same run as before nonces existed.
  util::SplitMix64Prng nonce_prng_;

  Role role_ = Role::kFollower;
  Term term_ = 0;
  NodeId vote_ = kNoNode;
  NodeId leader_ = kNoNode;

  int election_elapsed_ticks_ =
      0;  // followers/candidates: since the last leader contact or campaign;
          // leaders: since the last check-quorum round
  int heartbeat_elapsed_ticks_ = 0;    // leaders only
  int randomized_election_ticks_ = 0;  // in [election_ticks, 2 * election_ticks)

  std::map<NodeId, bool> votes_;  // (pre-)candidate: granted or not, per voter (self included)
  std::map<NodeId, Progress> progress_;  // leader: every member (voters, learners) of a
                                         // configuration in conf_history_, but itself
  NodeId transfer_target_ = kNoNode;
  ReadOnly read_only_;

  // Follower: the highest index our log is known to share with the leader of this term (the end of
  // its last append we matched). A heartbeat's commit is applied only up to it: the commit index it
  // names is the leader's word, but which entries it covers is only known for what we matched.
  Index leader_match_ = 0;
  bool disk_over_watermark_ = false;  // the driver's disk (set_disk_over_watermark)
  // Follower: the highest commit index an append of this term's leader named (appends carry the
  // leader's commit as is; heartbeats clamp it to what we hold, so they do not count).
  Index leader_commit_seen_ = 0;
  // Follower: the first index the leader of this term still holds (from its heartbeats; 0 when it
  // holds everything from index 1, or before its first heartbeat), and whether the leader's probe at
  // that index failed to match. Either way the entries this node needs are gone from the leader, and
  // it waits for a snapshot: stranded_below() reports it.
  Index leader_first_index_ = 0;
  bool rejected_leaders_first_probe_ = false;
  // Follower: this term's leader said in its last heartbeat that it is sending us a snapshot
  // (Message::sending_snapshot): stranded too, whatever our log's end, until we install it.
  bool leader_sending_snapshot_ = false;
  // The three above are a previous leader's word, kept across a leader change (reset()) until this
  // leader's first heartbeat replaces them: its first index, and no probe of its rejected yet.
  bool leaders_word_inherited_ = false;
  // Follower: the index of the last snapshot of this term's leader that we hold (installed, or
  // found in our log already); 0 before one. A heartbeat the leader sent before it processed our
  // answer still says sending_snapshot; while what we hold reaches its first index - 1, no
  // snapshot can help us, so it is ignored (else the node read stranded again after its install,
  // for up to snapshot_retry_ticks when the answer was lost). Reset with the term (reset()).
  Index snapshot_held_through_ = 0;

  // Catching up after lost durable state: fault_catch_up_ (Config::promised_index, or a heartbeat
  // naming a commit beyond our log) or a leader's contact while unvouched (Config::unvouched), or
  // both; catching_up_ until each that applies is satisfied (maybe_finish_catching_up).
  bool catching_up_ = false;
  bool fault_catch_up_ = false;
  // Ids removed by committed changes (Config::retired_ids, then each one commit_to sees retire),
  // oldest first, at most kMaxRetiredIds.
  std::vector<NodeId> retired_;
  // A peer told us our id is retired (kRemovedContext): who, and the position of its newest
  // committed configuration (conf_index 0: a word without one, from a node before retired5:
  // information only, cleared as before). One optional for both (the read-through of retired5).
  std::optional<RemovedWord> removed_word_;
  StepDown last_step_down_;  // why this core last stopped leading
  // The configuration in force at a trim point of the driver's log (set_trim_point_conf): used by
  // snapshot_to_send while the log starts right after `index`. One record: bounded.
  struct TrimPointConf {
    Index index = 0;
    ConfState conf;
  };
  std::optional<TrimPointConf> trim_point_conf_;
  Index promised_index_ = 0;
  Term promised_term_ = 0;
  Raft::CatchUpCause catch_up_cause_ = Raft::CatchUpCause::kNone;
  // Config::unvouched, until a leader caught this node up (or it won an election). vouching_term_:
  // the term of the newest leader that contacted it while unvouched (0: none yet); the node is
  // vouched once its durable log holds an entry of that term and reaches promised_index_.
  bool unvouched_ = false;
  Term vouching_term_ = 0;
  Index vouch_index_ = 0;  // the highest commit index a leader named while this node was unvouched
  // While unvouched, the Readies whose taking found its catch-up moved, and the word (vouching())
  // the last one saw: Raft::catch_up_moves.
  std::uint64_t catch_up_moves_ = 0;
  std::pair<Term, Index> counted_vouching_{};
  // While unvouched: a leader's match for this node is known to be no stale one from before the loss
  // (unvouched_may_grant): it accepted an append or a snapshot (its log holds something, at start),
  // or a heartbeat named a clamped commit below the leader's own, which is then that leader's match,
  // and our log reaches it.
  bool stale_match_ruled_out_ = false;
  CommittedConflict committed_conflict_;  // the latest one seen (count 0: none)
  // The leader known for term term_leader_term_ (term_leader(): only while that is our term, so a
  // new term forgets it without a reset), restored from HardState::leader.
  NodeId term_leader_ = kNoNode;
  std::uint64_t term_leader_nonce_ = 0;  // its leadership's nonce (0: not known)
  Term term_leader_term_ = 0;
  TermLeaderClash second_leader_;       // the latest second leader refused (count 0: none)
  TermLeaderClash leadership_refused_;  // the latest refusal of our leadership (count 0: none)
  bool marked_acks_sent_ = false;  // acknowledgements marked kCatchingUpContext since catching up

  // Leader: entries it proposed in this term that are not committed yet, for the pending-proposal
  // bounds. Holds at most max_uncommitted_entries.
  struct Uncommitted {
    Index index = 0;
    std::size_t bytes = 0;
    bool proposal_continues = false;  // Entry::proposal_continues of the entry at `index`
  };
  std::deque<Uncommitted> uncommitted_;
  std::size_t uncommitted_bytes_ = 0;

  // Outputs accumulated since the last ready().
  // Set by propose(): the new entries go to the followers when the driver next calls ready(), so
  // that every proposal of one driver round (the Node's loop steps its whole input batch before
  // ready()) shares one AppendEntries per follower instead of one each (docs/raft.md, "Proposals
  // leave at the next ready()").
  bool broadcast_pending_ = false;
  std::vector<Message> messages_;
  std::vector<Message> messages_after_persist_;
  std::vector<ReadState> read_states_;
  std::vector<std::uint64_t> aborted_reads_;
  SoftState reported_soft_state_;
  HardState reported_hard_state_;
};

}  // namespace raftlog::raft

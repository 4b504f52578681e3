// The safety checker: an observer that sees only what a Raft deployment could see from outside the core
// (roles and terms reported in Ready::soft_state, the logs the driver holds, commit indexes, durable
// hard states, proposal results and released reads) and reports the first broken invariant.
//
// It knows nothing of the core's internals, so the same checker judges a correct core and a broken one,
// and handcrafted histories can be fed to it directly (tests/sim/checker_test.cpp).
//
// Invariants (docs/testing.md explains each):
//   election-safety       at most one leader per term
//   vote-safety           a durable vote never changes within a term; durable terms never decrease
//   log-matching          an (index, term) pair names one entry and one predecessor term, ever
//   leader-completeness   an entry committed while its observer was at term C is in every leader's log
//                         of a term > C
//   state-machine-safety  no index is ever committed with two different entries
//   proposal-durability   an acknowledged (committed) proposal is never replaced, even across crashes
//   proposal-atomicity    a proposal commits whole or not at all: an entry whose proposal continues is
//                         followed, in the committed history, by the next entry of the same proposal
//   commit-index          per node, commit never decreases (within a run, and across a restart never
//                         below the durable commit), never exceeds the log, never truncated
//   read-linearizability  a read released at index c, requested after index i was committed, has c >= i
//   proposal-result       a successful propose() placed the entries where it said, with its term
//   append-durability     an append acknowledged to its client (the replica's answer) is committed at
//                         the indexes and term it was given, with its payloads, and stays so through
//                         every power loss
//   dedup-consistency     every answer for one (client_id, sequence) names the same indexes, across
//                         restarts and leaders, and no (client_id, sequence) is committed twice
//   recovery              a restarted replica opens its data directory, and its whole recovered log
//                         (committed or not) matches what every log held at those (index, term)s
//   conf-in-force         a node's configuration is the newest one in its log, committed or not (the
//                         bootstrap one when it holds no kConfig entry), after every batch and open
//   conf-succession       every kConfig entry holds a valid configuration one change away from the
//                         configuration before it in that log
//   conf-overlap          one change at a time: the configuration entry before a kConfig entry in a log
//                         is committed when that entry is appended
//   conf-convergence      once the cluster recovered, every member of the committed configuration
//                         runs it (checked by the liveness phase)
// (The cluster reports `second-leader` itself: a core that refused a second leader of its term
// without two leaders of that term; docs/testing.md.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "raft/log_reader.h"
#include "raft/types.h"

namespace raftlog::sim {

struct Violation {
  std::string invariant;  // one of the names above, or "liveness"
  std::string detail;
};

class Checker {
 public:
  // Bound on outstanding (requested, not yet released or aborted) reads tracked at once.
  static constexpr std::size_t kMaxTrackedReads = 1 << 16;
  // Bound on outstanding proposals tracked at once.
  static constexpr std::size_t kMaxTrackedProposals = 1 << 16;
  // Bound on acknowledged appends remembered (one per (client_id, sequence)).
  static constexpr std::size_t kMaxTrackedAcknowledgements = 1 << 16;

  explicit Checker(std::size_t node_count);

  // The configuration in force where a log holds no kConfig entry (default: every node a voter).
  void set_bootstrap_conf(const raft::ConfState& conf) {
    bootstrap_conf_ = conf;
    if (!committed_conf_set_) committed_conf_ = conf;
  }
  // The node reported `conf` as its configuration (after a Ready batch was applied, or at open).
  void observe_conf(raft::NodeId node, const raft::ConfState& conf);
  // The newest committed configuration (the bootstrap one while none is committed).
  const raft::ConfState& committed_conf() const { return committed_conf_; }

  // The log view of `node` (ids 1..node_count) that every later observation of that node refers to.
  // The pointer must stay valid; the checker only reads through it.
  void attach_log(raft::NodeId node, const raft::LogReader* log);

  // The node reported (term, role), e.g. through Ready::soft_state. Call after the driver applied the
  // batch's log changes, so that a new leader's log is complete. A leader's `leader_nonce`
  // (raft::Raft::term_leader_nonce; 0: not known) tells two leaderships of one id in one term
  // apart: a node that lost its state and was elected again in a term it led.
  void observe_role(raft::NodeId node, raft::Term term, raft::Role role,
                    std::uint64_t leader_nonce = 0);
  // Entries [first, last] were just appended to node's log (after any truncation of the same batch).
  void observe_append(raft::NodeId node, raft::Index first, raft::Index last);
  // The node is about to cut its log at `from` (called before the cut, so the checker sees what goes).
  void observe_truncate(raft::NodeId node, raft::Index from);
  // The node's commit index is now `commit`, while its term is `node_term`.
  void observe_commit(raft::NodeId node, raft::Index commit, raft::Term node_term);
  // A hard state of `node` became durable.
  void observe_durable_hard_state(raft::NodeId node, const raft::HardState& hard_state);
  // The node (crashed) lost its whole data directory: its durable term, vote and commit start over
  // (what it forgot is the unvouched guard's business, judged by the invariants on the others).
  void observe_wipe(raft::NodeId node);
  // The node (crashed) lost its log directory only: its durable term and vote stand, its commit
  // starts over, and the configuration its CONFSTATE keeps cannot be checked against its log.
  void observe_log_wipe(raft::NodeId node);
  // The node's log now starts after `index` (a snapshot it installed, or its open found it
  // trimmed), with `conf` in force there (checked against the committed history); nullopt: not
  // known (a trimmed log whose newest configuration entry is still in it: the first one it holds is
  // then not checked against the one before).
  void observe_log_base(raft::NodeId node, raft::Index index,
                        const std::optional<raft::ConfState>& conf);
  // The node crashed (it is no longer leader of anything).
  void observe_crash(raft::NodeId node);
  // The node restarted from durable state with commit index `commit`; its attached log is the durable log.
  // A log that starts after index 1 is announced first (observe_log_base).
  void observe_restart(raft::NodeId node, raft::Index commit);

  // A client's append (client_id, sequence) was acknowledged with [first, last] in `term`. Call once
  // the acknowledging node's commit was observed.
  void observe_acknowledged_append(std::uint64_t client_id, std::uint64_t sequence,
                                   raft::Index first, raft::Index last, raft::Term term,
                                   const std::vector<std::string>& payloads);

  // A client's propose() at `node` succeeded, placing `payloads` at [first, first + n) in `term`.
  void observe_proposal(raft::NodeId node, raft::Index first, raft::Term term,
                        const std::vector<std::string>& payloads);
  // A client asked for a linearizable read (whichever node it went to).
  void observe_read_request(std::uint64_t request_id);
  // `node` released the read at `read_index`.
  void observe_read_released(raft::NodeId node, std::uint64_t request_id, raft::Index read_index);
  void observe_read_aborted(std::uint64_t request_id);

  // When every node's log is identical and fully committed up to `last_index`, a pending proposal beyond
  // it exists in no log anymore: it failed (legitimately: its leader lost it before a quorum had it).
  void abandon_proposals_beyond(raft::Index last_index);
  // Full sweep: every node's committed prefix equals the committed history, and no (client_id,
  // sequence) is committed twice.
  void check_committed_prefixes();

  // Records an externally detected failure (e.g. liveness) unless one is already recorded.
  void report(std::string invariant, std::string detail);

  bool failed() const { return violation_.has_value(); }
  const std::optional<Violation>& violation() const { return violation_; }

  std::size_t pending_proposals() const { return pending_proposals_.size(); }
  std::uint64_t acknowledged_proposals() const { return acknowledged_proposals_; }
  std::uint64_t failed_proposals() const { return failed_proposals_; }
  std::uint64_t released_reads() const { return released_reads_; }
  std::uint64_t acknowledged_appends() const { return acknowledged_appends_.size(); }
  raft::Index committed_length() const { return committed_.size(); }
  std::uint64_t leaders_elected() const { return leader_by_term_.size(); }
  bool is_acknowledged(raft::Index index) const;
  // The entry committed at `index`, or nullptr if nothing is committed there yet.
  const raft::Entry* committed_entry(raft::Index index) const;

 private:
  struct CommittedEntry {
    raft::Entry entry;
    raft::Term observed_term = 0;         // term of the first node that reported it committed
    bool acknowledged = false;            // a client proposal at this index was acknowledged
    bool acknowledged_to_client = false;  // the replica answered an append with this index
  };
  struct AcknowledgedAppend {
    raft::Index first = 0;
    raft::Index last = 0;
    raft::Term term = 0;
  };
  struct EntryIdentity {
    raft::Term previous_term = 0;
    std::uint64_t digest = 0;
  };
  struct PendingProposal {
    raft::NodeId node = raft::kNoNode;
    raft::Term term = 0;
    std::string payload;
  };

  const raft::LogReader& log_of(raft::NodeId node) const;
  std::optional<raft::Entry> entry_at(raft::NodeId node, raft::Index index) const;
  void record_committed(raft::NodeId node, raft::Index index, const raft::Entry& entry,
                        raft::Term node_term);
  void check_leader_has(raft::NodeId leader, raft::Term leader_term, raft::Index index);
  // record_committed() for [from, to] of node's log, skipping what lies below its first index.
  void record_committed_range(raft::NodeId node, raft::Index from, raft::Index to,
                              raft::Term node_term);
  void check_exactly_once();
  // A kConfig entry appended to node's log at `index` (conf-succession, conf-overlap).
  void note_conf_entry(raft::NodeId node, const raft::Entry& entry);
  void resolve_proposals_at(raft::Index index);

  std::size_t node_count_;
  std::vector<const raft::LogReader*> logs_;  // [node]
  std::vector<raft::Index> commit_;           // [node] last commit reported in this incarnation
  std::vector<raft::Term> leader_term_;       // [node] term it leads, 0 if not leader
  std::vector<raft::HardState> durable_;      // [node] last durable hard state
  struct Leadership {
    raft::NodeId node = raft::kNoNode;
    std::uint64_t nonce = 0;  // 0: not known
  };
  std::map<raft::Term, Leadership> leader_by_term_;
  std::map<std::pair<raft::Index, raft::Term>, EntryIdentity> identities_;
  std::vector<CommittedEntry> committed_;  // committed_[i - 1] is the entry committed at i
  std::multimap<raft::Index, PendingProposal> pending_proposals_;
  std::map<std::pair<std::uint64_t, std::uint64_t>, AcknowledgedAppend>
      acknowledged_appends_;  // (client, seq)
  std::map<std::uint64_t, raft::Index>
      read_required_;  // request id -> committed length at request time
  std::uint64_t acknowledged_proposals_ = 0;
  std::uint64_t failed_proposals_ = 0;
  std::uint64_t released_reads_ = 0;
  std::optional<Violation> violation_;
  raft::ConfState bootstrap_conf_;
  raft::ConfState committed_conf_;
  bool committed_conf_set_ = false;
  // [node] the configurations its log holds, by index (one per kConfig entry; bounded by its log).
  std::vector<std::map<raft::Index, raft::ConfState>> conf_entries_;
  std::vector<bool> conf_base_unknown_;  // [node] observe_log_base() without a configuration
  // [node] lost only its log (observe_log_wipe), and no full wipe or log base with a known
  // configuration came since: its kept CONFSTATE may run a configuration (its base's, committed)
  // that its log, refilled from index 1, does not show yet, across crashes too. A restart whose
  // log shows a configuration is still checked against it (5 nodes, seed 101: an entry re-received
  // and lost again in a crash left the kept base ahead of the log).
  std::vector<bool> log_wipe_base_unknown_;
};

// Short printable form of an entry for traces and violation reports.
std::string describe(const raft::Entry& entry);

}  // namespace raftlog::sim

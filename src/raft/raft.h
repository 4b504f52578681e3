// The Raft core: a deterministic state machine in the style of etcd-io/raft.
//
// Inputs: tick(), step(message), propose(entries), read_index(id), transfer_leadership(target),
// on_persisted(index, term). Outputs: a Ready batch (see types.h for the driver's contract).
// No threads, clocks, sockets or files: the same inputs always give the same outputs, which is what
// lets raftlog-sim replay any seed exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "raft/log_reader.h"
#include "raft/types.h"

namespace raftlog::raft {

struct Config {
  NodeId id = kNoNode;
  // The configuration used when the log holds no kConfig entry (the bootstrap configuration).
  ConfState initial_conf;
  // The configurations the driver knows to be in the log (e.g. kept in a record next to its hard
  // state), oldest first: the newest one is in force, and the ones before it are what a truncation
  // of its entry rolls back to. When set, the core uses it instead of scanning the log backwards for
  // kConfig entries, a scan whose cost grows with the log. Index 0 names the bootstrap
  // configuration. The oldest record must be committed (or be the bootstrap one): a truncation never
  // rolls back past it. Indexes increase; each configuration is valid (validate_config).
  std::vector<ConfRecord> conf_history;
  // Ids removed by committed configuration changes before conf_history's oldest record (the
  // driver's record of them, oldest retirement first; at most kMaxRetiredIds). The core adds the
  // ones it sees retire. A request from a retired id is answered with kRemovedContext, not handled.
  std::vector<NodeId> retired_ids;

  // Logical time. Election timeout is randomized in [election_ticks, 2 * election_ticks).
  int election_ticks = 10;
  int heartbeat_ticks = 1;
  bool pre_vote = true;  // a rejoining node cannot disrupt a healthy leader by inflating terms
  bool check_quorum =
      true;  // a leader that has not heard from a majority for an election timeout steps down

  // Bounds (asserted): every queue the core owns has one.
  std::size_t max_entries_per_message = 256;
  std::size_t max_bytes_per_message = 1 << 20;
  std::size_t max_inflight_messages = 64;           // per follower, in replicate state
  // Per follower, in replicate state: entry bytes (Entry::byte_size) of the appends sent and not yet
  // acknowledged. No append is sent while they reach this bound, and an append carries only the room
  // left (at least one entry), so at most max_inflight_bytes plus one entry are in flight. It bounds
  // what one follower far behind costs the leader per round (log reads, messages handed to the
  // transport): without it, max_inflight_messages full messages (64 x 8 MiB in raftlogd) were read
  // in one round.
  std::size_t max_inflight_bytes = 16 << 20;
  std::size_t max_uncommitted_entries = 16 * 1024;  // pending proposals on a leader
  std::size_t max_uncommitted_bytes = 64 << 20;
  std::size_t max_pending_reads = 4096;
  // The driver installs snapshots (Ready::snapshot) and fills in the data of those it sends
  // (docs/raft.md, "Snapshots"). Then a leader sends a snapshot to a follower that needs entries it
  // trimmed, and a follower installs one. Without it a leader re-probes such a follower at its first
  // index on every heartbeat answer (it catches up only if its log was rebuilt from a copy) and a
  // follower ignores kSnapshot messages.
  bool snapshots = false;
  // A snapshot sent to a follower that has not acknowledged it within this many ticks is sent again
  // (it or its answer was lost, or its install failed). One snapshot per follower is in flight at a
  // time. The count restarts whenever the driver reports the transfer's progress
  // (Raft::snapshot_progress), so it bounds the time without progress: the default is 5 s at
  // raftlogd's 20 ms tick, for a chunk to go out or, after the last one, for the install and its
  // acknowledgement (decoding and writing the data, a store reset and two small synced files).
  int snapshot_retry_ticks = 250;

  // Catching up after lost durable state (docs/raft.md, "Storage faults"). The driver sets these when
  // recovery removed entries this node may already have acknowledged (a corrupted or missing part of
  // synced data): `promised_index` is the highest index it may have promised, `promised_term` the
  // highest term it may have promised it in. While catching up the node neither campaigns nor grants
  // (pre-)votes, and its append acknowledgements carry kCatchingUpContext so that leaders do not count
  // them toward commit. It stops catching up once its durable log reaches promised_index, or holds an
  // entry of a term above promised_term (a leader of a later term replaced what it had promised). The
  // core also enters this state by itself when a heartbeat of its leader names a commit index beyond
  // its log: the leader only does that after this node acknowledged that far.
  Index promised_index = 0;
  Term promised_term = 0;
  // The driver found this node's durable state empty (no hard state, no entries, no snapshot) in a
  // configuration with other members, or it did so before and no leader has caught it up since
  // (docs/raft.md, "Unvouched nodes"). An empty log cannot tell a brand-new cluster from one whose
  // entries this node acknowledged and then lost with its data directory, so until a leader has
  // caught it up the node grants a (pre-)vote only to a candidate whose log is empty too or, once a
  // leader of term T named commit c to it, whose log would vouch for it (last term above T, or T with
  // last index >= c), and campaigns only while its own log is empty. That first leader's message makes
  // it catch up (acknowledgements marked, not counted toward commit) until its durable log reaches c
  // AND holds an entry of term >= T; then it is vouched (unvouched() turns false, and the driver
  // forgets its record of the state). Winning an election vouches it too.
  bool unvouched = false;
  // The first leader's word to this unvouched node, as the driver recorded it (vouching() after an
  // earlier start): its term T and the commit index c it named (0, 0: none yet). The catch-up and the
  // vote rule above resume from it, so that a node that crashed in the middle of its first catch-up
  // still grants the candidates holding what that leader committed (without it, a needed voter that
  // restarted so voted for nobody with entries until a leader reached it, and none could be elected).
  Term vouching_term = 0;
  Index vouching_index = 0;
  // This node never founds a cluster (the driver's durable record: it joined a running cluster, or
  // it knew a commit index above 0; docs/raft.md, "Nodes that never found a cluster"). It then
  // grants no (pre-)vote to a candidate whose log is empty and does not campaign while its own log
  // is empty: a cluster that committed an entry never needs an empty leader (it lacks that entry),
  // and such a node's empty log is one that lost its entries or has not received them yet. Its
  // unvouched vote rule otherwise granted empty candidates until a leader named a commit above 0,
  // and a founder restarted empty with a stale bootstrap configuration won with such a vote.
  bool never_founds = false;
  // An operator's way out of the unvouched wedge (raftlogd --unvouched-may-elect; docs/raft.md,
  // "Unvouched nodes", and docs/operations.md): while unvouched, this node grants a (pre-)vote to
  // this candidate by the ordinary rules (the up-to-date rule against its own log, one vote per
  // term), without a leader's word. It vouches for nothing by itself, leaves every other rule as is
  // (an empty candidate is still refused under never_founds, a storage-fault catch-up still grants
  // nothing) and is meant for one case: a majority lost their logs, so nobody can be elected, and
  // the operator checked that this candidate holds the cluster's log. kNoNode: none.
  NodeId unvouched_may_elect = kNoNode;
  // A member's binding word that this node's id is retired, as the driver recorded it at an earlier
  // start (removed_word() then; docs/raft.md, "Membership changes"): restored, so that a restart
  // neither campaigns nor leads until the log holds the named configuration entry. Only words that
  // name a position (conf_index > 0) bind and are restored; a word the restored log shows stale is
  // dropped at once.
  std::optional<RemovedWord> removed_word;

  // Seeds the core's private PRNG (randomized election timeouts). Same seed, same behaviour.
  std::uint64_t random_seed = 1;
  // Seeds the generator of leadership nonces (Message::leader_nonce: a random non-zero value each
  // leadership draws when it becomes leader). The core has no randomness of its own: the driver
  // gives every start of a node a seed no earlier start of that id had (raftlogd: a real random
  // source; the simulator and the tests: their seeded generators), so that a node restarted on a
  // lost disk and elected again in a term it led draws another nonce than its first leadership,
  // and its peers tell the two apart. 0: derived from (random_seed, id), which a driver that
  // draws random_seed afresh at each start (the simulator) may rely on. Apart from election jitter:
  // drawing nonces changes no election timeout.
  std::uint64_t leadership_nonce_seed = 0;
};

enum class ProposeStatus : std::uint8_t {
  kOk,
  kNotLeader,       // see ProposeResult::leader_hint (kNoNode: no leader known yet)
  kTransferring,    // a leadership transfer is in progress; retry on the new leader
  kTooManyPending,  // max_uncommitted_entries/bytes would be exceeded; back off
  kEmpty,           // no entries given
  kTooLarge,        // one batch larger than max_bytes_per_message or max_entries_per_message
  kInvalidEntry,    // an entry type that cannot be proposed (kConfig: use propose_conf_change)
};

const char* to_string(ProposeStatus status);

struct ProposeResult {
  ProposeStatus status = ProposeStatus::kNotLeader;
  Index first_index = 0;  // on kOk: the indexes assigned to the proposed entries, contiguous
  Index last_index = 0;
  Term term = 0;  // on kOk: the term the entries were proposed in. The proposal succeeded iff
                  // the entry at last_index still has this term when it commits.
  NodeId leader_hint = kNoNode;
};

enum class ReadIndexStatus : std::uint8_t { kOk, kNotLeader, kTooManyPending };

enum class TransferStatus : std::uint8_t {
  kOk,
  kNotLeader,
  kUnknownTarget,
  kAlreadyLeader,
  kInProgress,
  // The target has not answered this leader for an election timeout or more: not running, or cut
  // off. A TimeoutNow would not reach it, and a transfer refuses proposals until it ends.
  kTargetSilent
};

// Why propose_conf_change() refused (docs/raft.md, "Membership changes").
enum class ConfChangeStatus : std::uint8_t {
  kOk,
  kNotLeader,     // see ConfChangeResult::leader_hint
  kTransferring,  // a leadership transfer is in progress
  kNotReady,      // this leader has not committed an entry of its term yet (the leader-change bug
                  // of single-server changes); retry shortly
  kInProgress,    // the previous change is not committed yet: one change at a time
  kInvalid,       // ConfChangeResult::problem says why (unknown node, already a member, ...)
  kWouldLoseQuorum,  // fewer voters of the new configuration than its quorum are reachable
  kLearnerBehind,    // a promotion of a learner that does not hold every committed entry yet
  kTooManyPending,   // max_uncommitted_entries/bytes would be exceeded
};

const char* to_string(ConfChangeStatus status);

// On kWouldLoseQuorum: a voter of the new configuration the leader did not count as reachable, and
// why (what an operator looks at: drills7 L6).
struct UncountedVoter {
  enum class Why : std::uint8_t {
    kSilent,           // not heard from within an election timeout (ticks_since_contact)
    kCatchingUp,       // its latest append answer was marked catching up (lost log, storage fault)
    kNoAcknowledgement,  // heard this term only through heartbeats or refusals, no plain ack
  };
  NodeId node = kNoNode;
  Why why = Why::kSilent;
  std::uint64_t ticks_since_contact = 0;  // kSilent: ticks since the leader last heard it (or its term)
  bool heard_this_term = false;           // kSilent: false when it never answered this leader
  friend bool operator==(const UncountedVoter&, const UncountedVoter&) = default;
};

struct ConfChangeResult {
  ConfChangeStatus status = ConfChangeStatus::kNotLeader;
  ConfChangeProblem problem = ConfChangeProblem::kNone;  // on kInvalid
  Index index = 0;  // on kOk: the kConfig entry's index and term; the change succeeded iff that
  Term term = 0;    // entry still has this term when it commits
  NodeId leader_hint = kNoNode;
  // On kWouldLoseQuorum: the new configuration's quorum, how many of its voters counted, and the
  // others (at most kMaxMembers), by id.
  std::size_t quorum = 0;
  std::size_t reachable = 0;
  std::vector<UncountedVoter> uncounted;
};

const char* to_string(ReadIndexStatus status);
const char* to_string(TransferStatus status);

// Checks every Config bound and the initial voter set. Returns an empty string when the config is
// usable, otherwise a sentence naming the first problem. The Raft constructor aborts on a bad config.
std::string validate_config(const Config& config);

// The restart rule, in one place: empty when a core may start from this hard state over this log,
// otherwise why not. A log entry of a term above the hard state's term is refused: the driver makes
// term and vote durable before any entry of that term (Ready's contract: hard state, then log, then
// messages after persist), so such a log means the hard state was lost or replaced by an older one,
// and starting would let this node vote a second time in a term it may have voted in already. A
// commit index beyond the log is refused too (committed entries are missing). The driver checks
// this first and refuses to start with the reason; the Raft constructor aborts on it.
std::string restart_problem(const HardState& hard_state, const LogReader& log);

// Observability for status pages and metrics: a leader's view of one follower.
struct PeerProgress {
  NodeId id = kNoNode;
  Index match_index = 0;  // highest index known durable on that peer
  Index next_index = 0;
  bool probing = true;  // probe state: one message in flight until the match point is known
  std::size_t inflight_messages = 0;
  std::uint64_t ticks_since_contact = 0;
  bool disk_over_watermark = false;  // as the peer's last response said (for the leader: its own)
  bool heard_this_term = false;      // the peer answered this leader (its reported fields are news)
  bool voter = false;        // a voter of the configuration in force (may be handed leadership)
  bool catching_up = false;  // its acknowledgements are not counted yet (a storage fault)
  // Non-zero while a snapshot replacing the peer's log up to this index is in flight to it (sent,
  // not yet acknowledged): it needed entries the leader no longer holds (docs/raft.md, "Snapshots").
  Index snapshot_index = 0;
  std::size_t inflight_bytes = 0;  // entry bytes of the appends in inflight_messages
  bool answered_append = false;  // its own append answer told where its log ends (Progress)

  // The peer needs entries below `first_index` (the leader's first retained index), as its own
  // answer to an append showed (answered_append): its log ends or matches below the first index,
  // so next_index (in probe state the leader's current guess, lowered only by its answers) fell
  // below it and the leader sends it a snapshot instead (snapshot_index). Or, in replicate state
  // (its match acknowledged), its acknowledged log ends below the first index - 1: there
  // next_index is optimistic (it moves on with every append sent, answered or not), so a peer that
  // went silent (down, cut off) keeps a next_index above a later trim's first index, yet what it
  // holds stops at match_index and the entries after it are gone. Before such an answer nothing
  // counts: a new leader starts every match at 0 (not known yet), and a follower that holds the
  // whole retained log (the deposed leader, with or without an uncommitted tail of its own), one
  // that answered only heartbeats, or one that is down across the election must not look
  // stranded (docs/operations.md, "Catching up from a snapshot").
  bool needs_trimmed_entries(Index first_index) const {
    return snapshot_index != 0 ||
           (answered_append &&
            (next_index < first_index || (!probing && match_index + 1 < first_index)));
  }
  // Where the peer's log stops matching this leader's, as far as the leader knows: past its match
  // once acknowledged (replicate state), else the probe's guess (next_index).
  Index needs_entries_from() const { return probing ? next_index : match_index + 1; }
};

// A leader's append contradicts an entry this follower holds as committed (docs/operations.md,
// "A committed entry conflicts with the leader"): only possible after a safety violation (an
// operator's copy of data directories, a lost disk restarted under its id on an older binary, a
// forged message). The follower keeps its log (it never truncates a committed entry) and the
// leader cannot catch it up: the driver says so loudly.
struct CommittedConflict {
  Index index = 0;       // the first committed entry the leader's log contradicts
  Term own_term = 0;     // its term here
  Term leader_term = 0;  // the term of the leader's entry there (0: not known, only that it differs)
  NodeId leader = kNoNode;
  std::uint64_t count = 0;  // appends seen contradicting a committed entry since start
};

// Two leaders of one term met (docs/raft.md, "A second leader of a term"): a node that knows
// `known_leader` as the leader of `term` refused leader messages of that term from `other_leader`.
// Only possible after a safety violation (a node restarted on a lost disk under its id and elected
// again in a term its peers had seen led) or with a forged message.
struct TermLeaderClash {
  Term term = 0;
  NodeId known_leader = kNoNode;  // the leader of `term` the refusing node knows (maybe itself)
  NodeId other_leader = kNoNode;  // the node whose leader messages of `term` it refused
  NodeId refused_by = kNoNode;    // the refusing node
  std::uint64_t count = 0;        // such messages (refused, or refusals received) since start
  // The leadership nonces (Message::leader_nonce) of the known leadership and of the refused one,
  // 0 where not known. known_leader == other_leader: the same id led `term` twice with these two
  // nonces (a node that lost its state and was elected again in a term it had led).
  std::uint64_t known_nonce = 0;
  std::uint64_t other_nonce = 0;
};

class Raft {
 public:
  // Restores from durable state: `hard_state` as last persisted, `log` as recovered. `log` must
  // outlive the Raft object and reflect every Ready the driver has applied.
  Raft(const Config& config, const LogReader& log, const HardState& hard_state);
  ~Raft();
  Raft(const Raft&) = delete;
  Raft& operator=(const Raft&) = delete;

  // Advance logical time by one tick.
  void tick();
  // Handle a message from a peer. Messages for other nodes, from unknown nodes, or naming a term above
  // kMaxTerm are ignored; so is anything else that contradicts this node's state (never an abort).
  // Taken by value: the entries of an append are moved into the log, not copied (a caller that
  // keeps its message passes a copy).
  void step(Message message);
  // Leader only: append client entries (type, client_id, sequence and payload are taken from
  // `entries`; index and term are assigned).
  ProposeResult propose(std::vector<Entry> entries);
  // Leader only: append a kConfig entry holding the configuration `change` leads to. It is in force
  // at once (when appended, on every node), and the next change is accepted once it committed.
  ConfChangeResult propose_conf_change(const ConfChange& change);
  // Leader only: start a linearizable read; its ReadState (or abort) appears in a later Ready.
  ReadIndexStatus read_index(std::uint64_t request_id);
  // Leader only: hand leadership to `target` (stops accepting proposals until done or aborted after an
  // election timeout).
  TransferStatus transfer_leadership(NodeId target);
  // The driver's disk passed its high watermark (true) or fell back below the low one (false). Sent
  // with every append and heartbeat response, so that a leader short of disk hands leadership to a
  // follower with room (the driver decides when; docs/raft.md, "Disk-aware leadership").
  void set_disk_over_watermark(bool over);
  // Leader only: the driver's transport made progress sending `peer` the snapshot in flight to it
  // (bytes went out since its last report). Restarts that snapshot's retry timer
  // (Config::snapshot_retry_ticks), which then bounds the time without progress rather than the
  // whole transfer. Ignored when no snapshot is in flight to `peer`.
  void snapshot_progress(NodeId peer);
  // The driver knows the configuration in force at `point`, its log's first index - 1 (it keeps it
  // across trims and restarts: docs/raft.md, "Snapshots"). A leader then sends snapshots at its first
  // index - 1 with that configuration even when a newer configuration committed above it, so that
  // the follower receives every entry the leader retains (without it the point is that newer
  // configuration's index: the core keeps only the newest committed one). Kept until replaced or
  // forgotten; used only while the log starts at point + 1 (a trim or an install that moved the
  // start makes it stale until the driver tells the new one). `conf` must be valid (validate_config's
  // rules: asserted, it is the driver's own state).
  void set_trim_point_conf(Index point, const ConfState& conf);
  // The configuration at the first index - 1 is not known (a log trimmed by an older binary, its
  // record lost): snapshots are sent at the newest committed configuration when it lies above.
  void forget_trim_point_conf();
  // The driver reports that every entry up to `index` is durable and that the entry at `index` has
  // `term` (stale reports after a truncation are ignored by the term check). Only durable entries count
  // toward a quorum, on the leader too.
  void on_persisted(Index index, Term term);

  bool has_ready() const;
  // Drains the pending outputs. The caller must handle the batch as types.h describes before the next one.
  Ready ready();

  // Read-only views.
  NodeId id() const;
  Role role() const;
  Term term() const;
  NodeId leader() const;
  Index commit_index() const;
  Index last_index() const;       // including the unstable tail not yet handed to the driver
  const ConfState& conf() const;  // the configuration in force: the newest in the log
  // The configurations the log holds that a truncation could still roll back to, oldest first: the
  // newest committed one (or the bootstrap one) and every newer one. back() is in force. What a
  // driver keeps for Config::conf_history.
  const std::vector<ConfRecord>& conf_history() const;
  std::vector<PeerProgress> progress() const;  // empty unless leader
  HardState hard_state() const;
  SoftState soft_state() const;
  // Highest index known durable locally (entries present at construction or reported by on_persisted).
  Index persisted_index() const;
  NodeId transfer_target() const;     // kNoNode unless a leadership transfer is in progress
  std::size_t pending_reads() const;  // ReadIndex requests not yet released or aborted
  // True while the node catches up after lost durable state (Config::promised_index); the index it
  // must reach is catching_up_to().
  bool catching_up() const;
  Index catching_up_to() const;
  // True while the node is unvouched (Config::unvouched): no leader has caught it up since it
  // started on empty durable state. Turns false once, when its durable log reaches what the
  // rule requires; a driver that keeps a record of the state removes it then (not before).
  bool unvouched() const;
  // While unvouched: the first leader's word (Config::vouching_term, vouching_index), {0, 0} before
  // one. A driver that keeps a record of the unvouched state keeps this in it.
  std::pair<Term, Index> vouching() const;
  // While unvouched: how often its catch-up moved (its term, leader, commit or log changed, or the
  // leader's word), counted as each Ready is taken. A driver that sees it unchanged for long knows
  // nothing moved (the replica's unvouched hint, docs/operations.md, "Unvouched nodes").
  std::uint64_t catch_up_moves() const;
  // Why the node catches up: kNone (it does not), kConfig (the driver's Config::promised_index),
  // kLeaderCommit (a heartbeat of its leader named a commit beyond its log: it lost entries it
  // acknowledged), kUnvouched (a leader's first contact with an unvouched node).
  enum class CatchUpCause : std::uint8_t { kNone, kConfig, kLeaderCommit, kUnvouched };
  CatchUpCause catch_up_cause() const;
  // True once a member answered that this node's id is retired (kRemovedContext). A member names
  // its newest committed configuration (a configuration that does not list us): the word binds
  // only when our log lacks that entry (a stale word, from a member whose log lacks our re-adding,
  // is checked so and dropped), and then this node neither campaigns nor leads (a leader steps
  // down, StepDownReason::kToldRemoved) until its log holds that entry (a leader that re-added it
  // replicated it). A word without a position (a node from before it) is information only and is
  // cleared when a leader of our term or later replicates to us (docs/raft.md, "Membership
  // changes"). A binding word is persisted by the driver (Config::removed_word).
  bool removed() const;
  // Which member said so (kNoNode when not removed).
  NodeId removed_by() const;
  // The word itself (nullopt when not removed): what a driver records durably while it binds
  // (told_removed()) and hands back at its next start (Config::removed_word).
  const std::optional<RemovedWord>& removed_word() const;
  // removed() by a word that binds (it named a configuration our log lacks).
  bool told_removed() const;
  // Why this core last stopped leading (reason kNone if it never did): a driver reads it when a
  // Ready's soft state shows the leader become a follower, to say why.
  const StepDown& last_step_down() const;
  // The retired ids this core knows (Config::retired_ids and the ones it saw retire), oldest first.
  const std::vector<NodeId>& retired_ids() const;
  // Non-zero while this follower needs entries its leader no longer holds (trimmed by retention):
  // it cannot catch up by replication alone and waits for the leader's snapshot (docs/raft.md,
  // "Snapshots"). The value is the leader's first retained index.
  Index stranded_below() const;
  // The snapshot this node installed that its driver has not reported durable yet (Ready::snapshot;
  // its index, term and configuration, without the data), or nullopt.
  const std::optional<Snapshot>& installing_snapshot() const;
  // Non-zero while this follower's log does not reach the commit index its leader last named in an
  // append (the value): it is still catching up. A follower in step with its leader reaches it with
  // every append (the entries an append carries go past the commit it names).
  Index behind_leader_commit() const;
  // The latest append that contradicted a committed entry of this node (count 0: none since start).
  const CommittedConflict& committed_conflict() const;
  // The leader this node knows for its current term (HardState::leader; kNoNode: none yet).
  NodeId term_leader() const;
  // The nonce of that leadership (HardState::leader_nonce; 0: not known, or no leader known).
  std::uint64_t term_leader_nonce() const;
  // This node refuses `message` as a second leader's: a leader message (append, heartbeat,
  // snapshot, TimeoutNow) of its current term from another node than the term's leader it knows,
  // or from that node with another non-zero leadership nonce than the known non-zero one. What the
  // core's step() decides (a driver that does work before stepping, such as preparing a
  // snapshot's data, asks it first).
  bool is_second_leader_message(const Message& message) const;
  // The latest leader message of this node's term from a node other than the term's leader it
  // knows, which it refused (count 0: none since start).
  const TermLeaderClash& second_leader() const;
  // The latest refusal of this node's leadership by a node that knows another leader of the term it
  // led (count 0: none since start). Information only: this node keeps its role.
  const TermLeaderClash& leadership_refused() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;  // pimpl keeps the core's internals out of every includer's compile
};

}  // namespace raftlog::raft

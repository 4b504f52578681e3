// Value types shared by the Raft core, its drivers (the server node and the simulator) and tests.
//
// The core is a pure state machine: it never touches a clock, a thread, a socket or a file. Everything
// it needs arrives through these types, and everything it wants done leaves through `Ready`.
// Indexes start at 1; index 0 and term 0 mean "none" (the empty log's last index is 0 with term 0).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "raft/payload.h"

namespace raftlog::raft {

using NodeId = std::uint64_t;  // 0 is "no node" (no leader known, no vote cast).
using Term = std::uint64_t;
using Index = std::uint64_t;

inline constexpr NodeId kNoNode = 0;

// Message::context of a kVote sent by a node campaigning because of kTimeoutNow (leadership transfer):
// voters then grant even while they still hear from the current leader (they ignore their lease).
inline constexpr std::uint64_t kTransferCampaignContext = 1;

// Message::context of a successful kAppendResponse from a node that is catching up after a storage
// fault (Raft::catching_up()): the leader tracks its progress but does not count its acknowledgement
// toward commit until an answer comes without this mark.
inline constexpr std::uint64_t kCatchingUpContext = 2;

// Message::context of a rejecting kPreVoteResponse, kVoteResponse or kAppendResponse that tells its
// receiver it was removed from the cluster by a committed configuration change (its id is retired,
// Raft::retired_ids()): a node that was down when its removal committed never receives the entry,
// and learns it from any member it asks for a vote (Raft::removed(), information only: it is one
// peer's word). Sent only where the vote is refused anyway (the requester's log is behind).
inline constexpr std::uint64_t kRemovedContext = 3;

// Message::context of a rejecting kAppendResponse: its sender knows another node as the leader of
// this term (Message::term_leader) and refused the recipient's append, heartbeat or snapshot of the
// same term (docs/raft.md, "A second leader of a term"): two leaders of one term, which only a node
// that lost its durable state (or a forged message) makes. Information for the recipient.
inline constexpr std::uint64_t kOtherLeaderContext = 5;

// At most this many retired ids are kept by the core (Config::retired_ids and the ones it sees
// retire); beyond, the oldest retirements are forgotten.
inline constexpr std::size_t kMaxRetiredIds = 1024;

// The highest term the core accepts or reaches. A message naming a higher term is dropped (a forged or
// corrupted term near 2^64 would otherwise be adopted and persisted, and the next election's term + 1
// would overflow: the cluster could never elect again). Honest terms grow by one per election and
// never come near it.
inline constexpr Term kMaxTerm = Term{1} << 62;
// The most entries one proposal may hold, on any node of any configuration (Config::
// max_entries_per_message may not exceed it): a new leader looks this far back for an unfinished
// proposal, however the node that proposed it was configured.
inline constexpr std::size_t kMaxProposalEntries = 65536;

enum class EntryType : std::uint8_t {
  kNormal = 0,  // a client payload
  kNoop = 1,  // appended by a new leader at once so that earlier-term entries commit (Raft §5.4.2)
  kConfig =
      2,  // a whole configuration (encode_config()), proposed by Raft::propose_conf_change; in
          // force from the moment it is appended to a log (docs/raft.md, "Membership changes")
};

// One log entry. `client_id`/`sequence` are opaque to Raft: the server uses them for idempotent
// appends and rebuilds its dedup table from the log; 0/0 means "not an idempotent append".
struct Entry {
  Index index = 0;
  Term term = 0;
  EntryType type = EntryType::kNormal;
  std::uint64_t client_id = 0;
  std::uint64_t sequence = 0;
  // The next entry belongs to the same proposal (one propose() call, one client Append): a commit
  // index never stops at this entry, so a proposal commits whole or not at all. Set by propose() on
  // every entry but a proposal's last; replicated and stored with the entry.
  bool proposal_continues = false;
  // The payload starts with a topic/keys/timestamp envelope (src/derived/envelope.h). Opaque to
  // Raft like client_id: set by the replica on the entries it proposes, replicated and stored with
  // the entry (store flag kEntryFlagEnvelope).
  bool has_envelope = false;
  // The payload is a consumer group's offset commit (src/derived/group_commit.h), not a client's
  // bytes. Opaque to Raft like has_envelope: replicated and stored with the entry (store flag
  // kEntryFlagGroupCommit).
  bool is_group_commit = false;
  Payload payload;  // shared by every copy of the entry (raft/payload.h)

  // Bytes this entry counts for in message and proposal bounds (payload plus a fixed header cost).
  std::size_t byte_size() const { return payload.size() + kEntryOverheadBytes; }
  static constexpr std::size_t kEntryOverheadBytes = 48;

  friend bool operator==(const Entry&, const Entry&) = default;
};

enum class MessageType : std::uint8_t {
  kPreVote,  // "would you vote for me at term+1?" (does not change anyone's term)
  kPreVoteResponse,
  kVote,  // RequestVote
  kVoteResponse,
  kAppend,  // AppendEntries (possibly with zero entries when probing)
  kAppendResponse,
  kHeartbeat,  // leader liveness + commit propagation + ReadIndex confirmation (context)
  kHeartbeatResponse,
  kTimeoutNow,  // leadership transfer: "campaign now, skip pre-vote"
  kSnapshot,    // what replaces the log up to Message::snapshot->index, for a follower that needs
                // entries the leader no longer holds (docs/raft.md, "Snapshots"); answered with a
                // kAppendResponse once installed
};

const char* to_string(MessageType type);

// State that must be durable before certain messages are sent (see Ready::messages_after_persist).
struct HardState {
  Term term = 0;
  NodeId vote = kNoNode;
  Index commit = 0;
  // The leader this node knows for `term` (kNoNode: none yet): itself once it won the term's
  // election, or the first node whose append, heartbeat or snapshot of the term it accepted. A
  // leader message of `term` from any other node is refused (docs/raft.md, "A second leader of a
  // term"). Durable with term and vote: a restarted node still refuses a second leader of its term.
  NodeId leader = kNoNode;
  // The nonce of that leader's leadership of `term` (Message::leader_nonce; 0: not known, from a
  // leader that sends none or a HARDSTATE from before it). Learnt with `leader`, in the same write:
  // a leader message of `term` from `leader` itself with another non-zero nonce is a second
  // leadership under the same id (a leader that lost its state and was elected again in its term)
  // and refused too.
  std::uint64_t leader_nonce = 0;

  friend bool operator==(const HardState&, const HardState&) = default;
};

// What HARDSTATE keeps differs (term, vote, the term's leader and its nonce: everything but the
// commit index, a hint the store's checkpoint keeps): such a change is synced before anything
// that vouches for it leaves (Ready::must_sync).
bool durable_fields_differ(const HardState& a, const HardState& b);

enum class Role : std::uint8_t { kFollower, kPreCandidate, kCandidate, kLeader };

const char* to_string(Role role);

// Why a leader stopped leading (Raft::last_step_down()): what the driver logs, since SoftState
// shows only the new role.
enum class StepDownReason : std::uint8_t {
  kNone,         // this core has not stepped down from leadership
  kCheckQuorum,  // no contact with a majority of voters within an election timeout
  kNewerTerm,    // a message of a newer term (another node's campaign or leadership)
  kRemoved,      // it committed its own removal from the voters and handed leadership over
  kToldRemoved,  // a member answered that its id is retired and its log lacks that member's newest
                 // committed configuration (Raft::removed_by): a retired id restarted on a lost disk
};

const char* to_string(StepDownReason reason);

struct StepDown {
  StepDownReason reason = StepDownReason::kNone;
  Term term = 0;  // the term it became follower in
  // kRemoved: the caught-up voter it told to campaign at once (TimeoutNow), or kNoNode when no
  // voter held its whole log (the voters then elect a leader after their election timeout).
  // kToldRemoved: the member that answered that this node's id is retired.
  NodeId successor = kNoNode;

  friend bool operator==(const StepDown&, const StepDown&) = default;
};

// Volatile state worth reporting (status pages, client redirects); never needs persisting.
struct SoftState {
  Role role = Role::kFollower;
  NodeId leader = kNoNode;
  Term term = 0;

  friend bool operator==(const SoftState&, const SoftState&) = default;
};

// A ReadIndex request whose leadership check has passed: the read may be served once the driver has
// applied (made visible) every entry up to `index`.
struct ReadState {
  std::uint64_t request_id = 0;
  Index index = 0;

  friend bool operator==(const ReadState&, const ReadState&) = default;
};

// The configuration: who votes and who only receives the log. Part of the core's state and of the log
// (EntryType::kConfig entries hold whole configurations, docs/raft.md "Membership changes").
// A member's peer/client address ("host:port", util::parse_host_port), carried by configuration
// entries so that every node learns where a new member listens. Opaque to the core's decisions, which
// are on ids only: it checks the syntax and the bounds, and that an address names a member.
struct MemberAddress {
  NodeId node = kNoNode;
  std::string address;

  friend bool operator==(const MemberAddress&, const MemberAddress&) = default;
};

// The longest member address a configuration holds (a DNS name of up to 100 bytes and a port fit; the
// bound keeps a configuration, and so CONFSTATE, small).
inline constexpr std::size_t kMaxMemberAddressBytes = 128;
// The most bytes one encoded configuration may take (encode_config), addresses included. Checked when
// a change is made (kTooLarge) and when a payload is decoded.
inline constexpr std::size_t kMaxConfigBytes = 3072;

struct ConfState {
  std::vector<NodeId> voters;  // sorted, unique, non-empty, never contains kNoNode
  std::vector<NodeId> learners =
      {};  // sorted, unique, never kNoNode, disjoint from voters: they receive
           // the log but never campaign, and their votes and acknowledgements
           // count toward nothing
  // Sorted by node, unique, each a member, no two with the same text; a member without one (every
  // member of a configuration written before addresses existed, format 2) is found by the node's
  // --members. Compared by same_members() where only the roles matter.
  std::vector<MemberAddress> addresses = {};

  friend bool operator==(const ConfState&, const ConfState&) = default;
};

// Voters and learners together (bounds the configuration's encoding, and so the replica's CONFSTATE
// record, to a little over 512 bytes).
inline constexpr std::size_t kMaxMembers = 64;
inline constexpr std::size_t kMaxVoters = kMaxMembers;

// True when `conf` satisfies the ConfState rules above (and has at most kMaxMembers members).
bool is_valid_conf(const ConfState& conf);
bool is_voter(const ConfState& conf, NodeId node);
bool is_learner(const ConfState& conf, NodeId node);
inline bool is_member(const ConfState& conf, NodeId node) {
  return is_voter(conf, node) || is_learner(conf, node);
}
std::string to_string(const ConfState& conf);  // "voters {1,2,3} learners {4}"
// Same voters and same learners (addresses aside).
bool same_members(const ConfState& a, const ConfState& b);
// The address `conf` records for `node`, or nullptr.
const std::string* address_of(const ConfState& conf, NodeId node);
// Empty when `address` may be a member address (host:port, port 1..65535, at most
// kMaxMemberAddressBytes, printable ASCII), else what is wrong with it.
std::string check_member_address(const std::string& address);

// Encoding (little endian), version 2: u8 version, u32 voter count, count x u64 voter ids, u32 learner
// count, count x u64 learner ids, u32 CRC-32C of every preceding byte. Version 3 (written when the
// configuration records addresses) inserts before the CRC: u32 address count, then per address u64
// node, u16 length, that many bytes. Version 1 (written by no release: kConfig entries could not be
// proposed before membership changes) is version 2 without the learner part; 1 and 2 still decode
// (with no addresses). Precondition: is_valid_conf(conf). The store checksums every entry as well;
// the codec's own CRC also covers a payload that arrives in a message.
std::string encode_config(const ConfState& conf);
// Returns nullopt for a payload that is not a well-formed encoded ConfState (is_valid_conf included).
std::optional<ConfState> decode_config(const std::string& payload);

// One membership change (single-server changes, Raft dissertation ch. 4).
enum class ConfChangeType : std::uint8_t {
  kAddVoter,        // a node that is not a member becomes a voter
  kAddLearner,      // a node that is not a member becomes a learner
  kPromoteLearner,  // a learner becomes a voter
  kRemoveNode,      // a voter or a learner leaves
};

const char* to_string(ConfChangeType type);

struct ConfChange {
  ConfChangeType type = ConfChangeType::kAddLearner;
  NodeId node = kNoNode;
  // The addresses the new configuration records (the driver's address book, the new member's
  // included); addresses of nodes that are not members of the new configuration are left out. Empty:
  // the new configuration keeps the addresses of the old one's remaining members.
  std::vector<MemberAddress> addresses = {};

  friend bool operator==(const ConfChange&, const ConfChange&) = default;
};

enum class ConfChangeProblem : std::uint8_t {
  kNone,
  kInvalidNode,     // kNoNode
  kAlreadyMember,   // add of a member, or promotion of a voter
  kNotMember,       // promotion or removal of a node the configuration does not hold
  kNotLearner,      // promotion of a node that is not a learner
  kNoVotersLeft,    // removal of the last voter
  kTooManyMembers,  // more than kMaxMembers
  kBadAddress,      // an address that check_member_address refuses, or two for one node
  kAddressInUse,    // two members with the same address
  kTooLarge,        // the new configuration would encode to more than kMaxConfigBytes
};

const char* to_string(ConfChangeProblem problem);

// The configuration `change` turns `conf` into, or the reason it cannot be applied.
ConfChangeProblem check_conf_change(const ConfState& conf, const ConfChange& change);
// Precondition: check_conf_change(conf, change) == kNone.
ConfState apply_conf_change(const ConfState& conf, const ConfChange& change);
// The single change that turns `from` into `to`; nullopt when they are equal or differ by more.
std::optional<ConfChange> single_change_between(const ConfState& from, const ConfState& to);

// A configuration and the log entry that holds it (index 0: the bootstrap configuration, in no entry).
// A member's word that this node's id is retired (a kRemovedContext answer; Raft::removed_word):
// who said so, and the position of its newest committed configuration, which does not list this
// node (conf_index 0: a word from a node before retired5 that names none, information only).
struct RemovedWord {
  NodeId by = kNoNode;
  Index conf_index = 0;
  Term conf_term = 0;
  friend bool operator==(const RemovedWord&, const RemovedWord&) = default;
};

struct ConfRecord {
  Index index = 0;
  Term term = 0;
  ConfState conf;

  friend bool operator==(const ConfRecord&, const ConfRecord&) = default;
};

// An optional value kept on the heap, with deep copies and deep equality: a Message or Ready without
// one pays a pointer, not the value's size. (Also what keeps GCC 12 quiet: a moved Message holding a
// std::optional<Snapshot> draws false -Wmaybe-uninitialized errors.)
template <typename T>
class Boxed {
 public:
  Boxed() = default;
  Boxed(T value)  // NOLINT(google-explicit-constructor): a box of its value
      : value_(std::make_unique<T>(std::move(value))) {}
  Boxed(const Boxed& other) : value_(other.value_ ? std::make_unique<T>(*other.value_) : nullptr) {}
  Boxed(Boxed&&) noexcept = default;
  Boxed& operator=(const Boxed& other) {
    if (this != &other) value_ = other.value_ ? std::make_unique<T>(*other.value_) : nullptr;
    return *this;
  }
  Boxed& operator=(Boxed&&) noexcept = default;
  ~Boxed() = default;

  explicit operator bool() const { return value_ != nullptr; }
  T& operator*() { return *value_; }
  const T& operator*() const { return *value_; }
  T* operator->() { return value_.get(); }
  const T* operator->() const { return value_.get(); }
  T& emplace() {
    value_ = std::make_unique<T>();
    return *value_;
  }
  void reset() { value_.reset(); }

  friend bool operator==(const Boxed& a, const Boxed& b) {
    if (!a.value_ || !b.value_) return !a.value_ && !b.value_;
    return *a.value_ == *b.value_;
  }

 private:
  std::unique_ptr<T> value_;
};

// What replaces a log's entries up to `index` (inclusive) on a follower that needs entries its leader
// trimmed (docs/raft.md, "Snapshots"). raftlog's state machine is the log itself, so a snapshot is
// small: where the log it replaces ended, the configuration in force there, and the driver's own
// state derived from those entries (raftlog: the dedup table), opaque to the core.
struct Snapshot {
  Index index = 0;  // the last entry it replaces (>= 1)
  Term term = 0;    // that entry's term (>= 1)
  ConfState conf;   // the configuration in force at `index`, with the members' addresses
  Payload data;     // the driver's state as of `index`; empty as the core makes it
  // The CRC-32C of `data` when the driver that filled it computed it (raftlog's replica does, once
  // per encoding it reuses), so the transport need not compute it again per send; the core never
  // reads it.
  std::optional<std::uint32_t> data_crc32c = std::nullopt;

  friend bool operator==(const Snapshot&, const Snapshot&) = default;
};

// A flat message, in the style of etcd/raft's raftpb.Message: every type uses a subset of the fields.
struct Message {
  MessageType type = MessageType::kAppend;
  NodeId from = kNoNode;
  NodeId to = kNoNode;
  Term term = 0;  // sender's term (for kPreVote: the term the sender would campaign at)

  // kAppend: index/log_term of the entry preceding `entries`.
  // kVote/kPreVote: the candidate's last log index/term.
  // kAppendResponse: on success, the highest index known to match; on reject, the rejected index.
  // kHeartbeat: the leader's first retained index once it has trimmed its log (0 before that).
  Index index = 0;
  Term log_term = 0;
  std::vector<Entry>
      entries;  // kAppend only; bounded by Config::max_entries_per_message/max_bytes_per_message
  Index commit = 0;  // kAppend/kHeartbeat: the leader's commit index (clamped for heartbeats)
  // kHeartbeat: the leader's commit index unclamped, for the follower's view of how far behind it
  // is (behind_leader_commit: a learner's readiness); never committed from. 0: not said.
  Index leader_commit = 0;

  bool reject = false;  // responses: vote not granted / append did not match; kHeartbeatResponse:
                        // the heartbeat's commit was beyond the follower's log (it lost entries)
  Index reject_hint =
      0;               // kAppendResponse reject: the follower's hint for fast backtracking (index);
                       // kHeartbeatResponse reject: the follower's last index
  Term hint_term = 0;  // kAppendResponse reject: the follower's term at reject_hint (0 if none)

  std::uint64_t context =
      0;  // kHeartbeat/kHeartbeatResponse: ReadIndex round identifier (0 = none);
          // kVote: kTransferCampaignContext when the campaign follows a TimeoutNow;
          // kAppendResponse: kCatchingUpContext from a node catching up

  // kAppendResponse/kHeartbeatResponse: the sender's disk is past its high watermark, so a leader
  // that must hand over leadership for lack of disk does not choose it (Raft::set_disk_over_watermark).
  bool disk_over_watermark = false;

  // kAppend/kHeartbeat from a leader: its retention hold, the lowest index a follower it heard from
  // within the retention grace period still needs (the follower part of the leader's trim limit;
  // docs/operations.md, "Retention"). The recipient trims no entry at or above it. 0: no hold. The
  // core neither sets nor reads it: the leader's driver stamps it, the follower's keeps it.
  Index retention_hold = 0;

  // kHeartbeat from a leader: it is sending this follower a snapshot (the follower needs entries
  // the leader trimmed: its progress is in snapshot state), so the follower reports itself
  // stranded (Raft::stranded_below) until it installs one, even when its own log shows no gap (a
  // divergent tail the leader's probes walked back below its first index). false from a leader
  // that predates it.
  bool sending_snapshot = false;

  // kAppendResponse with kOtherLeaderContext: the leader of this term its sender knows (the node it
  // follows, or itself), which is why it refused the recipient's leader message of the same term.
  NodeId term_leader = kNoNode;

  // kAppend, kHeartbeat, kSnapshot and kTimeoutNow from a leader: the nonce its leadership drew
  // when it became leader (a random non-zero value, Config::leadership_nonce_seed), the same on
  // every leader message of that leadership. A follower keeps it with the term's leader
  // (HardState::leader_nonce) and refuses a leader message of the term from the same id with
  // another non-zero nonce: a node that lost its state and was elected again in a term it had led
  // (docs/raft.md, "A second leader of a term"). kAppendResponse with kOtherLeaderContext: the
  // nonce the refusing node knows for term_leader (0: none known). 0: not said (an older sender).
  std::uint64_t leader_nonce = 0;

  // kSnapshot only (and then always set): what replaces the follower's log up to its index. The
  // leader's core fills index, term and conf; its driver fills data before sending (types.h, Ready).
  Boxed<Snapshot> snapshot;

  friend bool operator==(const Message&, const Message&) = default;
};

// Everything the core asks the driver to do, drained with Raft::ready(). The driver must:
//   0. if `snapshot` is set, install it before anything else of the batch, atomically and durably:
//      its log becomes empty with first index snapshot->index + 1 and term_at(snapshot->index) ==
//      snapshot->term, the configuration in force is snapshot->conf, and its own state is what
//      snapshot->data says; then report it with on_persisted(snapshot->index, snapshot->term) (or
//      a later entry). The batch's hard state names the snapshot's index as commit: it may be
//      persisted only once the snapshot is (a crash in between must not leave a commit index
//      beyond the log), and its term and vote before it (a log term above the persisted term is
//      refused at restart). A kSnapshot message in `messages` is sent with its data filled in by
//      the driver (the core leaves Snapshot::data empty);
//   1. if `truncate_from` is set, drop every log entry with index >= *truncate_from;
//   2. append `entries` (contiguous, starting right after the log's last index after step 1);
//   3. send `messages` now (they do not depend on this batch being durable: e.g. a leader's appends
//      go out while its own flush runs);
//   4. persist `hard_state` if set (durably when `must_sync`) and make the entries durable, then call
//      Raft::on_persisted(last_index, last_term) for the highest durable entry and only then send
//      `messages_after_persist` (vote grants, append acknowledgements, a candidate's vote requests);
//   5. deliver entries up to `commit_index` to readers (they are committed), and release `read_states`
//      once that delivery has reached each ReadState::index;
//   6. fail the `aborted_reads` (leadership lost or timed out: the caller should retry elsewhere).
// Batches must be handled in order: batch N's messages_after_persist go before batch N+1's.
//
// Log timing (the "unstable tail" rule): the core keeps every entry it produced in its own unstable tail
// until on_persisted() covers it, and reads the LogReader only below that tail (entries reported durable,
// or present when the Raft object was constructed). The driver may therefore apply steps 1-2 whenever it
// likes, but must have applied them (visible through the LogReader) before it reports those entries with
// on_persisted(). Only durable entries count toward a quorum. The driver never trims entries above commit.
//
// Which messages wait for persistence: vote requests, vote grants/rejections and append acknowledgements
// (they vouch for durable term/vote/log state). Appends, heartbeats and their responses, pre-votes and
// their responses and TimeoutNow go at once: they vouch for nothing that could be lost in a crash.
struct Ready {
  Boxed<Snapshot> snapshot;             // install this first (step 0 above)
  std::optional<SoftState> soft_state;  // set when role, leader or term changed
  std::optional<HardState> hard_state;  // set when term, vote or commit changed
  bool must_sync = false;  // term, vote, the term's leader or entries changed: fsync the hard state

  std::optional<Index> truncate_from;  // cut the log at this index first (always above every commit
                                       // index of earlier batches: committed entries are never cut)
  std::vector<Entry> entries;          // then append these

  std::vector<Message> messages;                // send at once
  std::vector<Message> messages_after_persist;  // send after this batch is durable

  std::optional<Index>
      commit_index;  // set when the commit index advanced: entries up to it are committed

  std::vector<ReadState> read_states;
  std::vector<std::uint64_t> aborted_reads;

  bool empty() const;
};

}  // namespace raftlog::raft

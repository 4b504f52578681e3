// TestCluster: N production replicas (replica::Replica, the driver raftlogd and the simulator run),
// each over its own simulated disk (a store::MemoryEnv holding a stepped CommitLog and the HARDSTATE
// file), joined by a FIFO "network" the test controls message by message (drop rules, isolation, a
// mutator, deliver/drop/duplicate at a position). Deterministic; every loop is bounded.
//
// Inputs go through the replica (propose, read_index, transfer_leadership, step, tick), followed by
// the replica's process(), as raftlogd's Node does; raft(id) is a read-only view of the core. What the
// replica hands out is recorded per node: every Ready (through a ReadyObserver, before the replica
// applies it), the read states and aborted reads, the highest commit index delivered (never going
// backwards), and the answers to each request.
//
// Durability: the replica writes term and vote durably at once (HARDSTATE), appends entries without
// waiting and holds acknowledgements until a flush covers them. The cluster runs each node's flush
// cycles (and a checkpoint after each, which persists the commit index) right after every input,
// unless the node's hold_persistence is set: then nothing it writes becomes durable, and nothing that
// vouches for it leaves, until persist_one() or persist_all(). crash_restart() is a power cut: the
// node's MemoryEnv loses every unsynced byte and the replica is reopened from what is left.
//
// Bounds: the network holds what the replicas sent until the test delivers or drops it (deliver_all
// fails the test beyond max_messages); a flush loop stops after 16 cycles (a test failure); the
// records (readies, delivered messages) grow with the test, whose steps are bounded.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "raft/memory_log.h"
#include "raft/raft.h"
#include "replica/replica.h"
#include "store/memory_env.h"

namespace raftlog::raft::testing {

class TestCluster;
struct TestNode;

// A node's log as its replica holds it: every entry written, flushed or not (the store's view, which
// is what the core reads).
class NodeLog {
 public:
  explicit NodeLog(const TestNode& node) : node_(node) {}
  Index first_index() const;
  Index last_index() const;
  std::optional<Term> term_at(Index index) const;
  // The entry at `index`; a test failure (and an empty entry) when the log does not hold it.
  Entry entry(Index index) const;
  // How far the log is durable (the store's flushed index).
  Index durable_index() const;

 private:
  const TestNode& node_;
};

// The answer to a request, filled in by the replica's callback (at once for a refusal, later for an
// append that commits or a read that is released).
template <typename Result>
struct Answer {
  std::shared_ptr<std::optional<Result>> slot = std::make_shared<std::optional<Result>>();
  bool answered() const { return slot->has_value(); }
  // The answer; a default (kOk-coded, empty) one when none came yet, so check answered() first.
  Result result() const { return slot->value_or(Result{}); }
  replica::ErrorCode code() const { return result().error.code; }
};

// What propose() returns: where the entries went (if proposed) and the replica's answer, which
// comes once they commit (or at once for a refusal).
struct Proposal {
  replica::Replica::AppendPlacement placement;
  Answer<replica::AppendResult> answer;
  bool proposed() const { return placement.proposed; }
  // The refusal's error code (kOk when the append was proposed).
  replica::ErrorCode refusal() const {
    return proposed() ? replica::ErrorCode::kOk : answer.code();
  }
};
using ReadRequest = Answer<replica::ReadIndexResult>;
using MembershipRequest = Answer<replica::MembershipResult>;
using TransferRequest = Answer<replica::TransferResult>;

struct TestNode {
  TestNode() : log(*this) {}
  TestNode(const TestNode&) = delete;
  TestNode& operator=(const TestNode&) = delete;

  NodeId id = kNoNode;
  replica::ReplicaConfig config;
  std::unique_ptr<store::MemoryEnv> env;  // the node's disk: survives crash_restart()
  std::unique_ptr<replica::MessageSender> sender;
  std::unique_ptr<replica::ReadyObserver> observer;
  std::unique_ptr<replica::DiskProbe> disk;
  std::unique_ptr<replica::Replica> replica;
  NodeLog log;

  // When set, the cluster runs no flush cycle of this node: what it writes stays volatile, and the
  // acknowledgements and votes that vouch for it stay held, until persist_one()/persist_all().
  bool hold_persistence = false;
  // Work the replica hands off its loop (replica/off_loop.h: a leader's snapshot encoding), oldest
  // first. The cluster runs each job and its `done` right after the replica's process() (then
  // processes again), unless hold_off_loop is set: then they wait for finish_off_loop(), so a test
  // can put inputs between a job's start and its result.
  std::unique_ptr<replica::OffLoopExecutor> off_loop;
  std::deque<std::pair<std::function<void()>, std::function<void()>>> off_loop_jobs;
  bool hold_off_loop = false;
  std::uint64_t ticks = 0;  // ticks this node has taken (TestCluster's clock is the most of any)

  std::vector<Ready> readies;  // every Ready this node's replica handled, as the core handed it out
  std::vector<ReadState> read_states;
  std::vector<std::uint64_t> aborted_reads;
  Index delivered_commit =
      0;  // highest Ready::commit_index seen (the restored one after a restart)
};

// A member's answer that `to`'s id is retired (kRemovedContext), naming the position of the
// member's newest committed configuration (commit 0: a word from a node before retired5).
inline Message removed_answer(NodeId from, NodeId to, Term term, Index commit = 0,
                              Term log_term = 0) {
  Message word;
  word.type = MessageType::kAppendResponse;
  word.from = from;
  word.to = to;
  word.term = term;
  word.reject = true;
  word.context = kRemovedContext;
  word.commit = commit;
  word.log_term = log_term;
  return word;
}

class TestCluster {
 public:
  using Tweak = std::function<void(Config&)>;
  using DropRule = std::function<bool(const Message&)>;
  // For the replica's own settings (retention, bounds); applied after `Tweak`.
  using ReplicaTweak = std::function<void(replica::ReplicaConfig&)>;

  // Nodes with ids `ids`, all empty logs, voter set = ids.
  explicit TestCluster(const std::vector<NodeId>& ids, const Tweak& tweak = {});
  TestCluster(const std::vector<NodeId>& ids, const Tweak& tweak,
              const ReplicaTweak& replica_tweak);
  // Nodes restored from the given logs and hard states (same order as ids), written to each node's
  // store and HARDSTATE before its replica opens (HardState::commit goes to the store's checkpoint).
  TestCluster(const std::vector<NodeId>& ids, const std::vector<std::vector<Entry>>& logs,
              const std::vector<HardState>& hard_states, const Tweak& tweak = {},
              const ReplicaTweak& replica_tweak = {});
  ~TestCluster();
  TestCluster(const TestCluster&) = delete;
  TestCluster& operator=(const TestCluster&) = delete;

  TestNode& node(NodeId id) { return *nodes_.at(id); }
  const TestNode& node(NodeId id) const { return *nodes_.at(id); }
  const Raft& raft(NodeId id) const { return nodes_.at(id)->replica->core(); }
  replica::Replica& replica(NodeId id) { return *nodes_.at(id)->replica; }
  std::vector<NodeId> ids() const;

  // --- inputs (each followed by process(id)) ------------------------------------------------
  // One client append of one entry per payload (client_id 0: no deduplication).
  Proposal propose(NodeId id, std::vector<std::string> payloads);
  // An idempotent append (client_id, sequence); client_id 0: not deduplicated.
  Proposal propose(NodeId id, std::vector<std::string> payloads, std::uint64_t client_id,
                   std::uint64_t sequence);
  ReadRequest read_index(NodeId id);
  TransferRequest transfer_leadership(NodeId id, NodeId target);
  // After a restart: 30 rounds for an election, then, when another node won, its leadership handed
  // to `id` (10 more rounds). Returns the leader then (kNoNode when none).
  NodeId elect_then_hand_over_to(NodeId id);
  // One membership change through the replica: answered at once when refused, else once committed.
  MembershipRequest propose_conf_change(NodeId id, ConfChange change);
  void step(NodeId id, Message message);
  void tick(NodeId id, int times = 1);
  void tick_all(int times = 1);  // ticks every node once per round and delivers after each round
  // One tick of `id`'s replica (its clock advanced), then expire_pending() and apply_retention() as
  // raftlogd's loop does, without the process() after it, for a caller that processes itself (the golden interpreter).
  void tick_unprocessed(NodeId id);
  // Retention's trim through the replica (whole segments only, never past what it allows), driven
  // over the rounds and off-loop writes it takes (test_cluster.cpp); the result's first index is
  // the node's after them.
  replica::TrimResult trim(NodeId id, Index before_index);
  // One trim() call and the off-loop writes it handed off, no further rounds: for tests that watch
  // a trim round by round (each round: apply_retention, then finish_off_loop).
  replica::TrimResult trim_call(NodeId id, Index before_index);

  // --- driving -------------------------------------------------------------------------------
  // The replica's process(); then, unless persistence is held, flush cycles until its log is
  // durable, processing after each.
  void process(NodeId id);
  // One flush cycle of `id` (everything it wrote so far becomes durable: the store has no finer
  // grain), a checkpoint, and the replica's process().
  void persist_one(NodeId id);
  // Flush cycles until the log is durable (bounded), processing after each.
  void persist_all(NodeId id);
  // Runs `id`'s off-loop jobs waiting now (each job, then its done, then the replica's process()).
  void finish_off_loop(NodeId id);
  // Power cut and restart: every byte the node did not sync is lost, pending requests fail, and a
  // new replica opens from what its disk kept. Messages already in the network stay there.
  void crash_restart(NodeId id);
  // While `id` is down (crash-stopped, as in crash_restart), its store's own truncate_suffix(from)
  // cuts its durable log, as a storage fault that recovery cut would leave it; then it restarts.
  void restart_with_log_cut(NodeId id, Index from);
  // Rebuilds `id` from a copy of `source`'s durable log (what an operator does by copying a healthy
  // node's log directory), keeping `id`'s own HARDSTATE, and restarts it.
  void restart_from_copy_of(NodeId id, NodeId source);
  // The node loses its whole data directory (a fresh disk) and restarts under its id, as a disk
  // replaced under a supervisor does (drills6 H1).
  void restart_wiped(NodeId id);
  // The node loses only DATA_DIR/log (HARDSTATE, CONFSTATE and its other files kept, drills6 H1's
  // second repro) and restarts.
  void restart_log_wiped(NodeId id);

  // Delivers (or drops) the queued message at `position` (< network_size()), then processes.
  void deliver_at(std::size_t position);
  void drop_at(std::size_t position);
  void duplicate_at(std::size_t position);
  std::size_t network_size() const { return network_.size(); }
  // Sent and not yet delivered or dropped, oldest first.
  const std::deque<Message>& in_flight() const { return network_; }
  // Removes (oldest first) up to `max` queued messages that `match`, for a caller that delivers
  // them itself (the golden interpreter).
  std::vector<Message> take_from_network(const std::function<bool(const Message&)>& match,
                                         std::size_t max);

  // Processes every node, then delivers queued messages (and everything they cause) until the
  // network is empty. Returns how many were delivered. A test failure after `max_messages`.
  std::size_t deliver_all(std::size_t max_messages = 100000);

  // Ticks `id` alone (delivering after each tick) until it is leader or `max_ticks` pass.
  bool campaign_until_leader(NodeId id, int max_ticks = 200);

  // Network faults. A message is dropped if either end is isolated or a drop rule matches.
  void isolate(NodeId id) { isolated_.insert(id); }
  void heal() {
    isolated_.clear();
    drop_rules_.clear();
  }
  void add_drop_rule(DropRule rule) { drop_rules_.push_back(std::move(rule)); }
  // A slow link for snapshots, like the transport's chunked transfer: from now on a kSnapshot
  // leaves for the network only once tick_all() rounds carried its data at `bytes_per_tick`, a newer
  // one from the same node to the same peer starts over from byte 0, and the sender reports the
  // bytes gone out (MessageSender::snapshot_send_mark). 0: snapshots travel like any message.
  void set_snapshot_link_rate(std::uint64_t bytes_per_tick) {
    snapshot_bytes_per_tick_ = bytes_per_tick;
  }
  // `peer` says it decodes snapshot data only up to framed version 4, as a node from before stamp5
  // (MessageSender::takes_stamped_snapshot_data answers false for it): its leaders send it version
  // 4, without the running max stamp. Default: every node runs this build.
  void set_older_snapshot_peer(NodeId peer) { older_snapshot_peers_.insert(peer); }
  // The data size of the snapshot on the slow link from `from` to `to`, 0 when none.
  std::uint64_t slow_snapshot_bytes(NodeId from, NodeId to) const {
    const auto found = slow_snapshots_.find({from, to});
    return found == slow_snapshots_.end() ? 0 : found->second.message.snapshot->data.size();
  }
  // How full `id`'s file system reports itself, 0..1 (its replica probes it at most every 100 ms;
  // the watermarks are the replica's, 0.90/0.80 unless a ReplicaTweak sets others). Default 0.01.
  void set_disk_used_ratio(NodeId id, double used_ratio);
  // Every delivered message passes through `mutator` first (a faulty or hostile network); empty: none.
  void set_mutator(std::function<void(Message&)> mutator) { mutator_ = std::move(mutator); }

  // Every message delivered (not dropped), in order.
  const std::vector<Message>& delivered() const { return delivered_; }
  std::size_t count_delivered(const std::function<bool(const Message&)>& match) const;

  // The unique leader among non-isolated nodes with the highest term, or kNoNode.
  NodeId leader() const;

 private:
  class Sender;
  class Observer;
  class OffLoop;

  void add_node(NodeId id, const std::vector<NodeId>& ids, const Tweak& tweak,
                const ReplicaTweak& replica_tweak);
  // Writes `log` and `hard_state` to the node's (empty) disk through the store's and the hard state
  // file's own APIs, as a node that ran before would have left them.
  void seed_disk(TestNode& n, const std::vector<Entry>& log, const HardState& hard_state);
  void open_replica(TestNode& n);
  // Crash-stops the node: its disk loses every unsynced byte, its pending requests fail.
  void power_cut(TestNode& n);
  bool flush_once(TestNode& n);  // false (and a test failure) when the store refused
  void check_failed(const TestNode& n);
  void run_off_loop_jobs_after(TestNode& n, std::size_t held);
  void record_ready(TestNode& n, const Ready& ready);
  void deliver(Message m);
  bool dropped(const Message& m) const;
  void advance_snapshot_link();  // one round of tick_all() on the slow snapshot link
  replica::Clock::time_point now() const;

  std::map<NodeId, std::unique_ptr<TestNode>> nodes_;
  std::uint64_t starts_ = 0;  // replicas opened: each start's leadership nonce seed
  std::deque<Message> network_;
  std::vector<Message> delivered_;
  std::set<NodeId> isolated_;
  std::set<NodeId> older_snapshot_peers_;
  std::vector<DropRule> drop_rules_;
  std::function<void(Message&)> mutator_;
  struct SlowSnapshot {
    Message message;
    std::uint64_t sent_bytes = 0;  // all of them: delivered
  };
  std::uint64_t snapshot_bytes_per_tick_ = 0;
  std::map<std::pair<NodeId, NodeId>, SlowSnapshot> slow_snapshots_;  // by (from, to)
  // The replicas' clock, in ticks of tick_ms: the most ticks any node has taken, shared by all, so a
  // round of tick_all() moves time by one tick, not one per node. A node ticked alone while it is
  // behind another sees no time pass (its Raft ticks still count): tests that depend on one node's
  // deadlines tick that node.
  std::uint64_t ticks_ = 0;
};

// A bare core (no driver) that leads a single-voter configuration, for the core's own rules that no
// input of the replica reaches (it validates first, or proposes only normal entries).
struct SoloLeader {
  SoloLeader();
  MemoryLog log;
  Raft core;
};

// Entries [first, first + terms.size()) with the given terms (kNormal, payload "e<index>").
std::vector<Entry> make_entries(Index first, const std::vector<Term>& terms);

}  // namespace raftlog::raft::testing

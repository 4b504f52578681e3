// A simulated cluster: N production replicas (replica::Replica, the driver raftlogd runs), each over
// its own simulated disk (a store::MemoryEnv holding a stepped CommitLog and the hard state file),
// joined by the simulated network. The Cluster feeds each replica its inputs exactly as raftlogd's
// Node does (ticks, messages, client appends and reads, then process()), takes every flush cycle and
// checkpoint of the stepped stores itself (so sync timing and sync failures are seeded faults), and is
// the only place that advances simulated time. What the replicas do goes to the Checker (through a
// ReadyObserver per replica) and to the Trace. Fault and workload decisions are made by callers
// (fault_schedule, workload).
//
// Time: one tick is kStepsPerTick steps. Messages and flush cycles take whole steps, so a message can
// arrive between two ticks, and several messages can be delivered between two ticks.
//
// The parts: cluster.cpp builds and wires the nodes and runs the ticks; cluster_node_io.cpp carries
// messages and runs the disks (flush cycles, checkpoints) and off-loop jobs; cluster_checks.cpp
// checks each Ready and reports to the Checker; cluster_faults.cpp crashes, restarts, pauses,
// strikes and trims; cluster_clients.cpp sends the clients' requests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "raft/types.h"
#include "replica/replica.h"
#include "sim/checker.h"
#include "sim/network.h"
#include "sim/trace.h"
#include "store/memory_env.h"
#include "util/prng.h"

namespace raftlog::sim {

inline constexpr std::uint64_t kStepsPerTick = 4;
// The replicas' clock: a tick is tick_ms of simulated time.
inline constexpr std::uint32_t kTickMs = 20;

struct ClusterConfig {
  std::size_t node_count = 3;  // every node slot, spares included
  // Nodes 1..voter_count form the bootstrap configuration; the rest are spare slots that start as
  // non-members (empty logs, never campaigning) until a membership change adds them. 0: all nodes.
  std::size_t voter_count = 0;
  raft::Config
      raft;  // template for every node: id, initial_conf and random_seed are filled per node
  // A flush cycle runs this many steps after a write left the log unflushed (the fsync's latency; the
  // writes that arrive meanwhile join it, as in group commit).
  std::uint64_t min_flush_delay_steps = 1;
  std::uint64_t max_flush_delay_steps = 6;
  // A slow sync: with this chance a flush cycle takes up to slow_flush_max_steps longer.
  std::uint32_t slow_flush_per_million = 0;
  std::uint64_t slow_flush_max_steps = 0;
  // A failing sync: with this chance a flush cycle's sync reports an error. The store fails for good
  // (it never trusts a later sync), so the node stops and restarts from what was durable.
  std::uint32_t failing_sync_per_million = 0;
  // Each node writes its store's checkpoint (which persists the commit index) every this many ticks.
  std::uint64_t checkpoint_every_ticks = 10;
  std::size_t payload_padding_max_bytes = 32;
  // A crash also loses each of the node's messages still in flight with this chance: packets still in
  // the dead machine's socket buffers never leave it.
  std::uint32_t crash_loses_outgoing_per_million = 900'000;
  // The leader's retention keeps what a follower heard from within this long still needs
  // (ReplicaConfig::retention_follower_grace_ms); the retention runs make it short, so that trims
  // strand followers that were down or cut off.
  std::uint32_t retention_follower_grace_ms = 600000;
  // Work a replica hands off its loop (replica/off_loop.h: a leader's snapshot encoding) completes
  // 1..this many steps after it was handed off (drawn from the seed), its result then handed back
  // between two inputs, as raftlogd's worker thread does.
  std::uint64_t max_off_loop_steps = 3 * kStepsPerTick;
  // ReplicaConfig::snapshot_gather_slice_bytes of every node.
  std::uint64_t snapshot_gather_slice_bytes = 4ULL << 20;
  // ReplicaConfig::ignore_unvouched_marker of every node (SimOptions::plant_ignore_unvouched).
  bool ignore_unvouched_marker = false;
  // ReplicaConfig::ignore_not_founder_marker of every node (SimOptions::plant_ignore_not_founder).
  bool ignore_not_founder_marker = false;
};

// Striking new leaders: with `per_million` chance, a node that has just become leader crashes (at once,
// or right after its first commit, each within max_delay_steps) and stays down up to max_down_ticks. Short-lived leaders leave half-replicated tails
// of many terms behind, the ground on which commit-rule bugs (Raft Figure 8) turn into lost entries.
struct LeaderStrike {
  std::uint32_t per_million = 0;  // 0 disables
  std::uint64_t max_delay_steps = 0;
  std::uint64_t max_down_ticks = 1;
};

struct ClusterStats {
  std::uint64_t messages_sent = 0;
  std::uint64_t messages_delivered = 0;
  std::uint64_t messages_dropped = 0;  // by drop faults, partitions, or a down receiver
  std::uint64_t crashes = 0;
  std::uint64_t leader_strikes = 0;
  std::uint64_t install_strikes = 0;
  std::uint64_t pauses = 0;
  std::uint64_t flush_cycles = 0;
  std::uint64_t sync_failures = 0;
  std::uint64_t restarts_catching_up = 0;  // reopened with a suspected storage fault
  std::uint64_t duplicate_answers = 0;     // appends answered from the dedup table
  std::uint64_t proposals_accepted = 0;
  std::uint64_t proposals_refused = 0;
  std::uint64_t reads_requested = 0;
  std::uint64_t reads_aborted = 0;
  std::uint64_t transfers_started = 0;
  std::uint64_t conf_changes_proposed = 0;  // accepted by a leader (not necessarily committed)
  std::uint64_t conf_changes_refused = 0;
  std::uint64_t conf_changes_committed = 0;
  std::uint64_t trims = 0;  // trim calls and trim rounds (continue_trim) that removed a segment
  std::uint64_t snapshots_installed = 0;  // by followers stranded behind a leader's first index
  // Of those, installed while their leader was still leader (checked, check_snapshot_point): at
  // the leader's first index - 1 or below, or above it because the leader does not know the
  // configuration in force at its first index - 1 while a configuration committed above it, or
  // does not know its topic table there (the fallbacks; anything else above it is a violation).
  std::uint64_t snapshots_at_first_index = 0;
  std::uint64_t snapshots_above_first_index_conf_unknown = 0;
  std::uint64_t snapshots_above_first_index_fallback = 0;
  std::uint64_t off_loop_jobs = 0;  // off-loop jobs completed (snapshot encodings)
  std::uint64_t wipes = 0;          // nodes restarted on an empty data directory (SimOptions::wipe)
  std::uint64_t log_wipes = 0;      // of those, the ones that lost only DATA_DIR/log
};

// One client append as the Replica's API takes it: (client_id, sequence) make it idempotent.
struct ClientAppend {
  std::uint64_t client_id = 0;
  std::uint64_t sequence = 0;
  std::vector<std::string> payloads;
};

class Cluster {
 public:
  using AppendDone = std::function<void(const replica::AppendResult&)>;

  Cluster(const ClusterConfig& config, std::uint64_t seed, util::Prng& prng, Checker& checker,
          Trace& trace);
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  std::size_t size() const { return nodes_.size(); }
  std::uint64_t now_tick() const { return tick_; }

  // Advances time by one tick: every running node ticks, then kStepsPerTick steps of message delivery
  // and flush cycles follow.
  void run_tick();

  // Node faults.
  bool is_up(raft::NodeId id) const { return node(id).replica != nullptr; }
  bool is_paused(raft::NodeId id) const { return node(id).paused_until_tick > tick_; }
  bool is_running(raft::NodeId id) const { return is_up(id) && !is_paused(id); }
  // Crashes `id`: a power cut (every byte its store did not sync is lost, torn or kept by sector, per
  // the drawn crash mode) or a process crash (the page cache survives); it restarts by itself after `down_ticks` ticks (0: only when restart() is called).
  void crash(raft::NodeId id, std::uint64_t down_ticks);
  void restart(raft::NodeId id);
  // Crashes `id` and replaces its disk with an empty one: it restarts after `down_ticks` under its
  // id on an empty data directory, having forgotten its term, vote and every entry it acknowledged.
  // With `only_log`, only DATA_DIR/log is lost (HARDSTATE with its term and vote, CONFSTATE,
  // TOPICSTATE, SNAPSHOT kept: drills6 H1's second repro).
  void wipe(raft::NodeId id, std::uint64_t down_ticks, bool only_log = false);
  // The node holds Raft state a wiped node's vote could not stand for: up, vouched, with a
  // non-empty log; or down with a durable log and no DATA_DIR/UNVOUCHED (FaultSchedule::wipe).
  bool holds_vouched_log(raft::NodeId id);
  // Down since wipe() (its whole disk or only DATA_DIR/log), not restarted yet.
  bool down_after_wipe(raft::NodeId id) const { return node(id).down_after_wipe; }
  // A commit index above 0 reached the node since its disk was last replaced whole (so its replica
  // recorded that it never founds a cluster, replica/not_founder_marker.h).
  bool knew_commit(raft::NodeId id) const { return node(id).knew_commit; }
  // Replaces the strike policy; a strike already pending is cancelled (so none lands after faults stop).
  void set_leader_strike(const LeaderStrike& strike) {
    strike_ = strike;
    strike_target_ = raft::kNoNode;
    strike_after_commit_ = false;
  }
  // The same for nodes that just installed a snapshot (the retention runs: the install's crash
  // cases, a power cut right after its rename and log reset, before anything else is written).
  void set_install_strike(const LeaderStrike& strike) {
    install_strike_ = strike;
    install_strike_target_ = raft::kNoNode;
  }
  // Stops the slow and failing syncs (the liveness phase).
  void calm_disks() {
    config_.slow_flush_per_million = 0;
    config_.failing_sync_per_million = 0;
    for (Node& n : nodes_) n.sync_will_fail = false;
  }
  // How full the node's file system reports itself, 0..1 (the replicas' watermarks are 0.90/0.80).
  void set_disk_used_ratio(raft::NodeId id, double used_ratio) {
    node(id).disk.used_ratio = used_ratio;
  }
  void pause(raft::NodeId id, std::uint64_t ticks);
  void unpause_all();

  Network& network() { return network_; }

  // Client operations, sent to `target` (a client does not know who leads). The answer comes through
  // `done`, possibly within this call (a refusal); an accepted append's placement is returned (and
  // checked against the log).
  replica::Replica::AppendPlacement append(raft::NodeId target, ClientAppend request,
                                           AppendDone done);
  bool request_read(raft::NodeId target);
  void transfer_leadership(raft::NodeId leader, raft::NodeId target);
  // A membership change proposed to `target` (answered, like an append, through the trace and stats).
  void propose_conf_change(raft::NodeId target, const raft::ConfChange& change);
  // Retention on `id`: trims the whole committed segments its replica allows (Replica::trim, as
  // raftlogd's retention and Trim RPC do). Nothing when it is not running.
  void trim(raft::NodeId id);
  // The leader's first index this node cannot reach by replication (Raft::stranded_below; 0: none,
  // or down).
  raft::Index stranded_below(raft::NodeId id) const {
    return is_up(id) ? node(id).replica->core().stranded_below() : 0;
  }
  // What `id`'s replica reports to Status RPCs (replica::Replica::status); nullopt while down.
  std::optional<replica::NodeStatus> status(raft::NodeId id) {
    if (!is_up(id)) return std::nullopt;
    return node(id).replica->status();
  }
  // The configuration in force on `id` (the last one it reported while it was up).
  const raft::ConfState& conf(raft::NodeId id) const { return node(id).conf; }
  const raft::ConfState& bootstrap_conf() const { return bootstrap_conf_; }
  // Fresh, run-unique payloads for a new append (the checker tells entries apart by payload).
  std::vector<std::string> make_payloads(std::uint64_t client_id, std::uint64_t sequence,
                                         std::size_t count);

  // What a deployment sees of each node.
  const raft::SoftState& soft_state(raft::NodeId id) const { return node(id).soft; }
  raft::Index commit_index(raft::NodeId id) const { return node(id).commit; }
  // The node's log as its core reads it (an empty log while it is down).
  const raft::LogReader& log(raft::NodeId id) const;
  // A running node that reports itself leader, the one with the highest term; kNoNode if none.
  raft::NodeId leader() const;

  const ClusterStats& stats() const { return stats_; }

 private:
  class ReplicaLogView;
  class NodeSender;
  class NodeObserver;
  class NodeOffLoop;
  // A disk with room to spare unless a test sets how full it is (set_disk_used_ratio).
  struct SimDisk final : replica::DiskProbe {
    double used_ratio = 0.01;
    std::optional<replica::DiskSpace> probe() override {
      return replica::DiskSpace{1ULL << 40, used_ratio};
    }
  };

  struct Node {
    raft::NodeId id = raft::kNoNode;
    std::unique_ptr<store::MemoryEnv> env;
    std::unique_ptr<ReplicaLogView> log_view;
    std::unique_ptr<NodeSender> sender;
    std::unique_ptr<NodeObserver> observer;
    SimDisk disk;
    std::unique_ptr<NodeOffLoop> off_loop;
    struct OffLoopJob {
      std::uint64_t due_step = 0;
      std::function<void()> job;
      std::function<void()> done;
    };
    std::deque<OffLoopJob> off_loop_jobs;  // at most one per replica (replica/off_loop.h)
    std::unique_ptr<replica::Replica> replica;  // null while crashed
    raft::SoftState soft;
    raft::ConfState conf;             // as of its last Ready (or open)
    raft::HardState last_hard_state;  // the last one its core emitted (to check must_sync)
    raft::HardState
        durable_hard_state;  // term and vote written; commit as far as a checkpoint vouches
    raft::Index commit = 0;
    std::uint64_t paused_until_tick = 0;
    std::uint64_t restart_at_tick = 0;  // 0: not scheduled
    std::uint64_t flush_at_step = 0;    // 0: no flush cycle scheduled
    bool sync_will_fail = false;        // the scheduled flush cycle's sync reports an error
    bool same_boot = false;  // the last crash was a process crash (the machine stayed up)
    // The log held a flushed entry (or started after a snapshot) when the node last went down:
    // what the wipe fault asks of a member that is down (FaultSchedule::wipe).
    bool down_with_durable_log = false;
    bool down_after_wipe = false;  // Cluster::down_after_wipe
    // A commit index above 0 reached it since its disk was last replaced whole: its replica then
    // recorded DATA_DIR/NOT_FOUNDER (unless a plant ignores it), which a lost log/ keeps.
    bool knew_commit = false;
    std::uint64_t checkpoint_phase = 0;  // ticks where tick % checkpoint_every_ticks == phase
    // The newest retention hold delivered to this replica from the leader of its term (on an
    // append or heartbeat), kept independently of the replica (check_retention_hold).
    struct HeardHold {
      raft::NodeId leader = raft::kNoNode;
      raft::Term term = 0;
      std::uint64_t hold = 0;
      replica::Clock::time_point at{};
    };
    HeardHold heard_hold;
    // The nonce of every leadership this id took in the run, across crashes and wipes
    // (check_fresh_leadership_nonce): one per election it won, so bounded by the run's elections.
    std::set<std::uint64_t> leadership_nonces;
  };

  Node& node(raft::NodeId id);
  const Node& node(raft::NodeId id) const;
  std::uint64_t now_step() const { return tick_ * kStepsPerTick + step_in_tick_; }
  replica::Clock::time_point now_time() const;
  void set_clock(std::uint64_t step_in_tick);
  replica::ReplicaConfig replica_config_for(raft::NodeId id);
  bool open_replica(Node& n);

  // After every input: the replica's Ready batches, then deferred completions, a flush to schedule,
  // and a fatal error to judge.
  void process(Node& n);
  void run_completions();
  void schedule_flush(Node& n);
  void run_due_flushes();
  void run_due_off_loop_jobs();
  void run_checkpoints();
  void stop_failed(Node& n, const std::string& why);

  // ReadyObserver and MessageSender of each node.
  void before_ready(Node& n, const raft::Ready& ready);
  // Tells the checker where a reopened node's log starts, when not at index 1.
  void observe_log_base(const Node& n);
  void check_no_second_leader(const Node& n);  // cluster_checks.cpp
  void check_fresh_leadership_nonce(Node& n);  // cluster_checks.cpp
  void after_ready(Node& n, const raft::Ready& ready);
  // `n` installed a snapshot of `point`: its log must start no later than its leader's (which must
  // then hold every entry after the point), unless one of the documented exceptions applies.
  void check_snapshot_point(const Node& n, raft::Index point);
  // A follower's trim moved its log's start from `first_before` to `first_after`: not past the
  // retention hold its leader of this term sent within the grace period (docs/operations.md,
  // "Retention"; a follower that ignores it strands a lagging node at the next leader change).
  void check_retention_hold(const Node& n, raft::Index first_before, raft::Index first_after);
  // Each tick of a running node, as raftlogd's loop each round (Replica::apply_retention): a trim
  // that waits for its writes off the loop or a scan slice, or whose deletion spreads over rounds,
  // goes on; a deletion it makes is checked and counted as Cluster::trim's are.
  void continue_trim(Node& n);
  void send(Node& from, raft::Message message);

  void deliver_due_messages();
  void contract_violation(const Node& n, const std::string& what);
  void maybe_schedule_strike(const Node& n);
  void maybe_schedule_install_strike(const Node& n);
  void run_due_strike();

  ClusterConfig config_;
  raft::ConfState bootstrap_conf_;
  std::uint64_t seed_;
  util::Prng& prng_;
  Checker& checker_;
  Trace& trace_;
  Network network_;
  std::vector<Node> nodes_;  // nodes_[id - 1]
  std::uint64_t tick_ = 0;
  std::uint64_t step_in_tick_ = 0;
  std::uint64_t next_read_id_ = 1;
  // Completion callbacks of the replicas, run once the Ready batch that produced them is observed
  // (the checker must have seen the commit an acknowledgement or a read depends on). Bounded by the
  // replicas' own bounds on pending requests.
  std::deque<std::function<void()>> completions_;
  LeaderStrike strike_;
  raft::NodeId strike_target_ = raft::kNoNode;  // at most one strike pending
  raft::Term strike_term_ = 0;
  std::uint64_t strike_at_step_ = 0;
  bool strike_after_commit_ = false;  // the strike waits for the target's next commit
  LeaderStrike install_strike_;
  raft::NodeId install_strike_target_ = raft::kNoNode;  // at most one pending
  std::uint64_t install_strike_at_step_ = 0;
  ClusterStats stats_;
};

}  // namespace raftlog::sim

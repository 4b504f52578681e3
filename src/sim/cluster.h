// A simulated cluster: N real Raft cores, each with simulated storage, joined by the simulated network.
// The Cluster is the driver of every core (it applies Ready batches exactly as types.h prescribes) and
// the only place that advances simulated time. Everything it observes goes to the Checker; everything it
// does goes to the Trace. Fault and workload decisions are made by callers (fault_schedule, workload).
//
// Time: one tick is kStepsPerTick steps. Messages and disk writes take whole steps, so a message can
// arrive between two ticks, and several messages can be delivered between two ticks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "raft/raft.h"
#include "raft/types.h"
#include "sim/checker.h"
#include "sim/network.h"
#include "sim/sim_storage.h"
#include "sim/trace.h"
#include "util/prng.h"

namespace raftlog::sim {

inline constexpr std::uint64_t kStepsPerTick = 4;

struct ClusterConfig {
  std::size_t node_count = 3;
  raft::Config raft;  // template for every node: id, initial_conf and random_seed are filled per node
  std::uint64_t min_persist_delay_steps = 1;
  std::uint64_t max_persist_delay_steps = 6;
  std::size_t payload_padding_max_bytes = 32;
  // A crash also loses each of the node's messages still in flight with this chance: packets still in
  // the dead machine's socket buffers never leave it.
  std::uint32_t crash_loses_outgoing_per_million = 900'000;
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
  std::uint64_t pauses = 0;
  std::uint64_t proposals_accepted = 0;
  std::uint64_t proposals_refused = 0;
  std::uint64_t reads_requested = 0;
  std::uint64_t reads_aborted = 0;
  std::uint64_t transfers_started = 0;
};

class Cluster {
 public:
  // Bound on Ready batches drained in one go for one node; a core that never stops producing output
  // after one input is a bug.
  static constexpr int kMaxReadyBatchesPerDrain = 10'000;
  // Bound on reads a node holds waiting for its commit index (the core bounds its own pending reads).
  static constexpr std::size_t kMaxWaitingReads = 1 << 14;

  Cluster(const ClusterConfig& config, std::uint64_t seed, util::Prng& prng, Checker& checker, Trace& trace);
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  std::size_t size() const { return nodes_.size(); }
  std::uint64_t now_tick() const { return tick_; }

  // Advances time by one tick: every running node ticks, then kStepsPerTick steps of message delivery
  // and disk completions follow.
  void run_tick();

  // Node faults.
  bool is_up(raft::NodeId id) const { return node(id).raft != nullptr; }
  bool is_paused(raft::NodeId id) const { return node(id).paused_until_tick > tick_; }
  bool is_running(raft::NodeId id) const { return is_up(id) && !is_paused(id); }
  // Crashes `id`; it restarts by itself after `down_ticks` ticks (0: only when restart() is called).
  void crash(raft::NodeId id, std::uint64_t down_ticks);
  void restart(raft::NodeId id);
  // Replaces the strike policy; a strike already pending is cancelled (so none lands after faults stop).
  void set_leader_strike(const LeaderStrike& strike) {
    strike_ = strike;
    strike_target_ = raft::kNoNode;
    strike_after_commit_ = false;
  }
  void pause(raft::NodeId id, std::uint64_t ticks);
  void unpause_all();

  Network& network() { return network_; }

  // Client operations, sent to `target` (a client does not know who leads; see leader_hint).
  raft::ProposeResult propose(raft::NodeId target, std::size_t entry_count, std::vector<std::string>* payloads);
  raft::ReadIndexStatus request_read(raft::NodeId target);
  raft::TransferStatus transfer_leadership(raft::NodeId leader, raft::NodeId target);

  // What the driver sees of each node.
  const raft::SoftState& soft_state(raft::NodeId id) const { return node(id).soft; }
  raft::Index commit_index(raft::NodeId id) const { return node(id).commit; }
  const SimStorage& storage(raft::NodeId id) const { return *node(id).storage; }
  // A running node that reports itself leader, the one with the highest term; kNoNode if none.
  raft::NodeId leader() const;

  const ClusterStats& stats() const { return stats_; }

 private:
  struct Node {
    raft::NodeId id = raft::kNoNode;
    std::unique_ptr<SimStorage> storage;
    std::unique_ptr<raft::Raft> raft;  // null while crashed
    raft::SoftState soft;
    raft::HardState last_hard_state;  // last one the core emitted (to check must_sync)
    raft::Index commit = 0;
    std::uint64_t paused_until_tick = 0;
    std::uint64_t restart_at_tick = 0;  // 0: not scheduled
    std::vector<raft::ReadState> waiting_reads;  // confirmed, waiting for commit to reach their index
  };

  Node& node(raft::NodeId id);
  const Node& node(raft::NodeId id) const;
  std::uint64_t now_step() const { return tick_ * kStepsPerTick + step_in_tick_; }
  void set_clock(std::uint64_t step_in_tick);
  raft::Config config_for(raft::NodeId id);

  void drain_ready(Node& n);
  void handle_ready(Node& n, raft::Ready& ready);
  void send(Node& from, const raft::Message& message);
  void deliver_due_messages();
  void complete_due_writes(Node& n);
  void release_reads(Node& n);
  void abort_waiting_reads(Node& n);
  void contract_violation(const Node& n, const std::string& what);
  void maybe_schedule_strike(const Node& n);
  void run_due_strike();

  ClusterConfig config_;
  std::uint64_t seed_;
  util::Prng& prng_;
  Checker& checker_;
  Trace& trace_;
  Network network_;
  std::vector<Node> nodes_;  // nodes_[id - 1]
  std::uint64_t tick_ = 0;
  std::uint64_t step_in_tick_ = 0;
  std::uint64_t next_payload_ = 0;
  std::uint64_t next_read_id_ = 1;
  LeaderStrike strike_;
  raft::NodeId strike_target_ = raft::kNoNode;  // at most one strike pending
  raft::Term strike_term_ = 0;
  std::uint64_t strike_at_step_ = 0;
  bool strike_after_commit_ = false;  // the strike waits for the target's next commit
  ClusterStats stats_;
};

}  // namespace raftlog::sim

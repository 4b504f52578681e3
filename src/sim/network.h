// The simulated network: every message in flight, with per-message faults (drop, duplication, delay and
// thereby reordering) and a link matrix for partitions. Time is counted in simulator steps.
//
// Partitions are applied when a message would be delivered: a link that is down at that moment loses
// the message, as a real network loses packets sent into a cut.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "raft/types.h"
#include "util/prng.h"

namespace raftlog::sim {

// Per-message fault rates and delays; changed by the fault schedule over a run.
struct NetworkConditions {
  std::uint32_t drop_per_million = 0;
  std::uint32_t duplicate_per_million = 0;
  std::uint64_t min_delay_steps = 1;  // >= 1: nothing is delivered in the step it was sent
  std::uint64_t max_delay_steps = 4;
  std::uint32_t long_delay_per_million = 0;  // a straggler that arrives far behind later messages
  std::uint64_t long_delay_max_steps = 0;
};

class Network {
 public:
  // Bound on messages in flight; beyond it new messages are dropped (a full router queue) and counted.
  static constexpr std::size_t kMaxInFlight = 1 << 16;

  explicit Network(std::size_t node_count);

  // Queues `message` (and maybe a duplicate) for delivery. Returns how many copies were queued (0: dropped).
  int send(const raft::Message& message, std::uint64_t now_step, util::Prng& prng);
  // Re-queues a message for delivery at `step` exactly (used to hold messages for a paused node).
  void hold_until(const raft::Message& message, std::uint64_t step);
  // The next message due at or before `step`, in (due step, send order) order; links that are down at
  // that moment drop it (reported through `dropped_by_partition`).
  std::optional<raft::Message> pop_due(std::uint64_t step, bool& dropped_by_partition);

  // Drops each in-flight message sent by `from` with the given chance; returns how many were dropped.
  std::size_t drop_in_flight_from(raft::NodeId from, std::uint32_t per_million, util::Prng& prng);

  void set_conditions(const NetworkConditions& conditions);
  const NetworkConditions& conditions() const { return conditions_; }

  // Links. Node ids are 1..node_count.
  bool link_up(raft::NodeId from, raft::NodeId to) const;
  void set_link(raft::NodeId from, raft::NodeId to, bool up);
  void heal_all();
  // Cuts every link between `group` and the rest, both ways.
  void split(const std::vector<raft::NodeId>& group);
  // Two sides that cannot talk to each other; `bridge` talks to both (and belongs to neither side).
  void bridge(const std::vector<raft::NodeId>& side_a, const std::vector<raft::NodeId>& side_b);
  bool fully_connected() const;

  std::size_t in_flight() const { return queue_.size(); }
  std::uint64_t overflow_drops() const { return overflow_drops_; }

 private:
  std::size_t slot(raft::NodeId from, raft::NodeId to) const;
  void enqueue(const raft::Message& message, std::uint64_t due_step);

  std::size_t node_count_;
  std::vector<bool> links_up_;  // [(from - 1) * n + (to - 1)]
  NetworkConditions conditions_;
  std::map<std::pair<std::uint64_t, std::uint64_t>, raft::Message> queue_;  // (due step, sequence)
  std::uint64_t next_sequence_ = 0;
  std::uint64_t overflow_drops_ = 0;
};

}  // namespace raftlog::sim

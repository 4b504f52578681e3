// Decides, tick by tick, which faults the cluster suffers: crashes (with timed restarts), pauses, partitions of
// every shape, and the network's per-message weather (drop, duplication, delay). Each seed draws its own
// profile, so the seed space covers calm runs, stormy runs and everything between.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/cluster.h"
#include "sim/trace.h"
#include "util/prng.h"

namespace raftlog::sim {

struct FaultProfile {
  bool leader_churn = false;  // the broken-rule hunting profile (see fault_schedule.cpp)
  // Chances per tick, in millionths.
  std::uint32_t crash_per_million = 0;  // a random running node crashes
  std::uint32_t crash_leader_per_million =
      0;  // the leader crashes (drives elections and Figure-8 histories)
  std::uint32_t pause_per_million = 0;
  std::uint32_t partition_per_million = 0;  // a new partition starts (when none is active)
  std::uint32_t weather_change_per_million = 0;
  // A membership change proposed to the leader (add a learner, promote, remove, add a voter); only
  // with spare node slots (SimOptions::reconfigure). Sometimes a second follows at once, which the
  // leader must refuse while the first is uncommitted.
  std::uint32_t reconfigure_per_million = 0;
  // A retention trim on a running node (the leader, three times in four): only with
  // SimOptions::retention.
  std::uint32_t trim_per_million = 0;
  // A running node's data directory is wiped (Cluster::wipe): only with SimOptions::wipe, and only
  // while every other node is up with a non-empty log.
  std::uint32_t wipe_per_million = 0;
  LeaderStrike leader_strike;  // new leaders crashing at once (see cluster.h)
  // Nodes crashing right after a snapshot install: only with SimOptions::retention (no draw).
  LeaderStrike install_strike;
  std::uint64_t max_down_ticks = 1;
  std::uint64_t max_pause_ticks = 1;
  std::uint64_t max_partition_ticks = 1;
  // Worst network weather this seed may see.
  std::uint32_t max_drop_per_million = 0;
  std::uint32_t max_duplicate_per_million = 0;
  std::uint64_t max_delay_steps = 1;
  std::uint32_t max_long_delay_per_million = 0;
  std::uint64_t long_delay_max_steps = 0;
};

// `aggressive` always draws the leader-churn profile (used to show that broken rules are caught quickly);
// otherwise a quarter of the seeds get it and the rest get a random storm intensity. `reconfigure`
// adds membership changes (drawn last, so that runs without them keep their histories).
FaultProfile draw_fault_profile(util::Prng& prng, bool aggressive, bool reconfigure = false,
                                bool retention = false, bool wipe = false);

// Calm network: no loss, short delays (the liveness phase runs on it).
NetworkConditions calm_network();

class FaultSchedule {
 public:
  FaultSchedule(const FaultProfile& profile, util::Prng& prng, Trace& trace);

  // Arms the faults that the cluster triggers itself (leader strikes); call once before the first tick.
  void start(Cluster& cluster);
  // Called once per tick of the fault phase, before the cluster ticks.
  void on_tick(Cluster& cluster);
  // Ends every fault: restarts crashed nodes, resumes paused ones, heals the network and calms it.
  void stop_and_heal(Cluster& cluster);

  std::uint64_t partitions_started() const { return partitions_started_; }

 private:
  void start_partition(Cluster& cluster);
  void crash_for_a_while(Cluster& cluster, raft::NodeId id);
  void change_weather(Cluster& cluster);
  void reconfigure(Cluster& cluster);
  void trim(Cluster& cluster);
  void wipe(Cluster& cluster);
  // Whether, in every configuration a node runs with `target` as a voter, the other voters holding
  // a vouched log form a majority (FaultSchedule::wipe).
  bool others_hold_a_quorum(Cluster& cluster, raft::NodeId target);
  // Whether every member runs the same configuration (no change in flight): FaultSchedule::wipe.
  static bool members_run_one_configuration(Cluster& cluster);
  // Whether every founder but `target` holds a vouched log or knew a commit (so its replica refuses
  // an empty candidate: it never founds a cluster), member or not, up or down.
  bool other_founders_refuse_empty(Cluster& cluster, raft::NodeId target);
  // A change of the leader's configuration drawn at random (kNoNode node: nothing to change).
  raft::ConfChange draw_conf_change(const raft::ConfState& conf, std::size_t slots);
  std::vector<raft::NodeId> shuffled_nodes(std::size_t node_count);

  FaultProfile profile_;
  util::Prng& prng_;
  Trace& trace_;
  std::uint64_t partition_ends_at_tick_ = 0;  // 0 when the network is whole
  std::uint64_t partitions_started_ = 0;
};

}  // namespace raftlog::sim

// Simulated clients: proposals with unique payloads, ReadIndex requests and leadership transfers. A
// client does not know the leader; it asks a random running node and follows one leader hint.
#pragma once

#include <cstdint>

#include "sim/cluster.h"
#include "util/prng.h"

namespace raftlog::sim {

struct WorkloadRates {
  std::uint32_t propose_per_million = 400'000;  // per tick
  std::uint32_t read_per_million = 150'000;
  std::uint32_t transfer_per_million = 10'000;
  std::uint64_t max_entries_per_proposal = 3;
};

class Workload {
 public:
  Workload(const WorkloadRates& rates, util::Prng& prng);

  void on_tick(Cluster& cluster);

  // One proposal of `entry_count` entries through the client path; returns the accepted result (status
  // kOk) or the last refusal.
  raft::ProposeResult propose(Cluster& cluster, std::size_t entry_count, std::vector<std::string>* payloads);
  // One read through the client path.
  raft::ReadIndexStatus read(Cluster& cluster);

 private:
  raft::NodeId random_running_node(Cluster& cluster);

  WorkloadRates rates_;
  util::Prng& prng_;
};

}  // namespace raftlog::sim

#include "sim/workload.h"

namespace raftlog::sim {

Workload::Workload(const WorkloadRates& rates, util::Prng& prng) : rates_(rates), prng_(prng) {}

raft::NodeId Workload::random_running_node(Cluster& cluster) {
  const raft::NodeId start = prng_.between(1, cluster.size());
  for (std::size_t offset = 0; offset < cluster.size(); ++offset) {
    const raft::NodeId id = (start - 1 + offset) % cluster.size() + 1;
    if (cluster.is_running(id)) return id;
  }
  return raft::kNoNode;
}

raft::ProposeResult Workload::propose(Cluster& cluster, std::size_t entry_count, std::vector<std::string>* payloads) {
  raft::NodeId target = random_running_node(cluster);
  raft::ProposeResult result;
  // The first try plus one redirect to the hinted leader.
  for (int attempt = 0; attempt < 2 && target != raft::kNoNode; ++attempt) {
    result = cluster.propose(target, entry_count, payloads);
    if (result.status != raft::ProposeStatus::kNotLeader || result.leader_hint == raft::kNoNode ||
        result.leader_hint == target || !cluster.is_running(result.leader_hint)) {
      break;
    }
    target = result.leader_hint;
  }
  return result;
}

raft::ReadIndexStatus Workload::read(Cluster& cluster) {
  // Reads go to whoever believes it leads (a client would follow redirects the same way).
  raft::NodeId target = cluster.leader();
  if (target == raft::kNoNode || prng_.below(4) == 0) target = random_running_node(cluster);
  if (target == raft::kNoNode) return raft::ReadIndexStatus::kNotLeader;
  return cluster.request_read(target);
}

void Workload::on_tick(Cluster& cluster) {
  if (prng_.chance_per_million(rates_.propose_per_million)) {
    std::vector<std::string> payloads;
    propose(cluster, prng_.between(1, rates_.max_entries_per_proposal), &payloads);
  }
  if (prng_.chance_per_million(rates_.read_per_million)) read(cluster);
  if (prng_.chance_per_million(rates_.transfer_per_million)) {
    const raft::NodeId leader = cluster.leader();
    if (leader != raft::kNoNode && cluster.size() > 1) {
      raft::NodeId target = prng_.between(1, cluster.size() - 1);
      if (target >= leader) ++target;
      cluster.transfer_leadership(leader, target);
    }
  }
}

}  // namespace raftlog::sim

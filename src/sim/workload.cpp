#include "sim/workload.h"

#include <fmt/format.h>

#include <memory>
#include <optional>

namespace raftlog::sim {

Workload::Workload(const WorkloadRates& rates, util::Prng& prng, Checker& checker)
    : rates_(rates), prng_(prng), checker_(checker), clients_(rates.clients) {
  for (std::size_t i = 0; i < clients_.size(); ++i) clients_[i].id = i + 1;
}

raft::NodeId Workload::random_running_node(Cluster& cluster) {
  const raft::NodeId start = prng_.between(1, cluster.size());
  for (std::size_t offset = 0; offset < cluster.size(); ++offset) {
    const raft::NodeId id = (start - 1 + offset) % cluster.size() + 1;
    if (cluster.is_running(id)) return id;
  }
  return raft::kNoNode;
}

replica::Replica::AppendPlacement Workload::propose(Cluster& cluster, std::size_t entry_count,
                                                    std::vector<std::string>* payloads) {
  raft::NodeId target = random_running_node(cluster);
  replica::Replica::AppendPlacement placement;
  // Client 0 takes no part in dedup; its "sequence" only keeps the payloads unique.
  *payloads = cluster.make_payloads(0, ++anonymous_appends_, entry_count);
  // The first try plus one redirect to the hinted leader.
  for (int attempt = 0; attempt < 2 && target != raft::kNoNode; ++attempt) {
    auto refusal = std::make_shared<std::optional<replica::AppendResult>>();
    placement = cluster.append(target, ClientAppend{0, 0, *payloads},
                               [refusal](const replica::AppendResult& result) {
                                 if (!result.error.ok()) *refusal = result;
                               });
    // A refusal is answered within append(); a later answer (the commit) changes nothing here.
    if (placement.proposed || !refusal->has_value()) break;
    const replica::NodeError& error = (*refusal)->error;
    if (error.code != replica::ErrorCode::kNotLeader || error.leader_id == target ||
        error.leader_id == raft::kNoNode || error.leader_id > cluster.size() ||
        !cluster.is_running(error.leader_id)) {
      break;
    }
    target = error.leader_id;
  }
  return placement;
}

void Workload::send_attempt(Cluster& cluster, std::size_t client_index) {
  Client& client = clients_[client_index];
  raft::NodeId target = client.hint;
  if (target == raft::kNoNode || target > cluster.size() || !cluster.is_running(target) ||
      prng_.below(8) == 0) {
    target = random_running_node(cluster);
  }
  if (target == raft::kNoNode) {
    client.retry_at_tick = cluster.now_tick() + 1;
    return;
  }
  client.waiting = true;
  ++client.attempts_of_sequence;
  const std::uint64_t attempt = ++client.attempt;
  const std::uint64_t sequence = client.sequence;
  cluster.append(target, ClientAppend{client.id, sequence, client.payloads},
                 [this, &cluster, client_index, attempt, sequence,
                  payloads = client.payloads](const replica::AppendResult& result) {
                   on_answer(cluster, client_index, attempt, sequence, payloads, result);
                 });
}

void Workload::on_answer(Cluster& cluster, std::size_t client_index, std::uint64_t attempt,
                         std::uint64_t sequence, const std::vector<std::string>& payloads,
                         const replica::AppendResult& result) {
  Client& client = clients_[client_index];
  if (result.error.ok()) {
    // Every answer counts, a late one of an older attempt too: all must agree.
    checker_.observe_acknowledged_append(client.id, sequence, result.first_index, result.last_index,
                                         result.term, payloads);
  } else if (result.error.code == replica::ErrorCode::kFailedPrecondition ||
             result.error.code == replica::ErrorCode::kInvalidArgument) {
    // A retry carries the same entries and a sequence inside the window: the replica must find it.
    checker_.report("dedup-consistency", fmt::format("client {} sequence {} refused: {}", client.id,
                                                     sequence, result.error.message));
    return;
  }
  if (attempt != client.attempt || sequence != client.sequence) return;  // a late answer
  client.waiting = false;
  if (result.error.ok()) {
    if (!client.ack_lost_once && prng_.chance_per_million(rates_.lost_ack_per_million)) {
      client.ack_lost_once = true;
      client.retry_at_tick = cluster.now_tick() + prng_.between(1, rates_.max_retry_delay_ticks);
      return;
    }
    client.busy = false;
    return;
  }
  if (client.attempts_of_sequence >= rates_.max_attempts) {
    client.busy = false;  // gives up: the outcome stays unknown
    return;
  }
  if (result.error.code == replica::ErrorCode::kNotLeader) client.hint = result.error.leader_id;
  client.retry_at_tick = cluster.now_tick() + prng_.between(1, rates_.max_retry_delay_ticks);
}

bool Workload::read(Cluster& cluster) {
  // Reads go to whoever believes it leads (a client would follow redirects the same way).
  raft::NodeId target = cluster.leader();
  if (target == raft::kNoNode || prng_.below(4) == 0) target = random_running_node(cluster);
  if (target == raft::kNoNode) return false;
  return cluster.request_read(target);
}

void Workload::on_tick(Cluster& cluster) {
  if (prng_.chance_per_million(rates_.propose_per_million) && !clients_.empty()) {
    const std::size_t index = prng_.below(clients_.size());
    Client& client = clients_[index];
    if (!client.busy) {
      client.busy = true;
      ++client.sequence;
      client.payloads = cluster.make_payloads(client.id, client.sequence,
                                              prng_.between(1, rates_.max_entries_per_proposal));
      client.ack_lost_once = false;
      client.attempts_of_sequence = 0;
      send_attempt(cluster, index);
    }
  }
  for (std::size_t index = 0; index < clients_.size(); ++index) {
    Client& client = clients_[index];
    if (client.busy && !client.waiting && client.retry_at_tick <= cluster.now_tick())
      send_attempt(cluster, index);
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

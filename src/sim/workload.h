// Simulated clients. Each appends through the replica's API with its own client_id and increasing
// sequences, as raftlog's client library does: an append whose outcome is unknown (refused by a
// follower, timed out, its node crashed, its leader lost) is retried with the same (client_id,
// sequence) and payloads until a node acknowledges it; an acknowledgement is sometimes "lost in
// transit" and retried as well, so that the dedup table's answer for an acknowledged append is put to
// the test across restarts and leaders. Every answer goes to the checker. A client does not know the
// leader; it asks a random running node and then follows the leader hints. ReadIndex requests and
// leadership transfers come now and then.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/cluster.h"
#include "util/prng.h"

namespace raftlog::sim {

struct WorkloadRates {
  std::uint32_t propose_per_million = 400'000;  // per tick: an idle client starts a new append
  std::uint32_t read_per_million = 150'000;
  std::uint32_t transfer_per_million = 10'000;
  std::uint64_t max_entries_per_proposal = 3;
  std::size_t clients = 4;
  // An acknowledgement the client never received: it retries the same sequence once.
  std::uint32_t lost_ack_per_million = 150'000;
  std::uint64_t max_retry_delay_ticks = 4;
  // A client gives up on a sequence after this many attempts (its outcome stays unknown to it).
  std::uint32_t max_attempts = 64;
};

class Workload {
 public:
  Workload(const WorkloadRates& rates, util::Prng& prng, Checker& checker);

  void on_tick(Cluster& cluster);

  // One append of `entry_count` fresh entries without a client id (no dedup), with one redirect to a
  // hinted leader: the liveness phase's barrier. Returns where it was proposed (proposed = false if
  // refused); `payloads` receives the entries.
  replica::Replica::AppendPlacement propose(Cluster& cluster, std::size_t entry_count,
                                            std::vector<std::string>* payloads);
  // One read through the client path; true when a node took it.
  bool read(Cluster& cluster);

 private:
  struct Client {
    std::uint64_t id = 0;
    std::uint64_t sequence = 0;  // of the current append (0: none yet)
    std::vector<std::string> payloads;
    bool busy = false;           // an append is outstanding or due for a retry
    bool waiting = false;        // an attempt is outstanding
    bool ack_lost_once = false;  // this sequence's acknowledgement was already "lost" once
    std::uint64_t attempt = 0;   // numbers attempts, so late answers of older ones are told apart
    std::uint32_t attempts_of_sequence = 0;
    std::uint64_t retry_at_tick = 0;
    raft::NodeId hint = raft::kNoNode;
  };

  raft::NodeId random_running_node(Cluster& cluster);
  void send_attempt(Cluster& cluster, std::size_t client_index);
  void on_answer(Cluster& cluster, std::size_t client_index, std::uint64_t attempt,
                 std::uint64_t sequence, const std::vector<std::string>& payloads,
                 const replica::AppendResult& result);

  WorkloadRates rates_;
  util::Prng& prng_;
  Checker& checker_;
  std::vector<Client> clients_;
  std::uint64_t anonymous_appends_ = 0;
};

}  // namespace raftlog::sim

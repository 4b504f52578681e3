// HealthReporter: keeps the standard gRPC health service (grpc.health.v1.Health) of a node in step
// with the node's state. Meaning (docs/operations.md): a node is SERVING when it has finished
// recovery (the gRPC server only starts after Node::open recovered the store) and knows a leader of
// its current term (itself or another node), and is a full replica (not catching up after a storage
// fault, not receiving or installing a snapshot, not stranded behind its leader's retention, not a
// follower catching up to its leader's commit index (replica/catch_up_rule.h), no corrupt entry
// found); NOT_SERVING otherwise, and from the start of a graceful
// shutdown on. The overall service "" and kServiceName carry the same status.
//
// A thread polls the node's status every poll_interval_ms (a status copy is cheap), so a change is
// visible within that bound; probes never touch the Raft loop.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "replica/node_status.h"
#include "server/snapshot_progress.h"

namespace grpc {
class HealthCheckServiceInterface;
}  // namespace grpc

namespace raftlog::server {

// The reason of a follower catching up to its leader's commit index (replica/catch_up_rule.h).
inline constexpr const char* kCatchingUpToLeaderReason =
    "catching up to the commit index its leader named (it started or reconnected, or fell more "
    "than --serving-lag-entries behind): SERVING again once its log reaches that index";

// Why a node with `status` is not SERVING, or "" when it is: the meaning above, in one place.
std::string not_serving_reason(const replica::NodeStatus& status);
// The same, for a node whose snapshot transfers are `transfers`: one receiving or installing a
// snapshot is not SERVING either (it is behind its leader's retention and catching up).
std::string not_serving_reason(const replica::NodeStatus& status,
                               const SnapshotTransfers& transfers);

class HealthReporter {
 public:
  static constexpr const char* kServiceName = "raftlog.v1.Log";
  static constexpr std::uint32_t kDefaultPollIntervalMs = 100;

  // `not_serving_reason` answers the question above: "" when SERVING, else why not (logged on a
  // change). It is called from the reporter's thread. `health` is the server's default health
  // service (must outlive the reporter).
  HealthReporter(std::uint64_t node_id, grpc::HealthCheckServiceInterface* health,
                 std::function<std::string()> not_serving_reason,
                 std::uint32_t poll_interval_ms = kDefaultPollIntervalMs);
  ~HealthReporter();  // stop()
  HealthReporter(const HealthReporter&) = delete;
  HealthReporter& operator=(const HealthReporter&) = delete;

  // Stops polling and marks every service NOT_SERVING for good (probes fail from now on). Idempotent.
  void stop();

 private:
  void run(std::string last);  // `last`: the reason published so far ("" = SERVING)
  void publish(bool serving);

  const std::uint64_t node_id_;  // for log lines
  grpc::HealthCheckServiceInterface* const health_;
  const std::function<std::string()> not_serving_reason_;
  const std::uint32_t poll_interval_ms_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace raftlog::server

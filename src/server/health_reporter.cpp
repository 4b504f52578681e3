#include "server/health_reporter.h"
#include "util/thread_name.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

namespace raftlog::server {

std::string not_serving_reason(const replica::NodeStatus& status) {
  if (status.corrupt_index != 0) {
    return "entry " + std::to_string(status.corrupt_index) + " is corrupt; restart to repair it";
  }
  if (!status.committed_conflict.empty()) {
    return "a committed entry conflicts with the leader's log: " + status.committed_conflict;
  }
  if (!status.second_leader.empty()) {
    return "two leaders of one term: " + status.second_leader;
  }
  // This node led its term before under another leadership nonce: it lost its state and is the
  // fork, whatever its log holds now (review of nonce6, M2).
  if (status.leads_term_twice) {
    return "this node lost its state and leads a term a second time: " + status.leadership_refused;
  }
  // Before "catching up" and the rest: nothing will move this node's log again (drills6 M3: a
  // removed node kept answering SERVING, and plain reads from its frozen log, until stopped).
  if (status.removed && status.removed_by != 0) {
    return "removed: member " + std::to_string(status.removed_by) +
           " answered that this node's id is retired (stop it; docs/operations.md, "
           "\"Membership\")";
  }
  if (status.removed) {
    return "removed from the configuration: its log no longer follows the cluster (stop it; "
           "docs/operations.md, \"Membership\")";
  }
  if (status.unvouched) {
    std::string reason =
        status.unvouched_reason.empty() ? replica::kUnvouchedReason : status.unvouched_reason;
    // A constant sentence: the hint counts seconds, and health logs every change of its reason
    // (review of bootstrap5, M1: one line a second for as long as the node waited).
    if (!status.unvouched_hint.empty()) reason += std::string("; ") + replica::kUnvouchedHintHealth;
    return reason;
  }
  if (status.catching_up) {
    return "catching up to index " + std::to_string(status.catching_up_to_index) +
           " after a storage fault (" + status.storage_fault + ")";
  }
  if (status.stranded_below_index != 0) {
    return "stranded: needs entries below index " + std::to_string(status.stranded_below_index) +
           " that the leader no longer holds; waiting for its snapshot";
  }
  if (status.catching_up_to_leader_commit != 0 || status.learner_catching_up_to_index != 0) {
    // Without the indexes, which move with every append: health logs each change of its reason
    // (the numbers are in Status: catching_up_to_leader_commit, behind_leader_commit_entries).
    const bool learner = std::find(status.learners.begin(), status.learners.end(),
                                   status.node_id) != status.learners.end();
    return std::string(learner ? "learner " : "") + kCatchingUpToLeaderReason;
  }
  if (status.leader_id == 0) return "no leader known";
  return "";
}

std::string not_serving_reason(const replica::NodeStatus& status,
                               const SnapshotTransfers& transfers) {
  if (status.corrupt_index != 0 || status.removed || status.catching_up || status.unvouched ||
      !status.committed_conflict.empty() || !status.second_leader.empty() ||
      status.leads_term_twice) {
    return not_serving_reason(status);
  }
  // Before "stranded": a follower behind its leader's retention that receives or installs the
  // leader's snapshot is catching up by itself, which is what an operator wants to read.
  if (std::string reason = snapshot_not_serving_reason(transfers); !reason.empty()) return reason;
  return not_serving_reason(status);
}

HealthReporter::HealthReporter(std::uint64_t node_id, grpc::HealthCheckServiceInterface* health,
                               std::function<std::string()> not_serving_reason,
                               std::uint32_t poll_interval_ms)
    : node_id_(node_id),
      health_(health),
      not_serving_reason_(std::move(not_serving_reason)),
      poll_interval_ms_(poll_interval_ms) {
  std::string reason_now = not_serving_reason_();
  publish(reason_now.empty());
  // The state at start is logged as every later change is (drills6 L2: a node that was NOT_SERVING
  // from its start until it became SERVING logged no reason at all).
  if (!reason_now.empty()) spdlog::info("node {}: health: NOT_SERVING ({})", node_id_, reason_now);
  thread_ = std::thread([this, reason_now = std::move(reason_now)]() mutable {
    util::name_this_thread("health");
    run(std::move(reason_now));
  });
}

HealthReporter::~HealthReporter() { stop(); }

void HealthReporter::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // Shutdown() sets every service NOT_SERVING and ignores later updates.
  health_->Shutdown();
}

void HealthReporter::publish(bool serving) {
  health_->SetServingStatus("", serving);
  health_->SetServingStatus(kServiceName, serving);
}

void HealthReporter::run(std::string last) {
  std::unique_lock lock(mu_);
  // Bounded by stop(): every wait ends after poll_interval_ms or when stopping.
  while (!cv_.wait_for(lock, std::chrono::milliseconds(poll_interval_ms_),
                       [&] { return stopping_; })) {
    lock.unlock();
    std::string now = not_serving_reason_();
    // A change of reason alone (no leader -> stranded) is logged too; the status only on a change.
    if (now != last) {
      if (now.empty() != last.empty()) publish(now.empty());
      if (now.empty()) {
        spdlog::info("node {}: health: SERVING (a leader is known)", node_id_);
      } else {
        spdlog::info("node {}: health: NOT_SERVING ({})", node_id_, now);
      }
      last = std::move(now);
    }
    lock.lock();
  }
}

}  // namespace raftlog::server

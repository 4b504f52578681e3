#include "server/health_reporter.h"
#include "util/thread_name.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include <chrono>

namespace raftlog::server {

HealthReporter::HealthReporter(std::uint64_t node_id, grpc::HealthCheckServiceInterface* health,
                               std::function<bool()> serving, std::uint32_t poll_interval_ms)
    : node_id_(node_id),
      health_(health),
      serving_(std::move(serving)),
      poll_interval_ms_(poll_interval_ms) {
  const bool serving_now = serving_();
  publish(serving_now);
  thread_ = std::thread([this, serving_now] {
    util::name_this_thread("health");
    run(serving_now);
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

void HealthReporter::run(bool last) {
  std::unique_lock lock(mu_);
  // Bounded by stop(): every wait ends after poll_interval_ms or when stopping.
  while (!cv_.wait_for(lock, std::chrono::milliseconds(poll_interval_ms_),
                       [&] { return stopping_; })) {
    lock.unlock();
    const bool now = serving_();
    if (now != last) {
      publish(now);
      spdlog::info("node {}: health: {}", node_id_,
                   now ? "SERVING (a leader is known)" : "NOT_SERVING (no leader known)");
      last = now;
    }
    lock.lock();
  }
}

}  // namespace raftlog::server

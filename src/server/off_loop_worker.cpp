#include "server/off_loop_worker.h"

#include <spdlog/spdlog.h>

#include "util/thread_name.h"

namespace raftlog::server {

OffLoopWorker::OffLoopWorker(std::function<void(std::function<void()> done)> deliver)
    : deliver_(std::move(deliver)), thread_([this] {
        util::name_this_thread("off-loop");
        work();
      }) {}

OffLoopWorker::~OffLoopWorker() { stop(); }

bool OffLoopWorker::run(std::function<void()> job, std::function<void()> done) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return false;
    if (jobs_.size() >= kMaxQueuedJobs) {
      spdlog::error("off-loop worker: {} jobs queued already; refusing one (the replica retries)",
                    jobs_.size());
      return false;
    }
    jobs_.emplace_back(std::move(job), std::move(done));
  }
  wake_.notify_one();
  return true;
}

void OffLoopWorker::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    jobs_.clear();
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void OffLoopWorker::work() {
  while (true) {
    std::pair<std::function<void()>, std::function<void()>> next;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      next = std::move(jobs_.front());
      jobs_.pop_front();
    }
    next.first();
    deliver_(std::move(next.second));
  }
}

}  // namespace raftlog::server

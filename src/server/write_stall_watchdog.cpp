#include "server/write_stall_watchdog.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "server/stream_limits.h"
#include "util/thread_name.h"

namespace raftlog::server {

WriteStallWatchdog::WriteStallWatchdog(std::string stream, std::chrono::milliseconds timeout)
    : stream_(std::move(stream)), timeout_(timeout) {
  thread_ = std::thread([this] {
    util::name_this_thread("write-watchdog");
    run();
  });
}

WriteStallWatchdog::~WriteStallWatchdog() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

WriteStallWatchdog::Guard WriteStallWatchdog::arm(grpc::ServerContextBase* context) {
  std::lock_guard lock(mu_);
  const std::uint64_t id = next_id_++;
  armed_.emplace(id, Armed{context, std::chrono::steady_clock::now() + timeout_, std::nullopt});
  return Guard(this, id);
}

std::optional<grpc::Status> WriteStallWatchdog::Guard::disarm() {
  if (disarmed_) return std::nullopt;
  disarmed_ = true;
  return owner_->disarm(id_);
}

std::optional<grpc::Status> WriteStallWatchdog::disarm(std::uint64_t id) {
  std::lock_guard lock(mu_);
  const auto found = armed_.find(id);
  if (found == armed_.end()) return std::nullopt;
  std::optional<grpc::Status> ended = std::move(found->second.ended);
  armed_.erase(found);
  return ended;
}

void WriteStallWatchdog::run() {
  const auto period = std::clamp<std::chrono::milliseconds>(
      timeout_ / 4, std::chrono::milliseconds(10), std::chrono::seconds(1));
  std::unique_lock lock(mu_);
  while (!stopping_) {
    wake_.wait_for(lock, period, [&] { return stopping_; });
    const auto now = std::chrono::steady_clock::now();
    for (auto& [id, write] : armed_) {
      if (write.ended || write.deadline > now) continue;
      // Under mu_: the guard's owner cannot return (and its context go away) before the cancel
      // is done. A synchronous call runs no code of ours when it is cancelled, so no lock order
      // with mu_ exists.
      spdlog::info("{}: its reader took nothing for {} ms; ending it", stream_, timeout_.count());
      write.ended = end_stalled_stream(write.context, stream_, timeout_);
    }
  }
}

}  // namespace raftlog::server

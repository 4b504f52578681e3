#include "server/scrubber.h"
#include "util/thread_name.h"

#include <algorithm>

namespace raftlog::server {

Scrubber::Scrubber(std::uint64_t bytes_per_second, std::uint32_t interval_ms, ReadChunk read,
                   OnCorruption on_corruption)
    : chunk_bytes_(bytes_per_second == 0
                       ? 0
                       : std::clamp<std::uint64_t>(
                             bytes_per_second / 1000 * std::max<std::uint32_t>(interval_ms, 1), 1,
                             kMaxChunkBytes)),
      interval_ms_(std::max<std::uint32_t>(interval_ms, 1)),
      read_(std::move(read)),
      on_corruption_(std::move(on_corruption)) {}

Scrubber::~Scrubber() { stop(); }

void Scrubber::start() {
  if (chunk_bytes_ == 0 || thread_.joinable()) return;
  thread_ = std::thread([this] {
    util::name_this_thread("scrubber");
    run();
  });
}

void Scrubber::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool Scrubber::step() {
  std::uint64_t from = 0;
  {
    std::lock_guard lock(mu_);
    if (stats_.corrupt_index != 0) return false;
    from = stats_.position;
  }
  const ScrubChunk chunk = read_(from, std::max<std::uint64_t>(chunk_bytes_, 1));
  {
    std::lock_guard lock(mu_);
    switch (chunk.outcome) {
      case ScrubChunk::Outcome::kVerified:
        stats_.bytes_verified += chunk.bytes;
        stats_.entries_verified += chunk.entries;
        stats_.position = chunk.next_index;
        return true;
      case ScrubChunk::Outcome::kAtEnd:
        if (from != 0) ++stats_.passes_completed;
        stats_.position = 0;
        return true;
      case ScrubChunk::Outcome::kStopped:
        return false;
      case ScrubChunk::Outcome::kCorrupt:
        stats_.corrupt_index = chunk.corrupt_index;  // recorded before the callback sees it
        break;
    }
  }
  // Unlocked: the callback may read stats(). Once: every later step() returns at the check above.
  on_corruption_(chunk.corrupt_index, chunk.message);
  return false;
}

ScrubberStats Scrubber::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void Scrubber::run() {
  const auto interval = std::chrono::milliseconds(interval_ms_);
  while (true) {
    {
      std::unique_lock lock(mu_);
      if (cv_.wait_for(lock, interval, [this] { return stopping_; })) return;
    }
    if (!step()) return;
  }
}

}  // namespace raftlog::server

// Scrubber: a background thread that re-reads the durable log at a bounded rate and verifies every
// entry's CRC32C, so that a byte flipped in data recovery trusted (sealed segments are only
// spot-checked at open) is found while the node runs, not when a reader or a lagging follower needs
// it years later (docs/storage-format.md, "Storage faults").
//
// The node supplies the read (under its store lock, within [first_index, flushed_index]) and what to
// do on a finding; the scrubber owns only the pacing and its position. It walks from the first index
// to the durable end, then starts over, one chunk per interval: chunk bytes = bytes_per_second *
// interval_ms / 1000, at most kMaxChunkBytes. GRPC-free and clock-injected for the tests.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace raftlog::server {

struct ScrubChunk {
  enum class Outcome : std::uint8_t {
    kVerified,  // entries [from, next_index) verified
    kAtEnd,     // nothing durable at or after `from`: start over from the first index next time
    kCorrupt,   // the entry at corrupt_index failed its check (message says how)
    kStopped,   // the log is closing: stop scrubbing
  };
  Outcome outcome = Outcome::kAtEnd;
  std::uint64_t next_index = 0;     // kVerified: where the next chunk starts
  std::uint64_t bytes = 0;          // kVerified: payload bytes verified
  std::uint64_t entries = 0;        // kVerified: entries verified
  std::uint64_t corrupt_index = 0;  // kCorrupt
  std::string message;              // kCorrupt
};

struct ScrubberStats {
  std::uint64_t bytes_verified = 0;
  std::uint64_t entries_verified = 0;
  std::uint64_t passes_completed = 0;  // walks that reached the durable end
  std::uint64_t position = 0;          // next index to verify (0 = not started)
  std::uint64_t corrupt_index = 0;     // first corrupt entry found (0 = none)
};

class Scrubber {
 public:
  static constexpr std::uint64_t kMaxChunkBytes = 4ULL << 20;

  // `read(from, max_bytes)` verifies entries from `from` (0: the first index) up to about max_bytes.
  using ReadChunk = std::function<ScrubChunk(std::uint64_t from, std::uint64_t max_bytes)>;
  // Called once, from the scrubber's thread, on the first corrupt entry; scrubbing stops after it.
  using OnCorruption = std::function<void(std::uint64_t index, const std::string& message)>;

  // bytes_per_second == 0 disables scrubbing (start() does nothing).
  Scrubber(std::uint64_t bytes_per_second, std::uint32_t interval_ms, ReadChunk read,
           OnCorruption on_corruption);
  ~Scrubber();  // stop()
  Scrubber(const Scrubber&) = delete;
  Scrubber& operator=(const Scrubber&) = delete;

  void start();
  void stop();  // joins the thread; idempotent
  // One chunk now, on the caller's thread (the thread calls it; tests call it directly).
  // Returns false once scrubbing is over (a corruption was reported, or the log stopped).
  bool step();
  ScrubberStats stats() const;

 private:
  void run();

  const std::uint64_t chunk_bytes_;
  const std::uint32_t interval_ms_;
  ReadChunk read_;
  OnCorruption on_corruption_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  ScrubberStats stats_;  // mu_
  std::thread thread_;
};

}  // namespace raftlog::server

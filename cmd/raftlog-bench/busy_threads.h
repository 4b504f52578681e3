// Background CPU load for `raftlog-bench raw --busy-threads N --busy-us U`: N threads that each burn
// U microseconds of CPU and then sleep about 1 ms, over and over, like N writer threads that each do
// a little work per append and then wait for a flush. Used to measure how much the one-thread
// write+fdatasync loop itself slows down when the CPUs are as busy as they are while the store
// serves 64 writer threads (docs/benchmarks.md, run 12): on this VM, busy CPUs slow the disk's sync.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace raftlog::bench {

class BusyThreads {
 public:
  // Starts `threads` threads (at most kMaxThreads), each burning `busy_us` (at most kMaxBusyUs) per ~1 ms.
  BusyThreads(std::uint64_t threads, std::uint64_t busy_us);
  ~BusyThreads();  // stops them
  BusyThreads(const BusyThreads&) = delete;
  BusyThreads& operator=(const BusyThreads&) = delete;

  // Stops and joins the threads; returns the CPU seconds they used in total. Idempotent.
  double stop();

  static constexpr std::uint64_t kMaxThreads = 1024;
  static constexpr std::uint64_t kMaxBusyUs = 100000;

 private:
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> cpu_ns_{0};
  std::vector<std::thread> threads_;
  double cpu_seconds_ = 0.0;
};

}  // namespace raftlog::bench

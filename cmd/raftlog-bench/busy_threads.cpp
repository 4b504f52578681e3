#include "busy_threads.h"

#include <time.h>

#include <algorithm>
#include <cassert>
#include <chrono>

namespace raftlog::bench {
namespace {

std::uint64_t thread_cpu_ns() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<std::uint64_t>(now.tv_sec) * 1'000'000'000ULL +
         static_cast<std::uint64_t>(now.tv_nsec);
}

}  // namespace

BusyThreads::BusyThreads(std::uint64_t threads, std::uint64_t busy_us) {
  assert(threads <= kMaxThreads && busy_us <= kMaxBusyUs);
  threads = std::min(threads, kMaxThreads);
  busy_us = std::min(busy_us, kMaxBusyUs);
  threads_.reserve(threads);
  for (std::uint64_t i = 0; i < threads; ++i) {
    threads_.emplace_back([this, busy_us] {
      // Bounded: runs until stop(), which the owner calls when its measurement ends.
      while (!stop_.load(std::memory_order_relaxed)) {
        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(busy_us);
        while (std::chrono::steady_clock::now() < until) {
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      cpu_ns_.fetch_add(thread_cpu_ns());
    });
  }
}

BusyThreads::~BusyThreads() { stop(); }

double BusyThreads::stop() {
  stop_.store(true);
  for (std::thread& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
  if (!threads_.empty()) {
    cpu_seconds_ = static_cast<double>(cpu_ns_.load()) / 1e9;
    threads_.clear();
  }
  return cpu_seconds_;
}

}  // namespace raftlog::bench

#include "server/timer_thread.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace raftlog::server {
namespace {

using namespace std::chrono_literals;
using Clock = TimerThread::Clock;

bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(2ms);
  }
  return condition();
}

TEST(TimerThread, RunsCallbacksInDeadlineOrderNotBeforeTheirTime) {
  TimerThread timer("test-timer", 8);
  timer.start();
  std::mutex mu;
  std::vector<int> order;
  std::vector<Clock::duration> lateness;
  const auto base = Clock::now();
  // Scheduled out of order; the earliest arrives last.
  for (const int delay_ms : {60, 20, 40, 5}) {
    const auto when = base + std::chrono::milliseconds(delay_ms);
    ASSERT_TRUE(timer.schedule(when, [&, delay_ms, when] {
      std::lock_guard lock(mu);
      order.push_back(delay_ms);
      lateness.push_back(Clock::now() - when);
    }));
  }
  ASSERT_TRUE(eventually(
      [&] {
        std::lock_guard lock(mu);
        return order.size() == 4;
      },
      2000ms));
  std::lock_guard lock(mu);
  EXPECT_EQ(order, (std::vector<int>{5, 20, 40, 60}));
  for (const Clock::duration late : lateness) EXPECT_GE(late, Clock::duration::zero());
  EXPECT_EQ(timer.pending(), 0u);
}

TEST(TimerThread, BoundsPendingCallbacks) {
  TimerThread timer("test-timer", 2);  // not started: nothing runs, so pending callbacks stay
  std::atomic<int> runs{0};
  const auto later = Clock::now() + 10s;
  EXPECT_TRUE(timer.schedule(later, [&] { runs.fetch_add(1); }));
  EXPECT_TRUE(timer.schedule(later, [&] { runs.fetch_add(1); }));
  EXPECT_FALSE(timer.schedule(later, [&] { runs.fetch_add(1); }));
  EXPECT_EQ(timer.pending(), 2u);
  timer.stop();
  EXPECT_EQ(runs.load(), 0);
}

TEST(TimerThread, StopDropsPendingAndRefusesNewCallbacks) {
  TimerThread timer("test-timer", 4);
  timer.start();
  std::atomic<int> runs{0};
  ASSERT_TRUE(timer.schedule(Clock::now() + 5s, [&] { runs.fetch_add(1); }));
  const auto stop_started = Clock::now();
  timer.stop();
  EXPECT_LT(Clock::now() - stop_started, 1s) << "stop() waited for a far deadline";
  EXPECT_EQ(timer.pending(), 0u);
  EXPECT_FALSE(timer.schedule(Clock::now(), [&] { runs.fetch_add(1); }));
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(runs.load(), 0);
  timer.stop();  // idempotent
}

TEST(TimerThread, CallbackMayScheduleAgain) {
  TimerThread timer("test-timer", 1);
  timer.start();
  std::atomic<int> runs{0};
  std::function<void()> again = [&] {
    // Bounded: five runs in all.
    if (runs.fetch_add(1) + 1 < 5) {
      EXPECT_TRUE(timer.schedule(Clock::now() + 1ms, again));
    }
  };
  ASSERT_TRUE(timer.schedule(Clock::now(), again));
  EXPECT_TRUE(eventually([&] { return runs.load() == 5; }, 2000ms));
  timer.stop();
  EXPECT_EQ(runs.load(), 5);
}

}  // namespace
}  // namespace raftlog::server

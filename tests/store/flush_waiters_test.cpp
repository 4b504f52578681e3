// FlushWaiters: a waiter returns once the flushed index reaches its own index, never earlier; a
// flush cycle wakes only the waiters it can cover; release_all() frees everyone, now and later.
#include "store/flush_waiters.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace raftlog::store {
namespace {

using namespace std::chrono_literals;

// One flush cycle as the store runs it: begin, publish the target, store the flushed index, end.
void flush_cycle(FlushWaiters& waiters, std::atomic<std::uint64_t>& flushed, std::uint64_t target) {
  waiters.begin_cycle();
  waiters.set_cycle_target(target);
  flushed.store(target);
  waiters.end_cycle();
}

// Waits (bounded) until `waiters` holds `count` sleeping threads.
void await_waiting(const FlushWaiters& waiters, std::uint32_t count) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (waiters.sleeping() != count && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_EQ(waiters.sleeping(), count);
}

TEST(FlushWaitersTest, ReturnsAtOnceWhenAlreadyFlushed) {
  FlushWaiters waiters;
  std::atomic<std::uint64_t> flushed{5};
  waiters.wait(5, flushed);
  waiters.wait(1, flushed);
  EXPECT_EQ(waiters.sleeping(), 0U);
}

TEST(FlushWaitersTest, ReturnsOnlyWaitersTheFlushCovers) {
  FlushWaiters waiters;
  std::atomic<std::uint64_t> flushed{0};
  constexpr int kThreads = 8;
  std::atomic<int> woken_mask{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      waiters.wait(static_cast<std::uint64_t>(i + 1), flushed);  // waits for index i+1
      woken_mask.fetch_or(1 << i);
    });
  }
  await_waiting(waiters, kThreads);
  flush_cycle(waiters, flushed, 3);
  await_waiting(waiters, kThreads - 3);  // the uncovered ones sleep again
  // Joined below; the three covered ones must have woken, the others not.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (woken_mask.load() != 0b111 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(woken_mask.load(), 0b111);
  flush_cycle(waiters, flushed, kThreads);
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(woken_mask.load(), (1 << kThreads) - 1);
  EXPECT_EQ(waiters.sleeping(), 0U);
}

TEST(FlushWaitersTest, CoveringCycleIsTheCycleInFlightOnlyWhenItsTargetMayReachTheIndex) {
  FlushWaiters waiters;
  EXPECT_EQ(waiters.covering_cycle(7), 1U);  // nothing in flight: the next cycle
  waiters.begin_cycle();                     // cycle 1, target not yet known
  EXPECT_EQ(waiters.covering_cycle(7), 1U);
  waiters.set_cycle_target(7);
  EXPECT_EQ(waiters.covering_cycle(7), 1U);  // the target reaches 7
  EXPECT_EQ(waiters.covering_cycle(8), 2U);  // it cannot: the next cycle
  waiters.end_cycle();
  EXPECT_EQ(waiters.covering_cycle(8), 2U);
  waiters.begin_cycle();  // cycle 2: the previous target must not leak into it
  EXPECT_EQ(waiters.covering_cycle(100), 2U);
}

TEST(FlushWaitersTest, AnEntryNotYetInTheLogIsCoveredAfterTheCycleThatReadItsTarget) {
  FlushWaiters waiters;
  EXPECT_EQ(waiters.covering_cycle_of_next_append(), 1U);  // nothing in flight: the next cycle
  waiters.begin_cycle();                                   // cycle 1 has not read its target yet
  EXPECT_EQ(waiters.covering_cycle_of_next_append(), 1U);  // it may still read the entry
  waiters.set_cycle_target(5);
  EXPECT_EQ(waiters.covering_cycle_of_next_append(), 2U);  // it cannot: the entry comes later
  waiters.end_cycle();
  EXPECT_EQ(waiters.covering_cycle_of_next_append(), 2U);
}

TEST(FlushWaitersTest, WaitersBeyondTheCycleInFlightSleepThroughIt) {
  // Appended after the sync in flight took its snapshot, these waiters sleep on the next cycle's bit:
  // the end of the cycle in flight does not wake them only to send them back to sleep.
  FlushWaiters waiters;
  std::atomic<std::uint64_t> flushed{0};
  waiters.begin_cycle();
  waiters.set_cycle_target(3);
  constexpr int kThreads = 8;
  constexpr int kUncovered = kThreads - 3;
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] { waiters.wait(static_cast<std::uint64_t>(i + 1), flushed); });
  }
  await_waiting(waiters, kThreads);
  std::this_thread::sleep_for(50ms);  // let every sleeper reach the kernel
  const std::uint64_t sleeps_before = waiters.sleeps();
  flushed.store(3);
  waiters.end_cycle();
  await_waiting(waiters, kUncovered);
  std::this_thread::sleep_for(50ms);
  // With a wake-all, each uncovered waiter would have gone to sleep once more (kUncovered sleeps).
  // A waiter that had not reached the kernel at end_cycle() returns from it and sleeps once more.
  EXPECT_LT(waiters.sleeps() - sleeps_before, static_cast<std::uint64_t>(kUncovered));
  flush_cycle(waiters, flushed, kThreads);
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(waiters.sleeping(), 0U);
}

TEST(FlushWaitersTest, ReleaseAllFreesCurrentAndLaterWaiters) {
  FlushWaiters waiters;
  std::atomic<std::uint64_t> flushed{0};
  std::thread sleeper([&] { waiters.wait(100, flushed); });
  await_waiting(waiters, 1);
  waiters.release_all();
  sleeper.join();
  waiters.wait(200, flushed);  // returns at once: the log is closed or failed
  EXPECT_EQ(flushed.load(), 0U);
}

void many_threads_many_rounds(bool with_waker) {
  // Racing releases against registrations: every waiter must return (a lost wake-up hangs the test,
  // which ctest's timeout turns into a failure).
  FlushWaiters waiters;
  if (with_waker) waiters.start_waker();
  std::atomic<std::uint64_t> flushed{0};
  constexpr int kThreads = 16;
  constexpr std::uint64_t kRounds = 2000;
  std::atomic<bool> done{false};
  std::thread releaser([&] {
    // Targets advance by 1 to 3, and every other cycle publishes its target only after a yield,
    // so waiters also meet cycles whose target is not known yet.
    for (std::uint64_t cycle = 0; !done.load(); ++cycle) {
      const std::uint64_t next = flushed.load() + 1 + cycle % 3;
      waiters.begin_cycle();
      if (cycle % 2 == 0) std::this_thread::yield();
      waiters.set_cycle_target(next);
      std::this_thread::yield();
      flushed.store(next);
      waiters.end_cycle();
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (std::uint64_t round = 0; round < kRounds; ++round) {
        const std::uint64_t target = flushed.load() + 1 + round % 3;
        waiters.wait(target, flushed);
        ASSERT_GE(flushed.load(), target);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  done.store(true);
  releaser.join();
  EXPECT_EQ(waiters.sleeping(), 0U);
  waiters.stop_waker();
}

TEST(FlushWaitersTest, ManyThreadsManyRoundsNoLostWakeup) { many_threads_many_rounds(false); }

TEST(FlushWaitersTest, ManyThreadsManyRoundsNoLostWakeupThroughTheWaker) {
  many_threads_many_rounds(true);
}

TEST(FlushWaitersTest, NoWaiterSleepsPastTheLastCycleThatCoveredIt) {
  // A waiter that guessed a cycle later than the one that covers it would sleep until some later
  // cycle; here no later cycle comes, so it would stay asleep. Waiters join while cycles run (through
  // the waker: more than 4 sleep), the cycles stop once every index is flushed, and every waiter must
  // then return. Bounded: 100 rounds of 8 waiters, each round's wait bounded by 5 s.
  constexpr int kWaiters = 8;
  for (int round = 0; round < 100; ++round) {
    FlushWaiters waiters;
    waiters.start_waker();
    std::atomic<std::uint64_t> flushed{0};
    std::atomic<int> returned{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < kWaiters; ++i) {
      threads.emplace_back([&, i] {
        waiters.wait(static_cast<std::uint64_t>(i + 1), flushed);
        returned.fetch_add(1);
      });
    }
    // Cycles of one index each, racing with the waiters going to sleep.
    for (std::uint64_t target = 1; target <= kWaiters; ++target) {
      waiters.begin_cycle();
      waiters.set_cycle_target(target);
      if (target % 2 == 0) std::this_thread::yield();
      flushed.store(target);
      waiters.end_cycle();
    }
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (returned.load() != kWaiters && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(1ms);
    }
    const bool all_returned = returned.load() == kWaiters;
    if (!all_returned) waiters.release_all();  // free the sleeper so the threads can be joined
    for (auto& thread : threads) thread.join();
    ASSERT_TRUE(all_returned) << "round " << round << ": a waiter slept past its cycle";
    waiters.stop_waker();
  }
}

TEST(FlushWaitersTest, WakerWakesCoveredWaitersOnly) {
  // More sleepers than FlushWaiters wakes by itself, so the wake-up goes through the waker.
  FlushWaiters waiters;
  waiters.start_waker();
  std::atomic<std::uint64_t> flushed{0};
  constexpr int kCovered = 6;
  std::atomic<int> woken{0};
  std::vector<std::thread> covered;
  for (int i = 0; i < kCovered; ++i) {
    covered.emplace_back([&] {
      waiters.wait(2, flushed);
      woken.fetch_add(1);
    });
  }
  std::thread uncovered([&] {
    waiters.wait(5, flushed);
    woken.fetch_add(1);
  });
  await_waiting(waiters, kCovered + 1);
  const std::uint64_t rounds_before = waiters.wake_rounds();
  flush_cycle(waiters, flushed, 3);  // handed to the waker
  await_waiting(waiters, 1);         // the covered ones returned; the other sleeps again
  for (auto& thread : covered) thread.join();
  EXPECT_EQ(woken.load(), kCovered);
  EXPECT_GT(waiters.wake_rounds(), rounds_before);
  // After the waker stopped, wake-ups are direct and still reach the sleeper.
  waiters.stop_waker();
  flush_cycle(waiters, flushed, 5);
  uncovered.join();
  EXPECT_EQ(woken.load(), kCovered + 1);
}

TEST(FlushWaitersTest, FewSleepersAreWokenDirectlyEvenWithAWaker) {
  FlushWaiters waiters;
  waiters.start_waker();
  std::atomic<std::uint64_t> flushed{0};
  std::thread waiter([&] { waiters.wait(1, flushed); });
  await_waiting(waiters, 1);
  flush_cycle(waiters, flushed, 1);
  waiter.join();
  waiters.stop_waker();
}

TEST(FlushWaitersTest, WakeUpHandedOverWhileTheWakerStopsIsNotLost) {
  // The last flush of a log races with close(): its wake-up may reach the waker as it exits. Bounded:
  // 100 rounds, each with enough waiters for the hand-over path.
  constexpr int kWaiters = 6;
  for (int round = 0; round < 100; ++round) {
    FlushWaiters waiters;
    waiters.start_waker();
    std::atomic<std::uint64_t> flushed{0};
    std::vector<std::thread> sleepers;
    for (int i = 0; i < kWaiters; ++i) sleepers.emplace_back([&] { waiters.wait(1, flushed); });
    await_waiting(waiters, kWaiters);
    std::thread flusher([&] { flush_cycle(waiters, flushed, 1); });
    waiters.stop_waker();
    flusher.join();
    for (auto& thread : sleepers) thread.join();  // hangs (ctest timeout) if the wake-up was lost
    ASSERT_EQ(waiters.sleeping(), 0U);
  }
}

// Flush cycles are serialized by the log (flush_cycle_mu_); the waiters check it, in release builds.
TEST(FlushWaitersTest, CyclesThatOverlapOrEndWithoutBeginningStop) {
  FlushWaiters waiters;
  EXPECT_DEATH(waiters.end_cycle(), "end_cycle without begin_cycle");
  waiters.begin_cycle();
  EXPECT_DEATH(waiters.begin_cycle(), "flush cycles overlap");
  waiters.end_cycle();
}

}  // namespace
}  // namespace raftlog::store

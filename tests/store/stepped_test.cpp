// Stepped mode (Options::background_work = BackgroundWork::kStepped): the log starts no thread, and
// nothing becomes durable, nor is the listener called, except in the steps its owner takes. Over
// MemoryEnv, so that power loss shows exactly what the steps made durable.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace raftlog::store {
namespace {

using testing::expect_entries;
using testing::make_batch;
using testing::open_ok;
using testing::small_options;

constexpr std::size_t kPayloadBytes = 1000;  // about 60 entries per 64 KiB segment

Options stepped_options(MemoryEnv* env, FlushMode mode = FlushMode::kSync) {
  Options options = small_options(env, mode);
  options.background_work = BackgroundWork::kStepped;
  return options;
}

std::size_t threads_in_process() {
  std::size_t threads = 0;
  for ([[maybe_unused]] const auto& task : std::filesystem::directory_iterator("/proc/self/task"))
    ++threads;
  return threads;
}

// Appends entries [first, first + count) of `term` without waiting, one entry per call.
void append_entries(CommitLog& log, std::uint64_t first, std::size_t count, std::uint64_t term) {
  for (std::uint64_t index = first; index < first + count; ++index) {
    const auto batch = make_batch(index, 1, term, kPayloadBytes);
    auto appended = log.append_no_wait(batch.span());
    ASSERT_TRUE(appended.ok()) << appended.status().to_string();
  }
}

// Power loss: the abandoned log is dropped, every unflushed byte is lost, the log reopens stepped.
std::unique_ptr<CommitLog> lose_power_and_reopen(MemoryEnv& env, std::unique_ptr<CommitLog> log) {
  env.crash();
  log.reset();
  env.restart(CrashOptions{CrashMode::kLoseUnflushed, 1});
  return open_ok("/log", stepped_options(&env));
}

class SteppedLogTest : public testing::MemoryLogDirTest {};

// The control first: the counting sees the threads a default log starts, so an unchanged count
// below means no thread.
TEST_F(SteppedLogTest, StartsNoThreadWhereADefaultLogStartsThree) {
  const std::size_t before = threads_in_process();
  {
    auto threaded = open_ok("/log", small_options(&env_));
    ASSERT_TRUE(threaded);
    EXPECT_EQ(threads_in_process(), before + 3) << "flusher, waker and allocator";
  }
  ASSERT_EQ(threads_in_process(), before);

  auto log = open_ok("/log", stepped_options(&env_));
  ASSERT_TRUE(log);
  EXPECT_EQ(threads_in_process(), before);
  append_entries(*log, 1, 300, 1);  // five segments: every roll creates its segment inline
  EXPECT_GE(log->segments().size(), 5U);
  ASSERT_TRUE(log->run_flush_cycle().ok());
  ASSERT_TRUE(log->run_checkpoint().ok());
  ASSERT_TRUE(log->truncate_suffix(250).ok());
  ASSERT_TRUE(log->truncate_prefix(100).ok());
  EXPECT_EQ(threads_in_process(), before);
  ASSERT_TRUE(log->close().ok());
  EXPECT_EQ(threads_in_process(), before);
}

TEST_F(SteppedLogTest, NothingIsDurableWithoutAFlushStep) {
  auto log = open_ok("/log", stepped_options(&env_));
  ASSERT_TRUE(log);
  append_entries(*log, 1, 100, 1);                             // into a second segment
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // 10 flush intervals: nobody flushes
  EXPECT_EQ(log->last_index(), 100U);
  EXPECT_EQ(log->flushed_index(), 0U);
  EXPECT_EQ(log->stats().flushes, 0U);

  log = lose_power_and_reopen(env_, std::move(log));
  ASSERT_TRUE(log);
  EXPECT_EQ(log->last_index(), 0U) << "appends without a flush step survived a power loss";

  append_entries(*log, 1, 100, 2);
  ASSERT_TRUE(log->run_flush_cycle().ok());
  EXPECT_EQ(log->flushed_index(), 100U);
  append_entries(*log, 101, 30, 2);  // written after the step: lost
  log = lose_power_and_reopen(env_, std::move(log));
  ASSERT_TRUE(log);
  EXPECT_EQ(log->last_index(), 100U);
  expect_entries(*log, 1, 100, 2, kPayloadBytes);
}

TEST_F(SteppedLogTest, TheListenerHearsOnlyInStepsOnTheCallersThread) {
  auto log = open_ok("/log", stepped_options(&env_));
  ASSERT_TRUE(log);
  std::vector<std::uint64_t> heard;
  std::vector<std::thread::id> listener_threads;
  std::vector<CommitLog::FlushCycle> cycles;
  log->set_flush_listener([&](std::uint64_t flushed) {
    heard.push_back(flushed);
    listener_threads.push_back(std::this_thread::get_id());
  });
  log->set_flush_observer([&](const CommitLog::FlushCycle& cycle) { cycles.push_back(cycle); });

  append_entries(*log, 1, 5, 1);
  log->request_flush();  // nobody to ask
  EXPECT_TRUE(heard.empty());
  ASSERT_TRUE(log->run_flush_cycle().ok());
  ASSERT_TRUE(log->run_flush_cycle().ok());  // nothing new: no call
  append_entries(*log, 6, 2, 1);
  ASSERT_TRUE(log->flush().ok());  // the same step
  ASSERT_TRUE(log->truncate_suffix(6).ok());
  ASSERT_TRUE(log->run_flush_cycle().ok());  // lowered to 5 by the truncation: nothing to report
  append_entries(*log, 6, 3, 2);
  ASSERT_TRUE(log->run_flush_cycle().ok());

  EXPECT_EQ(heard, (std::vector<std::uint64_t>{5, 7, 8}));
  for (const std::thread::id id : listener_threads) EXPECT_EQ(id, std::this_thread::get_id());
  ASSERT_EQ(cycles.size(), 3U);  // only the cycles that synced something
  EXPECT_EQ(cycles[0].entries, 5U);
  EXPECT_EQ(cycles[1].entries, 2U);
  EXPECT_EQ(cycles[2].entries, 3U);
}

// The listener runs inside the owner's step but holds no store lock: it may write and checkpoint.
TEST_F(SteppedLogTest, TheListenerMayAppendAndCheckpoint) {
  auto log = open_ok("/log", stepped_options(&env_));
  ASSERT_TRUE(log);
  std::vector<Status> from_listener;
  log->set_flush_listener([&](std::uint64_t flushed) {
    from_listener.push_back(log->run_checkpoint());
    const auto next = make_batch(flushed + 1, 1, 1, 100);
    from_listener.push_back(log->append_no_wait(next.span()).status());
  });
  append_entries(*log, 1, 3, 1);
  ASSERT_TRUE(log->run_flush_cycle().ok());
  ASSERT_EQ(from_listener.size(), 2U);
  for (const Status& status : from_listener) EXPECT_TRUE(status.ok()) << status.to_string();
  EXPECT_EQ(log->last_index(), 4U);
  EXPECT_EQ(log->flushed_index(), 3U) << "the listener's append waits for the next step";
  log->set_flush_listener(nullptr);
  log = lose_power_and_reopen(env_, std::move(log));
  ASSERT_TRUE(log);
  EXPECT_EQ(log->recovery_report().checkpoint_flushed_index, 3U) << "the listener's checkpoint";
  EXPECT_EQ(log->last_index(), 3U);
}

TEST_F(SteppedLogTest, RefusesToWaitForAFlushNobodyWouldRun) {
  auto log = open_ok("/log", stepped_options(&env_));
  ASSERT_TRUE(log);
  const auto explicit_index = make_batch(1, 3, 1, 100);
  auto appended = log->append(explicit_index.span());
  ASSERT_FALSE(appended.ok());
  EXPECT_EQ(appended.status().code(), StatusCode::kFailedPrecondition)
      << appended.status().to_string();
  auto auto_index = make_batch(1, 3, 1, 100);
  for (EntryToAppend& entry : auto_index.entries) entry.meta.index = 0;
  appended = log->append(auto_index.span());
  ASSERT_FALSE(appended.ok());
  EXPECT_EQ(appended.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(log->last_index(), 0U) << "a refused append wrote something";

  ASSERT_TRUE(log->append_no_wait(explicit_index.span()).ok());
  EXPECT_EQ(log->wait_flushed(0).code(), StatusCode::kOk);
  EXPECT_EQ(log->wait_flushed(3).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(log->run_flush_cycle().ok());
  EXPECT_TRUE(log->wait_flushed(3).ok());
  EXPECT_EQ(log->wait_flushed(4).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(log->close().ok());
  EXPECT_EQ(log->run_flush_cycle().code(), StatusCode::kClosed);
  EXPECT_EQ(log->run_checkpoint().code(), StatusCode::kClosed);
  EXPECT_EQ(log->wait_flushed(4).code(), StatusCode::kClosed);
}

TEST_F(SteppedLogTest, AsyncAppendWritesWithoutFlushing) {
  auto log = open_ok("/log", stepped_options(&env_, FlushMode::kAsync));
  ASSERT_TRUE(log);
  const auto batch = make_batch(1, 10, 1, kPayloadBytes);
  auto appended = log->append(batch.span());
  ASSERT_TRUE(appended.ok()) << appended.status().to_string();
  EXPECT_EQ(log->flushed_index(), 0U);
  ASSERT_TRUE(log->run_flush_cycle().ok());
  EXPECT_EQ(log->flushed_index(), 10U);
}

TEST_F(SteppedLogTest, ALogWithThreadsRefusesTheSteps) {
  auto log = open_ok("/log", small_options(&env_));
  ASSERT_TRUE(log);
  EXPECT_EQ(log->run_flush_cycle().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(log->run_checkpoint().code(), StatusCode::kFailedPrecondition);
}

// The periodic checkpoint is the owner's step: however long the log runs, only run_checkpoint()
// (besides truncations, persisted commits and close) moves what recovery starts from.
TEST_F(SteppedLogTest, OnlyTheCheckpointStepMovesTheCheckpoint) {
  auto log = open_ok("/log", stepped_options(&env_));
  ASSERT_TRUE(log);
  const std::uint64_t checkpoints_at_open = log->stats().checkpoints_written;
  append_entries(*log, 1, 50, 1);
  ASSERT_TRUE(log->run_flush_cycle().ok());
  ASSERT_TRUE(log->set_commit_index(40).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // 4 checkpoint intervals
  ASSERT_TRUE(log->run_flush_cycle().ok());
  EXPECT_EQ(log->stats().checkpoints_written, checkpoints_at_open);

  log = lose_power_and_reopen(env_, std::move(log));
  ASSERT_TRUE(log);
  EXPECT_EQ(log->recovery_report().checkpoint_flushed_index, 0U);
  EXPECT_EQ(log->last_index(), 50U);   // flushed, found by the scan from the old checkpoint
  EXPECT_EQ(log->commit_index(), 0U);  // never checkpointed

  append_entries(*log, 51, 20, 1);
  ASSERT_TRUE(log->run_flush_cycle().ok());
  ASSERT_TRUE(log->set_commit_index(60).ok());
  ASSERT_TRUE(log->run_checkpoint().ok());
  const std::uint64_t after_step = log->stats().checkpoints_written;
  ASSERT_TRUE(log->run_checkpoint().ok());  // nothing moved: nothing written
  EXPECT_EQ(log->stats().checkpoints_written, after_step);
  log = lose_power_and_reopen(env_, std::move(log));
  ASSERT_TRUE(log);
  EXPECT_EQ(log->recovery_report().checkpoint_flushed_index, 70U);
  EXPECT_EQ(log->commit_index(), 60U);
}

// drills4 M4: a prefix truncation whose segments all end below the last checkpoint neither
// flushes nor checkpoints (the flush cycle and the checkpoint before the first unlink held a
// replica's loop up to 0.78 s); one that reaches past it still does both first.
TEST_F(SteppedLogTest, APrefixTruncationBelowTheCheckpointNeitherFlushesNorCheckpoints) {
  auto log = open_ok("/log", stepped_options(&env_));
  ASSERT_TRUE(log);
  append_entries(*log, 1, 300, 1);
  ASSERT_TRUE(log->run_flush_cycle().ok());
  ASSERT_TRUE(log->run_checkpoint().ok());  // the flusher's periodic one: at 300
  append_entries(*log, 301, 10, 1);         // written, not flushed
  const std::uint64_t flushes = log->stats().flushes;
  const std::uint64_t checkpoints = log->stats().checkpoints_written;
  ASSERT_TRUE(log->truncate_prefix(150).ok());
  const std::uint64_t first = log->first_index();
  EXPECT_GT(first, 1U);
  EXPECT_EQ(log->stats().flushes, flushes) << "flushed for a truncation below the checkpoint";
  EXPECT_EQ(log->stats().checkpoints_written, checkpoints);
  EXPECT_EQ(log->flushed_index(), 300U);
  log = lose_power_and_reopen(env_, std::move(log));
  ASSERT_TRUE(log);
  EXPECT_EQ(log->first_index(), first);
  EXPECT_EQ(log->last_index(), 300U) << "the unflushed entries were flushed by the truncation";
  expect_entries(*log, first, 300, 1, kPayloadBytes);

  // Past the checkpoint (at 300): flushed and checkpointed first, as before.
  append_entries(*log, 301, 100, 1);
  ASSERT_TRUE(log->run_flush_cycle().ok());
  append_entries(*log, 401, 5, 1);
  ASSERT_TRUE(log->truncate_prefix(380).ok());
  EXPECT_GT(log->first_index(), first);
  EXPECT_EQ(log->flushed_index(), 405U);
  log = lose_power_and_reopen(env_, std::move(log));
  ASSERT_TRUE(log);
  EXPECT_EQ(log->last_index(), 405U);
  auto report = verify_log_directory("/log", &env_);
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok) << report->bad_file << " @" << report->bad_offset << ": "
                          << report->problem;
}

// Review offloop L6: a checkpoint that vouches for a truncation's point (its flushed index past the
// deleted segments, its commit index at or past before_index - 1) is enough though the commit index
// moved since (under load it moves every round, and the truncation then flushed and checkpointed
// on its caller's thread, the replica's loop, in every first deletion round). One asked of the
// flusher (request_checkpoint) is written by the owner's next flush step, and
// prefix_checkpointed() says when the last one covers a truncation.
TEST_F(SteppedLogTest, ACheckpointAskedOfTheFlusherCoversALaterPrefixTruncation) {
  auto log = open_ok("/log", stepped_options(&env_));
  ASSERT_TRUE(log);
  append_entries(*log, 1, 300, 1);
  ASSERT_TRUE(log->set_commit_index(200).ok());
  ASSERT_TRUE(log->run_flush_cycle().ok());
  ASSERT_TRUE(log->run_checkpoint().ok());       // flushed 300, commit 200
  ASSERT_TRUE(log->set_commit_index(290).ok());  // moved on since
  append_entries(*log, 301, 10, 1);
  const std::uint64_t checkpoints = log->stats().checkpoints_written;
  const std::uint64_t flushes = log->stats().flushes;
  EXPECT_TRUE(log->prefix_checkpointed(150));
  ASSERT_TRUE(log->truncate_prefix(150).ok());
  const std::uint64_t first = log->first_index();
  EXPECT_GT(first, 1U);
  EXPECT_EQ(log->stats().checkpoints_written, checkpoints)
      << "checkpointed again for a commit index past the truncation's point";
  EXPECT_EQ(log->stats().flushes, flushes);

  // Past the checkpoint's commit index (200): not covered until the flusher's step writes the
  // checkpoint asked of it; the truncation after it neither flushes nor checkpoints.
  EXPECT_FALSE(log->prefix_checkpointed(250));
  log->request_checkpoint();
  EXPECT_FALSE(log->prefix_checkpointed(250)) << "a stepped log checkpoints in its owner's step";
  EXPECT_EQ(log->stats().checkpoints_written, checkpoints);
  ASSERT_TRUE(log->run_flush_cycle().ok());
  EXPECT_EQ(log->stats().checkpoints_written, checkpoints + 1);
  EXPECT_TRUE(log->prefix_checkpointed(250));
  ASSERT_TRUE(log->run_flush_cycle().ok());  // asked once: no checkpoint in the next cycle
  EXPECT_EQ(log->stats().checkpoints_written, checkpoints + 1);
  ASSERT_TRUE(log->set_commit_index(300).ok());
  append_entries(*log, 311, 10, 1);
  EXPECT_TRUE(log->prefix_checkpointed(250)) << "its point is what counts, not the newest index";
  const std::uint64_t flushes_after = log->stats().flushes;
  ASSERT_TRUE(log->truncate_prefix(250).ok());
  const std::uint64_t second = log->first_index();
  EXPECT_GT(second, first);
  EXPECT_EQ(log->stats().checkpoints_written, checkpoints + 1);
  EXPECT_EQ(log->stats().flushes, flushes_after);
  // What the checkpoint vouches for comes back: the log from `second`, the commit index at or
  // past the point (a cut trim is finished up to it).
  log = lose_power_and_reopen(env_, std::move(log));
  ASSERT_TRUE(log);
  EXPECT_EQ(log->first_index(), second);
  EXPECT_GE(log->commit_index(), 249U);
  EXPECT_GE(log->last_index(), 310U);
  expect_entries(*log, second, 310, 1, kPayloadBytes);
}

TEST_F(SteppedLogTest, RollsAndTruncationsAcrossSegmentsWithoutThreads) {
  auto log = open_ok("/log", stepped_options(&env_));
  ASSERT_TRUE(log);
  append_entries(*log, 1, 300, 1);
  ASSERT_TRUE(log->run_flush_cycle().ok());
  const std::size_t segments = log->segments().size();
  ASSERT_GE(segments, 5U);
  expect_entries(*log, 1, 300, 1, kPayloadBytes);

  // A suffix cut inside the second segment removes every later one.
  ASSERT_TRUE(log->truncate_suffix(80).ok());
  EXPECT_EQ(log->last_index(), 79U);
  EXPECT_EQ(log->flushed_index(), 79U);
  EXPECT_EQ(log->segments().size(), 2U);
  append_entries(*log, 80, 150, 2);  // rolls again, inline
  ASSERT_TRUE(log->run_flush_cycle().ok());
  EXPECT_EQ(log->flushed_index(), 229U);

  ASSERT_TRUE(log->truncate_prefix(150).ok());
  const std::uint64_t first = log->first_index();
  EXPECT_GT(first, 1U);
  EXPECT_LE(first, 150U);
  append_entries(*log, 230, 10, 2);  // unflushed: lost below
  log = lose_power_and_reopen(env_, std::move(log));
  ASSERT_TRUE(log);
  EXPECT_EQ(log->first_index(), first);
  EXPECT_EQ(log->last_index(), 229U);
  if (first < 80) expect_entries(*log, first, 79, 1, kPayloadBytes);
  expect_entries(*log, std::max<std::uint64_t>(first, 80), 229, 2, kPayloadBytes);
  auto report = verify_log_directory("/log", &env_);
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok) << report->bad_file << " @" << report->bad_offset << ": "
                          << report->problem;
}

TEST_F(SteppedLogTest, AFailedSyncInAStepFailsTheLog) {
  auto log = open_ok("/log", stepped_options(&env_));
  ASSERT_TRUE(log);
  append_entries(*log, 1, 5, 1);
  env_.fail_next_syncs(1);
  EXPECT_EQ(log->run_flush_cycle().code(), StatusCode::kIo);
  EXPECT_EQ(log->flushed_index(), 0U);
  EXPECT_EQ(log->run_flush_cycle().code(), StatusCode::kIo)
      << "a later sync must not vouch for the lost one";
  EXPECT_EQ(log->run_checkpoint().code(), StatusCode::kIo);
  const auto next = make_batch(6, 1, 1, 100);
  EXPECT_EQ(log->append_no_wait(next.span()).status().code(), StatusCode::kIo);
}

// What one run of a fixed workload shows: every listener call, the flushed index after every step,
// and at the end the bytes of every file (after a power loss in the middle and a reopen).
std::vector<std::string> run_workload(MemoryEnv& env) {
  std::vector<std::string> trace;
  auto log = open_ok("/log", stepped_options(&env));
  if (!log) return {"open failed"};
  log->set_flush_listener(
      [&](std::uint64_t flushed) { trace.push_back("listener " + std::to_string(flushed)); });
  const auto step = [&](const char* what, const Status& status) {
    trace.push_back(std::string(what) + " " + status.to_string() + " flushed " +
                    std::to_string(log->flushed_index()) + " last " +
                    std::to_string(log->last_index()));
  };
  std::uint64_t next = 1;
  for (int round = 0; round < 12; ++round) {
    const std::size_t count = 7 + round * 5;  // crosses segment boundaries at different offsets
    for (std::size_t i = 0; i < count; ++i, ++next) {
      const auto batch = make_batch(next, 1, 1 + round / 4, 200 + (next * 37) % 2000);
      step("append", log->append_no_wait(batch.span()).status());
    }
    if (round % 3 != 2) step("flush", log->run_flush_cycle());
    if (round % 4 == 3) step("checkpoint", log->run_checkpoint());
    if (round == 5) {
      step("truncate_suffix", log->truncate_suffix(next - 20));
      next -= 20;
    }
    if (round == 8) step("truncate_prefix", log->truncate_prefix(next / 2));
    if (round == 9) step("commit", log->set_commit_index(log->flushed_index()));
  }
  env.crash();
  log.reset();
  env.restart(CrashOptions{CrashMode::kTornWrite, 7});
  log = open_ok("/log", stepped_options(&env));
  if (!log) return {"reopen failed"};
  const RecoveryReport& report = log->recovery_report();  // its duration is wall time: left out
  trace.push_back("recovered " + std::string(to_string(report.mode)) + " checkpoint " +
                  std::to_string(report.checkpoint_flushed_index) + " scanned " +
                  std::to_string(report.entries_scanned) + " zeroed " +
                  std::to_string(report.bytes_truncated) + " first " +
                  std::to_string(log->first_index()) + " last " +
                  std::to_string(log->last_index()));
  EXPECT_TRUE(log->close().ok());
  auto names = env.list_dir("/log");
  if (!names.ok()) return {"list failed"};
  std::sort(names->begin(), names->end());
  for (const std::string& name : *names) {
    auto content = env.content("/log/" + name);
    trace.push_back(
        name + " " +
        (content.ok() ? std::to_string(std::hash<std::string>{}(*content)) : "unreadable"));
  }
  return trace;
}

TEST(SteppedLogDeterminism, TheSameCallsGiveTheSameFlushesListenerCallsAndFiles) {
  MemoryEnv first_env;
  MemoryEnv second_env;
  ASSERT_TRUE(first_env.create_dir("/log").ok());
  ASSERT_TRUE(second_env.create_dir("/log").ok());
  const std::vector<std::string> first = run_workload(first_env);
  std::this_thread::sleep_for(std::chrono::milliseconds(15));  // other timings: must not matter
  const std::vector<std::string> second = run_workload(second_env);
  EXPECT_EQ(first, second);
  std::size_t listener_calls = 0;
  for (const std::string& line : first) listener_calls += line.rfind("listener ", 0) == 0 ? 1 : 0;
  EXPECT_GE(listener_calls, 8U) << "the workload must exercise the listener";
  EXPECT_GE(first.size(), 300U);
}

}  // namespace
}  // namespace raftlog::store

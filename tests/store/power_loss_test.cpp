// Power-loss tests: a random workload (appends in both flush modes, with indexes given or assigned by
// the log, suffix and prefix truncations, commit-index updates, explicit flushes; with the log's
// threads, or stepped: no thread, flush and checkpoint steps taken by the workload) runs over
// MemoryEnv and is cut by a simulated power loss at a random moment -- between operations or inside
// one (after a random number of sync calls).
// The restart loses, tears, partially keeps or bit-flips the unflushed bytes. After recovery:
//   * every entry acknowledged as flushed is present and intact (unless a truncation removed it),
//   * every entry present matches what was written at that index (nothing torn, nothing stale),
//   * entries are contiguous (nothing after a gap is exposed), terms never decrease,
//   * the index (read/term_at), the offline verifier and the checkpoint agree with the data.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <random>
#include <string>

#include "test_util.h"

namespace raftlog::store {
namespace {

using testing::payload_for;

struct ModelEntry {
  std::uint64_t term = 0;
  std::size_t size = 0;
};

struct Model {
  std::map<std::uint64_t, ModelEntry> entries;  // what was written at each index (maybe unflushed)
  std::uint64_t next_term = 1;
};

void check_recovered(const CommitLog& log, const Model& model, std::uint64_t durable_index,
                     std::uint64_t pending_truncation, MemoryEnv& env, const std::string& where) {
  const std::uint64_t first = log.first_index();
  const std::uint64_t last = log.last_index();
  std::uint64_t must_have = durable_index;
  if (pending_truncation != 0) must_have = std::min(must_have, pending_truncation - 1);
  ASSERT_GE(last, must_have) << where << ": acknowledged-flushed entries lost";
  if (!model.entries.empty()) {
    ASSERT_LE(last, model.entries.rbegin()->first) << where << ": entries beyond anything written";
  }
  EXPECT_EQ(log.flushed_index(), last) << where;
  std::uint64_t previous_term = 0;
  for (std::uint64_t index = first; index <= last;) {
    auto batch = log.read(index, 256, 1 << 20);
    ASSERT_TRUE(batch.ok()) << where << ": " << batch.status().to_string();
    for (const EntryView& entry : batch->entries) {
      ASSERT_EQ(entry.meta.index, index) << where;
      auto it = model.entries.find(index);
      ASSERT_NE(it, model.entries.end()) << where << ": index " << index << " was never written";
      ASSERT_EQ(entry.meta.term, it->second.term) << where << ": stale entry at " << index;
      ASSERT_EQ(entry.payload, payload_for(index, it->second.term, it->second.size))
          << where << ": damaged payload at " << index;
      ASSERT_GE(entry.meta.term, previous_term) << where;
      auto term = log.term_at(index);
      ASSERT_TRUE(term.ok());
      ASSERT_EQ(*term, entry.meta.term);
      previous_term = entry.meta.term;
      ++index;
    }
  }
  auto report = verify_log_directory("/log", &env);
  ASSERT_TRUE(report.ok()) << where;
  ASSERT_TRUE(report->ok) << where << ": " << report->bad_file << " @" << report->bad_offset << " "
                          << report->problem;
  if (last >= first) {
    EXPECT_EQ(report->first_index, first) << where;
    EXPECT_EQ(report->last_index, last) << where;
  }
  EXPECT_EQ(report->checkpoint_flushed_index, last) << where;  // recovery checkpoints what it kept
  EXPECT_EQ(log.recovery_report().last_index, last) << where;
}

// A seed's log options: flush mode, intervals, preallocation and the unstaged write path, drawn
// from `rng` (in this order, so a seed names the same run).
Options seeded_options(std::mt19937_64& rng, MemoryEnv* env, BackgroundWork work) {
  Options options =
      testing::small_options(env, rng() % 2 == 0 ? FlushMode::kSync : FlushMode::kAsync);
  options.background_work = work;
  options.max_entry_size_bytes = 4096;
  options.flush_interval_ms = 1 + static_cast<std::uint32_t>(rng() % 5);
  options.flush_dirty_bytes = 4096 + rng() % 65536;
  options.checkpoint_interval_ms = 1 + static_cast<std::uint32_t>(rng() % 20);
  options.preallocate_next_segment = rng() % 4 != 0;
  // Half the seeds write most entries unstaged (payload, padding, then header), so torn and lost
  // writes of that path are recovered too.
  if (rng() % 2 == 0)
    options.direct_write_min_payload_bytes = static_cast<std::uint32_t>(rng() % 512);
  return options;
}

// What the operations of one round of run_seed work on. An operation that fails must have met the
// crash (env.crashed()), which ends the round's operations.
struct SeedRound {
  std::mt19937_64& rng;
  MemoryEnv& env;
  CommitLog& log;
  Model& model;
  bool stepped = false;
  std::string where;
  std::uint64_t pending_truncation = 0;  // a truncate_suffix the crash interrupted
};

void append_random_batch(SeedRound& r) {
  if (r.rng() % 10 == 0) ++r.model.next_term;
  const std::size_t count = 1 + r.rng() % 8;
  const std::uint64_t first = r.log.last_index() + 1;
  testing::Batch batch;
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t size = r.rng() % 3000;
    batch.payloads.push_back(payload_for(first + i, r.model.next_term, size));
    r.model.entries[first + i] = {r.model.next_term, size};  // maybe written even if it fails
  }
  // Half the batches leave the index to the log (index 0): in sync mode they go through the
  // append group, whose leader tells the caller its range from inside the append.
  const bool log_assigns_index = r.rng() % 2 == 0;
  for (std::size_t i = 0; i < count; ++i) {
    EntryToAppend entry;
    entry.meta.index = log_assigns_index ? 0 : first + i;
    entry.meta.term = r.model.next_term;
    entry.payload = batch.payloads[i];
    batch.entries.push_back(entry);
  }
  auto result = r.stepped ? r.log.append_no_wait(batch.span()) : r.log.append(batch.span());
  if (!result.ok()) {
    ASSERT_TRUE(r.env.crashed()) << r.where << ": " << result.status().to_string();
    return;
  }
  ASSERT_EQ(result->first, first) << r.where;  // one appending thread: the next index
  ASSERT_EQ(result->last, first + count - 1) << r.where;
}

void truncate_random_suffix(SeedRound& r) {
  const std::uint64_t low = std::max(r.log.first_index(), r.log.commit_index() + 1);
  const std::uint64_t high = r.log.last_index() + 1;
  if (low > high) return;
  const std::uint64_t from = low + r.rng() % (high - low + 1);
  const Status status = r.log.truncate_suffix(from);
  if (!status.ok()) {
    ASSERT_TRUE(r.env.crashed()) << r.where << ": " << status.to_string();
    r.pending_truncation = from;
    return;
  }
  r.model.entries.erase(r.model.entries.lower_bound(from), r.model.entries.end());
  ++r.model.next_term;  // a new leader's entries follow a truncation
}

void random_flush_step(SeedRound& r) {
  const int step = r.stepped ? static_cast<int>(r.rng() % 3) : 0;
  const Status status = step == 0   ? r.log.flush()
                        : step == 1 ? r.log.run_flush_cycle()
                                    : r.log.run_checkpoint();
  if (!status.ok()) {
    ASSERT_TRUE(r.env.crashed()) << r.where << ": " << status.to_string();
  }
}

void raise_commit_at_random(SeedRound& r) {
  const std::uint64_t flushed = r.log.flushed_index();
  const std::uint64_t commit = r.log.commit_index();
  if (flushed > commit) (void)r.log.set_commit_index(commit + r.rng() % (flushed - commit + 1));
}

void truncate_random_prefix(SeedRound& r) {
  const std::uint64_t last = r.log.last_index();
  if (last == 0) return;
  const Status status = r.log.truncate_prefix(1 + r.rng() % last);
  if (!status.ok()) {
    ASSERT_TRUE(r.env.crashed()) << r.where << ": " << status.to_string();
  }
}

// One operation, picked by weight: appends 70 %, suffix truncations 10 %, flush steps 8 %, commit
// updates 7 %, prefix truncations 5 %.
void random_operation(SeedRound& r) {
  const int choice = static_cast<int>(r.rng() % 100);
  if (choice < 70) {
    append_random_batch(r);
  } else if (choice < 80) {
    truncate_random_suffix(r);
  } else if (choice < 88) {
    random_flush_step(r);
  } else if (choice < 95) {
    raise_commit_at_random(r);
  } else {
    truncate_random_prefix(r);
  }
}

// `work`: with kStepped no thread flushes; the workload's own flush steps (run_flush_cycle(),
// flush(), run_checkpoint()) are the only ones, and appends never wait (append_no_wait()).
void run_seed(std::uint64_t seed, BackgroundWork work = BackgroundWork::kThreads) {
  std::mt19937_64 rng(seed);
  MemoryEnv env;
  ASSERT_TRUE(env.create_dir("/log").ok());
  const Options options = seeded_options(rng, &env, work);
  Model model;
  auto log = testing::open_ok("/log", options);
  ASSERT_TRUE(log);

  for (int round = 0; round < 3; ++round) {
    const std::string where = "seed " + std::to_string(seed) + " round " + std::to_string(round) +
                              " mode " + to_string(options.flush_mode) + " " + to_string(work);
    const bool crash_inside = rng() % 2 == 0;
    if (crash_inside) env.crash_after_syncs(rng() % 60);
    SeedRound r{rng, env, *log, model, work == BackgroundWork::kStepped, where};
    const int operations = 10 + static_cast<int>(rng() % 50);
    for (int op = 0; op < operations && !env.crashed(); ++op) {
      ASSERT_NO_FATAL_FAILURE(random_operation(r));
    }
    env.crash();
    const std::uint64_t durable = log->flushed_index();
    log.reset();
    const auto mode = static_cast<CrashMode>(rng() % 5);
    env.restart({mode, rng()});
    auto reopened = CommitLog::open("/log", options);
    ASSERT_TRUE(reopened.ok()) << where << " crash " << to_string(mode) << ": "
                               << reopened.status().to_string();
    log = std::move(*reopened);
    check_recovered(*log, model, durable, r.pending_truncation, env,
                    where + " crash " + to_string(mode));
    if (::testing::Test::HasFatalFailure()) return;
    // Forget what did not survive; the next round continues from the recovered log.
    model.entries.erase(model.entries.upper_bound(log->last_index()), model.entries.end());
    model.entries.erase(model.entries.begin(), model.entries.lower_bound(log->first_index()));
    ++model.next_term;
  }
  ASSERT_TRUE(log->close().ok());
  auto clean = testing::open_ok("/log", options);
  ASSERT_TRUE(clean);
  EXPECT_EQ(clean->recovery_report().mode, RecoveryMode::kNormal);
}

std::uint64_t env_or(const char* name, std::uint64_t fallback) {
  const char* value = std::getenv(name);
  return value == nullptr ? fallback : std::strtoull(value, nullptr, 10);
}

// Runs the seeds of RAFTLOG_POWER_LOSS_SEED_START/_SEEDS, bounded in time as well as in count
// (RAFTLOG_POWER_LOSS_SECONDS), so the suite stays fast on slow machines.
void run_seeds(BackgroundWork work) {
  const auto started = std::chrono::steady_clock::now();
  const std::uint64_t first_seed = env_or("RAFTLOG_POWER_LOSS_SEED_START", 1);
  const std::uint64_t seed_count = env_or("RAFTLOG_POWER_LOSS_SEEDS", 300);
  const auto time_limit = std::chrono::seconds(env_or("RAFTLOG_POWER_LOSS_SECONDS", 15));
  std::uint64_t seeds = 0;
  for (std::uint64_t seed = first_seed; seed < first_seed + seed_count; ++seed) {
    run_seed(seed, work);
    ++seeds;
    if (::testing::Test::HasFatalFailure()) {
      ADD_FAILURE() << "failing seed: " << seed << " (" << to_string(work) << ")";
      return;
    }
    if (std::chrono::steady_clock::now() - started > time_limit) break;
  }
  std::printf("power-loss seeds run (%s): %llu\n", to_string(work),
              static_cast<unsigned long long>(seeds));
  EXPECT_GE(seeds, std::min<std::uint64_t>(seed_count, 50));
}

// Longer hunts: RAFTLOG_POWER_LOSS_SEEDS=20000 RAFTLOG_POWER_LOSS_SEED_START=1000
// RAFTLOG_POWER_LOSS_SECONDS=600 ./store_recovery_test --gtest_filter=PowerLoss.*
TEST(PowerLoss, RandomWorkloadsOverManySeeds) { run_seeds(BackgroundWork::kThreads); }

// The same workloads with no thread in the log: only the workload's steps make anything durable.
TEST(PowerLoss, SteppedRandomWorkloadsOverManySeeds) { run_seeds(BackgroundWork::kStepped); }

}  // namespace
}  // namespace raftlog::store

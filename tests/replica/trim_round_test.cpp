// A trim of many topics' segments must not hold the replica's loop for all of its durable steps at
// once (outside test finding F4: a trim of 4 one-MiB segments with 20,000 topics held the loop past
// the election timeout). Prints each round's milliseconds on this machine's disk (the figures in
// docs/benchmarks.md, "Trim round"); asserts only the behaviour: with trim_round_budget_ms = 0 no
// round writes more than one of TOPICSTATE, CONFSTATE and the deletion (SNAPSHOT.next, the
// segments' unlinks, SNAPSHOT), and the trim still reaches its target.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "node/temp_dir.h"
#include "replica/hooked_env.h"
#include "replica/replica.h"
#include "single_node_leader.h"
#include "stepped_follower_config.h"
#include "trim_to_end.h"
#include "store/env.h"
#include "store/memory_env.h"
#include "worker_executor.h"

namespace raftlog::replica {
namespace {

// The POSIX Env, noting which kinds of file each call wrote, renamed or removed.
class NotingEnv final : public store::Env {
 public:
  std::set<std::string> take_kinds() {
    std::lock_guard lock(mu_);
    return std::exchange(kinds_, {});
  }
  store::Status create_dir(const std::string& path) override { return base_->create_dir(path); }
  store::Result<std::vector<std::string>> list_dir(const std::string& dir) const override {
    return base_->list_dir(dir);
  }
  bool exists(const std::string& path) const override { return base_->exists(path); }
  store::Result<std::unique_ptr<store::File>> open(const std::string& path, bool create) override {
    if (create) note(path);
    return base_->open(path, create);
  }
  store::Result<std::unique_ptr<store::File>> open_read_only(const std::string& path) override {
    return base_->open_read_only(path);
  }
  store::Status rename(const std::string& from, const std::string& to) override {
    note(to);
    return base_->rename(from, to);
  }
  store::Status remove(const std::string& path) override {
    note(path);
    return base_->remove(path);
  }
  store::Status remove_dir(const std::string& path) override { return base_->remove_dir(path); }
  store::Status sync_dir(const std::string& dir) override { return base_->sync_dir(dir); }
  store::Result<std::string> read_file(const std::string& path,
                                       std::size_t max_bytes) const override {
    return base_->read_file(path, max_bytes);
  }
  store::Status write_file(const std::string& path, std::string_view content) override {
    note(path);
    return base_->write_file(path, content);
  }
  store::Result<std::chrono::system_clock::time_point> modified_at(
      const std::string& path) const override {
    return base_->modified_at(path);
  }

 private:
  void note(const std::string& path) {
    std::string kind;
    if (path.find("TOPICSTATE") != std::string::npos) {
      kind = "TOPICSTATE";
    } else if (path.find("CONFSTATE") != std::string::npos) {
      kind = "CONFSTATE";
    } else if (path.find("SNAPSHOT") != std::string::npos ||
               path.find("/log/") != std::string::npos) {
      kind = "deletion";  // SNAPSHOT.next, SNAPSHOT, or a segment's files
    } else {
      return;
    }
    std::lock_guard lock(mu_);
    kinds_.insert(kind);
  }

  store::Env* base_ = store::Env::posix();
  std::mutex mu_;
  std::set<std::string> kinds_;
};

constexpr int kTopics = 20000;
constexpr std::size_t kBodyBytes = 128;

class TrimRoundTest : public ::testing::Test {
 protected:
  void open(std::uint32_t budget_ms) {
    ReplicaConfig c = testing::single_node_leader_config(dir_.path(), &env_, 1ULL << 20, 64 << 10);
    c.topic_state_save_entries = 1ULL << 30;  // only the trim saves TOPICSTATE
    c.trim_round_budget_ms = budget_ms;
    ReplicaDeps deps;
    deps.sender = &sender_;
    deps.disk = &disk_;
    ASSERT_NO_FATAL_FAILURE(
        testing::open_single_node_leader(std::move(c), std::move(deps), &replica_));
  }
  // Then flushed, as the store's flusher does within milliseconds (a trim waits for it).
  void append_topics() {
    testing::append_topics(*replica_, kTopics, kBodyBytes, Clock::now() + std::chrono::hours(1));
    ASSERT_TRUE(replica_->log().flush().ok());
    ASSERT_NO_FATAL_FAILURE(testing::checkpoint_by_the_flusher(*replica_, sealed_end()));
  }
  std::uint64_t sealed_end() { return testing::sealed_end(*replica_); }
  // Runs the trim round by round (the first round is the request, the next ones the loop's
  // continuation); returns the number of rounds and prints each one's milliseconds and writes.
  int trim_in_rounds(std::uint64_t before, const char* label) {
    (void)env_.take_kinds();
    int rounds = 0;
    double total_ms = 0;
    for (; rounds < 200 && replica_->log().first_index() < before; ++rounds) {
      const auto started = std::chrono::steady_clock::now();
      if (rounds == 0) {
        EXPECT_TRUE(replica_->trim(before, "test:").error.ok());
      } else {
        replica_->apply_retention(Clock::now());
        replica_->process();
      }
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
              .count();
      total_ms += ms;
      const std::set<std::string> kinds = env_.take_kinds();
      std::string names;
      for (const std::string& kind : kinds) names += " " + kind;
      std::printf("%s round %d: %.1f ms, wrote:%s\n", label, rounds, ms, names.c_str());
      kinds_per_round_.push_back(kinds);
    }
    std::printf("%s: %d round(s), %.1f ms in all\n", label, rounds, total_ms);
    return rounds;
  }

  server::testing::TempDir dir_;
  NotingEnv env_;
  testing::NullSender sender_;
  testing::RoomyDisk disk_;
  std::unique_ptr<Replica> replica_;
  std::vector<std::set<std::string>> kinds_per_round_;
};

TEST_F(TrimRoundTest, WithNoBudgetEachRoundWritesAtMostOneDurableStep) {
  open(0);
  append_topics();
  const std::uint64_t before = sealed_end();
  ASSERT_GT(before, 1U);
  ASSERT_GE(replica_->log().disk_usage().segments, 4U);
  const int rounds = trim_in_rounds(before, "budget 0 ms");
  EXPECT_EQ(replica_->log().first_index(), before) << "the trim did not finish in " << rounds;
  bool saw_topic_state = false;
  bool saw_deletion = false;
  for (std::size_t round = 0; round < kinds_per_round_.size(); ++round) {
    EXPECT_LE(kinds_per_round_[round].size(), 1U) << "round " << round;
    saw_topic_state |= kinds_per_round_[round].count("TOPICSTATE") != 0;
    saw_deletion |= kinds_per_round_[round].count("deletion") != 0;
  }
  EXPECT_TRUE(saw_topic_state);
  EXPECT_TRUE(saw_deletion);
  // The topic table as of the new first index - 1 went with it: the offsets of the deleted
  // topics are still known after a restart (TOPICSTATE and SNAPSHOT agree with the log).
  replica_.reset();
  open(0);
  EXPECT_EQ(replica_->log().first_index(), before);
}

// A budget no step reaches: the whole trim in the request's own round, as before the bound (the
// figure of the round the outside test saw).
TEST_F(TrimRoundTest, WithARoomyBudgetTheTrimRunsInOneRound) {
  open(600000);
  append_topics();
  const std::uint64_t before = sealed_end();
  ASSERT_GE(replica_->log().disk_usage().segments, 4U);
  EXPECT_EQ(trim_in_rounds(before, "budget unbounded"), 1);
  EXPECT_EQ(replica_->log().first_index(), before);
}

// drills4 M4: the log's flush before a trim (0.33-0.56 s with 9 MB unflushed in async mode) ran
// on the loop. The trim now asks the store's flusher and waits for it, round by round: the round
// of the request flushes nothing, and once the flusher ran (here the test's flush step: a
// stepped store) the trim goes on to its point.
TEST(TrimFlushTest, TheTrimLeavesTheLogsFlushToTheStoresFlusher) {
  store::MemoryEnv env;
  ReplicaConfig c = testing::single_node_leader_config(
      "/data", &env, store::Options::kMinSegmentSizeBytes, 16 << 10);
  c.store.background_work = store::BackgroundWork::kStepped;
  c.topic_state_save_entries = 1ULL << 30;  // only the trim saves TOPICSTATE
  testing::NullSender sender;
  testing::RoomyDisk disk;
  ReplicaDeps deps = testing::stepped_follower_deps(&sender, &disk);
  std::unique_ptr<Replica> replica;
  ASSERT_NO_FATAL_FAILURE(
      testing::open_single_node_leader(std::move(c), std::move(deps), &replica));
  for (int i = 0; i < 6; ++i) {
    ASSERT_NO_FATAL_FAILURE(
        testing::append_and_wait(*replica, std::vector<std::string>(7, std::string(8 << 10, 'x')),
                                 false, Clock::time_point() + std::chrono::hours(2)));
  }
  const std::uint64_t before = testing::sealed_end(*replica);
  ASSERT_GT(before, 8U);
  const std::uint64_t flushed = replica->log().flushed_index();
  ASSERT_LT(flushed + 1, before) << "the entries to trim are flushed already";
  ASSERT_TRUE(replica->trim(before, "test:").error.ok());
  EXPECT_EQ(replica->log().flushed_index(), flushed) << "the trim flushed the log on its loop";
  EXPECT_EQ(replica->log().first_index(), 1U);
  ASSERT_TRUE(replica->log().run_flush_cycle().ok());  // the flusher's step
  for (int round = 0; round < 20 && replica->log().first_index() < before; ++round) {
    replica->apply_retention(Clock::time_point() + std::chrono::hours(1));
    replica->process();
    // The flusher's next steps: the truncation's checkpoint is the flusher's too (review offloop
    // L6: TrimCheckpointTest).
    ASSERT_TRUE(replica->log().run_flush_cycle().ok());
  }
  EXPECT_EQ(replica->log().first_index(), before);
}

// Review offloop L6: a trim's first prefix truncation past the store's last checkpoint ran the
// store's flush cycle and checkpoint (CHECKPOINT and every segment's index file synced: 369-572 ms
// with 90,000 topics, the longest trim round left) on the loop. The trim now asks the store's
// flusher for that checkpoint and truncates in a later round, once it is durable: no CHECKPOINT or
// index-file sync runs on the loop's thread in any of the trim's rounds, the flusher's thread
// writes the checkpoint (slowed here by 30 ms a sync, which no round waits for) and the trim
// still reaches its point. The periodic checkpoint is an hour away, so only an asked one comes.
TEST(TrimCheckpointTest, TheTruncationsCheckpointIsTheFlushersNotTheLoops) {
  store::MemoryEnv memory;
  testing::HookedEnv env(&memory);
  const std::thread::id loop = std::this_thread::get_id();
  std::atomic<bool> in_round{false};
  std::atomic<int> loop_syncs{0};
  std::atomic<int> flusher_checkpoints{0};
  env.before = [&](testing::HookedEnv::Op op, const std::string& path) {
    if (op != testing::HookedEnv::Op::kSync) return;
    const bool checkpoint = path.ends_with("/CHECKPOINT");
    if (!checkpoint && !path.ends_with(".idx")) return;
    if (std::this_thread::get_id() == loop) {
      if (in_round.load()) ++loop_syncs;
    } else if (checkpoint) {
      ++flusher_checkpoints;
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
    }
  };
  ReplicaConfig c = testing::single_node_leader_config(
      "/data", &env, store::Options::kMinSegmentSizeBytes, 16 << 10);
  c.store.checkpoint_interval_ms = 3600 * 1000;
  c.topic_state_save_entries = 1ULL << 30;  // only the trim saves TOPICSTATE
  testing::NullSender sender;
  testing::RoomyDisk disk;
  ReplicaDeps deps;
  deps.sender = &sender;
  deps.disk = &disk;
  std::unique_ptr<Replica> replica;
  ASSERT_NO_FATAL_FAILURE(
      testing::open_single_node_leader(std::move(c), std::move(deps), &replica));
  for (int i = 0; i < 6; ++i) {
    ASSERT_NO_FATAL_FAILURE(
        testing::append_and_wait(*replica, std::vector<std::string>(7, std::string(8 << 10, 'x')),
                                 false, Clock::now() + std::chrono::hours(2)));
  }
  ASSERT_TRUE(replica->log().flush().ok());  // as the flusher does within ms: no trim flush
  const std::uint64_t before = testing::sealed_end(*replica);
  ASSERT_GT(before, 8U);
  ASSERT_FALSE(replica->log().prefix_checkpointed(before)) << "nothing to ask the flusher for";
  const int checkpoints_before = flusher_checkpoints.load();
  int rounds = 0;
  for (; rounds < 500 && (rounds == 0 || replica->trim_in_progress()); ++rounds) {
    in_round = true;
    if (rounds == 0) {
      EXPECT_TRUE(replica->trim(before, "test:").error.ok());
    } else {
      replica->apply_retention(Clock::now());
      replica->process();
    }
    in_round = false;
    testing::let_the_flusher_run();
  }
  EXPECT_EQ(replica->log().first_index(), before) << "after " << rounds << " rounds";
  // The new interleaving: the request's round asks, a later one truncates (no replica call persists
  // the commit index on the loop: set_commit_index(.., persist=true) is not used by the replica, so
  // every CHECKPOINT sync counted here is a truncation's).
  EXPECT_GE(rounds, 2) << "the trim did not wait for the flusher's checkpoint";
  EXPECT_EQ(loop_syncs.load(), 0) << "the truncation's checkpoint ran on the loop";
  EXPECT_GT(flusher_checkpoints.load(), checkpoints_before) << "the flusher wrote none";
}

// The deletion step by part with many small segments and many topics (the outside test's case:
// 64 KiB segments, 30,000 topics, a trim that deletes 60-140 segments): each round's milliseconds
// as the replica's round profile sees them (SNAPSHOT.next gathered, encoded, written and synced;
// the prefix truncation; SNAPSHOT renamed), and inside them the file system calls: SNAPSHOT.next's
// write (data + fdatasync), the segments' unlinks, the log directory's sync. Once as the deletion
// was (the whole trim in one round: no budget reached, no segment bound), once as it is (the
// default budget and segment bound), in one run; prints both and their longest rounds' ratio.
// Asserts the behaviour only: bounded, no round unlinks more than the bound, and both finish.
class TrimDeletionBench : public ::testing::Test {
 protected:
  // 30,000, or RAFTLOG_BENCH_TOPICS (e.g. 90000, the outside test's drills5 M2 case) when set
  // within 1..200,000.
  static int deletion_topics() {
    const char* set = std::getenv("RAFTLOG_BENCH_TOPICS");
    const long topics = set != nullptr ? std::strtol(set, nullptr, 10) : 0;
    return topics >= 1 && topics <= 200000 ? static_cast<int>(topics) : 30000;
  }
  struct Calls {
    double snapshot_next_write_ms = 0;  // SNAPSHOT.next.tmp written and fdatasync'd
    double unlink_ms = 0;
    int unlinked_segments = 0;  // .seg files
    double log_dir_sync_ms = 0;
    double data_dir_sync_ms = 0;  // after SNAPSHOT.next's and SNAPSHOT's renames
  };
  void SetUp() override {
    env_.after = [this](testing::HookedEnv::Op op, const std::string& path,
                        std::chrono::nanoseconds took) {
      const double ms = std::chrono::duration<double, std::milli>(took).count();
      std::lock_guard lock(mu_);
      if (op == testing::HookedEnv::Op::kWriteFile &&
          path.find("SNAPSHOT.next") != std::string::npos) {
        calls_.snapshot_next_write_ms += ms;
      } else if (op == testing::HookedEnv::Op::kRemove && testing::is_segment_file(path)) {
        calls_.unlink_ms += ms;
        if (path.ends_with(".seg")) ++calls_.unlinked_segments;
      } else if (op == testing::HookedEnv::Op::kSyncDir) {
        (path.ends_with("/log") ? calls_.log_dir_sync_ms : calls_.data_dir_sync_ms) += ms;
      }
    };
  }
  Calls take_calls() {
    std::lock_guard lock(mu_);
    return std::exchange(calls_, {});
  }
  // `off_loop`: a worker thread takes the writes (TOPICSTATE, SNAPSHOT.next), as in raftlogd;
  // without it the replica writes them on its loop, as before.
  void open(const std::string& dir, std::uint32_t budget_ms, std::size_t segments_per_round,
            bool off_loop) {
    ReplicaConfig c = testing::single_node_leader_config(
        dir, &env_, store::Options::kMinSegmentSizeBytes, 16 << 10);
    c.topic_state_save_entries = 1ULL << 30;  // only the trim saves TOPICSTATE
    c.trim_round_budget_ms = budget_ms;
    c.trim_segments_per_round = segments_per_round;
    ReplicaDeps deps;
    deps.sender = &sender_;
    deps.disk = &disk_;
    if (off_loop) {
      worker_ = std::make_unique<testing::WorkerExecutor>();
      deps.off_loop = worker_.get();
    }
    ASSERT_NO_FATAL_FAILURE(
        testing::open_single_node_leader(std::move(c), std::move(deps), &replica_));
    testing::append_topics(*replica_, deletion_topics(), kBodyBytes,
                           Clock::now() + std::chrono::hours(1));
  }
  // Trims every sealed segment round by round; prints each round by part; the longest round (ms).
  double trim_by_part(const char* label, std::size_t segments_per_round) {
    const std::uint64_t before = testing::sealed_end(*replica_);
    const std::uint64_t segments = replica_->log().disk_usage().segments;
    (void)take_calls();
    double longest = 0;
    double worker_wait_ms = 0;  // the loop idle, waiting for the worker's results
    int rounds = 0;
    for (; rounds < 20000 &&
           (rounds == 0 || replica_->log().first_index() < before ||
            env_.exists(dir_ + "/SNAPSHOT.next") || (worker_ != nullptr && !worker_->idle()));
         ++rounds) {
      {
        // Between rounds, as the node's loop waits for its next input (the worker's result, the
        // store's flusher, the next tick): the truncation's checkpoint is the flusher's too.
        const auto waited = std::chrono::steady_clock::now();
        if (worker_ == nullptr || worker_->run_done(std::chrono::milliseconds(5)) == 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        worker_wait_ms +=
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - waited)
                .count();
      }
      replica_->begin_round();
      if (rounds == 0) {
        if (worker_ == nullptr) {
          // As the trim did before: the log's flush on the loop, in the request's round (now the
          // store's flusher's, asked by the trim, which waits for it).
          RoundProfile::Scope part(replica_->round_profile(), RoundPart::kTrimFlush);
          EXPECT_TRUE(replica_->log().flush().ok());
        }
        EXPECT_TRUE(replica_->trim(before, "bench:").error.ok());
      } else {
        replica_->apply_retention(Clock::now());
        replica_->process();
      }
      const double ms =
          std::chrono::duration<double, std::milli>(replica_->end_round(Clock::duration::zero()))
              .count();
      longest = std::max(longest, ms);
      const Calls calls = take_calls();
      const RoundProfile& profile = replica_->round_profile();
      const auto part_ms = [&](RoundPart part) {
        return std::chrono::duration<double, std::milli>(profile.spent(part)).count();
      };
      std::printf(
          "%s round %d: %.1f ms; trim.flush %.1f, topic_state %.1f, trim.scan %.1f, "
          "trim.snapshot_next %.1f "
          "(its write+fdatasync %.1f), trim.unlink %.1f (%d segment(s): unlinks %.1f, log dir "
          "sync %.1f), trim.snapshot %.1f; data dir syncs %.1f\n",
          label, rounds, ms, part_ms(RoundPart::kTrimFlush), part_ms(RoundPart::kTopicState),
          part_ms(RoundPart::kTrimScan), part_ms(RoundPart::kTrimSnapshotNext),
          calls.snapshot_next_write_ms, part_ms(RoundPart::kTrimUnlink), calls.unlinked_segments,
          calls.unlink_ms, calls.log_dir_sync_ms, part_ms(RoundPart::kTrimSnapshot),
          calls.data_dir_sync_ms);
      if (segments_per_round != 0) {
        EXPECT_LE(static_cast<std::size_t>(calls.unlinked_segments), segments_per_round)
            << label << " round " << rounds;
      }
    }
    EXPECT_EQ(replica_->log().first_index(), before) << label;
    EXPECT_TRUE(replica_->knows_first_index_topics()) << label;
    std::printf(
        "%s: %llu segment(s) deleted in %d round(s), the longest %.1f ms (%.1f ms waiting for the "
        "worker between rounds)\n",
        label, static_cast<unsigned long long>(segments - replica_->log().disk_usage().segments),
        rounds, longest, worker_wait_ms);
    return longest;
  }

  testing::HookedEnv env_;
  std::mutex mu_;
  Calls calls_;
  std::string dir_;
  testing::NullSender sender_;
  testing::RoomyDisk disk_;
  std::unique_ptr<testing::WorkerExecutor> worker_;  // outlives the replica
  std::unique_ptr<Replica> replica_;
};

TEST_F(TrimDeletionBench, ManySmallSegmentsAndManyTopicsByPart) {
  server::testing::TempDir one_round_dir;
  dir_ = one_round_dir.path();
  ASSERT_NO_FATAL_FAILURE(open(dir_, 600000, 0, false));
  const double one_round = trim_by_part("one round (as before)", 0);
  replica_.reset();
  server::testing::TempDir bounded_dir;
  dir_ = bounded_dir.path();
  const std::size_t bound = ReplicaConfig{}.trim_segments_per_round;
  ASSERT_NO_FATAL_FAILURE(open(dir_, ReplicaConfig{}.trim_round_budget_ms, bound, false));
  const double bounded = trim_by_part("bounded, writes on the loop", bound);
  replica_.reset();
  server::testing::TempDir off_loop_dir;
  dir_ = off_loop_dir.path();
  ASSERT_NO_FATAL_FAILURE(open(dir_, ReplicaConfig{}.trim_round_budget_ms, bound, true));
  const double off_loop = trim_by_part("bounded, writes off the loop", bound);
  replica_.reset();
  worker_.reset();
  std::printf(
      "longest trim round: %.1f ms as before, %.1f ms bounded (%.2fx), %.1f ms with TOPICSTATE "
      "and SNAPSHOT.next off the loop (%.2fx of bounded)\n",
      one_round, bounded, bounded > 0 ? one_round / bounded : 0.0, off_loop,
      off_loop > 0 ? bounded / off_loop : 0.0);
}

}  // namespace
}  // namespace raftlog::replica

// A trim's TOPICSTATE and SNAPSHOT.next, and an install's TOPICSTATE, written off the Raft loop
// (src/replica/replica_off_loop_write.cpp; drills4 M4: TOPICSTATE of 99,020 topics written on the
// loop took 0.5-0.6 s, past the election timeout). The loop copies what is to be written, hands it
// to the executor, and goes on with the trim's next step only once the write came back; a power cut
// with a write held leaves a state the next open handles (nothing deleted before SNAPSHOT.next is
// durable), a stop drops a write the worker has not started and waits for one it has, and an
// install takes the write back and finishes a pending deletion before it touches SNAPSHOT.next.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "held_executor.h"
#include "replica/off_loop_write.h"
#include "replica/replica.h"
#include "replica/snapshot_data.h"
#include "replica/topic_state_file.h"
#include "stepped_follower_config.h"
#include "store/memory_env.h"

namespace raftlog::replica {
namespace {

constexpr std::uint64_t kEntries = 32;
constexpr std::uint64_t kSnapshotIndex = 40;  // above the follower's log: the core installs it
constexpr std::uint64_t kSnapshotTerm = 2;

std::string payload(std::uint64_t index) {
  return std::string(15 << 10, static_cast<char>('a' + index % 26));
}

// Leader 1's state as of kSnapshotIndex: client 77's append of ["x", "y"] just below it.
raft::Message snapshot_message() {
  SnapshotData data;
  data.index = kSnapshotIndex;
  data.term = kSnapshotTerm;
  data.conf = raft::ConfState{{1, 2, 3}};
  data.topics = {{"orders", 7}};
  data.dedup_view_start = 1;
  const std::vector<std::string> xy = {"x", "y"};
  data.dedup_clients = {
      {77, 0, {{5, {kSnapshotIndex - 1, kSnapshotIndex, kSnapshotTerm}, append_digest(xy)}}}};
  raft::Message m;
  m.type = raft::MessageType::kSnapshot;
  m.from = 1;
  m.to = 2;
  m.term = kSnapshotTerm;
  m.commit = kSnapshotIndex;
  raft::Snapshot snapshot;
  snapshot.index = kSnapshotIndex;
  snapshot.term = kSnapshotTerm;
  snapshot.conf = data.conf;
  snapshot.data = encode_snapshot_data(data);
  m.snapshot = std::move(snapshot);
  return m;
}

// Review L8: the loop's settle() of a write a real worker thread is running waits for it and
// returns its outcome; one the worker has not started is dropped and never written.
TEST(OffLoopWriteTest, SettleWaitsForARunningWriteAndDropsOneNotStarted) {
  OffLoopWrite running;
  std::mutex mu;
  std::condition_variable cv;
  bool started = false;
  bool release = false;
  bool finished = false;
  std::thread worker([&] {
    running.run([&] {
      std::unique_lock lock(mu);
      started = true;
      cv.notify_all();
      cv.wait(lock, [&] { return release; });
      finished = true;
      return store::Status::io("the disk said no");
    });
  });
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return started; });
  }
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::lock_guard lock(mu);
    release = true;
    cv.notify_all();
  });
  const std::optional<store::Status> outcome = running.settle();
  {
    std::lock_guard lock(mu);
    EXPECT_TRUE(finished) << "settle() returned before the running write ended";
  }
  ASSERT_TRUE(outcome.has_value());
  EXPECT_FALSE(outcome->ok());
  worker.join();
  opener.join();

  OffLoopWrite queued;
  EXPECT_FALSE(queued.settle().has_value()) << "not started: dropped";
  bool written = false;
  queued.run([&] {
    written = true;
    return store::Status();
  });
  EXPECT_FALSE(written) << "a dropped write ran";
}

class TrimOffLoopTest : public ::testing::Test {
 protected:
  void open() {
    ReplicaConfig c = testing::stepped_follower_config(env_.get());
    c.raft.snapshots = true;
    c.topic_state_save_entries = 1ULL << 30;  // only the trim and the install save TOPICSTATE
    if (trim_segments_per_round_ != 0) c.trim_segments_per_round = trim_segments_per_round_;
    ReplicaDeps deps = testing::stepped_follower_deps(&sender_, &disk_);
    deps.off_loop = &executor_;
    executor_.jobs.clear();  // a previous replica's: their `done` would find it gone
    NodeError error;
    replica_ = Replica::open(std::move(c), std::move(deps), &error);
    ASSERT_NE(replica_, nullptr) << error.message;
  }
  // Leader 1 of term 1 sent 1..kEntries of 15 KiB (client 100 + index, sequence 1), committed,
  // flushed, in a fresh directory; then the flusher's periodic checkpoint unless `checkpoint` is
  // false (the last one is then the open's, which vouches for nothing of it).
  void build_log(bool checkpoint = true) {
    replica_.reset();
    env_ = std::make_unique<store::MemoryEnv>();
    open();
    for (std::uint64_t from = 1; from <= kEntries; from += 8) {
      std::vector<raft::Entry> entries;
      for (std::uint64_t index = from; index < from + 8; ++index) {
        entries.push_back(testing::client_entry(index, payload(index)));
      }
      replica_->step(testing::leader_append(from - 1, entries, kEntries));
      replica_->process();
      ASSERT_TRUE(replica_->log().run_flush_cycle().ok());
      replica_->process();
    }
    if (checkpoint) {
      ASSERT_TRUE(replica_->log().run_checkpoint().ok());
    }
    ASSERT_EQ(replica_->commit_index(), kEntries);
    ASSERT_TRUE(executor_.jobs.empty());
  }
  // Where a trim before `before` makes the log start: the first segment that keeps an entry at or
  // above it.
  std::uint64_t planned_start(std::uint64_t before) const {
    std::uint64_t planned = replica_->log().first_index();
    for (const store::CommitLog::SegmentInfo& segment : replica_->log().segments()) {
      if (segment.active || segment.last_index >= before) break;
      planned = segment.last_index + 1;
    }
    return planned;
  }
  std::uint64_t topic_state_through() const {
    auto state = read_topic_state(env_.get(), "/data");
    return state.ok() && state->has_value() ? (*state)->through_index : 0;
  }
  // One round of the node's loop: the pending trim continued (the retention step).
  void round() {
    replica_->apply_retention(Clock::time_point() + std::chrono::hours(1));
    replica_->process();
  }
  // The trim asked, its TOPICSTATE handed off (the loop wrote nothing), then that write done and
  // the next round: SNAPSHOT.next handed off. Stops at `stage` (0: TOPICSTATE held, 1: its work
  // ran but not its `done`, 2: SNAPSHOT.next held, 3: its work ran, not its `done`).
  void trim_to_stage(int stage) {
    ASSERT_TRUE(replica_->trim(24, "test:").error.ok());
    ASSERT_EQ(executor_.jobs.size(), 1U) << "TOPICSTATE is handed off the loop";
    EXPECT_LT(topic_state_through(), 23U) << "the loop wrote TOPICSTATE itself";
    EXPECT_EQ(replica_->log().first_index(), 1U);
    if (stage == 0) return;
    executor_.run_job();
    EXPECT_EQ(topic_state_through(), kEntries) << "written by the job";
    if (stage == 1) return;
    executor_.finish(*replica_);
    round();
    ASSERT_EQ(executor_.jobs.size(), 1U) << "SNAPSHOT.next is handed off the loop";
    EXPECT_FALSE(env_->exists("/data/SNAPSHOT.next")) << "the loop wrote SNAPSHOT.next itself";
    EXPECT_EQ(replica_->log().first_index(), 1U) << "nothing goes before SNAPSHOT.next is durable";
    if (stage == 2) return;
    executor_.run_job();
    EXPECT_TRUE(env_->exists("/data/SNAPSHOT.next"));
    round();
    EXPECT_EQ(replica_->log().first_index(), 1U) << "nothing goes before the write came back";
  }
  // Rounds (and the executor's jobs) until the trim is done: the log starts at `planned`.
  void finish_trim(std::uint64_t planned) {
    for (int i = 0;
         i < 64 && (replica_->log().first_index() < planned || env_->exists("/data/SNAPSHOT.next"));
         ++i) {
      executor_.finish_all(*replica_);
      round();
    }
  }
  DedupTable::Lookup lookup(std::uint64_t client, std::vector<std::string> payloads,
                            std::uint64_t sequence = 1) {
    DedupTable::Range range;
    return replica_->dedup_lookup(client, sequence, payloads, &range);
  }
  // The log starts at `first`, holds every entry from there to kEntries, committed; SNAPSHOT
  // names its start (or none for a log that starts at 1); every append of 1..kEntries is still
  // answered from the dedup table.
  void expect_whole_at(std::uint64_t first, const std::string& where) {
    const store::CommitLog& log = replica_->log();
    EXPECT_EQ(log.first_index(), first) << where;
    EXPECT_EQ(log.last_index(), kEntries) << where;
    EXPECT_EQ(replica_->commit_index(), kEntries) << where;
    for (std::uint64_t index = first; index <= kEntries; ++index) {
      auto batch = log.read(index, 1, 1 << 20);
      ASSERT_TRUE(batch.ok() && !batch->entries.empty()) << where << ": entry " << index;
      EXPECT_EQ(batch->entries.front().payload, payload(index)) << where << ": entry " << index;
    }
    EXPECT_FALSE(env_->exists("/data/SNAPSHOT.next")) << where;
    if (first > 1) {
      auto current = read_snapshot_file(env_.get(), "/data");
      ASSERT_TRUE(current.ok() && current->has_value()) << where;
      EXPECT_EQ((*current)->index + 1, first) << where;
      EXPECT_TRUE(replica_->knows_first_index_topics()) << where;
    }
    for (std::uint64_t index = 1; index <= kEntries; ++index) {
      EXPECT_EQ(lookup(100 + index, {payload(index)}), DedupTable::Lookup::kFound)
          << where << ": the append at " << index;
    }
  }
  void power_cut_and_reopen(int seed) {
    env_->crash();
    replica_.reset();
    env_->restart(store::CrashOptions{static_cast<store::CrashMode>(seed % 3),
                                      static_cast<std::uint64_t>(seed)});
    open();
  }

  std::size_t trim_segments_per_round_ = 0;  // 0: the default
  std::unique_ptr<store::MemoryEnv> env_ = std::make_unique<store::MemoryEnv>();
  testing::RecordingSender sender_;
  testing::RoomyDisk disk_;
  testing::HeldExecutor executor_;
  std::unique_ptr<Replica> replica_;
};

TEST_F(TrimOffLoopTest, TopicStateAndSnapshotNextAreWrittenOffTheLoop) {
  ASSERT_NO_FATAL_FAILURE(build_log());
  const std::uint64_t planned = planned_start(24);
  ASSERT_GT(planned, 8U);
  ASSERT_NO_FATAL_FAILURE(trim_to_stage(3));
  finish_trim(planned);
  ASSERT_NO_FATAL_FAILURE(expect_whole_at(planned, "after the trim"));
  replica_.reset();
  open();
  ASSERT_NO_FATAL_FAILURE(expect_whole_at(planned, "reopened"));
}

// A power cut at each stage of the trim's writes off the loop: nothing was deleted, so the open
// finds the whole log (a SNAPSHOT.next, whole or not, is deleted), and the trim asked again after
// it finishes.
TEST_F(TrimOffLoopTest, APowerCutWithAWriteOffTheLoopLeavesTheWholeLog) {
  for (int stage = 0; stage <= 3; ++stage) {
    const std::string where = "cut at stage " + std::to_string(stage);
    ASSERT_NO_FATAL_FAILURE(build_log());
    const std::uint64_t planned = planned_start(24);
    ASSERT_NO_FATAL_FAILURE(trim_to_stage(stage));
    power_cut_and_reopen(stage + 1);
    ASSERT_NO_FATAL_FAILURE(expect_whole_at(1, where));
    ASSERT_TRUE(replica_->trim(24, "test:").error.ok()) << where;
    finish_trim(planned);
    ASSERT_NO_FATAL_FAILURE(expect_whole_at(planned, where + ", trimmed again"));
  }
}

// Review offloop L6: the truncation's checkpoint is the store flusher's, asked in the deletion's
// first round and waited for, round by round (it ran on the loop inside the truncation). A power
// cut between the request and the truncation (before the flusher's step: cut 0; after it: cut 1;
// at the first unlink: cut 2) leaves the whole log, as any cut before an unlink, and the trim asked
// again finishes; one after the first unlink (cut 3) is a cut trim the open finishes: the commit
// index it recovers, the flusher's checkpoint's, covers the trim's point.
TEST_F(TrimOffLoopTest, APowerCutBetweenTheCheckpointRequestAndTheTruncation) {
  for (int cut = 0; cut <= 3; ++cut) {
    const std::string where = "cut " + std::to_string(cut);
    ASSERT_NO_FATAL_FAILURE(build_log(/*checkpoint=*/false));
    const std::uint64_t planned = planned_start(24);
    ASSERT_GT(planned, 8U);
    ASSERT_NO_FATAL_FAILURE(trim_to_stage(3));
    executor_.finish_all(*replica_);
    round();  // SNAPSHOT.next is durable: the deletion asks for the checkpoint
    ASSERT_EQ(replica_->log().first_index(), 1U)
        << where << ": unlinked before a checkpoint vouched for the point";
    ASSERT_TRUE(env_->exists("/data/SNAPSHOT.next")) << where;
    EXPECT_FALSE(replica_->log().prefix_checkpointed(planned)) << where;
    round();  // no flusher step yet: the deletion waits
    ASSERT_EQ(replica_->log().first_index(), 1U) << where;
    if (cut >= 1) {
      ASSERT_TRUE(replica_->log().run_flush_cycle().ok());  // the flusher's step and checkpoint
      EXPECT_TRUE(replica_->log().prefix_checkpointed(planned)) << where;
    }
    if (cut >= 2) {
      env_->crash_after_removes(cut == 2 ? 0 : 2);  // 2: the first segment's data and index
      round();
      ASSERT_TRUE(env_->crashed()) << where << ": the round did not unlink";
    }
    power_cut_and_reopen(cut + 1);
    if (cut == 3) {
      ASSERT_NO_FATAL_FAILURE(expect_whole_at(planned, where + ", the cut trim finished"));
      continue;
    }
    if (cut == 0) {
      // No checkpoint recorded the commit index (the flusher's never came): the log is whole, the
      // stale SNAPSHOT.next gone, and the node relearns the commit index from its leader.
      EXPECT_EQ(replica_->log().first_index(), 1U) << where;
      EXPECT_EQ(replica_->log().last_index(), kEntries) << where;
      EXPECT_FALSE(env_->exists("/data/SNAPSHOT.next")) << where;
      continue;
    }
    ASSERT_NO_FATAL_FAILURE(expect_whole_at(1, where));
    ASSERT_TRUE(replica_->trim(24, "test:").error.ok()) << where;
    finish_trim(planned);
    ASSERT_NO_FATAL_FAILURE(expect_whole_at(planned, where + ", trimmed again"));
  }
}

// A clean stop with a write out: one the worker has not started is dropped (its job, run after the
// stop, writes nothing); one it ran is taken as done, and a SNAPSHOT.next that landed is followed
// by the deletion within the stop (as for any deletion under way).
TEST_F(TrimOffLoopTest, AStopDropsAWriteNotStartedAndFinishesOneThatRan) {
  ASSERT_NO_FATAL_FAILURE(build_log());
  ASSERT_NO_FATAL_FAILURE(trim_to_stage(2));
  auto held = std::move(executor_.jobs.front());
  executor_.jobs.clear();
  replica_.reset();  // a clean stop
  held.job();        // the worker after the stop: dropped
  held.done();       // the replica is gone: nothing
  EXPECT_FALSE(env_->exists("/data/SNAPSHOT.next")) << "a dropped write reached the disk";
  open();
  ASSERT_NO_FATAL_FAILURE(expect_whole_at(1, "after a stop with SNAPSHOT.next not started"));

  ASSERT_NO_FATAL_FAILURE(build_log());
  const std::uint64_t planned = planned_start(24);
  ASSERT_NO_FATAL_FAILURE(trim_to_stage(3));
  replica_.reset();  // SNAPSHOT.next written, its `done` not run
  EXPECT_FALSE(env_->exists("/data/SNAPSHOT.next")) << "the stop left the deletion to the open";
  open();
  ASSERT_NO_FATAL_FAILURE(expect_whole_at(planned, "after a stop with SNAPSHOT.next written"));
}

// Review M3: a write of the trim's that fails on the worker (its fdatasync reports an error) stops
// the trim: the next round reports it, nothing is unlinked, no SNAPSHOT.next is left, and a later
// trim succeeds.
TEST_F(TrimOffLoopTest, AFailedWriteOffTheLoopStopsTheTrimAndDeletesNothing) {
  for (int stage : {0, 2}) {  // TOPICSTATE's write, SNAPSHOT.next's
    const std::string where = stage == 0 ? "TOPICSTATE failed" : "SNAPSHOT.next failed";
    ASSERT_NO_FATAL_FAILURE(build_log());
    const std::uint64_t planned = planned_start(24);
    ASSERT_NO_FATAL_FAILURE(trim_to_stage(stage));
    env_->fail_next_syncs(1);
    executor_.finish(*replica_);
    EXPECT_FALSE(replica_->failed()) << where << ": " << replica_->failure_reason();
    const TrimResult next = replica_->trim(24, "test:");
    EXPECT_FALSE(next.error.ok()) << where << ": the failure is reported";
    for (int i = 0; i < 8; ++i) {
      executor_.finish_all(*replica_);
      EXPECT_EQ(replica_->log().first_index(), 1U) << where << ": a segment went";
      round();
    }
    EXPECT_FALSE(env_->exists("/data/SNAPSHOT.next")) << where;
    ASSERT_NO_FATAL_FAILURE(expect_whole_at(1, where));
    // A later trim, on a disk that works again.
    ASSERT_TRUE(replica_->trim(24, "test:").error.ok()) << where;
    finish_trim(planned);
    ASSERT_NO_FATAL_FAILURE(expect_whole_at(planned, where + ", trimmed again"));
  }
}

// Review R2 of the trim rounds: an install finishes a trim's pending deletion before it renames
// SNAPSHOT.install over SNAPSHOT.next. A power cut at every sync of the install, with a deletion
// spread one segment a round and left part-way, and with the trim's SNAPSHOT.next write held by the
// executor (not started: the install drops it; run: the install takes it and finishes the
// deletion): the reopened node holds the old log starting where a trim left it, every append of it
// still answered, or the snapshot's state. Without the deletion finished first, a cut between the
// rename and the log reset leaves a log start no file describes and the deleted appends unknown.
TEST_F(TrimOffLoopTest, AnInstallFinishesAPendingDeletionFirst) {
  enum class Pending { kPartWay, kWriteHeld, kWriteRan };
  int saw_old = 0;
  int saw_new = 0;
  for (Pending pending : {Pending::kPartWay, Pending::kWriteHeld, Pending::kWriteRan}) {
    bool completed = false;
    for (std::uint64_t syncs = 0; syncs < 40 && !completed; ++syncs) {
      const std::string where = "pending " + std::to_string(static_cast<int>(pending)) +
                                ", cut after " + std::to_string(syncs) + " syncs";
      trim_segments_per_round_ = 1;
      ASSERT_NO_FATAL_FAILURE(build_log());
      const std::uint64_t planned = planned_start(24);
      if (pending == Pending::kPartWay) {
        ASSERT_NO_FATAL_FAILURE(trim_to_stage(3));
        executor_.finish(*replica_);  // SNAPSHOT.next is back
        round();                      // the first segment goes
        ASSERT_GT(replica_->log().first_index(), 1U) << where;
        ASSERT_LT(replica_->log().first_index(), planned) << where;
      } else {
        ASSERT_NO_FATAL_FAILURE(trim_to_stage(pending == Pending::kWriteHeld ? 2 : 3));
      }
      env_->crash_after_syncs(syncs);
      replica_->step(snapshot_message());
      // The preparation (the newest job: the trim's write, if held, is older).
      ASSERT_FALSE(executor_.jobs.empty()) << where;
      executor_.finish(*replica_, executor_.jobs.size() - 1);
      completed = !env_->crashed();
      if (completed) {
        EXPECT_EQ(replica_->snapshot_stats().installed, 1U) << where;
        executor_.finish_all(*replica_);  // the install's TOPICSTATE
      }
      power_cut_and_reopen(static_cast<int>(syncs) + 1);
      const std::uint64_t first = replica_->log().first_index();
      if (first == kSnapshotIndex + 1) {
        ++saw_new;
        EXPECT_EQ(lookup(77, {"x", "y"}, 5), DedupTable::Lookup::kFound) << where;
        continue;
      }
      ++saw_old;
      EXPECT_FALSE(completed) << where << ": the install completed, the old log came back";
      // The deletion finished (by the install or by the open), or never began.
      ASSERT_NO_FATAL_FAILURE(expect_whole_at(first == 1 ? 1 : planned, where));
      if (pending == Pending::kPartWay) {
        EXPECT_EQ(first, planned) << where;
      }
    }
    EXPECT_TRUE(completed) << "the install never completed within the cuts tried";
  }
  EXPECT_GT(saw_old, 0);
  EXPECT_GT(saw_new, 0);
}

// A trim whose point lies in the active segment ends once it deleted what it could. It used to stay
// pending after its deletion (which spreads over rounds) and delete that segment whenever it
// sealed, perhaps long after and below the point of a snapshot sent meanwhile (a real-process
// catch-up test saw the leader's log start move past the follower's after the install); no
// one-round trim did that.
TEST_F(TrimOffLoopTest, ATrimEndsWithItsDeletionAndDeletesNothingWhenTheActiveSegmentSealsLater) {
  ASSERT_NO_FATAL_FAILURE(build_log());
  const std::uint64_t before = kEntries + 1;  // into the active segment
  const std::uint64_t planned = planned_start(before);
  ASSERT_GT(planned, 1U);
  ASSERT_TRUE(replica_->trim(before, "test:").error.ok());
  finish_trim(planned);
  ASSERT_EQ(replica_->log().first_index(), planned);
  EXPECT_FALSE(replica_->trim_in_progress()) << "the trim waits for the active segment to seal";
  // The leader sends 8 more entries: the active segment seals (two new ones start).
  std::vector<raft::Entry> entries;
  for (std::uint64_t index = kEntries + 1; index <= kEntries + 8; ++index) {
    entries.push_back(testing::client_entry(index, payload(index)));
  }
  replica_->step(testing::leader_append(kEntries, entries, kEntries + 8));
  replica_->process();
  ASSERT_TRUE(replica_->log().run_flush_cycle().ok());
  replica_->process();
  ASSERT_EQ(replica_->commit_index(), kEntries + 8);
  ASSERT_GT(planned_start(before), planned) << "the segment holding the trim point did not seal";
  for (int i = 0; i < 16; ++i) {
    executor_.finish_all(*replica_);
    round();
  }
  EXPECT_EQ(replica_->log().first_index(), planned) << "the ended trim deleted the sealed segment";
}

// Review offloop2 M1: a trim with no whole segment below its point (it lies in the active segment)
// ends at once, with no TOPICSTATE saved for nothing. It used to hand off a TOPICSTATE save and
// wait in trim_.pending_before, which the continuation never ended: once the segment sealed it was
// deleted, long after the answer.
TEST_F(TrimOffLoopTest, ATrimWithNoWholeSegmentBelowItsPointEndsAtOnce) {
  ASSERT_NO_FATAL_FAILURE(build_log());
  const std::uint64_t planned = planned_start(kEntries + 1);
  ASSERT_TRUE(replica_->trim(kEntries + 1, "test:").error.ok());
  finish_trim(planned);
  ASSERT_EQ(replica_->log().first_index(), planned);
  ASSERT_FALSE(replica_->trim_in_progress());
  // One small entry more, in the active segment: TOPICSTATE does not reach it yet.
  const auto leader_sends = [this](std::uint64_t from, std::uint64_t to, std::size_t bytes) {
    std::vector<raft::Entry> entries;
    for (std::uint64_t index = from; index <= to; ++index) {
      entries.push_back(testing::client_entry(index, std::string(bytes, 'n')));
    }
    replica_->step(testing::leader_append(from - 1, entries, to));
    replica_->process();
    ASSERT_TRUE(replica_->log().run_flush_cycle().ok());
    replica_->process();
    ASSERT_EQ(replica_->commit_index(), to);
  };
  ASSERT_NO_FATAL_FAILURE(leader_sends(kEntries + 1, kEntries + 1, 10));
  ASSERT_EQ(planned_start(kEntries + 2), planned) << "nothing whole is below the point";
  const TrimResult again = replica_->trim(kEntries + 2, "test:");
  ASSERT_TRUE(again.error.ok()) << again.error.message;
  EXPECT_FALSE(replica_->trim_in_progress()) << "a trim with nothing whole to delete waits";
  EXPECT_TRUE(executor_.jobs.empty()) << "a TOPICSTATE save for nothing was handed off";
  executor_.finish_all(*replica_);
  round();
  // 8 entries of 15 KiB: the segment holding the point seals.
  ASSERT_NO_FATAL_FAILURE(leader_sends(kEntries + 2, kEntries + 9, 15 << 10));
  ASSERT_GT(planned_start(kEntries + 2), planned) << "the segment holding the point did not seal";
  for (int i = 0; i < 16; ++i) {
    executor_.finish_all(*replica_);
    round();
  }
  EXPECT_EQ(replica_->log().first_index(), planned) << "the trim deleted the sealed segment later";
}

}  // namespace
}  // namespace raftlog::replica

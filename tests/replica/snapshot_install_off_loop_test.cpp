// A follower's install of its leader's snapshot prepared off its Raft loop
// (src/replica/replica_snapshot_receive.cpp): while the executor holds the preparation the loop
// answers heartbeats and acknowledges nothing of the log the install replaces; a newer snapshot, a
// newer term or a failed write drops the preparation and its SNAPSHOT.install, the old state
// intact; a power cut before the install's rename leaves the old state, and the open removes the
// file.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "held_executor.h"
#include "replica/hooked_env.h"
#include "replica/replica.h"
#include "replica_test_access.h"
#include "replica/snapshot_data.h"
#include "replica/topic_state_file.h"
#include "stepped_follower_config.h"
#include "store/memory_env.h"

namespace raftlog::replica {
namespace {

constexpr std::uint64_t kSnapshotTerm = 2;
constexpr const char* kInstallFile = "/data/SNAPSHOT.install";

using testing::HeldExecutor;

raft::ConfState snapshot_conf() { return raft::ConfState{{1, 2, 3}}; }

// The leader's state as of `index`: client 77's append of ["x", "y"] just below it, topic
// "orders" at next offset `index`.
std::string leader_data(std::uint64_t index) {
  SnapshotData data;
  data.index = index;
  data.term = kSnapshotTerm;
  data.conf = snapshot_conf();
  data.topics = {{"orders", index}};
  data.dedup_view_start = 1;
  const std::vector<std::string> xy = {"x", "y"};
  data.dedup_clients = {{77, 0, {{5, {index - 1, index, kSnapshotTerm}, append_digest(xy)}}}};
  return encode_snapshot_data(data);
}

raft::Message snapshot_message(std::uint64_t index, raft::Term message_term = kSnapshotTerm) {
  raft::Message m;
  m.type = raft::MessageType::kSnapshot;
  m.from = 1;
  m.to = 2;
  m.term = message_term;
  m.commit = index + 2;
  raft::Snapshot snapshot;
  snapshot.index = index;
  snapshot.term = kSnapshotTerm;
  snapshot.conf = snapshot_conf();
  snapshot.data = leader_data(index);
  m.snapshot = std::move(snapshot);
  return m;
}

raft::Message heartbeat(raft::NodeId from, raft::Term term) {
  raft::Message m;
  m.type = raft::MessageType::kHeartbeat;
  m.from = from;
  m.to = 2;
  m.term = term;
  m.commit = 3;
  return m;
}

class SnapshotInstallOffLoopTest : public ::testing::Test {
 protected:
  void open() {
    // Through hooked_ when a test set one (it sees the file system calls), else the MemoryEnv.
    store::Env* const env =
        hooked_ != nullptr ? static_cast<store::Env*>(hooked_.get()) : env_.get();
    ReplicaConfig c = testing::stepped_follower_config(env);
    c.raft.snapshots = true;
    ReplicaDeps deps = testing::stepped_follower_deps(&sender_, &disk_);
    deps.off_loop = &executor_;
    deps.snapshot_installed = [this](std::uint64_t index, const std::string&) {
      installed_.push_back(index);
    };
    NodeError error;
    replica_ = Replica::open(std::move(c), std::move(deps), &error);
    ASSERT_NE(replica_, nullptr) << error.message;
  }
  // Leader 1 of term 1 sent entries 1..4, commit 3, all flushed.
  void build_old_state() {
    open();
    std::vector<raft::Entry> entries;
    for (raft::Index index = 1; index <= 4; ++index) {
      raft::Entry entry;
      entry.index = index;
      entry.term = 1;
      entry.payload = "old " + std::to_string(index);
      entries.push_back(entry);
    }
    step(testing::leader_append(0, entries, 3));
    flush();
    ASSERT_EQ(replica_->commit_index(), 3U);
    sender_.sent.clear();
  }
  void step(raft::Message message) {
    replica_->step(std::move(message));
    replica_->process();
  }
  void flush() {
    ASSERT_TRUE(replica_->log().run_flush_cycle().ok());
    replica_->process();
  }
  void expect_old_state(const std::string& where) {
    EXPECT_EQ(replica_->log().first_index(), 1U) << where;
    EXPECT_EQ(replica_->log().last_index(), 4U) << where;
    EXPECT_EQ(replica_->snapshot_stats().installed, 0U) << where;
    EXPECT_TRUE(installed_.empty()) << where;
    EXPECT_FALSE(env_->exists("/data/SNAPSHOT.next")) << where;
  }
  std::vector<raft::Message> sent_of(raft::MessageType type) const {
    std::vector<raft::Message> out;
    for (const raft::Message& m : sender_.sent) {
      if (m.type == type) out.push_back(m);
    }
    return out;
  }

  std::unique_ptr<store::MemoryEnv> env_ = std::make_unique<store::MemoryEnv>();
  std::unique_ptr<testing::HookedEnv> hooked_;  // over env_
  testing::RecordingSender sender_;
  testing::RoomyDisk disk_;
  HeldExecutor executor_;
  std::vector<std::uint64_t> installed_;
  std::unique_ptr<Replica> replica_;
};

TEST_F(SnapshotInstallOffLoopTest, TheLoopAnswersAHeartbeatWhileTheInstallIsPrepared) {
  build_old_state();
  step(snapshot_message(10));
  ASSERT_EQ(executor_.jobs.size(), 1U) << "the install's preparation is handed off the loop";
  EXPECT_EQ(replica_->snapshot_stats().install_preparing, 1U);
  expect_old_state("while the preparation is held");
  // The loop goes on: a heartbeat of the leader is answered at once.
  step(heartbeat(1, kSnapshotTerm));
  ASSERT_EQ(sent_of(raft::MessageType::kHeartbeatResponse).size(), 1U);
  EXPECT_TRUE(sent_of(raft::MessageType::kAppendResponse).empty())
      << "the snapshot is not answered";
  executor_.run_job();
  EXPECT_TRUE(env_->exists(kInstallFile)) << "written off the loop";
  expect_old_state("prepared, before its result reached the loop");
  executor_.finish(*replica_);
  ASSERT_FALSE(replica_->failed()) << replica_->failure_reason();
  EXPECT_EQ(replica_->log().first_index(), 11U);
  EXPECT_EQ(replica_->commit_index(), 10U);
  EXPECT_EQ(replica_->topic_offsets().next_offset("orders"), 10U);
  DedupTable::Range range;
  EXPECT_EQ(replica_->dedup_lookup(77, 5, {"x", "y"}, &range), DedupTable::Lookup::kFound);
  EXPECT_EQ(installed_, std::vector<std::uint64_t>{10});
  EXPECT_FALSE(env_->exists(kInstallFile)) << "renamed into place";
  EXPECT_TRUE(env_->exists("/data/SNAPSHOT"));
  EXPECT_EQ(replica_->snapshot_stats().install_preparing, 0U);
  flush();
  const auto answers = sent_of(raft::MessageType::kAppendResponse);
  ASSERT_EQ(answers.size(), 1U);
  EXPECT_EQ(answers[0].index, 10U);
}

// Review offloop L10 (drills5 M1): an install's log reset renames the old segments aside and the
// store's flusher unlinks them after its cycles (docs/storage-format.md, crash case 7), off the
// loop: the round that installs unlinks no segment file (it renames each one aside), and the flush
// steps after it (the flusher's thread in raftlogd) unlink them all. Fails if the unlinks move back
// into the reset, on the loop.
TEST_F(SnapshotInstallOffLoopTest, TheInstallRoundUnlinksNoSegmentTheFlushStepsDo) {
  hooked_ = std::make_unique<testing::HookedEnv>(env_.get());
  bool installing = false;
  int unlinked_installing = 0;
  int unlinked_after = 0;
  int set_aside = 0;
  hooked_->before = [&](testing::HookedEnv::Op op, const std::string& path) {
    if (!testing::is_segment_file(path)) return;
    if (op == testing::HookedEnv::Op::kRemove)
      ++(installing ? unlinked_installing : unlinked_after);
    if (op == testing::HookedEnv::Op::kRename && installing &&
        path.find("/discard-") != std::string::npos) {
      ++set_aside;
    }
  };
  build_old_state();
  const int old_files = 2 * static_cast<int>(replica_->log().segments().size());
  ASSERT_GT(old_files, 0);
  step(snapshot_message(10));
  ASSERT_EQ(executor_.jobs.size(), 1U);
  executor_.run_job();
  installing = true;
  executor_.finish(*replica_);  // the install round: the preparation's `done` and process()
  installing = false;
  ASSERT_FALSE(replica_->failed()) << replica_->failure_reason();
  ASSERT_EQ(installed_, std::vector<std::uint64_t>{10});
  EXPECT_EQ(unlinked_installing, 0) << "the install round unlinked segment files on the loop";
  EXPECT_EQ(set_aside, old_files) << "the old segments were not renamed aside";
  for (int i = 0; i < 16 && unlinked_after < old_files; ++i) flush();
  EXPECT_EQ(unlinked_after, old_files) << "the flush steps did not unlink the set-aside files";
}

TEST_F(SnapshotInstallOffLoopTest, AnAppendMeanwhileIsNotAcknowledgedAgainstTheReplacedLog) {
  build_old_state();
  step(snapshot_message(10));
  ASSERT_EQ(executor_.jobs.size(), 1U);
  // The leader's append of entry 5 (term 2) after 4: it matches the old log, and the core would
  // acknowledge 5 (and later ones) of a log the install is about to reset.
  raft::Entry five;
  five.index = 5;
  five.term = kSnapshotTerm;
  five.payload = "five";
  raft::Message append = testing::leader_append(4, {five}, 3);
  append.term = kSnapshotTerm;
  step(append);
  flush();
  EXPECT_EQ(replica_->log().last_index(), 4U) << "not appended to the replaced log";
  EXPECT_TRUE(sent_of(raft::MessageType::kAppendResponse).empty());
  EXPECT_EQ(replica_->snapshot_stats().appends_dropped_while_preparing, 1U);
  executor_.finish(*replica_);
  flush();
  const auto answers = sent_of(raft::MessageType::kAppendResponse);
  ASSERT_EQ(answers.size(), 1U);
  EXPECT_EQ(answers[0].index, 10U) << "only the install is acknowledged";
  EXPECT_FALSE(answers[0].reject);
}

TEST_F(SnapshotInstallOffLoopTest, TheSameSnapshotAgainIsNotPreparedTwice) {
  build_old_state();
  step(snapshot_message(10));
  step(snapshot_message(10));  // the leader's retry
  ASSERT_EQ(executor_.jobs.size(), 1U);
  EXPECT_EQ(replica_->snapshot_stats().install_retries_ignored, 1U);
  executor_.finish(*replica_);
  EXPECT_EQ(installed_, std::vector<std::uint64_t>{10});
}

TEST_F(SnapshotInstallOffLoopTest, ANewerSnapshotDropsThePreparationAndItsFile) {
  build_old_state();
  step(snapshot_message(10));
  executor_.run_job();
  ASSERT_TRUE(env_->exists(kInstallFile));
  // A snapshot of another point: the first one's preparation goes; the second waits for the first
  // job's `done` (one job outstanding at a time).
  step(snapshot_message(12));
  EXPECT_EQ(replica_->snapshot_stats().install_preparations_dropped, 1U);
  ASSERT_EQ(executor_.jobs.size(), 1U);
  executor_.finish(*replica_);
  EXPECT_FALSE(env_->exists(kInstallFile)) << "the dropped preparation's file is removed";
  expect_old_state("after the dropped preparation's result");
  ASSERT_EQ(executor_.jobs.size(), 1U) << "the newer snapshot's preparation follows";
  executor_.finish(*replica_);
  ASSERT_FALSE(replica_->failed()) << replica_->failure_reason();
  EXPECT_EQ(installed_, std::vector<std::uint64_t>{12});
  EXPECT_EQ(replica_->log().first_index(), 13U);
}

// Review F1: a snapshot stepped after another's preparation came back but before its install
// (raftlogd steps a whole input batch before one process()) must not start writing
// SNAPSHOT.install, which the install is about to rename as the first one's. Two mechanisms keep
// it so: receive_snapshot handles the pending Ready (the first one's install) before it judges
// the newer one, and start_snapshot_preparation defers while a prepared snapshot waits. Since the
// first, the second is reached only if that inner process() stopped before the install: this test
// fails when both are gone (review installoff2 G1), not when one is.
TEST_F(SnapshotInstallOffLoopTest, ASnapshotArrivingBeforeThePreparedOnesInstallWaitsForIt) {
  build_old_state();
  step(snapshot_message(10));
  executor_.run_job();
  auto done = std::move(executor_.jobs.front().done);
  executor_.jobs.clear();
  done();  // stepped into the core; the install comes with the next process()
  replica_->step(snapshot_message(12));
  // The step handles the pending Ready first (review F3: the point is judged against the core's
  // log), which installs the first one; only then may the newer one be handed off. (The install
  // hands off its TOPICSTATE write too.)
  if (!executor_.jobs.empty()) {
    EXPECT_EQ(installed_, std::vector<std::uint64_t>{10})
        << "a job that writes SNAPSHOT.install is handed off before the file's rename";
    for (std::size_t at = 0; at < executor_.jobs.size(); ++at) {
      executor_.run_job(at);  // a worker thread would run them at once
    }
  }
  replica_->process();
  ASSERT_FALSE(replica_->failed()) << replica_->failure_reason();
  EXPECT_EQ(installed_, std::vector<std::uint64_t>{10});
  auto current = read_snapshot_file(env_.get(), "/data");
  ASSERT_TRUE(current.ok() && current->has_value());
  EXPECT_EQ((*current)->index, 10U);
  ASSERT_EQ(executor_.jobs.size(), 2U)
      << "the install's TOPICSTATE write, then the newer one's preparation after the install";
  executor_.finish(*replica_);
  executor_.finish(*replica_);
  ASSERT_FALSE(replica_->failed()) << replica_->failure_reason();
  EXPECT_EQ(installed_, (std::vector<std::uint64_t>{10, 12}));
}

// Review installoff2 G1, the guard alone: a snapshot queued while the one prepared before it waits
// for its install (receive_snapshot's own process() normally installs it first) is not handed off:
// its job would write SNAPSHOT.install, which the install is about to rename as the first one's.
TEST_F(SnapshotInstallOffLoopTest, APreparationWaitsForThePreparedSnapshotsInstall) {
  build_old_state();
  step(snapshot_message(10));
  executor_.run_job();
  auto done = std::move(executor_.jobs.front().done);
  executor_.jobs.clear();
  done();  // prepared and stepped into the core; the install comes with the next process()
  ReplicaTestAccess::queue_incoming_snapshot(*replica_, snapshot_message(12));
  EXPECT_TRUE(executor_.jobs.empty())
      << "a job that writes SNAPSHOT.install was handed off before the prepared one's rename";
  replica_->process();  // the install of 10, then the preparation of 12 is handed off
  ASSERT_FALSE(replica_->failed()) << replica_->failure_reason();
  EXPECT_EQ(installed_, std::vector<std::uint64_t>{10});
  auto current = read_snapshot_file(env_.get(), "/data");
  ASSERT_TRUE(current.ok() && current->has_value());
  EXPECT_EQ((*current)->index, 10U);
  ASSERT_EQ(executor_.jobs.size(), 2U)
      << "the install's TOPICSTATE write, then the newer one's preparation after the install";
  executor_.finish(*replica_);
  executor_.finish(*replica_);
  ASSERT_FALSE(replica_->failed()) << replica_->failure_reason();
  EXPECT_EQ(installed_, (std::vector<std::uint64_t>{10, 12}));
  EXPECT_EQ(replica_->log().first_index(), 13U);
}

// Review installoff2 G2: a snapshot the core installs without a preparation (not expected: the
// install's fallback) never touches SNAPSHOT.install, which a preparation job still out may be
// writing at that moment; the job's `done` then removes its own file.
TEST_F(SnapshotInstallOffLoopTest, AnUnpreparedInstallLeavesAPreparationsFileAlone) {
  build_old_state();
  step(snapshot_message(10));
  executor_.run_job();  // the worker wrote SNAPSHOT.install; its `done` has not run
  auto prepared_file = env_->read_file(kInstallFile, 1 << 20);
  ASSERT_TRUE(prepared_file.ok());
  ReplicaTestAccess::step_into_core(*replica_, snapshot_message(12));
  replica_->process();
  ASSERT_FALSE(replica_->failed()) << replica_->failure_reason();
  EXPECT_EQ(installed_, std::vector<std::uint64_t>{12});
  EXPECT_EQ(replica_->log().first_index(), 13U);
  auto current = read_snapshot_file(env_.get(), "/data");
  ASSERT_TRUE(current.ok() && current->has_value());
  EXPECT_EQ((*current)->index, 12U);
  auto install_file = env_->read_file(kInstallFile, 1 << 20);
  ASSERT_TRUE(install_file.ok()) << "the fallback took the preparation's SNAPSHOT.install";
  EXPECT_EQ(*install_file, *prepared_file)
      << "the fallback wrote the preparation's SNAPSHOT.install";
  executor_.finish(*replica_);  // the preparation of 10: overtaken by the install, dropped
  ASSERT_FALSE(replica_->failed()) << replica_->failure_reason();
  EXPECT_FALSE(env_->exists(kInstallFile)) << "the preparation's `done` removes its file";
  EXPECT_EQ(installed_, std::vector<std::uint64_t>{12});
  current = read_snapshot_file(env_.get(), "/data");
  ASSERT_TRUE(current.ok() && current->has_value());
  EXPECT_EQ((*current)->index, 12U);
  EXPECT_EQ(replica_->log().first_index(), 13U);
}

// Review mend L5: when the core replaced the prepared snapshot by another before its install (not
// expected: the fallback prepares that one on the loop), the replaced preparation's
// SNAPSHOT.install is removed, not left behind.
TEST_F(SnapshotInstallOffLoopTest, AnUnpreparedInstallRemovesTheReplacedPreparationsFile) {
  build_old_state();
  step(snapshot_message(10));
  executor_.run_job();
  auto done = std::move(executor_.jobs.front().done);
  executor_.jobs.clear();
  done();  // 10 prepared and stepped into the core, its install due in the next process()
  ASSERT_TRUE(env_->exists(kInstallFile));
  ReplicaTestAccess::step_into_core(*replica_, snapshot_message(12));  // replaces it in the core
  replica_->process();
  ASSERT_FALSE(replica_->failed()) << replica_->failure_reason();
  EXPECT_EQ(installed_, std::vector<std::uint64_t>{12});
  EXPECT_EQ(replica_->log().first_index(), 13U);
  EXPECT_FALSE(env_->exists(kInstallFile)) << "the replaced preparation's file was left behind";
  ASSERT_EQ(executor_.jobs.size(), 1U) << "only the install's TOPICSTATE write";
  executor_.finish(*replica_);
  auto topic_state = read_topic_state(env_.get(), "/data");
  ASSERT_TRUE(topic_state.ok() && topic_state->has_value());
  EXPECT_EQ((*topic_state)->through_index, 12U) << "written off the loop";
}

TEST_F(SnapshotInstallOffLoopTest, ANewerTermDropsThePreparationAndItsFile) {
  build_old_state();
  step(snapshot_message(10));
  executor_.run_job();
  // Node 3 leads term 3: the snapshot of leader 1's term 2 is stale now.
  step(heartbeat(3, kSnapshotTerm + 1));
  EXPECT_EQ(replica_->core().term(), kSnapshotTerm + 1);
  EXPECT_EQ(replica_->snapshot_stats().install_preparations_dropped, 1U);
  EXPECT_EQ(replica_->snapshot_stats().install_preparing, 0U);
  executor_.finish(*replica_);
  EXPECT_FALSE(env_->exists(kInstallFile));
  expect_old_state("after a newer term");
  EXPECT_TRUE(sent_of(raft::MessageType::kAppendResponse).empty());
  EXPECT_TRUE(executor_.jobs.empty());
}

TEST_F(SnapshotInstallOffLoopTest, AFailedWriteKeepsTheOldStateAndTheRetryInstalls) {
  build_old_state();
  step(snapshot_message(10));
  env_->fail_next_syncs(1);  // SNAPSHOT.install's fdatasync reports an error (ENOSPC, EIO)
  executor_.finish(*replica_);
  ASSERT_FALSE(replica_->failed())
      << "a failed preparation is not fatal: " << replica_->failure_reason();
  EXPECT_EQ(replica_->snapshot_stats().install_write_failures, 1U);
  EXPECT_FALSE(env_->exists(kInstallFile)) << "the partial file is removed";
  expect_old_state("after the failed write");
  EXPECT_TRUE(sent_of(raft::MessageType::kAppendResponse).empty()) << "not answered";
  // The leader sends it again after its retry timeout: this time it installs.
  step(snapshot_message(10));
  executor_.finish(*replica_);
  EXPECT_EQ(installed_, std::vector<std::uint64_t>{10});
  EXPECT_EQ(replica_->log().first_index(), 11U);
}

TEST_F(SnapshotInstallOffLoopTest,
       APowerCutBeforeTheRenameLeavesTheOldStateAndTheOpenRemovesTheFile) {
  build_old_state();
  step(snapshot_message(10));
  executor_.run_job();
  ASSERT_TRUE(env_->exists(kInstallFile));
  ASSERT_TRUE(env_->sync_dir("/data").ok());  // any later directory fsync makes its name durable
  env_->crash();
  replica_.reset();
  executor_.jobs.clear();  // the worker died with the process
  env_->restart(store::CrashOptions{store::CrashMode::kKeepAll, 1});
  ASSERT_TRUE(env_->exists(kInstallFile)) << "the file survived the cut (it was synced)";
  open();
  EXPECT_FALSE(env_->exists(kInstallFile)) << "the open removes a left-over preparation";
  expect_old_state("reopened after the cut");
  step(snapshot_message(10));
  executor_.finish(*replica_);
  EXPECT_EQ(installed_, std::vector<std::uint64_t>{10});
}

TEST_F(SnapshotInstallOffLoopTest,
       AStopWhilePreparingLeavesTheOldStateAndTheNextOpenRemovesTheFile) {
  build_old_state();
  step(snapshot_message(10));
  executor_.run_job();
  replica_.reset();  // a clean stop
  // A `done` that runs after its replica is gone does nothing.
  auto done = std::move(executor_.jobs.front().done);
  executor_.jobs.clear();
  done();
  EXPECT_TRUE(env_->exists(kInstallFile)) << "left for the next open";
  open();
  EXPECT_FALSE(env_->exists(kInstallFile));
  expect_old_state("reopened after the stop");
}

// Review F3: a kSnapshot reaches the core without a preparation only when the core will not
// install it (Replica::core_would_install follows Raft::Impl::handle_snapshot's rules). The core
// installing one unprepared would prepare it on the loop, the hold this design removes. Each of
// the core's branches, from the old state (log 1..4 of term 1, commit 3): prepared exactly when
// the core installs it.
TEST_F(SnapshotInstallOffLoopTest, ASnapshotIsPreparedExactlyWhenTheCoreInstallsIt) {
  struct Outcome {
    bool prepared;
    bool installed;
  };
  // Steps `message` in the input batch of what the case stepped before it (no process() between,
  // as raftlogd steps a batch), then finishes its preparation if one was handed off.
  const auto step_snapshot = [this](raft::Message message) {
    const std::size_t jobs = executor_.jobs.size();
    const std::uint64_t installs = replica_->snapshot_stats().installed;
    replica_->step(std::move(message));
    Outcome out{executor_.jobs.size() > jobs, false};
    if (out.prepared) {
      executor_.finish(*replica_);
    } else {
      replica_->process();
    }
    out.installed = replica_->snapshot_stats().installed > installs;
    EXPECT_FALSE(replica_->failed()) << replica_->failure_reason();
    EXPECT_FALSE(env_->exists(kInstallFile)) << "installed or removed";
    return out;
  };
  const auto fresh = [this] {
    replica_.reset();
    executor_.jobs.clear();
    env_ = std::make_unique<store::MemoryEnv>();
    sender_.sent.clear();
    installed_.clear();
    build_old_state();
  };
  const auto expect = [](Outcome out, bool installs, const char* branch) {
    EXPECT_EQ(out.prepared, installs) << branch;
    EXPECT_EQ(out.installed, installs) << branch;
  };
  // (index, snapshot term) in message term `term`, its data describing it.
  const auto snapshot_of = [](std::uint64_t index, raft::Term snapshot_term, raft::Term term) {
    raft::Message m = snapshot_message(index, term);
    SnapshotData data;
    data.index = index;
    data.term = snapshot_term;
    data.conf = snapshot_conf();
    data.dedup_view_start = 1;
    m.snapshot->term = snapshot_term;
    m.snapshot->data = encode_snapshot_data(data);
    return m;
  };

  fresh();
  raft::Message to_node_3 = snapshot_of(10, 2, 2);
  to_node_3.to = 3;
  expect(step_snapshot(to_node_3), false, "addressed to another node");
  fresh();
  raft::Message from_itself = snapshot_of(10, 2, 2);
  from_itself.from = 2;
  expect(step_snapshot(from_itself), false, "from this node");
  fresh();
  expect(step_snapshot(snapshot_of(10, 2, raft::kMaxTerm + 1)), false, "a term none may adopt");
  fresh();
  expect(step_snapshot(snapshot_of(3, 1, 2)), false, "its point at the commit index");
  fresh();
  expect(step_snapshot(snapshot_of(4, 1, 2)), false, "its point in the log with its term");
  EXPECT_EQ(replica_->log().last_index(), 4U) << "answered like an append: the log kept";
  fresh();
  expect(step_snapshot(snapshot_of(4, 2, 2)), true, "its point in the log with another term");
  fresh();
  expect(step_snapshot(snapshot_of(10, 2, 2)), true, "its point above the log");
  fresh();
  step(heartbeat(3, 3));  // node 3 leads term 3
  expect(step_snapshot(snapshot_of(10, 2, 2)), false, "a stale message term");
  fresh();
  expect(step_snapshot(snapshot_of(10, 3, 2)), false, "its term above the message's");
  fresh();
  expect(step_snapshot(snapshot_of(10, 0, 2)), false, "its term 0");
  fresh();
  raft::Message no_voters = snapshot_of(10, 2, 2);
  no_voters.snapshot->conf = raft::ConfState{};
  expect(step_snapshot(no_voters), false, "an invalid configuration");
  // Review oneterm5 M2: node 1 leads term 1 (build_old_state), so a snapshot of term 1 from node 3
  // is a second leader's, which the core refuses whole (docs/raft.md, "A second leader of a term").
  fresh();
  raft::Message second_leader = snapshot_of(10, 1, 1);
  second_leader.from = 3;
  expect(step_snapshot(second_leader), false, "a second leader of the term");
  // nonce6: node 1 leading term 2 with nonce A, then node 1 again in term 2 with nonce B (it lost
  // its state and was elected again in the term it led): a second leadership under the same id,
  // which the core refuses whole, so its snapshot is not prepared either.
  fresh();
  raft::Message first = heartbeat(1, 2);
  first.leader_nonce = 0xA;
  step(first);
  raft::Message other_nonce = snapshot_of(10, 2, 2);
  other_nonce.leader_nonce = 0xB;
  expect(step_snapshot(other_nonce), false, "the known leader's id with another nonce");
  raft::Message known_nonce = snapshot_of(10, 2, 2);
  known_nonce.leader_nonce = 0xA;
  expect(step_snapshot(known_nonce), true, "the known leadership");
  // The core judges the point against its own log, which runs ahead of the store's until its
  // Ready is handled: leader 1's append of term 2 replaces entry 4 (term 1) in the core only, and a
  // snapshot of (4, term 1) from a leader of term 3 in the same batch is one the core installs.
  fresh();
  raft::Entry four;
  four.index = 4;
  four.term = 2;
  four.payload = "four of term 2";
  raft::Message append = testing::leader_append(3, {four}, 3);
  append.term = 2;
  replica_->step(append);
  raft::Message after_the_cut = snapshot_of(4, 1, 3);
  after_the_cut.from = 3;
  expect(step_snapshot(after_the_cut), true, "its point in the log the batch's append replaced");
}

}  // namespace
}  // namespace raftlog::replica

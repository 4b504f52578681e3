// A follower's replica installing its leader's snapshot (src/replica/replica_snapshot.cpp): the
// install replaces the log, the configuration, the topic table and the dedup table together; a power
// cut at every sync of it restarts from the old state or the new one, never a mix; a snapshot whose
// data does not validate is refused before anything changes.
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "derived/envelope.h"
#include "replica/conf_state_file.h"
#include "replica/replica.h"
#include "replica/snapshot_data.h"
#include "replica/topic_state_file.h"
#include "stepped_follower_config.h"
#include "store/memory_env.h"

namespace raftlog::replica {
namespace {

struct RecordingSender final : MessageSender {
  void send(raft::Message message) override { sent.push_back(std::move(message)); }
  void snapshots_useless_through(std::uint64_t committed) override {
    useless_through.push_back(committed);
  }
  std::vector<raft::Message> sent;
  std::vector<std::uint64_t> useless_through;
};

struct RoomyDisk final : DiskProbe {
  std::optional<DiskSpace> probe() override { return DiskSpace{1ULL << 40, 0.10}; }
};

std::string orders_entry(std::uint64_t offset, const std::string& body) {
  std::string payload;
  derived::encode_envelope(1000 + offset, "orders", {}, body, &payload);
  EXPECT_TRUE(derived::stamp_envelope(&payload, 1000 + offset, offset));
  return payload;
}

constexpr std::uint64_t kWallMs = 1'900'000'000'000;  // this node's wall clock
constexpr std::uint64_t kSnapshotIndex = 10;
constexpr std::uint64_t kSnapshotTerm = 2;

raft::ConfState snapshot_conf() {
  raft::ConfState conf;
  conf.voters = {1, 2, 3};
  conf.addresses = {{1, "127.0.0.1:7001"}, {2, "127.0.0.1:7002"}, {3, "127.0.0.1:7003"}};
  return conf;
}

// The leader's state as of index 10: client 77's append of ["x", "y"] at 8..9, topic "orders" at
// next offset 7, node 9 retired.
SnapshotData leader_data() {
  SnapshotData data;
  data.index = kSnapshotIndex;
  data.term = kSnapshotTerm;
  data.conf = snapshot_conf();
  data.retired_ids = {9};
  data.timestamp_floor_ms = 5000;
  data.topics = {{"orders", 7}};
  data.dedup_view_start = 1;
  const std::vector<std::string> xy = {"x", "y"};
  data.dedup_clients = {{77, 0, {{5, {8, 9, 2}, append_digest(xy)}}}};
  return data;
}

raft::Message snapshot_message(const std::string& data) {
  raft::Message m;
  m.type = raft::MessageType::kSnapshot;
  m.from = 1;
  m.to = 2;
  m.term = kSnapshotTerm;
  m.commit = 12;
  raft::Snapshot snapshot;
  snapshot.index = kSnapshotIndex;
  snapshot.term = kSnapshotTerm;
  snapshot.conf = snapshot_conf();
  snapshot.data = data;
  m.snapshot = std::move(snapshot);
  return m;
}

enum class Seen { kOld, kNew };

class SnapshotInstallTest : public ::testing::Test {
 protected:
  void open() {
    NodeError error;
    replica_ = try_open(&error);
    ASSERT_NE(replica_, nullptr) << error.message;
  }
  std::unique_ptr<Replica> try_open(NodeError* error) {
    ReplicaConfig c = testing::stepped_follower_config(env_.get());
    c.raft.snapshots = true;
    if (dedup_rebuild_entries_ != 0) c.dedup_rebuild_entries = dedup_rebuild_entries_;
    if (max_snapshot_data_bytes_ != 0) c.max_snapshot_data_bytes = max_snapshot_data_bytes_;
    if (trim_segments_per_round_ != 0) c.trim_segments_per_round = trim_segments_per_round_;
    ReplicaDeps deps;
    deps.sender = &sender_;
    deps.disk = &disk_;
    deps.clock = [] { return Clock::time_point() + std::chrono::hours(1); };
    deps.wall_clock = [] {
      return std::chrono::system_clock::time_point(std::chrono::milliseconds(kWallMs));
    };
    deps.snapshot_installed = [this](std::uint64_t index, const std::string& section) {
      installed_.emplace_back(index, section);
    };
    return Replica::open(std::move(c), std::move(deps), error);
  }
  // The old state: leader 1 of term 1 sent 1..4 (client 50's ["a", "b"] at 1..2, topic "orders"
  // offsets 0 and 1 at 3..4), commit 3, all flushed.
  void build_old_state() {
    open();
    raft::Message append;
    append.type = raft::MessageType::kAppend;
    append.from = 1;
    append.to = 2;
    append.term = 1;
    append.commit = 3;
    for (raft::Index index = 1; index <= 4; ++index) {
      raft::Entry entry;
      entry.index = index;
      entry.term = 1;
      if (index <= 2) {
        entry.client_id = 50;
        entry.sequence = 1;
        entry.payload = index == 1 ? "a" : "b";
      } else {
        entry.has_envelope = true;
        entry.payload = orders_entry(index - 3, "o");
      }
      append.entries.push_back(entry);
    }
    replica_->step(append);
    replica_->process();
    ASSERT_TRUE(replica_->log().run_flush_cycle().ok());
    replica_->process();
    ASSERT_TRUE(replica_->log().run_checkpoint().ok());
    ASSERT_EQ(replica_->commit_index(), 3U);
    sender_.sent.clear();
  }
  void power_cut_and_reopen(store::CrashMode mode, std::uint64_t seed) {
    env_->crash();
    replica_.reset();
    env_->restart(store::CrashOptions{mode, seed});
    open();
  }
  DedupTable::Lookup lookup(std::uint64_t client, std::uint64_t sequence,
                            std::vector<std::string> payloads) {
    DedupTable::Range range;
    return replica_->dedup_lookup(client, sequence, payloads, &range);
  }
  // Which state the reopened node holds; a test failure for a mix.
  Seen check_state(const std::string& where) {
    const store::CommitLog& log = replica_->log();
    if (log.first_index() == 1) {
      EXPECT_EQ(log.last_index(), 4U) << where;
      EXPECT_EQ(replica_->core().conf_history().front().index, 0U) << where;
      EXPECT_EQ(replica_->first_index_conf(), (raft::ConfState{{1, 2, 3}})) << where;
      EXPECT_TRUE(replica_->retired_ids().empty()) << where;
      EXPECT_EQ(replica_->topic_offsets().next_offset("orders"), 2U) << where;
      EXPECT_EQ(lookup(50, 1, {"a", "b"}), DedupTable::Lookup::kFound) << where;
      EXPECT_EQ(lookup(77, 5, {"x", "y"}), DedupTable::Lookup::kUnknown) << where;
      return Seen::kOld;
    }
    EXPECT_EQ(log.first_index(), kSnapshotIndex + 1) << where;
    EXPECT_EQ(log.last_index(), kSnapshotIndex) << where;
    EXPECT_EQ(*log.term_at(kSnapshotIndex), kSnapshotTerm) << where;
    EXPECT_EQ(replica_->commit_index(), kSnapshotIndex) << where;
    const auto& history = replica_->core().conf_history();
    EXPECT_EQ(history.size(), 1U) << where;
    EXPECT_EQ(history.front().index, kSnapshotIndex) << where;
    EXPECT_EQ(history.front().conf, snapshot_conf()) << where;
    // The configuration at the log's first index - 1 (for the snapshots it sends once it leads) and
    // the snapshot's retired ids (CONFSTATE) come back with it.
    EXPECT_EQ(replica_->first_index_conf(), snapshot_conf()) << where;
    EXPECT_EQ(replica_->retired_ids(), std::vector<raft::NodeId>{9}) << where;
    EXPECT_EQ(replica_->topic_offsets().next_offset("orders"), 7U) << where;
    EXPECT_GE(replica_->timestamp_floor_ms(), 5000U) << where;
    EXPECT_EQ(lookup(77, 5, {"x", "y"}), DedupTable::Lookup::kFound) << where;
    EXPECT_EQ(lookup(50, 1, {"a", "b"}), DedupTable::Lookup::kUnknown) << where;
    auto topic_state = read_topic_state(env_.get(), "/data");
    EXPECT_TRUE(topic_state.ok() && topic_state->has_value() &&
                (*topic_state)->through_index == kSnapshotIndex)
        << where << ": the open completes TOPICSTATE";
    return Seen::kNew;
  }
  // The leader sends entry 11 (term 2) after the snapshot: it continues the installed log.
  void continue_after_snapshot(const std::string& where) {
    raft::Message append;
    append.type = raft::MessageType::kAppend;
    append.from = 1;
    append.to = 2;
    append.term = kSnapshotTerm;
    append.index = kSnapshotIndex;
    append.log_term = kSnapshotTerm;
    append.commit = 11;
    raft::Entry entry;
    entry.index = 11;
    entry.term = kSnapshotTerm;
    entry.has_envelope = true;
    entry.payload = orders_entry(7, "after");
    append.entries.push_back(entry);
    replica_->step(append);
    replica_->process();
    ASSERT_TRUE(replica_->log().run_flush_cycle().ok()) << where;
    replica_->process();
    EXPECT_EQ(replica_->log().last_index(), 11U) << where;
    EXPECT_EQ(replica_->commit_index(), 11U) << where;
    EXPECT_EQ(replica_->topic_offsets().next_offset("orders"), 8U) << where;
  }

  std::uint64_t dedup_rebuild_entries_ = 0;  // 0: the default
  std::size_t max_snapshot_data_bytes_ = 0;  // 0: the default
  std::size_t trim_segments_per_round_ = 0;  // 0: the default
  std::unique_ptr<store::MemoryEnv> env_ = std::make_unique<store::MemoryEnv>();
  RecordingSender sender_;
  RoomyDisk disk_;
  std::vector<std::pair<std::uint64_t, std::string>> installed_;
  std::unique_ptr<Replica> replica_;
};

TEST_F(SnapshotInstallTest, InstallsTheSnapshotAndAnswersOnlyOnceItIsDurable) {
  build_old_state();
  // Entry 5 arrives but is not flushed: its acknowledgement is held, and the install drops it.
  raft::Message append;
  append.type = raft::MessageType::kAppend;
  append.from = 1;
  append.to = 2;
  append.term = 1;
  append.index = 4;
  append.log_term = 1;
  append.commit = 3;
  raft::Entry five;
  five.index = 5;
  five.term = 1;
  five.payload = "five";
  append.entries.push_back(five);
  replica_->step(append);
  replica_->process();
  ASSERT_TRUE(sender_.sent.empty());

  SnapshotData data = leader_data();
  data.section = "node section";
  replica_->step(snapshot_message(encode_snapshot_data(data)));
  replica_->process();
  ASSERT_FALSE(replica_->failed()) << replica_->failure_reason();
  EXPECT_EQ(check_state("after the install"), Seen::kNew);
  EXPECT_EQ(replica_->snapshot_stats().installed, 1U);
  ASSERT_EQ(installed_.size(), 1U);
  EXPECT_EQ(installed_[0], std::make_pair(kSnapshotIndex, std::string("node section")));
  ASSERT_TRUE(replica_->log().run_flush_cycle().ok());
  replica_->process();
  ASSERT_EQ(sender_.sent.size(), 1U) << "only the snapshot's acknowledgement; entry 5's is dropped";
  EXPECT_EQ(sender_.sent[0].type, raft::MessageType::kAppendResponse);
  EXPECT_FALSE(sender_.sent[0].reject);
  EXPECT_EQ(sender_.sent[0].index, kSnapshotIndex);
  continue_after_snapshot("after the install");
  // A clean restart keeps everything the snapshot brought.
  replica_.reset();
  open();
  EXPECT_EQ(replica_->log().first_index(), kSnapshotIndex + 1);
  EXPECT_EQ(replica_->log().last_index(), 11U);
  EXPECT_EQ(replica_->topic_offsets().next_offset("orders"), 8U);
  EXPECT_EQ(lookup(77, 5, {"x", "y"}), DedupTable::Lookup::kFound);
  EXPECT_EQ(replica_->core().conf_history().front().conf, snapshot_conf());
}

// Review drills5 M4: every tick tells the transport the commit index, so a partial snapshot of an
// index at or below it (the entries came by replication) is dropped at once, with its file.
TEST_F(SnapshotInstallTest, EachTickTellsTheTransportTheCommitIndexSoStalePartialsGo) {
  build_old_state();
  ASSERT_GT(replica_->commit_index(), 0U);
  sender_.useless_through.clear();
  replica_->tick();
  ASSERT_EQ(sender_.useless_through.size(), 1U);
  EXPECT_EQ(sender_.useless_through.back(), replica_->commit_index());
}

// A hard state lost beside the empty log an install leaves (it starts after the snapshot's index,
// and holds no entry whose term restart_problem() could compare): refused like one lost beside
// entries, since the node saw term 2 and may have voted in it. (Outside test finding drills2 F2's
// review of HARDSTATE: it opened with term 0.)
TEST_F(SnapshotInstallTest, AHardStateLostBesideTheEmptyLogOfAnInstallIsRefused) {
  build_old_state();
  replica_->step(snapshot_message(encode_snapshot_data(leader_data())));
  replica_->process();
  ASSERT_FALSE(replica_->failed()) << replica_->failure_reason();
  ASSERT_EQ(replica_->log().last_index(), kSnapshotIndex);
  ASSERT_EQ(replica_->log().first_index(), kSnapshotIndex + 1);
  replica_.reset();
  ASSERT_TRUE(env_->remove("/data/HARDSTATE").ok());
  NodeError error;
  replica_ = try_open(&error);
  ASSERT_EQ(replica_, nullptr) << "opened with term " << replica_->core().term();
  EXPECT_NE(error.message.find("HARDSTATE"), std::string::npos) << error.message;
}

TEST_F(SnapshotInstallTest, ASnapshotWhoseDataDoesNotValidateIsRefusedAndCounted) {
  build_old_state();
  std::string bytes = encode_snapshot_data(leader_data());
  std::string flipped = bytes;
  flipped[bytes.size() / 2] ^= 0x10;
  SnapshotData other_index = leader_data();
  other_index.index = kSnapshotIndex + 1;
  SnapshotData other_conf = leader_data();
  other_conf.conf.voters = {1, 2};
  other_conf.conf.addresses.pop_back();
  // The same members at other addresses: the core would run the message's configuration while
  // CONFSTATE persisted the data's, changing the node's address book at its next restart.
  SnapshotData other_address = leader_data();
  other_address.conf.addresses.back().address = "127.0.0.1:7009";
  const std::vector<std::string> bad = {"",
                                        flipped,
                                        bytes.substr(0, bytes.size() - 1),
                                        encode_snapshot_data(other_index),
                                        encode_snapshot_data(other_conf),
                                        encode_snapshot_data(other_address)};
  for (const std::string& data : bad) {
    replica_->step(snapshot_message(data));
    replica_->process();
  }
  EXPECT_EQ(replica_->snapshot_stats().refused, bad.size());
  EXPECT_EQ(replica_->snapshot_stats().installed, 0U);
  EXPECT_FALSE(env_->exists("/data/SNAPSHOT")) << "nothing of a refused snapshot is written";
  EXPECT_EQ(check_state("after the refusals"), Seen::kOld);
  EXPECT_EQ(replica_->commit_index(), 3U);
  EXPECT_TRUE(sender_.sent.empty()) << "a refused snapshot is not answered";
  // The node section's own check refuses too.
  replica_.reset();
  ReplicaConfig c = testing::stepped_follower_config(env_.get());
  c.raft.snapshots = true;
  ReplicaDeps deps;
  deps.sender = &sender_;
  deps.disk = &disk_;
  deps.clock = [] { return Clock::time_point() + std::chrono::hours(1); };
  deps.check_snapshot_section = [](std::string_view section, std::uint64_t) {
    return section == "good" ? std::string() : std::string("not a table");
  };
  NodeError error;
  replica_ = Replica::open(std::move(c), std::move(deps), &error);
  ASSERT_NE(replica_, nullptr) << error.message;
  SnapshotData with_section = leader_data();
  with_section.section = "bad";
  replica_->step(snapshot_message(encode_snapshot_data(with_section)));
  replica_->process();
  EXPECT_EQ(replica_->snapshot_stats().refused, 1U);
  with_section.section = "good";
  replica_->step(snapshot_message(encode_snapshot_data(with_section)));
  replica_->process();
  EXPECT_EQ(replica_->snapshot_stats().installed, 1U);
}

// A power cut at every sync of the install (the hard state, SNAPSHOT, the log's reset, CONFSTATE,
// TOPICSTATE), with each way of losing unflushed bytes: the reopened node holds the old state or
// the new one, never a mix, and continues from it.
TEST_F(SnapshotInstallTest, APowerCutAtEverySyncRestartsFromTheOldOrTheNewState) {
  int saw_old = 0;
  int saw_new = 0;
  bool completed = false;
  for (std::uint64_t step = 0; step < 60 && !completed; ++step) {
    replica_.reset();  // it closes through its env
    env_ = std::make_unique<store::MemoryEnv>();
    installed_.clear();
    build_old_state();
    if (HasFatalFailure()) return;
    env_->crash_after_syncs(step);
    replica_->step(snapshot_message(encode_snapshot_data(leader_data())));
    replica_->process();
    completed = !env_->crashed();
    const std::string where = "cut after " + std::to_string(step) + " syncs";
    if (completed) {
      ASSERT_FALSE(replica_->failed()) << where << ": " << replica_->failure_reason();
    }
    // The node section learns of the install only once the install is durable (a later, failed
    // TOPICSTATE save does not undo it: the open completes that step).
    const bool reported = !installed_.empty();
    power_cut_and_reopen(static_cast<store::CrashMode>(step % 3), step + 1);
    if (HasFatalFailure()) return;
    const Seen seen = check_state(where);
    if (reported) {
      EXPECT_EQ(seen, Seen::kNew) << where << ": reported installed, then lost";
    }
    (seen == Seen::kNew ? saw_new : saw_old)++;
    if (seen == Seen::kNew) {
      continue_after_snapshot(where);
    } else {
      // The old log goes on; the leader sends its snapshot again, and it installs.
      replica_->step(snapshot_message(encode_snapshot_data(leader_data())));
      replica_->process();
      EXPECT_EQ(check_state(where + ", installed again"), Seen::kNew);
    }
  }
  EXPECT_TRUE(completed) << "the install never finished within the steps tried";
  EXPECT_GT(saw_old, 0);
  EXPECT_GT(saw_new, 1) << "cuts between the log's reset and the end of the install";
}

// Review finding 6: a sender whose clock is days ahead (or a forged snapshot) must not pin this
// node's future timestamps: the snapshot's floor is bounded as a replicated entry's timestamp is
// (kMaxTimestampSkewMs past this node's clock), at the install and when the open completes an
// install a power cut interrupted, in memory and in the TOPICSTATE saved.
TEST_F(SnapshotInstallTest, TheSnapshotsTimestampFloorIsBoundedByTheSkewLimit) {
  const std::uint64_t bound = kWallMs + Replica::kMaxTimestampSkewMs;
  SnapshotData ahead = leader_data();
  ahead.timestamp_floor_ms = kWallMs + 10ULL * 24 * 3600 * 1000;
  bool completed = false;
  int completed_at_open = 0;
  for (std::uint64_t step = 0; step < 60 && !completed; ++step) {
    replica_.reset();
    env_ = std::make_unique<store::MemoryEnv>();
    build_old_state();
    if (HasFatalFailure()) return;
    env_->crash_after_syncs(step);
    replica_->step(snapshot_message(encode_snapshot_data(ahead)));
    replica_->process();
    completed = !env_->crashed();
    const std::string where = "cut after " + std::to_string(step) + " syncs";
    if (completed) {
      ASSERT_FALSE(replica_->failed()) << where << ": " << replica_->failure_reason();
      ASSERT_EQ(replica_->snapshot_stats().installed, 1U) << where;
      EXPECT_EQ(replica_->timestamp_floor_ms(), bound) << where;
    }
    auto before_cut = read_topic_state(env_.get(), "/data");
    const bool saved_before_cut = before_cut.ok() && before_cut->has_value() &&
                                  (*before_cut)->through_index == kSnapshotIndex;
    power_cut_and_reopen(static_cast<store::CrashMode>(step % 3), step + 1);
    if (HasFatalFailure()) return;
    if (replica_->log().first_index() != kSnapshotIndex + 1) continue;  // the old state
    if (!saved_before_cut) ++completed_at_open;
    EXPECT_LE(replica_->timestamp_floor_ms(), bound) << where;
    auto saved = read_topic_state(env_.get(), "/data");
    ASSERT_TRUE(saved.ok() && saved->has_value()) << where;
    EXPECT_LE((*saved)->timestamp_floor_ms, bound) << where;
  }
  EXPECT_TRUE(completed);
  EXPECT_GT(completed_at_open, 0) << "no cut fell between the log's reset and TOPICSTATE";
}

// Review finding 5: an unreadable SNAPSHOT on a log that starts after it is not ignored. The open is
// refused, naming the file, unless the log and CONFSTATE provably hold everything it could add (the
// install completed, and the log alone covers the dedup window the open rebuilds).
TEST_F(SnapshotInstallTest, AnUnreadableSnapshotRefusesTheOpenUnlessTheStateIsCompleteWithoutIt) {
  build_old_state();
  replica_->step(snapshot_message(encode_snapshot_data(leader_data())));
  replica_->process();
  continue_after_snapshot("the install");
  replica_.reset();
  const auto topic_state_before = env_->read_file("/data/TOPICSTATE", 1 << 20);
  ASSERT_TRUE(topic_state_before.ok());
  auto bytes = env_->read_file("/data/SNAPSHOT", 1 << 20);
  ASSERT_TRUE(bytes.ok());
  std::string damaged = *bytes;
  damaged[damaged.size() / 2] ^= 0x04;
  ASSERT_TRUE(env_->write_file("/data/SNAPSHOT", damaged).ok());
  NodeError error;
  std::unique_ptr<Replica> refused = try_open(&error);
  EXPECT_EQ(refused, nullptr) << "opened without the dedup records SNAPSHOT held";
  EXPECT_NE(error.message.find("/data/SNAPSHOT"), std::string::npos) << error.message;
  EXPECT_NE(error.message.find("Damaged data at startup"), std::string::npos) << error.message;
  refused.reset();
  // A refused open writes nothing: TOPICSTATE stays as the node left it (it used to be saved from
  // the open's empty tables as the refused replica closed).
  const auto topic_state_after = env_->read_file("/data/TOPICSTATE", 1 << 20);
  ASSERT_TRUE(topic_state_after.ok());
  EXPECT_EQ(*topic_state_after, *topic_state_before);
  // The same file as SNAPSHOT.next (the install's rename not done): refused too.
  ASSERT_TRUE(env_->rename("/data/SNAPSHOT", "/data/SNAPSHOT.next").ok());
  EXPECT_EQ(try_open(&error), nullptr);
  EXPECT_NE(error.message.find("/data/SNAPSHOT.next"), std::string::npos) << error.message;
  ASSERT_TRUE(env_->rename("/data/SNAPSHOT.next", "/data/SNAPSHOT").ok());
  // A dedup window of one entry, which the log (entry 11) holds, and CONFSTATE's base at the
  // snapshot's index: nothing is missing, the node opens (and answers (77, 5) no more).
  dedup_rebuild_entries_ = 1;
  open();
  if (HasFatalFailure()) return;
  EXPECT_EQ(replica_->log().first_index(), kSnapshotIndex + 1);
  EXPECT_EQ(replica_->core().conf_history().front().index, kSnapshotIndex);
  EXPECT_EQ(replica_->topic_offsets().next_offset("orders"), 8U);
}

// A second snapshot (index 20, term 3), whose data does not carry client 77 any more (the leader
// evicted it): only the first snapshot's SNAPSHOT answers a retry of (77, 5).
constexpr std::uint64_t kSecondIndex = 20;
constexpr std::uint64_t kSecondTerm = 3;

raft::Message second_snapshot_message() {
  SnapshotData data = leader_data();
  data.index = kSecondIndex;
  data.term = kSecondTerm;
  data.topics = {{"orders", 12}};
  const std::vector<std::string> z = {"z"};
  data.dedup_clients = {{88, 0, {{3, {15, 15, 3}, append_digest(z)}}}};
  raft::Message m = snapshot_message(encode_snapshot_data(data));
  m.term = kSecondTerm;
  m.commit = kSecondIndex;
  m.snapshot->index = kSecondIndex;
  m.snapshot->term = kSecondTerm;
  return m;
}

// Review finding 3: an install over an earlier install, cut at every sync. SNAPSHOT is rewritten
// only after the new log's reset, so a node that reopens the old log (starting after the first
// snapshot) still answers a retry the first snapshot covered, instead of appending it again.
TEST_F(SnapshotInstallTest, APowerCutDuringASecondInstallKeepsTheFirstSnapshotsDedupRecords) {
  int saw_old = 0;
  int saw_new = 0;
  bool completed = false;
  for (std::uint64_t step = 0; step < 60 && !completed; ++step) {
    replica_.reset();
    env_ = std::make_unique<store::MemoryEnv>();
    build_old_state();
    if (HasFatalFailure()) return;
    replica_->step(snapshot_message(encode_snapshot_data(leader_data())));
    replica_->process();
    continue_after_snapshot("the first install");
    if (HasFatalFailure()) return;
    env_->crash_after_syncs(step);
    replica_->step(second_snapshot_message());
    replica_->process();
    completed = !env_->crashed();
    const std::string where = "cut after " + std::to_string(step) + " syncs";
    if (completed) {
      ASSERT_FALSE(replica_->failed()) << where << ": " << replica_->failure_reason();
    }
    power_cut_and_reopen(static_cast<store::CrashMode>(step % 3), step + 1);
    if (HasFatalFailure()) return;
    const std::uint64_t first = replica_->log().first_index();
    if (first == kSnapshotIndex + 1) {
      ++saw_old;
      EXPECT_EQ(replica_->log().last_index(), 11U) << where;
      EXPECT_EQ(lookup(77, 5, {"x", "y"}), DedupTable::Lookup::kFound)
          << where << ": the first snapshot's dedup record is lost";
      EXPECT_EQ(lookup(88, 3, {"z"}), DedupTable::Lookup::kUnknown) << where;
      EXPECT_EQ(replica_->topic_offsets().next_offset("orders"), 8U) << where;
    } else {
      ++saw_new;
      EXPECT_EQ(first, kSecondIndex + 1) << where;
      EXPECT_EQ(replica_->commit_index(), kSecondIndex) << where;
      EXPECT_EQ(lookup(88, 3, {"z"}), DedupTable::Lookup::kFound) << where;
      EXPECT_EQ(lookup(77, 5, {"x", "y"}), DedupTable::Lookup::kUnknown) << where;
      EXPECT_EQ(replica_->topic_offsets().next_offset("orders"), 12U) << where;
    }
    EXPECT_FALSE(env_->exists("/data/SNAPSHOT.next")) << where << ": the open finishes or drops it";
    auto current = read_snapshot_file(env_.get(), "/data");
    ASSERT_TRUE(current.ok() && current->has_value()) << where;
    EXPECT_EQ((*current)->index + 1, first) << where << ": SNAPSHOT names the log's start";
  }
  EXPECT_TRUE(completed) << "the install never finished within the steps tried";
  EXPECT_GT(saw_old, 0);
  EXPECT_GT(saw_new, 0);
}

// A follower that received entries 1..kEntries (term 1), each its own client's append of one
// 15 KiB entry (about four per minimum-size segment), all committed and flushed.
class TrimSnapshotTest : public SnapshotInstallTest {
 protected:
  static constexpr std::uint64_t kEntries = 32;
  static std::string payload(std::uint64_t index) {
    return std::string(15 << 10, static_cast<char>('a' + index % 26));
  }
  // With with_config_entry_, entry kConfigIndex adds learner 4 (a kConfig entry, no client).
  static constexpr std::uint64_t kConfigIndex = 12;
  static raft::ConfState conf_with_learner() {
    raft::ConfState conf{{1, 2, 3}};
    conf.learners = {4};
    return conf;
  }
  // The configuration in force at `index`.
  raft::ConfState conf_at(std::uint64_t index) const {
    return with_config_entry_ && index >= kConfigIndex ? conf_with_learner()
                                                       : raft::ConfState{{1, 2, 3}};
  }
  bool with_config_entry_ = false;
  void build_log() {
    open();
    for (std::uint64_t from = 1; from <= kEntries; from += 8) {
      raft::Message append;
      append.type = raft::MessageType::kAppend;
      append.from = 1;
      append.to = 2;
      append.term = 1;
      append.index = from - 1;
      append.log_term = from == 1 ? 0 : 1;
      append.commit = kEntries;
      for (std::uint64_t index = from; index < from + 8; ++index) {
        raft::Entry entry = testing::client_entry(index, payload(index));
        if (with_config_entry_ && index == kConfigIndex) {
          entry.type = raft::EntryType::kConfig;
          entry.client_id = 0;
          entry.sequence = 0;
          entry.payload = raft::encode_config(conf_with_learner());
        }
        append.entries.push_back(entry);
      }
      replica_->step(append);
      replica_->process();
      ASSERT_TRUE(replica_->log().run_flush_cycle().ok());
      replica_->process();
    }
    ASSERT_TRUE(replica_->log().run_checkpoint().ok());
    ASSERT_EQ(replica_->commit_index(), kEntries);
  }
  // A fresh log trimmed below 10, then below 24 with a power cut due after `step` syncs.
  void trim_twice_cut_after(std::uint64_t step, std::uint64_t* after_first, TrimResult* second) {
    replica_.reset();
    env_ = std::make_unique<store::MemoryEnv>();
    build_log();
    if (HasFatalFailure()) return;
    const TrimResult first_trim = replica_->trim(10, "test:");
    ASSERT_TRUE(first_trim.error.ok()) << first_trim.error.message;
    *after_first = replica_->log().first_index();
    ASSERT_GT(*after_first, 1U);
    env_->crash_after_syncs(step);
    *second = replica_->trim(24, "test:");
  }
  // A fresh log trimmed below 10; *planned is where a trim below 24 makes it start (the first
  // segment that keeps an entry at or above 24), several segments later.
  void trim_once(std::uint64_t* after_first, std::uint64_t* planned) {
    replica_.reset();
    env_ = std::make_unique<store::MemoryEnv>();
    build_log();
    if (HasFatalFailure()) return;
    ASSERT_TRUE(replica_->trim(10, "test:").error.ok());
    *after_first = replica_->log().first_index();
    *planned = *after_first;
    for (const store::CommitLog::SegmentInfo& segment : replica_->log().segments()) {
      if (segment.active || segment.last_index >= 24) break;
      *planned = segment.last_index + 1;
    }
    ASSERT_GE(*planned, *after_first + 8) << "the second trim deletes fewer than two segments";
  }
  // After a reopen: the log starts at `first`, holds every entry from there to kEntries, committed;
  // the node knows its topic table at the first index - 1 (a snapshot it sends starts there),
  // SNAPSHOT names that point and SNAPSHOT.next is gone; every retry is still answered.
  void expect_whole_at(std::uint64_t first, const std::string& where) {
    const store::CommitLog& log = replica_->log();
    EXPECT_EQ(log.first_index(), first) << where;
    EXPECT_EQ(log.last_index(), kEntries) << where;
    EXPECT_EQ(replica_->commit_index(), kEntries) << where;
    for (std::uint64_t index = log.first_index(); index <= kEntries; ++index) {
      auto batch = log.read(index, 1, 1 << 20);
      ASSERT_TRUE(batch.ok() && !batch->entries.empty()) << where << ": entry " << index;
      EXPECT_EQ(batch->entries.front().payload, payload(index)) << where << ": entry " << index;
    }
    EXPECT_TRUE(replica_->knows_first_index_topics())
        << where << ": the topic table as of " << log.first_index() - 1 << " is not known";
    EXPECT_FALSE(env_->exists("/data/SNAPSHOT.next")) << where;
    auto current = read_snapshot_file(env_.get(), "/data");
    ASSERT_TRUE(current.ok() && current->has_value()) << where;
    EXPECT_EQ((*current)->index + 1, log.first_index()) << where;
    EXPECT_TRUE((*current)->topics_at_index) << where;
    expect_every_retry_answered(where);
  }
  // Every append of the log, trimmed or not, is still answered from the dedup table.
  void expect_every_retry_answered(const std::string& where) {
    for (std::uint64_t index = 1; index <= kEntries; ++index) {
      if (with_config_entry_ && index == kConfigIndex) continue;
      EXPECT_EQ(lookup(100 + index, 1, {payload(index)}), DedupTable::Lookup::kFound)
          << where << ": the append at " << index << " (log starts at "
          << replica_->log().first_index() << ") would be appended again";
    }
  }
};

// Review finding 3 (round 2): a trim over an earlier trim, cut at every sync. The second trim's
// SNAPSHOT replaces the first's only once its segments are gone, so whichever log a restart finds,
// the appends the first trim removed are still answered.
TEST_F(TrimSnapshotTest, APowerCutDuringASecondTrimKeepsTheFirstTrimsDedupRecords) {
  int saw_old = 0;
  int saw_new = 0;
  bool completed = false;
  for (std::uint64_t step = 0; step < 60 && !completed; ++step) {
    std::uint64_t after_first = 0;
    TrimResult second_trim;
    ASSERT_NO_FATAL_FAILURE(trim_twice_cut_after(step, &after_first, &second_trim));
    completed = !env_->crashed();
    const std::string where = "cut after " + std::to_string(step) + " syncs";
    if (completed) {
      ASSERT_TRUE(second_trim.error.ok()) << where << ": " << second_trim.error.message;
    }
    const std::uint64_t planned = replica_->log().first_index();
    power_cut_and_reopen(static_cast<store::CrashMode>(step % 3), step + 1);
    if (HasFatalFailure()) return;
    const std::uint64_t first = replica_->log().first_index();
    EXPECT_GE(first, after_first) << where;
    (first == after_first ? saw_old : saw_new)++;
    if (completed) {
      EXPECT_EQ(first, planned) << where;
    }
    expect_every_retry_answered(where);
    EXPECT_FALSE(env_->exists("/data/SNAPSHOT.next")) << where << ": the open finishes or drops it";
  }
  EXPECT_TRUE(completed) << "the trim never finished within the steps tried";
  EXPECT_GT(saw_old, 0);
  EXPECT_GT(saw_new, 0);
}

// A trim's SNAPSHOT.next may leave out the least recently used clients (its budget), which only the
// previous SNAPSHOT holds. A cut before the trim deleted any segment leaves a log that SNAPSHOT names
// exactly, and SNAPSHOT.next's point still in the log: the open keeps SNAPSHOT (the trim never
// reached its commit point) and every retry is still answered.
TEST_F(TrimSnapshotTest, ACutBeforeATrimDeletedAnythingKeepsThePreviousSnapshot) {
  // About 13 clients of one append each fit: all of the first trim's, not all of the second's.
  max_snapshot_data_bytes_ = 900;
  int checked = 0;
  bool completed = false;
  for (std::uint64_t step = 0; step < 60 && !completed; ++step) {
    std::uint64_t after_first = 0;
    TrimResult second_trim;
    ASSERT_NO_FATAL_FAILURE(trim_twice_cut_after(step, &after_first, &second_trim));
    completed = !env_->crashed();
    power_cut_and_reopen(static_cast<store::CrashMode>(step % 3), step + 1);
    if (HasFatalFailure()) return;
    if (replica_->log().first_index() != after_first) continue;  // the trim deleted segments
    ++checked;
    expect_every_retry_answered("cut after " + std::to_string(step) + " syncs");
  }
  EXPECT_GT(checked, 0);
}

// The configuration in force at the log's first index - 1 (what a leader's snapshot at that point
// carries, docs/raft.md "Snapshots") across a trim cut at every sync: the configuration entry at 12
// lies between the first trim's point and the second's. Whichever log the restart finds, the
// configuration the node knows there is the one in force there (or none, for a log that starts
// where no saved snapshot names, a cut part-way through the segments' deletion); at the first
// trim's start and at the second's it is known.
TEST_F(TrimSnapshotTest, APowerCutDuringATrimKeepsTheConfigurationAtTheFirstIndex) {
  with_config_entry_ = true;
  int known_old = 0;
  int known_new = 0;
  bool completed = false;
  for (std::uint64_t step = 0; step < 60 && !completed; ++step) {
    std::uint64_t after_first = 0;
    TrimResult second_trim;
    ASSERT_NO_FATAL_FAILURE(trim_twice_cut_after(step, &after_first, &second_trim));
    ASSERT_LT(after_first, kConfigIndex + 1);
    completed = !env_->crashed();
    const std::string where = "cut after " + std::to_string(step) + " syncs";
    if (completed) {
      ASSERT_TRUE(second_trim.error.ok()) << where << ": " << second_trim.error.message;
      ASSERT_GT(replica_->log().first_index(), kConfigIndex + 1) << "the trim passes entry 12";
      EXPECT_EQ(replica_->first_index_conf(), conf_with_learner()) << where;
    }
    power_cut_and_reopen(static_cast<store::CrashMode>(step % 3), step + 1);
    if (HasFatalFailure()) return;
    const std::uint64_t first = replica_->log().first_index();
    const std::optional<raft::ConfState>& known = replica_->first_index_conf();
    if (known) {
      EXPECT_EQ(*known, conf_at(first - 1)) << where << ": the log starts at " << first;
    }
    // Known wherever the open finds SNAPSHOT naming the log's start (either trim's).
    auto saved = read_snapshot_file(env_.get(), "/data");
    ASSERT_TRUE(saved.ok()) << where;
    if (saved->has_value() && (*saved)->index + 1 == first) {
      EXPECT_TRUE(known.has_value()) << where;
      (first == after_first ? known_old : known_new) += known ? 1 : 0;
    }
    EXPECT_EQ(replica_->core().conf(), conf_with_learner()) << where;
  }
  EXPECT_TRUE(completed) << "the trim never finished within the steps tried";
  EXPECT_GT(known_old, 0);
  EXPECT_GT(known_new, 0);
}

// A trim of several segments, cut by a power cut after each of its segment files' deletions (a
// journaling file system keeps any prefix of the unlinks): the open finishes the deletion its
// SNAPSHOT.next planned, so the log starts where the trim planned (or, when nothing went, where it
// started), never in between, and the node knows its topic table at its first index - 1. Before,
// the log started in between and the node fell back to snapshots above its first index.
TEST_F(TrimSnapshotTest, ACutAfterEachSegmentDeletionIsFinishedByTheOpen) {
  int finished_by_open = 0;
  bool completed = false;
  for (std::uint64_t removes = 0; removes < 40 && !completed; ++removes) {
    std::uint64_t after_first = 0;
    std::uint64_t planned = 0;
    ASSERT_NO_FATAL_FAILURE(trim_once(&after_first, &planned));
    env_->crash_after_removes(removes);
    const TrimResult second = replica_->trim(24, "test:");
    completed = !env_->crashed();
    const std::string where = "cut after " + std::to_string(removes) + " file deletions";
    if (completed) {
      EXPECT_TRUE(second.error.ok()) << where << ": " << second.error.message;
    }
    power_cut_and_reopen(static_cast<store::CrashMode>(removes % 3), removes + 1);
    if (HasFatalFailure()) return;
    const std::uint64_t first = replica_->log().first_index();
    if (!completed && removes > 0) ++finished_by_open;
    ASSERT_NO_FATAL_FAILURE(
        expect_whole_at(removes == 0 && !completed ? after_first : planned, where));
    // The node goes on: the next trim continues from the table the open loaded.
    if (first == planned) {
      ASSERT_TRUE(replica_->trim(kEntries, "test:").error.ok()) << where;
      EXPECT_GT(replica_->log().first_index(), planned) << where;
      EXPECT_TRUE(replica_->knows_first_index_topics()) << where;
    }
  }
  EXPECT_TRUE(completed) << "the trim never finished within the cuts tried";
  EXPECT_GE(finished_by_open, 3) << "cuts between the segment deletions";
}

// The node's first trim (no SNAPSHOT yet: the log started at 1), cut after each file deletion: the
// open finishes it too.
TEST_F(TrimSnapshotTest, AFirstTrimCutPartWayIsFinishedByTheOpen) {
  int finished_by_open = 0;
  for (std::uint64_t removes = 1; removes <= 5; ++removes) {
    replica_.reset();
    env_ = std::make_unique<store::MemoryEnv>();
    ASSERT_NO_FATAL_FAILURE(build_log());
    std::uint64_t planned = 1;
    for (const store::CommitLog::SegmentInfo& segment : replica_->log().segments()) {
      if (segment.active || segment.last_index >= 24) break;
      planned = segment.last_index + 1;
    }
    ASSERT_GE(planned, 9u);
    env_->crash_after_removes(removes);
    (void)replica_->trim(24, "test:");
    ASSERT_TRUE(env_->crashed()) << removes;
    ASSERT_FALSE(env_->exists("/data/SNAPSHOT"));
    power_cut_and_reopen(store::CrashMode::kLoseUnflushed, removes);
    if (HasFatalFailure()) return;
    if (replica_->log().first_index() == planned) ++finished_by_open;
    ASSERT_NO_FATAL_FAILURE(
        expect_whole_at(planned, "first trim cut after " + std::to_string(removes) + " deletions"));
  }
  EXPECT_EQ(finished_by_open, 5);
}

// A deletion spread over rounds (one segment a round here), cut by a power cut after each round:
// between rounds the disk is what a cut inside a one-round deletion leaves, so the open finishes
// it; while the log starts part-way the running node knows no table as of its first index - 1,
// and once it starts at the planned point it knows the trim's again.
TEST_F(TrimSnapshotTest, ADeletionSpreadOverRoundsIsFinishedByTheOpenAfterACutInAnyRound) {
  int cut_part_way = 0;
  bool finished = false;
  for (int rounds = 1; rounds <= 12 && !finished; ++rounds) {
    std::uint64_t after_first = 0;
    std::uint64_t planned = 0;
    trim_segments_per_round_ = 0;
    ASSERT_NO_FATAL_FAILURE(trim_once(&after_first, &planned));
    replica_.reset();
    trim_segments_per_round_ = 1;
    open();
    const std::string where = "cut after " + std::to_string(rounds) + " round(s)";
    for (int round = 0; round < rounds; ++round) {
      const TrimResult result = replica_->trim(24, "test:");
      ASSERT_TRUE(result.error.ok()) << where << ": " << result.error.message;
    }
    const std::uint64_t first = replica_->log().first_index();
    ASSERT_GT(first, after_first) << where << ": every round deletes a segment";
    finished = first == planned && !env_->exists("/data/SNAPSHOT.next");
    if (first < planned) {
      ++cut_part_way;
      EXPECT_TRUE(env_->exists("/data/SNAPSHOT.next")) << where;
      EXPECT_FALSE(replica_->knows_first_index_topics()) << where;
      EXPECT_FALSE(replica_->knows_first_index_conf()) << where;
    } else {
      EXPECT_TRUE(replica_->knows_first_index_topics()) << where;
    }
    power_cut_and_reopen(static_cast<store::CrashMode>(rounds % 3), 100 + rounds);
    if (HasFatalFailure()) return;
    ASSERT_NO_FATAL_FAILURE(expect_whole_at(planned, where));
  }
  EXPECT_TRUE(finished) << "the deletion never finished";
  EXPECT_GE(cut_part_way, 1) << "cuts with the log starting part-way";
}

// A clean stop in the middle of a spread deletion finishes it before the store closes (no
// SNAPSHOT.next left for the open), and a trim asked meanwhile continues it before anything else.
TEST_F(TrimSnapshotTest, AStopOrANewTrimInTheMiddleOfASpreadDeletionFinishesItFirst) {
  std::uint64_t after_first = 0;
  std::uint64_t planned = 0;
  ASSERT_NO_FATAL_FAILURE(trim_once(&after_first, &planned));
  replica_.reset();
  trim_segments_per_round_ = 1;
  open();
  ASSERT_TRUE(replica_->trim(24, "test:").error.ok());
  ASSERT_LT(replica_->log().first_index(), planned);
  // A trim further than the deletion: the deletion goes on, one segment a call, to its point
  // first (SNAPSHOT.next is not rewritten for another point meanwhile).
  auto planned_file = read_snapshot_file(env_.get(), "/data", SnapshotFile::kNext);
  ASSERT_TRUE(planned_file.ok() && planned_file->has_value());
  EXPECT_EQ((*planned_file)->index + 1, planned);
  ASSERT_TRUE(replica_->trim(kEntries, "test:").error.ok());
  planned_file = read_snapshot_file(env_.get(), "/data", SnapshotFile::kNext);
  if (replica_->log().first_index() < planned) {
    ASSERT_TRUE(planned_file.ok() && planned_file->has_value());
    EXPECT_EQ((*planned_file)->index + 1, planned);
  }
  replica_.reset();  // a clean stop
  EXPECT_FALSE(env_->exists("/data/SNAPSHOT.next")) << "the stop left the deletion to the open";
  auto current = read_snapshot_file(env_.get(), "/data");
  ASSERT_TRUE(current.ok() && current->has_value());
  EXPECT_GE((*current)->index + 1, planned);
  trim_segments_per_round_ = 0;
  open();
  EXPECT_GE(replica_->log().first_index(), planned);
  EXPECT_TRUE(replica_->knows_first_index_topics());
  expect_every_retry_answered("after the stop");
}

// The same stop by a store error (an unlink refused part-way): the trim fails, the running node
// leaves SNAPSHOT.next in place (it no longer renames it over SNAPSHOT for a log that starts
// between the two points), and the next open finishes the deletion.
TEST_F(TrimSnapshotTest, ATrimAStoreErrorStoppedPartWayIsFinishedByTheNextOpen) {
  for (std::uint64_t removes = 1; removes <= 4; ++removes) {
    std::uint64_t after_first = 0;
    std::uint64_t planned = 0;
    ASSERT_NO_FATAL_FAILURE(trim_once(&after_first, &planned));
    env_->fail_remove_after(removes);
    const TrimResult second = replica_->trim(24, "test:");
    const std::string where = "failed after " + std::to_string(removes) + " file deletions";
    EXPECT_FALSE(second.error.ok()) << where;
    EXPECT_GT(replica_->log().first_index(), after_first) << where;
    EXPECT_LT(replica_->log().first_index(), planned) << where;
    EXPECT_FALSE(replica_->knows_first_index_topics()) << where;
    replica_.reset();  // a restart (the store failed for good)
    open();
    if (HasFatalFailure()) return;
    ASSERT_NO_FATAL_FAILURE(expect_whole_at(planned, where));
  }
}

// Anything that does not match exactly is left as before (logged, the file taken for its dedup part
// when it describes the log's start): the same cut (after the trim's first segment), then one thing
// made not to match each time; nothing more is deleted, every entry the log holds stays readable.
TEST_F(TrimSnapshotTest, ACutTrimThatDoesNotMatchExactlyIsNotFinished) {
  struct Variant {
    const char* name;
    std::function<void(SnapshotData*, store::MemoryEnv*)> change;
    bool retries_answered;  // the changed file still describes the log's start
  };
  const std::vector<Variant> variants = {
      // A trim always cuts at a segment boundary: a damaged or foreign file.
      {"a point inside a segment", [](SnapshotData* d, store::MemoryEnv*) { d->index += 1; }, true},
      // An install's SNAPSHOT.next whose log reset never came must never drive a deletion.
      {"an install's file",
       [](SnapshotData* d, store::MemoryEnv*) { d->origin = SnapshotOrigin::kInstalled; }, false},
      {"a version-1 trim (table not known)",
       [](SnapshotData* d, store::MemoryEnv*) { d->topics_at_index = false; }, true},
      {"another term at the point", [](SnapshotData* d, store::MemoryEnv*) { d->term += 1; },
       false},
      {"TOPICSTATE short of the point",
       [](SnapshotData* d, store::MemoryEnv* env) {
         auto state = read_topic_state(env, "/data");
         ASSERT_TRUE(state.ok() && state->has_value());
         TopicState shorter = **state;
         shorter.through_index = d->index - 1;
         ASSERT_TRUE(write_topic_state(env, "/data", shorter).ok());
       },
       true},
      // A point past the commit index (entries 33..40 appended, not committed; TOPICSTATE raised
      // to the point, so that only the commit check stands in the way): uncommitted entries are
      // never deleted.
      {"a point past the commit index",
       [](SnapshotData* d, store::MemoryEnv* env) {
         auto log =
             store::CommitLog::open("/data/log", testing::stepped_follower_config(env).store);
         ASSERT_TRUE(log.ok()) << log.status().to_string();
         const std::string body(15 << 10, 'u');
         for (std::uint64_t index = kEntries + 1; index <= kEntries + 8; ++index) {
           store::EntryToAppend entry{store::EntryMeta{index, 1}, body};
           ASSERT_TRUE((*log)->append_no_wait({&entry, 1}).ok());
         }
         ASSERT_TRUE((*log)->run_flush_cycle().ok());
         ASSERT_EQ((*log)->commit_index(), kEntries);
         for (const store::CommitLog::SegmentInfo& segment : (*log)->segments()) {
           if (segment.base_index > kEntries + 1 && segment.last_index >= segment.base_index) {
             d->index = segment.base_index - 1;
             break;
           }
         }
         ASSERT_GT(d->index, kEntries);
         ASSERT_TRUE((*log)->close().ok());
         auto state = read_topic_state(env, "/data");
         ASSERT_TRUE(state.ok() && state->has_value());
         TopicState raised = **state;
         raised.through_index = d->index;
         ASSERT_TRUE(write_topic_state(env, "/data", raised).ok());
       },
       true},
      // CONFSTATE names a configuration entry at or below the point: deleting it would make the
      // open take it for a committed (trimmed) configuration.
      {"a CONFSTATE record at or below the point",
       [](SnapshotData* d, store::MemoryEnv* env) {
         auto file = ConfStateFile::open("/data", env);
         ASSERT_TRUE(file.ok()) << file.status().to_string();
         std::vector<raft::ConfRecord> records = (*file)->current();
         if (records.empty()) {  // never written: the bootstrap configuration is the base
           records.push_back(
               raft::ConfRecord{0, 0, testing::stepped_follower_config(env).raft.initial_conf});
         }
         raft::ConfRecord added = records.back();
         added.index = d->index;
         added.term = 1;
         added.conf.learners.push_back(9);
         added.conf.addresses.push_back({9, "127.0.0.1:7009"});
         records.push_back(added);
         ASSERT_TRUE((*file)->write(records).ok());
       },
       true},
      {"SNAPSHOT unreadable",
       [](SnapshotData*, store::MemoryEnv* env) {
         auto bytes = env->read_file("/data/SNAPSHOT", 1 << 20);
         ASSERT_TRUE(bytes.ok());
         std::string damaged = *bytes;
         damaged[damaged.size() / 2] ^= 0x04;
         ASSERT_TRUE(env->write_file("/data/SNAPSHOT", damaged).ok());
       },
       true},
  };
  for (const Variant& variant : variants) {
    std::uint64_t after_first = 0;
    std::uint64_t planned = 0;
    ASSERT_NO_FATAL_FAILURE(trim_once(&after_first, &planned));
    env_->crash_after_removes(2);  // the trim's first segment (its data and index files)
    (void)replica_->trim(24, "test:");
    ASSERT_TRUE(env_->crashed());
    replica_.reset();
    env_->restart(store::CrashOptions{store::CrashMode::kLoseUnflushed, 1});
    auto planned_file = read_snapshot_file(env_.get(), "/data", SnapshotFile::kNext);
    ASSERT_TRUE(planned_file.ok() && planned_file->has_value());
    ASSERT_EQ((*planned_file)->index + 1, planned);
    SnapshotData changed = **planned_file;
    ASSERT_NO_FATAL_FAILURE(variant.change(&changed, env_.get())) << variant.name;
    ASSERT_TRUE(env_->write_file("/data/SNAPSHOT.next", encode_snapshot_data(changed)).ok());
    open();
    if (HasFatalFailure()) return;
    const store::CommitLog& log = replica_->log();
    EXPECT_GT(log.first_index(), after_first) << variant.name;
    EXPECT_LT(log.first_index(), planned) << variant.name << ": deleted although it does not match";
    EXPECT_FALSE(replica_->knows_first_index_topics()) << variant.name;
    for (std::uint64_t index = log.first_index(); index <= kEntries; ++index) {
      auto batch = log.read(index, 1, 1 << 20);
      ASSERT_TRUE(batch.ok() && !batch->entries.empty()) << variant.name << ": entry " << index;
      EXPECT_EQ(batch->entries.front().payload, payload(index)) << variant.name << ": " << index;
    }
    if (variant.retries_answered) expect_every_retry_answered(variant.name);
  }
}

}  // namespace
}  // namespace raftlog::replica

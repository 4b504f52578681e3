// The dispatcher of a RUNNING follower whose log an installed snapshot moved past what it applied
// (src/server/dispatcher.h, skip_trimmed): it seeds the topic queues from the snapshot's topic
// table, so that version-1 entries after the snapshot continue each topic's offsets as the leader
// numbers them, and takes the snapshot's consumer group table (handed over by the install, or read
// from SNAPSHOT when the hand-over has not come), or marks every offset unknown when the snapshot
// carried none. A second install seeds from its own table. The at-open path is
// dispatcher_seed_test.cpp's.
//
// A real Node and Dispatcher, without gRPC: the node is follower 2 of {1, 2, 3} and the test plays
// leader 1, sending AppendEntries and snapshots into Node::receive.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "derived/envelope.h"
#include "derived/group_commit.h"
#include "derived/group_table.h"
#include "node/node_test_support.h"
#include "node/temp_dir.h"
#include "replica/snapshot_data.h"
#include "server/dispatcher.h"
#include "server/node.h"
#include "shared/v1_envelope.h"

namespace raftlog::server::testing {
namespace {

constexpr raft::Term kTerm = 1;
constexpr char kClusterId[] = "dispatcher-install-test";

// The follower's messages go nowhere: the test's leader does not need its answers.
struct DiscardingSender final : MessageSender {
  void send(raft::Message) override {}
};

raft::Entry entry_at(std::uint64_t index, std::string payload) {
  raft::Entry entry;
  entry.index = index;
  entry.term = kTerm;
  entry.payload = std::move(payload);
  return entry;
}

// A version-2 envelope entry of `topic` at the leader's `offset`.
raft::Entry topic_entry(std::uint64_t index, const std::string& topic, std::uint64_t offset) {
  std::string payload;
  derived::encode_envelope(1000 + index, topic, {}, "v2", &payload);
  EXPECT_TRUE(derived::stamp_envelope(&payload, 1000 + index, offset));
  raft::Entry entry = entry_at(index, std::move(payload));
  entry.has_envelope = true;
  return entry;
}

// A version-1 envelope entry of `topic` (no topic offset: whoever indexes it counts it), as
// binaries from before topic offsets wrote it.
raft::Entry v1_topic_entry(std::uint64_t index, const std::string& topic) {
  raft::Entry entry = entry_at(index, raftlog::testing::v1_envelope(topic, "v1"));
  entry.has_envelope = true;
  return entry;
}

raft::Entry group_commit_entry(std::uint64_t index, const std::string& group,
                               const std::string& topic, std::uint64_t offset) {
  raft::Entry entry = entry_at(index, derived::encode_group_commit({group, topic, offset}));
  entry.is_group_commit = true;
  return entry;
}

derived::GroupSlot known_slot(std::uint64_t offset, std::uint64_t index) {
  return derived::GroupSlot{true, derived::GroupOffset{offset, index, kTerm}};
}

// The leader's consumer group table as of the snapshot at `index`: `groups` after the entry at
// `index` (its boundary is index + 1).
std::string group_section(std::uint64_t index,
                          std::map<std::string, std::map<std::string, derived::GroupSlot>> groups) {
  derived::GroupTableState state;
  state.cluster_id = kClusterId;
  state.boundary = index + 1;
  state.boundary_term = kTerm;
  state.groups = std::move(groups);
  return derived::encode_group_table(state);
}

// A topic's records: (offset, log index) each.
using Records = std::vector<std::pair<std::uint64_t, std::uint64_t>>;

// Expectations on the slots of a group table.
struct Expect {
  const derived::GroupTableState& state;
  explicit Expect(const derived::GroupTableState& s) : state(s) {}
  void known(const std::string& group, const std::string& topic, std::uint64_t offset,
             std::uint64_t index) const {
    EXPECT_EQ(slot(group, topic), std::optional(known_slot(offset, index)))
        << group << "/" << topic;
  }
  void unknown(const std::string& group, const std::string& topic) const {
    EXPECT_EQ(slot(group, topic), std::optional(derived::GroupSlot{})) << group << "/" << topic;
  }
  std::optional<derived::GroupSlot> slot(const std::string& group, const std::string& topic) const {
    auto found = state.groups.find(group);
    if (found == state.groups.end()) return std::nullopt;
    auto slot = found->second.find(topic);
    if (slot == found->second.end()) return std::nullopt;
    return slot->second;
  }
};

// Follower 2 with its dispatcher, driven by the test as leader 1.
class RunningFollower {
 public:
  // `hand_over`: the install hands its group table to the dispatcher (as Server does); false
  // keeps it back, so the dispatcher finds the table only in SNAPSHOT.
  explicit RunningFollower(bool hand_over) : hand_over_(hand_over) {}
  ~RunningFollower() {
    if (dispatcher_ != nullptr) dispatcher_->stop();
    if (node_ != nullptr) node_->stop();
  }

  // Opens and starts the node and its dispatcher. Call through ASSERT_NO_FATAL_FAILURE.
  void start() {
    config_ = test_config(dir_.path(), 3);
    config_.node_id = 2;
    config_.data_dir = dir_.path() + "/node2";
    config_.cluster_id = kClusterId;
    // Only the test's leader speaks: no election while a test runs (10-20 s timeout).
    config_.tick_ms = 100;
    config_.election_ticks = 100;
    node_ = open_node(config_, &sender_);
    ASSERT_NE(node_, nullptr);
    std::string problem;
    dispatcher_ = Dispatcher::open(node_.get(), config_, &problem);
    ASSERT_NE(dispatcher_, nullptr) << problem;
    Dispatcher* dispatcher = dispatcher_.get();
    node_->set_snapshot_section(Node::SnapshotSection{
        [dispatcher](std::uint64_t index) { return dispatcher->snapshot_section(index); },
        [](std::string_view section, std::uint64_t index) {
          return Dispatcher::check_snapshot_section(section, index, kClusterId);
        },
        [this, dispatcher](std::uint64_t, const std::string& section) {
          if (hand_over_) dispatcher->adopt_snapshot_section(section);
        }});
    node_->start();
    dispatcher_->start();
  }

  // Leader 1's AppendEntries: `entries` after (prev_index, kTerm), committing `commit`.
  void replicate(std::uint64_t prev_index, std::vector<raft::Entry> entries, std::uint64_t commit) {
    raft::Message m;
    m.type = raft::MessageType::kAppend;
    m.from = 1;
    m.to = 2;
    m.term = kTerm;
    m.index = prev_index;
    m.log_term = prev_index == 0 ? 0 : kTerm;
    m.entries = std::move(entries);
    m.commit = commit;
    node_->receive(std::move(m));
  }

  // Leader 1's snapshot at `index` with its topic table `topics` and node section `section`.
  void install(std::uint64_t index, std::vector<replica::TopicOffsets::TopicNext> topics,
               std::string section) {
    raft::ConfState conf;
    conf.voters = {1, 2, 3};
    for (const auto& [id, address] : config_.members) conf.addresses.push_back({id, address});
    replica::SnapshotData data;
    data.index = index;
    data.term = kTerm;
    data.conf = conf;
    data.topics = std::move(topics);
    data.section = std::move(section);
    data.dedup_view_start = 1;
    raft::Snapshot snapshot;
    snapshot.index = index;
    snapshot.term = kTerm;
    snapshot.conf = conf;
    snapshot.data = replica::encode_snapshot_data(data);
    raft::Message m;
    m.type = raft::MessageType::kSnapshot;
    m.from = 1;
    m.to = 2;
    m.term = kTerm;
    m.commit = index;
    m.snapshot = std::move(snapshot);
    node_->receive(std::move(m));
  }

  // Both the indexes and the group table applied every entry through `index`.
  bool applied_through(std::uint64_t index) const {
    return wait_until(
        [&] {
          return dispatcher_->indexes().boundary() > index &&
                 dispatcher_->groups().boundary() > index;
        },
        10s);
  }
  bool log_starts_at(std::uint64_t first) const {
    return wait_until([&] { return node_->log_bounds().first == first; }, 10s);
  }

  // (offset, log index) of `topic`'s records from `from_offset` that the log still holds.
  Records topic_records(const std::string& topic, std::uint64_t from_offset) {
    const derived::TopicRead read = dispatcher_->indexes().read_topic(
        topic, from_offset, 100, node_->commit_index(), node_->log_bounds().first);
    EXPECT_EQ(read.status, derived::TopicReadStatus::kOk) << topic << " from " << from_offset;
    Records records;
    for (const derived::QueueRecord& record : read.records)
      records.emplace_back(record.offset, record.index);
    return records;
  }

  derived::GroupTableState groups() const { return dispatcher_->groups().state(); }

  // The old log every test starts from: "orders" at offsets 0 and 1 (1..2), billing's commit of
  // "orders" at 2 (3), a plain entry (4); all committed and applied.
  void build_old_log() {
    replicate(0,
              {topic_entry(1, "orders", 0), topic_entry(2, "orders", 1),
               group_commit_entry(3, "billing", "orders", 2), entry_at(4, "plain")},
              4);
    ASSERT_TRUE(applied_through(4));
    Expect(groups()).known("billing", "orders", 2, 3);
  }

 private:
  TempDir dir_;
  NodeConfig config_;
  DiscardingSender sender_;
  bool hand_over_;
  std::unique_ptr<Node> node_;
  std::unique_ptr<Dispatcher> dispatcher_;  // after node_: destroyed (stopped) first
};

// The snapshot at 10: "old" (whose entries the follower never held) at 4, "orders" at 7; billing
// read "orders" up to 5 (commit at 9).
constexpr std::uint64_t kFirstSnapshot = 10;
std::vector<replica::TopicOffsets::TopicNext> first_topics() { return {{"old", 4}, {"orders", 7}}; }
std::string first_section() {
  return group_section(kFirstSnapshot, {{"billing", {{"orders", known_slot(5, 9)}}}});
}

// What every test starts with: the follower holds the old log (build_old_log), installs the first
// snapshot (with `section` as its node section) while it runs, and receives after it two
// version-1 entries of "old", one of "orders", and billing's commit of "old" at 1 (11..14), which
// its dispatcher applies. Both topics go on from the snapshot's table, not from this node's count.
void run_through_the_first_snapshot(RunningFollower& follower, std::string section) {
  ASSERT_NO_FATAL_FAILURE(follower.start());
  ASSERT_NO_FATAL_FAILURE(follower.build_old_log());
  follower.install(kFirstSnapshot, first_topics(), std::move(section));
  ASSERT_TRUE(follower.log_starts_at(kFirstSnapshot + 1));
  follower.replicate(kFirstSnapshot,
                     {v1_topic_entry(11, "old"), v1_topic_entry(12, "old"),
                      v1_topic_entry(13, "orders"), group_commit_entry(14, "billing", "old", 1)},
                     14);
  ASSERT_TRUE(follower.applied_through(14));
  EXPECT_EQ(follower.topic_records("old", 4), (Records{{4, 11}, {5, 12}}))
      << "the version-1 entries of a topic this node never held are not numbered on from the "
         "snapshot's table";
  EXPECT_EQ(follower.topic_records("orders", 7), (Records{{7, 13}}))
      << "a topic this node held is not numbered on from the snapshot's table";
}

TEST(DispatcherInstall, ARunningFollowersTopicsContinueFromTheSnapshotAndItsGroupsAreTheLeaders) {
  RunningFollower follower(/*hand_over=*/true);
  ASSERT_NO_FATAL_FAILURE(run_through_the_first_snapshot(follower, first_section()));
  const derived::GroupTableState groups = follower.groups();
  EXPECT_TRUE(groups.complete);
  Expect(groups).known("billing", "orders", 5, 9);  // the leader's, not this node's 2 at 3
  Expect(groups).known("billing", "old", 1, 14);
  EXPECT_EQ(groups.groups.size(), 1u);
}

TEST(DispatcherInstall, WithoutTheInstallsHandOverTheGroupTableIsTakenFromSnapshot) {
  RunningFollower follower(/*hand_over=*/false);
  ASSERT_NO_FATAL_FAILURE(run_through_the_first_snapshot(follower, first_section()));
  const derived::GroupTableState groups = follower.groups();
  EXPECT_TRUE(groups.complete) << "the table in SNAPSHOT was not adopted";
  Expect(groups).known("billing", "orders", 5, 9);
  Expect(groups).known("billing", "old", 1, 14);
}

TEST(DispatcherInstall, ASnapshotWithoutAGroupTableMarksEveryOffsetUnknown) {
  // The leader's table had not applied past the snapshot, or did not fit: it sends none.
  RunningFollower follower(/*hand_over=*/true);
  ASSERT_NO_FATAL_FAILURE(run_through_the_first_snapshot(follower, ""));
  const derived::GroupTableState groups = follower.groups();
  EXPECT_FALSE(groups.complete) << "commits the install replaced count as applied";
  Expect(groups).unknown("billing", "orders");  // this node's 2 at 3 may be stale
  Expect(groups).known("billing", "old", 1, 14);
}

TEST(DispatcherInstall, ASecondInstallSeedsFromItsOwnTableOnly) {
  RunningFollower follower(/*hand_over=*/true);
  ASSERT_NO_FATAL_FAILURE(run_through_the_first_snapshot(follower, first_section()));

  // The follower falls behind again: the leader's snapshot at 30 says "old" has 9 entries (three
  // after the two this node numbered 4 and 5) and "orders" 8, and "new" (never seen here) 2.
  constexpr std::uint64_t kSecondSnapshot = 30;
  follower.install(kSecondSnapshot, {{"new", 2}, {"old", 9}, {"orders", 8}},
                   group_section(kSecondSnapshot, {{"billing", {{"orders", known_slot(6, 29)}}}}));
  ASSERT_TRUE(follower.log_starts_at(kSecondSnapshot + 1));
  follower.replicate(kSecondSnapshot,
                     {v1_topic_entry(31, "old"), v1_topic_entry(32, "orders"),
                      v1_topic_entry(33, "new"), v1_topic_entry(34, "old")},
                     34);
  ASSERT_TRUE(follower.applied_through(34));

  EXPECT_EQ(follower.topic_records("old", 9), (Records{{9, 31}, {10, 34}}));
  EXPECT_EQ(follower.topic_records("orders", 8), (Records{{8, 32}}));
  EXPECT_EQ(follower.topic_records("new", 2), (Records{{2, 33}}));
  const derived::GroupTableState groups = follower.groups();
  EXPECT_TRUE(groups.complete);
  Expect(groups).known("billing", "orders", 6, 29);
  EXPECT_EQ(Expect(groups).slot("billing", "old"), std::nullopt)
      << "the commit at 14 is not in the leader's table at 30";
}

}  // namespace
}  // namespace raftlog::server::testing

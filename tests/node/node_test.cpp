// The Node driven directly (no gRPC): a single-node cluster, and a two-node cluster whose second
// member is played by the test's MessageSender (it grants votes and answers heartbeats, and
// acknowledges appends only when told to, which is how a test keeps an append waiting for commit).
#include "server/node.h"

#include <gtest/gtest.h>
#include <sys/mount.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "temp_dir.h"

namespace raftlog::server {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;

constexpr auto kWait = 3s;  // longest any single step may take before the test fails

// Plays every member other than node 1: votes for it, answers its heartbeats, and acknowledges its
// appends while `ack_appends` is set. Records every message node 1 sends.
class FakePeers final : public MessageSender {
 public:
  void send(raft::Message message) override {
    Node* node = nullptr;
    {
      std::lock_guard lock(mu_);
      sent_.push_back(message);
      node = node_;
    }
    if (node == nullptr) return;
    raft::Message reply;
    reply.from = message.to;
    reply.to = message.from;
    reply.term = message.term;
    switch (message.type) {
      case raft::MessageType::kPreVote:
        reply.type = raft::MessageType::kPreVoteResponse;
        break;
      case raft::MessageType::kVote:
        reply.type = raft::MessageType::kVoteResponse;
        break;
      case raft::MessageType::kHeartbeat:
        reply.type = raft::MessageType::kHeartbeatResponse;
        reply.context = message.context;
        break;
      case raft::MessageType::kAppend:
        if (!ack_appends.load()) return;
        reply.type = raft::MessageType::kAppendResponse;
        reply.index = message.index + message.entries.size();
        break;
      default:
        return;
    }
    node->receive(std::move(reply));  // thread-safe: only queues an input
  }

  void attach(Node* node) {
    std::lock_guard lock(mu_);
    node_ = node;
  }
  std::vector<raft::Message> sent() const {
    std::lock_guard lock(mu_);
    return sent_;
  }

  std::atomic<bool> ack_appends{true};

 private:
  mutable std::mutex mu_;
  Node* node_ = nullptr;
  std::vector<raft::Message> sent_;
};

NodeConfig test_config(const std::string& dir, std::size_t members) {
  NodeConfig config;
  config.node_id = 1;
  for (std::uint64_t id = 1; id <= members; ++id)
    config.members[id] = "127.0.0.1:" + std::to_string(40000 + id);
  config.data_dir = dir + "/node1";
  config.cluster_id = "node-test";  // a multi-node cluster may not keep the shared default
  config.tick_ms = 10;
  config.election_ticks = 5;  // 50-100 ms election timeout
  config.heartbeat_ticks = 1;
  config.store.segment_size_bytes = 1 << 20;
  config.store.max_entry_size_bytes = 64 << 10;
  config.store.preallocate_next_segment = false;
  config.max_entries_per_append = 8;
  config.max_append_bytes = 256 << 10;
  // The shared disk these tests run on may be fuller than the default 90 % high watermark; only the
  // watermark test sets its own.
  config.disk_high_watermark = 1.0;
  config.disk_low_watermark = 0.99;
  return config;
}

std::unique_ptr<Node> open_node(const NodeConfig& config, MessageSender* sender) {
  NodeError error;
  std::unique_ptr<Node> node = Node::open(config, sender, &error);
  EXPECT_NE(node, nullptr) << error.message;
  return node;
}

bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout = kWait) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

bool wait_for_leader(const Node& node) {
  return wait_until([&] { return node.status().role == raft::Role::kLeader; });
}

// The setup most tests share: node 1 opened on FakePeers that play the other members. Members are
// destroyed in reverse order, so the node goes before the peers it sends to.
struct FakeCluster {
  FakePeers sender;
  std::unique_ptr<Node> node;

  // Opens node 1, lets the fake peers answer it (a one-member cluster never sends them anything), starts
  // it and waits until it leads. A fatal failure ends only this function: call it through
  // ASSERT_NO_FATAL_FAILURE.
  void start_leader(const NodeConfig& config, NodeEvents* events = nullptr) {
    NodeError error;
    node = Node::open(config, &sender, &error, events);
    ASSERT_NE(node, nullptr) << error.message;
    sender.attach(node.get());
    node->start();
    ASSERT_TRUE(wait_for_leader(*node));
  }
  ~FakeCluster() { sender.attach(nullptr); }  // no reply may reach a node that is being destroyed
};

// An append whose callback may run later; `calls` catches a second completion.
struct AsyncAppend {
  std::shared_ptr<std::promise<AppendResult>> promise =
      std::make_shared<std::promise<AppendResult>>();
  std::shared_ptr<std::atomic<int>> calls = std::make_shared<std::atomic<int>>(0);
  std::future<AppendResult> future = promise->get_future();

  Node::AppendCallback callback() {
    return [promise = promise, calls = calls](AppendResult result) {
      if (calls->fetch_add(1) == 0) promise->set_value(std::move(result));
    };
  }
  bool done() const { return future.wait_for(0s) == std::future_status::ready; }
  AppendResult get() {
    if (future.wait_for(kWait) != std::future_status::ready) {
      ADD_FAILURE() << "append did not complete";
      return AppendResult{};
    }
    return future.get();
  }
};

AsyncAppend start_append(Node& node, std::vector<std::string> payloads, std::uint64_t client_id = 0,
                         std::uint64_t sequence = 0) {
  AsyncAppend append;
  node.append(std::move(payloads), client_id, sequence, append.callback());
  return append;
}

AppendResult append_and_wait(Node& node, std::vector<std::string> payloads,
                             std::uint64_t client_id = 0, std::uint64_t sequence = 0) {
  AsyncAppend append = start_append(node, std::move(payloads), client_id, sequence);
  AppendResult result = append.get();
  EXPECT_EQ(append.calls->load(), 1);
  return result;
}

std::vector<raft::Entry> read_all(const Node& node, std::uint64_t from) {
  std::vector<raft::Entry> entries;
  const NodeError error = node.read_committed(from, 1000, 1 << 20, &entries);
  EXPECT_TRUE(error.ok()) << error.message;
  return entries;
}

TEST(Node, SingleNodeElectsItselfAndCommitsAppends) {
  TempDir dir;
  FakeCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.start_leader(test_config(dir.path(), 1)));
  Node& node = *cluster.node;

  const AppendResult first = append_and_wait(node, {"alpha", "beta"}, 7, 1);
  ASSERT_TRUE(first.error.ok()) << first.error.message;
  EXPECT_EQ(first.last_index, first.first_index + 1);
  EXPECT_EQ(first.term, node.status().term);
  EXPECT_FALSE(first.duplicate);
  EXPECT_GE(node.commit_index(), first.last_index);

  const AppendResult second = append_and_wait(node, {"gamma"});
  ASSERT_TRUE(second.error.ok()) << second.error.message;
  EXPECT_EQ(second.first_index, first.last_index + 1);
  EXPECT_EQ(second.last_index, second.first_index);

  const std::vector<raft::Entry> entries = read_all(node, first.first_index);
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].payload, "alpha");
  EXPECT_EQ(entries[0].client_id, 7u);
  EXPECT_EQ(entries[0].sequence, 1u);
  EXPECT_EQ(entries[1].payload, "beta");
  EXPECT_EQ(entries[1].index, first.last_index);
  EXPECT_EQ(entries[2].payload, "gamma");
  EXPECT_EQ(entries[2].client_id, 0u);
  for (const raft::Entry& entry : entries) EXPECT_EQ(entry.term, first.term);

  // Sync flush mode: a committed entry of a single node is durable.
  EXPECT_GE(node.flushed_index(), second.last_index);
  // The status snapshot is published after each round of the loop, so it may trail a callback.
  ASSERT_TRUE(wait_until([&] { return node.status().commit_index >= second.last_index; }));
  const NodeStatus status = node.status();
  EXPECT_EQ(status.leader_id, 1u);
  EXPECT_EQ(status.leader_address, "127.0.0.1:40001");
  EXPECT_GE(status.commit_index, second.last_index);
  EXPECT_TRUE(status.peers.empty());
  // A one-member cluster has nobody to talk to.
  EXPECT_TRUE(cluster.sender.sent().empty());

  // A linearizable read barrier covers every completed append.
  std::promise<ReadIndexResult> read;
  node.read_index([&read](ReadIndexResult result) { read.set_value(std::move(result)); });
  auto read_future = read.get_future();
  ASSERT_EQ(read_future.wait_for(kWait), std::future_status::ready);
  const ReadIndexResult barrier = read_future.get();
  ASSERT_TRUE(barrier.error.ok()) << barrier.error.message;
  EXPECT_GE(barrier.read_index, second.last_index);
}

TEST(Node, InvalidAppendsFailSynchronouslyAndWriteNothing) {
  TempDir dir;
  const NodeConfig config = test_config(dir.path(), 1);
  FakeCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.start_leader(config));
  Node& node = *cluster.node;
  ASSERT_TRUE(wait_until([&] { return node.status().commit_index >= 1; }));  // the leader's no-op
  const std::uint64_t last_before = node.status().last_index;

  struct Case {
    const char* name;
    std::vector<std::string> payloads;
    const char* reason;
  };
  const Case cases[] = {
      {"empty", {}, "EMPTY_APPEND"},
      {"too many entries", std::vector<std::string>(config.max_entries_per_append + 1, "x"),
       "TOO_MANY_ENTRIES"},
      {"entry too large",
       {"ok", std::string(config.store.max_entry_size_bytes + 1, 'x')},
       "ENTRY_TOO_LARGE"},
      // Each entry fits, the sum does not: 5 x 64 KiB > 256 KiB.
      {"append too large",
       std::vector<std::string>(5, std::string(config.store.max_entry_size_bytes, 'x')),
       "APPEND_TOO_LARGE"},
  };
  for (const Case& test_case : cases) {
    bool called = false;
    AppendResult result;
    node.append(test_case.payloads, 1, 1, [&](AppendResult r) {
      called = true;
      result = std::move(r);
    });
    ASSERT_TRUE(called) << test_case.name << ": the callback must run before append() returns";
    EXPECT_EQ(result.error.code, ErrorCode::kInvalidArgument) << test_case.name;
    EXPECT_EQ(result.error.reason, test_case.reason) << test_case.name;
    EXPECT_FALSE(result.error.message.empty()) << test_case.name;
  }
  // Nothing reached the log, and the (client 1, sequence 1) of the refused calls is still free.
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(node.status().last_index, last_before);
  const AppendResult accepted = append_and_wait(node, {"after"}, 1, 1);
  ASSERT_TRUE(accepted.error.ok()) << accepted.error.message;
  EXPECT_FALSE(accepted.duplicate);
  EXPECT_EQ(accepted.first_index, last_before + 1);
}

TEST(Node, ReadCommittedRejectsBadRanges) {
  TempDir dir;
  FakeCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.start_leader(test_config(dir.path(), 1)));
  Node& node = *cluster.node;
  const AppendResult appended = append_and_wait(node, {"a", "b", "c"});
  ASSERT_TRUE(appended.error.ok());
  const std::uint64_t commit = node.commit_index();
  ASSERT_GE(commit, appended.last_index);

  std::vector<raft::Entry> entries{raft::Entry{}};
  NodeError error = node.read_committed(0, 10, 1 << 20, &entries);
  EXPECT_EQ(error.code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(error.reason, "BAD_INDEX_RANGE");
  EXPECT_TRUE(entries.empty());

  // Past the end: not committed yet (retry later), with the indexes the read was judged against.
  error = node.read_committed(commit + 2, 10, 1 << 20, &entries);
  EXPECT_EQ(error.code, ErrorCode::kOutOfRange);
  EXPECT_EQ(error.reason, "INDEX_NOT_YET_COMMITTED");
  EXPECT_NE(error.message.find(std::to_string(commit)), std::string::npos) << error.message;
  EXPECT_EQ(error.commit_index, commit);
  EXPECT_EQ(error.first_index, 1u);

  // The end of the committed log is not an error: there is just nothing yet.
  error = node.read_committed(commit + 1, 10, 1 << 20, &entries);
  EXPECT_TRUE(error.ok()) << error.message;
  EXPECT_TRUE(entries.empty());

  // Entry and byte limits; at least one entry even when it alone exceeds max_bytes.
  error = node.read_committed(appended.first_index, 2, 1 << 20, &entries);
  ASSERT_TRUE(error.ok());
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].payload, "a");
  error = node.read_committed(appended.first_index, 10, 0, &entries);
  ASSERT_TRUE(error.ok());
  EXPECT_EQ(entries.size(), 1u);
}

TEST(Node, RetriedIdempotentAppendIsAnsweredWithTheOriginalIndexes) {
  TempDir dir;
  FakeCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.start_leader(test_config(dir.path(), 1)));
  Node& node = *cluster.node;
  const AppendResult original = append_and_wait(node, {"one", "two"}, 42, 1);
  ASSERT_TRUE(original.error.ok()) << original.error.message;
  ASSERT_TRUE(wait_until([&] { return node.status().last_index >= original.last_index; }));
  const std::uint64_t last_before = node.status().last_index;
  EXPECT_EQ(last_before, original.last_index);

  const AppendResult retry = append_and_wait(node, {"one", "two"}, 42, 1);
  ASSERT_TRUE(retry.error.ok()) << retry.error.message;
  EXPECT_TRUE(retry.duplicate);
  EXPECT_EQ(retry.first_index, original.first_index);
  EXPECT_EQ(retry.last_index, original.last_index);
  EXPECT_EQ(retry.term, original.term);
  std::this_thread::sleep_for(30ms);
  EXPECT_EQ(node.status().last_index, last_before);  // nothing written twice

  // Another sequence of the same client, and the same sequence of another client, are new appends.
  const AppendResult next = append_and_wait(node, {"three"}, 42, 2);
  ASSERT_TRUE(next.error.ok());
  EXPECT_FALSE(next.duplicate);
  EXPECT_EQ(next.first_index, original.last_index + 1);
  const AppendResult other = append_and_wait(node, {"one"}, 43, 1);
  ASSERT_TRUE(other.error.ok());
  EXPECT_FALSE(other.duplicate);
  EXPECT_EQ(other.first_index, next.last_index + 1);
}

TEST(Node, ASequenceOlderThanTheDedupWindowIsRefused) {
  TempDir dir;
  NodeConfig config = test_config(dir.path(), 1);
  config.dedup_sequences_per_client = 2;
  FakeCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.start_leader(config));
  Node& node = *cluster.node;
  for (std::uint64_t sequence = 1; sequence <= 3; ++sequence) {
    ASSERT_TRUE(append_and_wait(node, {"s" + std::to_string(sequence)}, 9, sequence).error.ok());
  }
  const AppendResult too_old = append_and_wait(node, {"s1"}, 9, 1);
  EXPECT_EQ(too_old.error.code, ErrorCode::kFailedPrecondition) << too_old.error.message;
  EXPECT_EQ(too_old.error.reason, "SEQUENCE_TOO_OLD");
  const AppendResult remembered = append_and_wait(node, {"s2"}, 9, 2);
  ASSERT_TRUE(remembered.error.ok());
  EXPECT_TRUE(remembered.duplicate);
}

// Idempotency is exact: the same (client_id, sequence) with other entries (contents or count) is
// refused with SEQUENCE_REUSED and writes nothing, also after a restart rebuilt the table from the
// log; the exact retry is still answered with the original range.
TEST(Node, ARetryMustCarryTheSameEntriesAlsoAfterTheTableIsRebuiltFromTheLog) {
  TempDir dir;
  const NodeConfig config = test_config(dir.path(), 1);
  const std::vector<std::vector<std::string>> not_the_same{
      {"a", "x"}, {"a"}, {"a", "b", "c"}, {"b", "a"}};
  auto expect_reused = [&](Node& node, const AppendResult& original) {
    ASSERT_TRUE(wait_until([&] { return node.commit_index() == node.status().last_index; }));
    const std::uint64_t last_before = node.status().last_index;
    for (const std::vector<std::string>& payloads : not_the_same) {
      const AppendResult reused = append_and_wait(node, payloads, 42, 1);
      EXPECT_EQ(reused.error.code, ErrorCode::kFailedPrecondition) << reused.error.message;
      EXPECT_EQ(reused.error.reason, "SEQUENCE_REUSED") << payloads.size() << " entries";
    }
    const AppendResult exact = append_and_wait(node, {"a", "b"}, 42, 1);
    ASSERT_TRUE(exact.error.ok()) << exact.error.message;
    EXPECT_TRUE(exact.duplicate);
    EXPECT_EQ(exact.first_index, original.first_index);
    EXPECT_EQ(exact.last_index, original.last_index);
    EXPECT_EQ(node.status().last_index, last_before) << "a refused retry wrote something";
  };
  AppendResult original;
  {
    FakeCluster cluster;
    ASSERT_NO_FATAL_FAILURE(cluster.start_leader(config));
    original = append_and_wait(*cluster.node, {"a", "b"}, 42, 1);
    ASSERT_TRUE(original.error.ok()) << original.error.message;
    expect_reused(*cluster.node, original);
    cluster.node->stop();
  }
  FakeCluster restarted;
  ASSERT_NO_FATAL_FAILURE(restarted.start_leader(config));
  expect_reused(*restarted.node, original);
}

// A retry of an append that is still uncommitted (in the log, waiting for the follower) is compared
// just as exactly: other entries are refused at once, the exact retry waits for the original.
TEST(Node, ARetryOfAnUncommittedAppendIsComparedExactly) {
  TempDir dir;
  FakeCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.start_leader(test_config(dir.path(), 2)));
  Node& node = *cluster.node;
  cluster.sender.ack_appends = false;  // nothing commits from now on
  AsyncAppend original = start_append(node, {"x", "y"}, 42, 1);
  ASSERT_TRUE(wait_until([&] { return node.status().last_index > node.commit_index(); }));
  const AppendResult reused = append_and_wait(node, {"x", "z"}, 42, 1);
  EXPECT_EQ(reused.error.code, ErrorCode::kFailedPrecondition) << reused.error.message;
  EXPECT_EQ(reused.error.reason, "SEQUENCE_REUSED");
  const AppendResult fewer = append_and_wait(node, {"x"}, 42, 1);
  EXPECT_EQ(fewer.error.reason, "SEQUENCE_REUSED") << fewer.error.message;
  AsyncAppend exact = start_append(node, {"x", "y"}, 42, 1);
  std::this_thread::sleep_for(30ms);
  EXPECT_FALSE(exact.done()) << "the exact retry waits for the original's commit";
  EXPECT_FALSE(original.done());
  cluster.sender.attach(nullptr);
  node.stop();
  EXPECT_EQ(exact.get().error.reason, "SHUTTING_DOWN");
  EXPECT_EQ(original.get().error.reason, "SHUTTING_DOWN");
}

// Sequences start at 1: with a non-zero client_id, sequence 0 is refused (BAD_SEQUENCE) and writes
// nothing. client_id 0 is not deduplicated whatever its sequence.
TEST(Node, SequenceZeroIsRefusedForAnIdempotentAppend) {
  TempDir dir;
  FakeCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.start_leader(test_config(dir.path(), 1)));
  Node& node = *cluster.node;
  const AppendResult seed = append_and_wait(node, {"seed"});
  ASSERT_TRUE(seed.error.ok()) << seed.error.message;
  const std::uint64_t last_before = node.status().last_index;
  const AppendResult zero = append_and_wait(node, {"z"}, 5, 0);
  EXPECT_EQ(zero.error.code, ErrorCode::kInvalidArgument) << zero.error.message;
  EXPECT_EQ(zero.error.reason, "BAD_SEQUENCE");
  EXPECT_EQ(node.status().last_index, last_before);
  for (const std::uint64_t sequence : std::vector<std::uint64_t>{0, 0, 7, 7}) {
    const AppendResult plain = append_and_wait(node, {"p"}, 0, sequence);
    ASSERT_TRUE(plain.error.ok()) << plain.error.message;
    EXPECT_FALSE(plain.duplicate);
  }
  EXPECT_EQ(node.status().last_index, last_before + 4);
  const AppendResult first = append_and_wait(node, {"z"}, 5, 1);
  ASSERT_TRUE(first.error.ok()) << first.error.message;
  EXPECT_FALSE(first.duplicate);
}

TEST(Node, AsyncFlushModeCommitsAndSurvivesARestart) {
  TempDir dir;
  NodeConfig config = test_config(dir.path(), 1);
  config.store.flush_mode = store::FlushMode::kAsync;
  AppendResult appended;
  {
    FakeCluster cluster;
    ASSERT_NO_FATAL_FAILURE(cluster.start_leader(config));
    Node& node = *cluster.node;
    appended = append_and_wait(node, {"x", "y"}, 3, 1);
    ASSERT_TRUE(appended.error.ok()) << appended.error.message;
    EXPECT_EQ(node.status().flush_mode, store::FlushMode::kAsync);
    node.stop();  // flushes and checkpoints
  }
  FakePeers sender;
  auto node = open_node(config, &sender);
  ASSERT_NE(node, nullptr);
  EXPECT_GE(node->commit_index(), appended.last_index);
  EXPECT_GE(node->flushed_index(), appended.last_index);
  const std::vector<raft::Entry> entries = read_all(*node, appended.first_index);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].payload, "x");
  EXPECT_EQ(entries[1].payload, "y");
}

TEST(Node, InputsWakeTheLoopWithoutWaitingForATick) {
  // The loop is woken by push() only while it sleeps (the loop_sleeping_ flag). A lost wake-up
  // would leave an input waiting for the next tick, here 250 ms: 400 appends that each need two
  // inputs (the append, then the flush notice) would then take an average of half a tick each, over
  // 10 s in all (measured with push() never notifying), instead of well under one.
  TempDir dir;
  NodeConfig config = test_config(dir.path(), 1);
  config.tick_ms = 250;
  config.election_ticks = 3;  // a single node still elects itself within 1.5 s
  config.heartbeat_ticks = 1;
  config.store.flush_mode =
      store::FlushMode::kAsync;  // no fsync per append: only the wake-ups count
  FakePeers sender;
  auto node = open_node(config, &sender);
  ASSERT_NE(node, nullptr);
  node->start();
  ASSERT_TRUE(wait_for_leader(*node));

  constexpr int kThreads = 4;
  constexpr int kAppendsPerThread = 100;
  std::atomic<int> slow_appends{0};  // took longer than 100 ms (a tick is 250 ms)
  std::atomic<int> failed_appends{0};
  const auto started = std::chrono::steady_clock::now();
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < kAppendsPerThread; ++i) {
        const auto append_started = std::chrono::steady_clock::now();
        const AppendResult result =
            append_and_wait(*node, {"w" + std::to_string(t) + "-" + std::to_string(i)});
        if (!result.error.ok()) failed_appends.fetch_add(1);
        if (std::chrono::steady_clock::now() - append_started >= 100ms) slow_appends.fetch_add(1);
      }
    });
  }
  for (std::thread& writer : writers) writer.join();
  const auto elapsed = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(failed_appends.load(), 0);
  // A machine stall can make a few appends slow; lost wake-ups make most of them slow.
  EXPECT_LT(slow_appends.load(), kThreads * kAppendsPerThread / 10);
  EXPECT_LT(elapsed, 5s);
  EXPECT_GE(node->commit_index(), static_cast<std::uint64_t>(kThreads * kAppendsPerThread));
}

TEST(Node, WithoutALeaderAppendsAreRefusedWithNoLeader) {
  TempDir dir;
  FakePeers sender;  // not attached: the other members never answer
  auto node = open_node(test_config(dir.path(), 3), &sender);
  ASSERT_NE(node, nullptr);
  node->start();
  const AppendResult result = append_and_wait(*node, {"x"});
  EXPECT_EQ(result.error.code, ErrorCode::kNoLeader) << result.error.message;
  EXPECT_NE(node->status().role, raft::Role::kLeader);
  // It does campaign (pre-votes to both peers) once its election timeout passes.
  EXPECT_TRUE(wait_until([&] {
    for (const raft::Message& m : sender.sent()) {
      if (m.type == raft::MessageType::kPreVote) return true;
    }
    return false;
  }));
}

TEST(Node, UncommittedAppendTimesOutWithAnUnknownOutcome) {
  TempDir dir;
  NodeConfig config = test_config(dir.path(), 2);
  config.append_timeout_ms = 200;
  FakeCluster cluster;
  cluster.sender.ack_appends = false;
  ASSERT_NO_FATAL_FAILURE(cluster.start_leader(config));
  Node& node = *cluster.node;
  const auto started = std::chrono::steady_clock::now();
  const AppendResult result = append_and_wait(node, {"never acknowledged"}, 5, 1);
  EXPECT_EQ(result.error.code, ErrorCode::kDeadlineExceeded) << result.error.message;
  EXPECT_GE(std::chrono::steady_clock::now() - started, 190ms);
  cluster.sender.attach(nullptr);
  node.stop();
}

TEST(Node, TransferToANonMemberIsRefused) {
  TempDir dir;
  FakeCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.start_leader(test_config(dir.path(), 1)));
  Node& node = *cluster.node;
  std::promise<TransferResult> done;
  node.transfer_leadership(9,
                           [&done](TransferResult result) { done.set_value(std::move(result)); });
  auto future = done.get_future();
  ASSERT_EQ(future.wait_for(kWait), std::future_status::ready);
  EXPECT_EQ(future.get().error.code, ErrorCode::kInvalidArgument);
}

// Stop fails what is pending with UNAVAILABLE; Node::open on the same directory then recovers the
// entries, the commit index, the term and the dedup table (including an append that was in the log
// but not yet committed when the node stopped: the new term's no-op commits it, and the retry gets its
// original indexes).
TEST(Node, StopFailsPendingAndARestartRecoversLogHardStateAndDedup) {
  TempDir dir;
  const NodeConfig config = test_config(dir.path(), 2);
  AppendResult committed;
  AsyncAppend pending;
  std::uint64_t term_before = 0;
  std::uint64_t last_before = 0;
  {
    FakeCluster cluster;
    ASSERT_NO_FATAL_FAILURE(cluster.start_leader(config));
    Node& node = *cluster.node;
    committed = append_and_wait(node, {"kept-1", "kept-2"}, 42, 1);
    ASSERT_TRUE(committed.error.ok()) << committed.error.message;

    cluster.sender.ack_appends = false;  // from now on nothing commits
    pending = start_append(node, {"in-flight"}, 42, 2);
    ASSERT_TRUE(wait_until([&] { return node.status().last_index > committed.last_index; }));
    ASSERT_TRUE(wait_until([&] { return node.flushed_index() > committed.last_index; }));
    std::this_thread::sleep_for(50ms);
    EXPECT_FALSE(pending.done());
    term_before = node.status().term;
    last_before = node.status().last_index;

    cluster.sender.attach(nullptr);
    node.stop();
    const AppendResult failed = pending.get();
    EXPECT_EQ(failed.error.code, ErrorCode::kUnavailable) << failed.error.message;
    EXPECT_EQ(failed.error.reason, "SHUTTING_DOWN");
    EXPECT_EQ(pending.calls->load(), 1);

    // After stop every request is refused at once.
    bool called = false;
    node.append({"late"}, 0, 0, [&](AppendResult result) {
      called = true;
      EXPECT_EQ(result.error.code, ErrorCode::kUnavailable);
    });
    EXPECT_TRUE(called);
    EXPECT_TRUE(node.stopping());
    EXPECT_FALSE(node.failed());
    node.stop();  // idempotent
  }
  EXPECT_FALSE(std::filesystem::exists(config.data_dir + "/log/ABORT"))
      << "a clean stop removes the marker";

  FakePeers sender;
  auto node = open_node(config, &sender);
  ASSERT_NE(node, nullptr);
  // Before the loop runs: the durable state as recovered.
  const NodeStatus recovered = node->status();
  EXPECT_EQ(recovered.term, term_before);
  EXPECT_EQ(recovered.last_index, last_before);
  EXPECT_GE(node->commit_index(), committed.last_index);
  EXPECT_LT(node->commit_index(), last_before) << "the in-flight append was never committed";
  const std::vector<raft::Entry> kept = read_all(*node, committed.first_index);
  ASSERT_GE(kept.size(), 2u);
  EXPECT_EQ(kept[0].payload, "kept-1");
  EXPECT_EQ(kept[1].payload, "kept-2");

  sender.attach(node.get());
  node->start();
  ASSERT_TRUE(wait_for_leader(*node));
  EXPECT_GT(node->status().term, term_before);

  const AppendResult retry_committed = append_and_wait(*node, {"kept-1", "kept-2"}, 42, 1);
  ASSERT_TRUE(retry_committed.error.ok()) << retry_committed.error.message;
  EXPECT_TRUE(retry_committed.duplicate);
  EXPECT_EQ(retry_committed.first_index, committed.first_index);
  EXPECT_EQ(retry_committed.last_index, committed.last_index);
  EXPECT_EQ(retry_committed.term, committed.term);

  const AppendResult retry_in_flight = append_and_wait(*node, {"in-flight"}, 42, 2);
  ASSERT_TRUE(retry_in_flight.error.ok()) << retry_in_flight.error.message;
  EXPECT_TRUE(retry_in_flight.duplicate);
  EXPECT_EQ(retry_in_flight.first_index, committed.last_index + 1);
  EXPECT_EQ(retry_in_flight.last_index, committed.last_index + 1);
  EXPECT_EQ(retry_in_flight.term, term_before);
  const std::vector<raft::Entry> all = read_all(*node, committed.first_index);
  ASSERT_GE(all.size(), 3u);
  EXPECT_EQ(all[2].payload, "in-flight");
  sender.attach(nullptr);
  node->stop();
}

}  // namespace
}  // namespace raftlog::server

namespace raftlog::server {
namespace {

// A leader whose file system fills refuses appends with RESOURCE_EXHAUSTED/DISK_FULL instead of
// failing, keeps serving reads, and accepts appends again once space is freed. Real ENOSPC from a
// small tmpfs (needs root and mount permission; skipped otherwise).
// A small tmpfs mounted on a temp dir for the test's lifetime (needs root and mount permission).
class ScopedTmpfs {
 public:
  explicit ScopedTmpfs(const char* size) {
    mounted_ = ::mount("tmpfs", dir_.path().c_str(), "tmpfs", 0,
                       (std::string("size=") + size).c_str()) == 0;
    if (!mounted_) error_ = std::strerror(errno);
  }
  ~ScopedTmpfs() {
    if (mounted_) ::umount2(dir_.path().c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }
  const std::string& path() const { return dir_.path(); }

 private:
  TempDir dir_;
  bool mounted_ = false;
  std::string error_;
};

TEST(Node, DiskFullRefusesAppendsKeepsReadsAndRecoversWhenSpaceIsFreed) {
  ScopedTmpfs mount_point("2m");
  if (!mount_point.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here: " << mount_point.error();

  NodeConfig config = test_config(mount_point.path(), 1);
  config.store.segment_size_bytes = 256 << 10;
  FakeCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.start_leader(config));
  Node& node = *cluster.node;
  const AppendResult before = append_and_wait(node, {"before-full"});
  ASSERT_TRUE(before.error.ok()) << before.error.message;

  // Fill the file system with a scratch file until less than a segment is left.
  const std::string filler = mount_point.path() + "/filler";
  {
    FILE* f = std::fopen(filler.c_str(), "w");
    ASSERT_NE(f, nullptr);
    const std::string block(64 << 10, 'x');
    for (int i = 0; i < 64 && std::fwrite(block.data(), 1, block.size(), f) == block.size(); ++i) {
    }
    std::fclose(f);
  }
  // The free-space check is refreshed every 100 ms.
  AppendResult refused;
  ASSERT_TRUE(wait_until([&] {
    refused = append_and_wait(node, {"while-full"});
    return !refused.error.ok();
  }));
  EXPECT_EQ(refused.error.code, ErrorCode::kResourceExhausted) << refused.error.message;
  EXPECT_EQ(refused.error.reason, "DISK_FULL");
  EXPECT_FALSE(node.failed());
  // Reads keep working and nothing was lost.
  const std::vector<raft::Entry> entries = read_all(node, before.first_index);
  ASSERT_FALSE(entries.empty());
  EXPECT_EQ(entries.front().payload, "before-full");

  ASSERT_EQ(std::remove(filler.c_str()), 0);
  AppendResult after;
  ASSERT_TRUE(wait_until([&] {
    after = append_and_wait(node, {"after-space-freed"});
    return after.error.ok();
  }));
  EXPECT_GT(after.first_index, before.last_index);
  node.stop();
}

}  // namespace
}  // namespace raftlog::server

namespace raftlog::server {
namespace {

// Fills `path` with `bytes` of scratch data (replacing it).
void write_filler(const std::string& path, std::size_t bytes) {
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  const std::string block(64 << 10, 'x');
  for (std::size_t written = 0; written < bytes; written += block.size()) {
    ASSERT_EQ(std::fwrite(block.data(), 1, block.size(), f), block.size());
  }
  ASSERT_EQ(std::fclose(f), 0);
}

// Above the high watermark the leader refuses appends with RESOURCE_EXHAUSTED/DISK_WATERMARK while
// reads go on; between the watermarks it keeps refusing (hysteresis); at or below the low watermark it
// accepts again. A real small tmpfs (needs root and mount permission; skipped otherwise).
TEST(Node, DiskWatermarkRefusesAppendsWithHysteresisAndKeepsReads) {
  ScopedTmpfs mount_point("8m");
  if (!mount_point.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here: " << mount_point.error();

  NodeConfig config = test_config(mount_point.path(), 1);
  config.store.segment_size_bytes = 256 << 10;
  config.disk_high_watermark = 0.60;
  config.disk_low_watermark = 0.30;
  FakeCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.start_leader(config));
  Node& node = *cluster.node;
  const AppendResult before = append_and_wait(node, {"before-watermark"});
  ASSERT_TRUE(before.error.ok()) << before.error.message;
  EXPECT_FALSE(node.disk_watermark_exceeded());

  const std::string filler = mount_point.path() + "/filler";
  write_filler(filler, 6 << 20);  // ~75 % of 8 MiB with the log
  AppendResult refused;
  ASSERT_TRUE(wait_until([&] {
    refused = append_and_wait(node, {"above-high"});
    return !refused.error.ok();
  }));
  EXPECT_EQ(refused.error.code, ErrorCode::kResourceExhausted) << refused.error.message;
  EXPECT_EQ(refused.error.reason, "DISK_WATERMARK");
  EXPECT_NE(refused.error.message.find("high watermark"), std::string::npos)
      << refused.error.message;
  EXPECT_TRUE(node.disk_watermark_exceeded());
  EXPECT_FALSE(node.failed());
  // Reads keep working: the entry from before, then the appends accepted before the next check.
  const std::vector<raft::Entry> entries = read_all(node, before.first_index);
  ASSERT_FALSE(entries.empty());
  EXPECT_EQ(entries.front().payload, "before-watermark");
  for (std::size_t i = 1; i < entries.size(); ++i) EXPECT_EQ(entries[i].payload, "above-high");

  // Between the watermarks (~45 %): still refused, even after several checks.
  write_filler(filler, 3 << 20);
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  for (int i = 0; i < 3; ++i) {
    const AppendResult between = append_and_wait(node, {"between"});
    EXPECT_EQ(between.error.reason, "DISK_WATERMARK") << between.error.message;
    std::this_thread::sleep_for(std::chrono::milliseconds(110));
  }

  ASSERT_EQ(std::remove(filler.c_str()), 0);
  AppendResult after;
  ASSERT_TRUE(wait_until([&] {
    after = append_and_wait(node, {"below-low"});
    return after.error.ok();
  }));
  EXPECT_FALSE(node.disk_watermark_exceeded());
  EXPECT_GT(after.first_index, before.last_index);
  node.stop();
}

// What the node reports to NodeEvents (the metrics' counters) matches what it did.
class CountingEvents final : public NodeEvents {
 public:
  void append_proposed() override { ++proposed; }
  void append_committed(std::uint64_t entries, std::uint64_t payload_bytes,
                        std::chrono::steady_clock::duration latency) override {
    committed_entries += entries;
    committed_bytes += payload_bytes;
    if (latency.count() > 0) ++positive_latencies;
  }
  void leader_changed() override { ++leader_changes; }
  void election_finished(bool won) override { ++(won ? elections_won : elections_lost); }
  void segments_deleted(std::uint64_t count) override { deleted_segments += count; }
  void store_flushed(const store::CommitLog::FlushCycle& cycle) override {
    flushed_entries += cycle.entries;
    ++flush_cycles;
  }
  std::atomic<std::uint64_t> proposed{0}, committed_entries{0}, committed_bytes{0},
      positive_latencies{0};
  std::atomic<std::uint64_t> leader_changes{0}, elections_won{0}, elections_lost{0};
  std::atomic<std::uint64_t> flushed_entries{0}, flush_cycles{0}, deleted_segments{0};
};

TEST(Node, ReportsProposalsCommitsElectionsAndFlushesToEvents) {
  TempDir dir;
  CountingEvents events;
  FakeCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.start_leader(test_config(dir.path(), 1), &events));
  Node& node = *cluster.node;
  EXPECT_EQ(events.elections_won.load(), 1U);
  EXPECT_EQ(events.leader_changes.load(), 1U);
  const AppendResult first = append_and_wait(node, {"abc", "de"});
  ASSERT_TRUE(first.error.ok()) << first.error.message;
  const AppendResult second = append_and_wait(node, {"fghij"}, 9, 1);
  ASSERT_TRUE(second.error.ok()) << second.error.message;
  const AppendResult retry = append_and_wait(node, {"fghij"}, 9, 1);  // a duplicate: not new work
  ASSERT_TRUE(retry.error.ok() && retry.duplicate);
  EXPECT_EQ(events.proposed.load(), 2U);
  EXPECT_EQ(events.committed_entries.load(), 3U);
  EXPECT_EQ(events.committed_bytes.load(), 10U);
  EXPECT_EQ(events.positive_latencies.load(), 2U);
  EXPECT_GE(events.flush_cycles.load(), 1U);
  EXPECT_GE(events.flushed_entries.load(), 3U);  // the leader's no-op entry may be flushed too
  node.stop();
}

TEST(Node, ALeaderBackFromAStalledLoopSendsItsHeartbeatAtOnce) {
  // The loop runs its ticks at most once per round. A leader whose loop was held up (a round that
  // wrote a large batch, a machine too busy to run it) used to get one tick per stall, so with
  // heartbeat_ticks = 8 its heartbeats went out only every 8th stall while the followers' election
  // timers kept running. Now it makes up to heartbeat_ticks of the missed ticks: one heartbeat per
  // stall longer than a heartbeat interval. Each stall here is an append's completion callback, which
  // runs on the loop thread, sleeping for 15 ticks.
  TempDir dir;
  NodeConfig config = test_config(dir.path(), 2);
  config.tick_ms = 10;
  config.heartbeat_ticks = 8;
  config.election_ticks = 20;
  config.store.flush_mode =
      store::FlushMode::kAsync;  // an append commits within a few short rounds
  FakeCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.start_leader(config));

  constexpr int kStalls = 8;
  std::vector<std::size_t>
      sent_after_stall;  // how many messages had been sent when each stall ended
  for (int stall = 0; stall < kStalls; ++stall) {
    auto ended = std::make_shared<std::promise<std::size_t>>();
    std::future<std::size_t> ended_future = ended->get_future();
    cluster.node->append({"stall " + std::to_string(stall)}, 0, 0,
                         [&cluster, ended](AppendResult result) {
                           EXPECT_TRUE(result.error.ok()) << result.error.message;
                           std::this_thread::sleep_for(150ms);
                           ended->set_value(cluster.sender.sent().size());
                         });
    ASSERT_EQ(ended_future.wait_for(kWait), std::future_status::ready);
    sent_after_stall.push_back(ended_future.get());
  }
  const std::vector<raft::Message> sent = cluster.sender.sent();
  int heartbeats = 0;
  for (std::size_t i = sent_after_stall.front(); i < sent_after_stall.back(); ++i) {
    if (sent[i].type == raft::MessageType::kHeartbeat) ++heartbeats;
  }
  EXPECT_GE(heartbeats, kStalls - 1)
      << "heartbeats between the end of the first and of the last stall";
  EXPECT_EQ(cluster.node->status().role, raft::Role::kLeader);
}

}  // namespace
}  // namespace raftlog::server

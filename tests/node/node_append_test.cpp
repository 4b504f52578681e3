// The Node's append and read paths: a leader commits and serves appends, refuses invalid ones
// synchronously, bounds committed reads; without a leader or a quorum, appends fail with the
// documented errors, and so does a transfer to a non-member.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "node_test_support.h"

namespace raftlog::server {
namespace {

using namespace raftlog::server::testing;  // node_test_support.h

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

// append_all (an AppendStream message of several appends): each append is answered on its own, an
// invalid one alone, and the valid ones are stepped in one loop round, so one AppendEntries to the
// follower carries all of them.
TEST(Node, AppendAllLeavesInOneAppendEntriesAndAnInvalidAppendFailsAlone) {
  TempDir dir;
  FakeCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.start_leader(test_config(dir.path(), 2)));
  Node& node = *cluster.node;
  ASSERT_EQ(append_and_wait(node, {"warm-up"}, 1, 1).error.code, ErrorCode::kOk);
  const std::size_t sent_before = cluster.sender.sent().size();
  constexpr int kAppends = 5;
  std::vector<AsyncAppend> appends(kAppends + 1);
  std::vector<Node::AppendCall> calls;
  for (int i = 0; i < kAppends + 1; ++i) {
    Node::AppendCall call;
    call.client_id = 100 + static_cast<std::uint64_t>(i);
    call.sequence = 1;
    // The fourth is empty: refused at once, the others unaffected.
    if (i != 3) call.payloads = {"batch-" + std::to_string(i)};
    call.done = appends[static_cast<std::size_t>(i)].callback();
    calls.push_back(std::move(call));
  }
  node.append_all(std::move(calls));
  std::vector<AppendResult> results;
  for (AsyncAppend& append : appends) results.push_back(append.get());
  EXPECT_EQ(results[3].error.code, ErrorCode::kInvalidArgument) << results[3].error.message;
  std::uint64_t expected_index = 0;
  for (int i = 0; i < kAppends + 1; ++i) {
    if (i == 3) continue;
    const AppendResult& result = results[static_cast<std::size_t>(i)];
    ASSERT_EQ(result.error.code, ErrorCode::kOk) << i << ": " << result.error.message;
    EXPECT_EQ(result.first_index, result.last_index);
    if (expected_index != 0) {
      EXPECT_EQ(result.first_index, expected_index) << i;  // in order
    }
    expected_index = result.last_index + 1;
  }
  // One AppendEntries to the follower holds all five (plus at most entries proposed before them).
  const std::uint64_t first = results[0].first_index;
  const std::uint64_t last = results[kAppends].last_index;
  const std::vector<raft::Message> sent = cluster.sender.sent();
  bool one_message = false;
  for (std::size_t m = sent_before; m < sent.size(); ++m) {
    const raft::Message& message = sent[m];
    if (message.type != raft::MessageType::kAppend || message.entries.empty()) continue;
    const std::uint64_t message_first = message.index + 1;
    const std::uint64_t message_last = message.index + message.entries.size();
    if (message_first <= first && message_last >= last) one_message = true;
  }
  EXPECT_TRUE(one_message) << "the appends of one append_all left in several AppendEntries";
  cluster.sender.attach(nullptr);
  node.stop();
}

}  // namespace
}  // namespace raftlog::server

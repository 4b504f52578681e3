// Stopping and reopening a Node: pending appends fail on stop, and a restart recovers the log, the
// hard state and the dedup table, in sync and in async flush mode.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "node_test_support.h"

namespace raftlog::server {
namespace {

using namespace raftlog::server::testing;  // node_test_support.h

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

}  // namespace
}  // namespace raftlog::server

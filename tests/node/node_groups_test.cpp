// The Node's consumer group commits: the entry is flagged as a group commit (in the log, across a
// restart, not an envelope), and retention never trims at or above the hold the group table sets.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "derived/group_commit.h"
#include "node_test_support.h"

namespace raftlog::server {
namespace {

using namespace raftlog::server::testing;  // node_test_support.h

AppendResult commit_and_wait(Node& node, const derived::GroupCommit& commit) {
  AsyncAppend append;
  node.append_group_commit(derived::encode_group_commit(commit), append.callback());
  return append.get();
}

TrimResult trim_and_wait(Node& node, std::uint64_t before) {
  std::promise<TrimResult> promise;
  node.trim(before, [&](TrimResult result) { promise.set_value(std::move(result)); });
  return promise.get_future().get();
}

// A trim answers before its deletion has run (it follows over the node's next loop rounds and
// ends when nothing whole below its point can go: docs/design.md, "Known limits"): asked again
// until its answer's first index is past `past` and the same for 500 ms, the trim's end (bounded:
// 10 s); that answer, or the last one.
TrimResult trim_until_settled(Node& node, std::uint64_t before, std::uint64_t past) {
  using SteadyClock = std::chrono::steady_clock;
  const auto deadline = SteadyClock::now() + std::chrono::seconds(10);
  TrimResult result = trim_and_wait(node, before);
  auto unchanged_since = SteadyClock::now();
  while (result.error.ok() && SteadyClock::now() < deadline &&
         (result.first_index <= past ||
          SteadyClock::now() - unchanged_since < std::chrono::milliseconds(500))) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const TrimResult again = trim_and_wait(node, before);
    if (again.first_index != result.first_index) unchanged_since = SteadyClock::now();
    result = again;
  }
  EXPECT_LT(SteadyClock::now(), deadline) << "the trim before " << before << " did not settle";
  return result;
}

TEST(NodeGroups, ACommitIsAFlaggedEntryInTheLogAndStaysSoAcrossARestart) {
  TempDir dir;
  std::uint64_t index = 0;
  {
    FakeCluster cluster;
    ASSERT_NO_FATAL_FAILURE(cluster.start_leader(test_config(dir.path(), 1)));
    const AppendResult plain = append_and_wait(*cluster.node, {"plain"});
    ASSERT_TRUE(plain.error.ok());
    const AppendResult committed = commit_and_wait(*cluster.node, {"billing", "orders", 12});
    ASSERT_TRUE(committed.error.ok()) << committed.error.message;
    index = committed.first_index;
    EXPECT_EQ(committed.last_index, index);
    const std::vector<raft::Entry> entries = read_all(*cluster.node, plain.first_index);
    ASSERT_EQ(entries.size(), 2U);
    EXPECT_FALSE(entries[0].is_group_commit);
    EXPECT_TRUE(entries[1].is_group_commit);
    EXPECT_FALSE(entries[1].has_envelope);
    EXPECT_EQ(entries[1].client_id, 0U);  // never deduplicated
  }
  FakeCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.start_leader(test_config(dir.path(), 1)));
  const std::vector<raft::Entry> entries = read_all(*cluster.node, index);
  ASSERT_FALSE(entries.empty());
  ASSERT_TRUE(entries[0].is_group_commit);
  derived::GroupCommit decoded;
  ASSERT_EQ(derived::decode_group_commit(entries[0].payload.view(), &decoded),
            derived::GroupCommitDecode::kOk);
  EXPECT_EQ(decoded, (derived::GroupCommit{"billing", "orders", 12}));
}

TEST(NodeGroups, RetentionNeverTrimsAtOrAboveTheHold) {
  TempDir dir;
  NodeConfig config = test_config(dir.path(), 1);
  config.store.segment_size_bytes = 128 << 10;
  FakeCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.start_leader(config));
  std::uint64_t last = 0;
  for (int i = 0; i < 200; ++i) {  // about 800 KiB: six segments
    const AppendResult appended = append_and_wait(*cluster.node, {std::string(4 << 10, 'x')});
    ASSERT_TRUE(appended.error.ok());
    last = appended.last_index;
  }
  cluster.node->hold_log_from(50);
  const TrimResult held = trim_until_settled(*cluster.node, last, 1);
  ASSERT_TRUE(held.error.ok()) << held.error.message;
  EXPECT_GT(held.first_index, 1U);   // whole segments below 50 went
  EXPECT_LE(held.first_index, 50U);  // nothing at or above the hold
  EXPECT_LE(held.limit, 50U);
  cluster.node->hold_log_from(150);
  const TrimResult moved = trim_until_settled(*cluster.node, last, held.first_index);
  ASSERT_TRUE(moved.error.ok());
  EXPECT_GT(moved.first_index, held.first_index);
  EXPECT_LE(moved.first_index, 150U);
  cluster.node->hold_log_from(0);  // no hold: up to what is committed
  const TrimResult free = trim_until_settled(*cluster.node, last, 150);
  ASSERT_TRUE(free.error.ok());
  EXPECT_GT(free.first_index, 150U);
}

}  // namespace
}  // namespace raftlog::server

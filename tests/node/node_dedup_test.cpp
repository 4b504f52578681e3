// The Node's idempotent appends: a retried (client_id, sequence) is answered with the original
// indexes and must carry the same entries, within the dedup window, also once the table is rebuilt
// from the log after a restart.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "node_test_support.h"

namespace raftlog::server {
namespace {

using namespace raftlog::server::testing;  // node_test_support.h

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

}  // namespace
}  // namespace raftlog::server

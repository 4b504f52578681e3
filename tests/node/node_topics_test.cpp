// The Node's appends with topics and keys: validation, the envelope and its timestamp, and
// idempotent retries (the dedup digest leaves the leader's timestamp out).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "derived/envelope.h"
#include "node_test_support.h"

namespace raftlog::server {
namespace {

using namespace raftlog::server::testing;  // node_test_support.h

AppendResult append_with(Node& node, std::vector<std::string> payloads,
                         std::vector<EntryAttributes> attributes, std::uint64_t client_id = 0,
                         std::uint64_t sequence = 0) {
  AsyncAppend append;
  node.append(std::move(payloads), client_id, sequence, append.callback(), std::move(attributes));
  return append.get();
}

TEST(NodeTopics, EntriesCarryTheirTopicKeysAndAMonotonicTimestamp) {
  TempDir dir;
  FakeCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.start_leader(test_config(dir.path(), 1)));
  Node& node = *cluster.node;
  const AppendResult first =
      append_with(node, {"a", "b"}, {{"orders", {"order-1"}}, {"payments", {}}});
  ASSERT_TRUE(first.error.ok()) << first.error.message;
  const AppendResult plain = append_and_wait(node, {"plain"});
  ASSERT_TRUE(plain.error.ok());
  const AppendResult second = append_with(node, {"c"}, {{"", {"k1", "k2"}}});
  ASSERT_TRUE(second.error.ok());

  const std::vector<raft::Entry> entries = read_all(node, first.first_index);
  ASSERT_EQ(entries.size(), 4U);
  std::uint64_t previous = 0;
  const std::vector<std::string> topics = {"orders", "payments", "", ""};
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (i == 2) {
      EXPECT_FALSE(entries[i].has_envelope);
      EXPECT_EQ(entries[i].payload, "plain");  // exactly as before envelopes existed
      continue;
    }
    ASSERT_TRUE(entries[i].has_envelope) << i;
    derived::DecodedEnvelope envelope;
    ASSERT_EQ(derived::decode_envelope(entries[i].payload.view(), &envelope),
              derived::EnvelopeDecode::kOk);
    EXPECT_EQ(envelope.topic, topics[i]);
    EXPECT_GE(envelope.timestamp_ms, previous);
    EXPECT_GT(envelope.timestamp_ms, 1'600'000'000'000U);  // a wall-clock time, in ms
    previous = envelope.timestamp_ms;
  }
  derived::DecodedEnvelope last;
  ASSERT_EQ(derived::decode_envelope(entries[3].payload.view(), &last), derived::EnvelopeDecode::kOk);
  ASSERT_EQ(last.keys.size(), 2U);
  EXPECT_EQ(last.keys[1], "k2");
  EXPECT_EQ(last.user_bytes, "c");
  // The leader wrote each entry's topic offset: the next "orders" entry is offset 1.
  const AppendResult third = append_with(node, {"d"}, {{"orders", {}}});
  ASSERT_TRUE(third.error.ok()) << third.error.message;
  derived::DecodedEnvelope orders;
  ASSERT_EQ(derived::decode_envelope(read_all(node, third.first_index).at(0).payload.view(), &orders),
            derived::EnvelopeDecode::kOk);
  EXPECT_TRUE(orders.has_topic_offset);
  EXPECT_EQ(orders.topic_offset, 1U);
}

TEST(NodeTopics, BadAttributesAreRefusedWithTheirReason) {
  TempDir dir;
  FakeCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.start_leader(test_config(dir.path(), 1)));
  Node& node = *cluster.node;
  struct Case {
    std::vector<std::string> payloads;
    std::vector<EntryAttributes> attributes;
    const char* reason;
  };
  const std::vector<Case> cases = {
      {{"a", "b"}, {{"t", {}}}, replica::kReasonBadAttributes},
      {{"a"}, {{"bad/topic", {}}}, replica::kReasonBadTopic},
      {{"a"}, {{std::string(derived::kMaxTopicBytes + 1, 't'), {}}}, replica::kReasonBadTopic},
      {{"a"}, {{"t", {""}}}, replica::kReasonBadKeys},
      {{"a"}, {{"t", std::vector<std::string>(derived::kMaxKeysPerEntry + 1, "k")}},
       replica::kReasonBadKeys},
      {{"a"}, {{"t", {std::string(derived::kMaxKeyBytes + 1, 'k')}}}, replica::kReasonBadKeys},
  };
  const std::uint64_t last_before = node.status().last_index;
  for (const Case& c : cases) {
    const AppendResult result = append_with(node, c.payloads, c.attributes);
    EXPECT_EQ(result.error.code, ErrorCode::kInvalidArgument) << c.reason;
    EXPECT_EQ(result.error.reason, c.reason) << result.error.message;
  }
  EXPECT_EQ(node.status().last_index, last_before);  // nothing written
}

TEST(NodeTopics, TheEnvelopeCountsTowardTheEntrySizeBound) {
  TempDir dir;
  NodeConfig config = test_config(dir.path(), 1);
  FakeCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.start_leader(config));
  Node& node = *cluster.node;
  const std::string largest(config.store.max_entry_size_bytes, 'x');
  EXPECT_TRUE(append_and_wait(node, {largest}).error.ok());
  const AppendResult wrapped = append_with(node, {largest}, {{"t", {}}});
  EXPECT_EQ(wrapped.error.reason, replica::kReasonEntryTooLarge) << wrapped.error.message;
}

TEST(NodeTopics, ARetryWithTheSameAttributesIsADuplicateOtherAttributesAReuse) {
  TempDir dir;
  FakeCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.start_leader(test_config(dir.path(), 1)));
  Node& node = *cluster.node;
  const AppendResult original = append_with(node, {"x"}, {{"orders", {"k"}}}, 7, 1);
  ASSERT_TRUE(original.error.ok()) << original.error.message;
  // The retry's envelope has another timestamp than the stored one: still the same append.
  const AppendResult retry = append_with(node, {"x"}, {{"orders", {"k"}}}, 7, 1);
  ASSERT_TRUE(retry.error.ok()) << retry.error.message;
  EXPECT_TRUE(retry.duplicate);
  EXPECT_EQ(retry.first_index, original.first_index);
  const AppendResult other_topic = append_with(node, {"x"}, {{"payments", {"k"}}}, 7, 1);
  EXPECT_EQ(other_topic.error.reason, replica::kReasonSequenceReused);
  const AppendResult plain = append_and_wait(node, {"x"}, 7, 1);
  EXPECT_EQ(plain.error.reason, replica::kReasonSequenceReused);
}

TEST(NodeTopics, TimestampsAndDedupSurviveARestart) {
  TempDir dir;
  std::uint64_t before_restart = 0;
  std::uint64_t first_index = 0;
  {
    FakeCluster cluster;
    ASSERT_NO_FATAL_FAILURE(cluster.start_leader(test_config(dir.path(), 1)));
    const AppendResult original = append_with(*cluster.node, {"x"}, {{"t", {}}}, 8, 1);
    ASSERT_TRUE(original.error.ok());
    first_index = original.first_index;
    const std::vector<raft::Entry> entries = read_all(*cluster.node, first_index);
    derived::EnvelopeHeader header;
    ASSERT_EQ(derived::decode_envelope_header(entries.at(0).payload.view(), &header),
              derived::EnvelopeDecode::kOk);
    before_restart = header.timestamp_ms;
  }
  FakeCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.start_leader(test_config(dir.path(), 1)));
  const AppendResult retry = append_with(*cluster.node, {"x"}, {{"t", {}}}, 8, 1);
  ASSERT_TRUE(retry.error.ok()) << retry.error.message;
  EXPECT_TRUE(retry.duplicate);  // the rebuilt table digests the stored entry without its timestamp
  EXPECT_EQ(retry.first_index, first_index);
  const AppendResult next = append_with(*cluster.node, {"y"}, {{"t", {}}});
  ASSERT_TRUE(next.error.ok());
  std::uint64_t after_restart = 0;
  const std::vector<raft::Entry> entries = read_all(*cluster.node, next.first_index);
  derived::EnvelopeHeader header;
  ASSERT_EQ(derived::decode_envelope_header(entries.at(0).payload.view(), &header),
            derived::EnvelopeDecode::kOk);
  after_restart = header.timestamp_ms;
  EXPECT_GE(after_restart, before_restart);
}

}  // namespace
}  // namespace raftlog::server

// After a trim whose first retained entry is plain (no topic, no timestamp), a node answers what a
// node rebuilt from the trimmed log answers (docs/design.md, "Time lookups after a trim"): a time
// lookup (the Topics FindByTime RPC, `read --since`) the first retained *stamped* entry, never the
// plain first one; a topic whose entries the trim removed whole is listed on both (it was unknown
// to the rebuilt node only, which then refused a group commit the other admitted). On a real
// one-node Server in process: first the node that indexed the entries before the trim, then the
// same node with derived/ removed (its indexes rebuilt from the trimmed log, seeded from SNAPSHOT,
// as a follower's after a snapshot install).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>

#include "raftlog/v1/client.grpc.pb.h"
#include "raftlog/v1/groups.grpc.pb.h"
#include "raftlog/v1/topics.grpc.pb.h"
#include "server/in_process_node.h"
#include "shared/loopback.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;
namespace v1 = ::raftlog::v1;

// The index FindByTime answers for `timestamp_ms` over the whole log (0 when none), nullopt on an
// error.
std::optional<std::uint64_t> find_by_time(const InProcessNode& node, std::uint64_t timestamp_ms) {
  auto stub = v1::Topics::NewStub(node.new_connection());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 5s);
  v1::FindByTimeRequest request;
  request.set_timestamp_ms(timestamp_ms);
  v1::FindByTimeResponse response;
  const grpc::Status status = stub->FindByTime(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  if (!status.ok()) return std::nullopt;
  return response.found() ? response.index() : 0;
}

// The topic's [first, end) offsets as ListTopics answers them; nullopt when it is not listed.
std::optional<std::pair<std::uint64_t, std::uint64_t>> listed(const InProcessNode& node,
                                                              const std::string& topic) {
  auto stub = v1::Topics::NewStub(node.new_connection());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 5s);
  v1::ListTopicsResponse response;
  const grpc::Status status = stub->ListTopics(&context, v1::ListTopicsRequest(), &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  for (const v1::TopicInfo& info : response.topics()) {
    if (info.topic() == topic) return std::make_pair(info.first_offset(), info.end_offset());
  }
  return std::nullopt;
}

// A group commit of `topic` at `offset` (the leader admits only a topic its indexes know).
grpc::Status commit_offset(const InProcessNode& node, const std::string& topic,
                           std::uint64_t offset) {
  auto stub = v1::Groups::NewStub(node.new_connection());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 5s);
  v1::CommitOffsetRequest request;
  request.set_group("g");
  request.set_topic(topic);
  request.set_offset(offset);
  v1::CommitOffsetResponse response;
  return stub->CommitOffset(&context, request, &response);
}

// Restarts the node with derived/ removed: its indexes rebuilt from the trimmed log, seeded from
// SNAPSHOT, as a follower's after a snapshot install; waits until they reach `last`.
void rebuild_indexes(InProcessNode& node, std::uint64_t last) {
  node.shutdown();
  std::filesystem::remove_all(node.data_dir() + "/derived");
  ASSERT_TRUE(node.restart());
  ASSERT_TRUE(eventually([&] { return node.derived_indexed_through() >= last; }, 10s));
}

TEST(TimeLookupTrim, APlainFirstEntryIsAnsweredAlikeByTheNodeThatIndexedItAndARebuiltOne) {
  InProcessNode node([](server::NodeConfig& config) {
    config.store.segment_size_bytes = store::Options::kMinSegmentSizeBytes;
    config.store.max_entry_size_bytes = 16 << 10;
  });
  ASSERT_TRUE(node.started());
  // "old" (stamped) is trimmed whole; the plain entries span several 64 KiB segments, so the trim
  // leaves one of them first; "new" follows.
  const std::uint64_t last_old = node.append_to_topic("old", 4, 8000);
  const std::uint64_t last_plain = node.append(30, 8000);
  const std::uint64_t last_new = node.append_to_topic("new", 3, 8000);
  ASSERT_NE(last_old, 0u);
  ASSERT_NE(last_plain, 0u);
  ASSERT_NE(last_new, 0u);
  const std::uint64_t first_new = last_plain + 1;
  const std::uint64_t first = node.trim_before(last_plain, last_old, 10s);
  ASSERT_GT(first, last_old) << "the log starts at " << first;
  ASSERT_LE(first, last_plain) << "the first retained entry must be a plain one";
  ASSERT_TRUE(eventually([&] { return node.derived_indexed_through() >= last_new; }, 10s));

  // The node that indexed "old" before the trim (its time records below the log's start span it).
  EXPECT_EQ(find_by_time(node, 0), first_new) << "indexed before the trim; the log starts at " << first;
  EXPECT_EQ(find_by_time(node, 1), first_new);
  EXPECT_EQ(listed(node, "old"), std::make_pair(std::uint64_t{4}, std::uint64_t{4}));
  const grpc::Status committed = commit_offset(node, "old", 4);
  EXPECT_TRUE(committed.ok()) << committed.error_message();

  // The same log, its indexes rebuilt from the trimmed log.
  ASSERT_NO_FATAL_FAILURE(rebuild_indexes(node, last_new));
  EXPECT_EQ(find_by_time(node, 0), first_new) << "rebuilt; the log starts at " << first;
  EXPECT_EQ(find_by_time(node, 1), first_new);
  EXPECT_EQ(listed(node, "old"), std::make_pair(std::uint64_t{4}, std::uint64_t{4}))
      << "a topic trimmed whole is known to the rebuilt node too";
  const grpc::Status recommitted = commit_offset(node, "old", 4);
  EXPECT_TRUE(recommitted.ok()) << "a group commit of a topic trimmed whole is admitted after the "
                                   "rebuild too: "
                                << recommitted.error_message();
}

// drills6 M4's case, through the node (review of dispatch3, M2): the log's start after the trim is
// a stamped entry in the millisecond of the trimmed entry before it (one Append: one stamp), so the
// time index holds no record of it. The node reads that entry to know it is stamped
// (TopicsService::first_entry_stamped) and answers it, before the trim's rebuild and after.
TEST(TimeLookupTrim, AStampedFirstEntryInTheTrimmedMillisecondIsTheAnswerOnEveryNode) {
  InProcessNode node([](server::NodeConfig& config) {
    config.store.segment_size_bytes = store::Options::kMinSegmentSizeBytes;
    config.store.max_entry_size_bytes = 16 << 10;
  });
  ASSERT_TRUE(node.started());
  constexpr std::size_t kBatch = 30;  // 8,000 bytes each: several 64 KiB segments, one stamp
  const std::uint64_t batch_last = node.append_to_topic("same", kBatch, 8000, kBatch);
  ASSERT_NE(batch_last, 0u);
  const std::uint64_t batch_first = batch_last - kBatch + 1;
  std::this_thread::sleep_for(5ms);  // a later millisecond: a time record past the batch
  const std::uint64_t later = node.append_to_topic("later", 1, 10);
  ASSERT_NE(later, 0u);
  const std::uint64_t first = node.trim_before(batch_last, batch_first, 10s);
  ASSERT_GT(first, batch_first) << "the trim must cut the batch";
  ASSERT_LE(first, batch_last);
  // The start and the batch's last entry carry the batch's one stamp.
  {
    auto stub = v1::Log::NewStub(node.new_connection());
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 5s);
    v1::ReadRequest request;
    request.set_from_index(first);
    request.set_max_entries(static_cast<std::uint32_t>(batch_last - first + 1));
    v1::ReadResponse response;
    ASSERT_TRUE(stub->Read(&context, request, &response).ok());
    ASSERT_EQ(response.entries_size(), static_cast<int>(batch_last - first + 1));
    EXPECT_EQ(response.entries(0).timestamp_ms(),
              response.entries(response.entries_size() - 1).timestamp_ms());
  }
  ASSERT_TRUE(eventually([&] { return node.derived_indexed_through() >= later; }, 10s));
  EXPECT_EQ(find_by_time(node, 0), first) << "indexed before the trim";
  ASSERT_NO_FATAL_FAILURE(rebuild_indexes(node, later));
  EXPECT_EQ(find_by_time(node, 0), first) << "rebuilt";
}

}  // namespace
}  // namespace raftlog::testing

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

#include "raftlog/v1/client.grpc.pb.h"
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

  // The same log, its indexes rebuilt from the trimmed log.
  node.shutdown();
  std::filesystem::remove_all(node.data_dir() + "/derived");
  ASSERT_TRUE(node.restart());
  ASSERT_TRUE(eventually([&] { return node.derived_indexed_through() >= last_new; }, 10s));
  EXPECT_EQ(find_by_time(node, 0), first_new) << "rebuilt; the log starts at " << first;
  EXPECT_EQ(find_by_time(node, 1), first_new);
  EXPECT_EQ(listed(node, "old"), std::make_pair(std::uint64_t{4}, std::uint64_t{4}))
      << "a topic trimmed whole is known to the rebuilt node too";
}

}  // namespace
}  // namespace raftlog::testing

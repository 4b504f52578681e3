// A node whose derived indexes hold their most topics (derived::kMaxTopics) answers a topic read,
// tail or group commit of a topic they do not know with FAILED_PRECONDITION, TOPIC_NOT_INDEXED:
// the log may hold entries of it that the indexes did not queue. Found by an outside test: a log
// of 60,000 topics answered a read of an acknowledged topic with nothing (exit 0), and a group
// commit to it with "has no entries".
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "api_errors/error_info.h"
#include "derived/derived_indexes.h"
#include "raftlog/v1/groups.grpc.pb.h"
#include "raftlog/v1/topics.grpc.pb.h"
#include "server/in_process_node.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;
namespace v1 = ::raftlog::v1;

// `count` entries, each of its own topic "t<first + i>", 500 per Append; the last index.
std::uint64_t append_distinct_topics(const InProcessNode& node, std::size_t first,
                                     std::size_t count) {
  auto stub = v1::Log::NewStub(node.new_connection());
  std::uint64_t last = 0;
  for (std::size_t done = 0; done < count;) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 20s);
    v1::AppendRequest request;
    for (std::size_t i = 0; i < 500 && done < count; ++i, ++done) {
      request.add_entries("e");
      request.add_attributes()->set_topic("t" + std::to_string(first + done));
    }
    v1::AppendResponse response;
    const grpc::Status status = stub->Append(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    if (!status.ok()) return 0;
    last = response.last_index();
  }
  return last;
}

struct TopicRead {
  grpc::Status status;
  std::string reason;
  int entries = 0;
};

TopicRead read_topic(const InProcessNode& node, const std::string& topic) {
  auto stub = v1::Topics::NewStub(node.new_connection());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 5s);
  v1::ReadTopicRequest request;
  request.set_topic(topic);
  v1::ReadTopicResponse response;
  TopicRead read;
  read.status = stub->ReadTopic(&context, request, &response);
  read.entries = response.entries_size();
  if (auto details = api_errors::error_details(context)) read.reason = details->reason;
  return read;
}

TEST(TopicNotIndexed, ATopicBeyondTheIndexedBoundIsRefusedNotAnsweredEmpty) {
  InProcessNode node([](server::NodeConfig&) {});
  ASSERT_TRUE(node.started());
  constexpr std::size_t kTopics = derived::kMaxTopics + 3;
  const std::uint64_t last = append_distinct_topics(node, 0, kTopics);
  ASSERT_NE(last, 0u);
  // The indexes follow the commit index: wait until the last topic entry is indexed.
  std::optional<TopicRead> indexed_first;
  for (int attempt = 0; attempt < 300; ++attempt) {
    TopicRead read = read_topic(node, "t" + std::to_string(derived::kMaxTopics - 1));
    if (read.status.ok() && read.entries == 1) {
      indexed_first = read;
      break;
    }
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(indexed_first.has_value()) << "the last queued topic was never indexed";
  // The indexes' queues are full; each entry of a further topic is counted, not queued.
  bool counted = false;
  std::string last_message;
  for (int attempt = 0; attempt < 300 && !counted; ++attempt) {
    const TopicRead read = read_topic(node, "t" + std::to_string(kTopics - 1));
    last_message = read.status.error_message();
    counted = !read.status.ok() && last_message.find("(3 since") != std::string::npos;
    if (!counted) std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(counted) << "the three entries past the bound were not all counted: " << last_message;

  // A queued topic reads as before.
  const TopicRead queued = read_topic(node, "t0");
  ASSERT_TRUE(queued.status.ok()) << queued.status.error_message();
  EXPECT_EQ(queued.entries, 1);
  // Acknowledged entries of a topic past the bound: a clear refusal, never an empty answer.
  for (std::size_t i = derived::kMaxTopics; i < kTopics; ++i) {
    const TopicRead read = read_topic(node, "t" + std::to_string(i));
    EXPECT_EQ(read.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
        << "t" << i << ": " << read.status.error_message();
    EXPECT_EQ(read.reason, "TOPIC_NOT_INDEXED");
    EXPECT_NE(read.status.error_message().find("by index or key"), std::string::npos)
        << read.status.error_message();
  }
  // A tail of it ends with the same status instead of waiting for entries never queued.
  {
    auto stub = v1::Topics::NewStub(node.new_connection());
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 5s);
    v1::ReadTopicRequest request;
    request.set_topic("t" + std::to_string(derived::kMaxTopics));
    auto reader = stub->TailTopic(&context, request);
    v1::ReadTopicResponse response;
    while (reader->Read(&response)) {
    }
    const grpc::Status status = reader->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << status.error_message();
  }
  // A group commit to it is refused alike (not "has no entries").
  {
    auto stub = v1::Groups::NewStub(node.new_connection());
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 5s);
    v1::CommitOffsetRequest request;
    request.set_group("billing");
    request.set_topic("t" + std::to_string(derived::kMaxTopics + 1));
    request.set_offset(1);
    v1::CommitOffsetResponse response;
    const grpc::Status status = stub->CommitOffset(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << status.error_message();
    const auto details = api_errors::error_details(context);
    EXPECT_EQ(details ? details->reason : "", "TOPIC_NOT_INDEXED");
  }
}

}  // namespace
}  // namespace raftlog::testing

// TailTopic (raftlog.v1.Topics) on a real one-node Server in process, against a reader that takes
// nothing (the stream must end after --stream-stall-timeout-ms, as a Tail does) and after the
// node's dispatcher stopped (the stream must end with UNAVAILABLE, INDEXES_UNAVAILABLE, not wait
// for entries that will never be indexed).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <system_error>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "api_errors/error_info.h"
#include "raftlog/v1/topics.grpc.pb.h"
#include "server/in_process_node.h"
#include "shared/loopback.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;
namespace v1 = ::raftlog::v1;

// One TailTopic call on a channel, read or not as the test pleases.
struct TopicTailCall {
  TopicTailCall(const std::shared_ptr<grpc::Channel>& channel, const std::string& topic,
                std::uint64_t from_offset, std::chrono::milliseconds deadline)
      : stub(v1::Topics::NewStub(channel)) {
    context.set_deadline(std::chrono::system_clock::now() + deadline);
    v1::ReadTopicRequest request;
    request.set_topic(topic);
    request.set_from_offset(from_offset);
    reader = stub->TailTopic(&context, request);
  }
  // Reads whatever is left (counting the entries), then the status the stream ended with.
  grpc::Status drain_and_finish(std::size_t* entries_read = nullptr) {
    v1::ReadTopicResponse response;
    while (reader->Read(&response)) {
      if (entries_read != nullptr)
        *entries_read += static_cast<std::size_t>(response.entries_size());
    }
    return reader->Finish();
  }
  std::string reason() const {
    const std::optional<api_errors::ErrorDetails> details = api_errors::error_details(context);
    return details ? details->reason : "";
  }
  std::unique_ptr<v1::Topics::Stub> stub;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::ReadTopicResponse>> reader;
};

// A reader that takes nothing leaves the node's write pending for good (HTTP/2 flow control) while
// its connection stays up: without the stall bound the stream held one of the node's 64 topic
// tails and a gRPC server thread until the client went away (here: until its 10 s deadline).
TEST(TopicTailStall, AStreamWhoseReaderTakesNothingIsEndedAfterTheStallTimeout) {
  InProcessNode node([](server::NodeConfig& c) { c.stream_stall_timeout_ms = 500; });
  ASSERT_TRUE(node.started());
  // More than the reader's HTTP/2 windows hold (64 KiB without BDP probing, see TailStall in
  // client_services_test.cpp), so a write stays outstanding while nobody reads.
  constexpr std::size_t kEntries = 8;
  // Four per append: eight 1 MiB entries and their envelopes are over the 8 MiB append bound.
  ASSERT_NE(node.append_to_topic("big", kEntries, 1 << 20, 4), 0u);

  grpc::ChannelArguments no_window_growth;
  no_window_growth.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  const auto started = std::chrono::steady_clock::now();
  TopicTailCall stalled(node.new_connection(no_window_growth), "big", 0, 10s);
  // Several stall timeouts without reading (and time for a loaded machine to start the call);
  // reading earlier would let the write complete.
  std::this_thread::sleep_for(4s);
  std::size_t entries_read = 0;
  const grpc::Status status = stalled.drain_and_finish(&entries_read);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_NE(status.error_message().find("not reading"), std::string::npos)
      << status.error_message();
  EXPECT_LT(entries_read, kEntries) << "the stalled stream was not ended before it was read";
  EXPECT_LT(std::chrono::steady_clock::now() - started, 9s);

  // The node still serves topic tails that are read.
  TopicTailCall reader(node.new_connection(), "big", 0, 10s);
  v1::ReadTopicResponse first;
  ASSERT_TRUE(reader.reader->Read(&first));
  ASSERT_GT(first.entries_size(), 0);
  EXPECT_EQ(first.entries(0).offset(), 0u);
  reader.context.TryCancel();
  (void)reader.drain_and_finish();
}

// A tail that reads keeps going while entries are indexed, however long it takes them.
TEST(TopicTailStall, AStreamThatIsReadIsNotEndedByTheStallTimeout) {
  InProcessNode node([](server::NodeConfig& c) { c.stream_stall_timeout_ms = 300; });
  ASSERT_TRUE(node.started());
  ASSERT_NE(node.append_to_topic("slow", 1, 16), 0u);
  TopicTailCall tail(node.new_connection(), "slow", 0, 20s);
  std::uint64_t next = 0;
  for (int round = 0; round < 4; ++round) {
    v1::ReadTopicResponse response;
    ASSERT_TRUE(tail.reader->Read(&response)) << "round " << round;
    for (const v1::TopicEntry& entry : response.entries()) {
      EXPECT_EQ(entry.offset(), next);
      ++next;
    }
    // Quiet for longer than the stall timeout: nothing is written, so nothing stalls.
    std::this_thread::sleep_for(700ms);
    ASSERT_NE(node.append_to_topic("slow", 1, 16), 0u);
  }
  EXPECT_EQ(next, 4u);
  tail.context.TryCancel();
  EXPECT_EQ(tail.drain_and_finish().error_code(), grpc::StatusCode::CANCELLED);
}

// The dispatcher stops on a storage error of the indexes (here: its directory removed, so the
// next persist fails). A TailTopic then waits for entries its node will never index; it must end
// with UNAVAILABLE, INDEXES_UNAVAILABLE, so the client resumes on another node.
TEST(TopicTailAfterDispatcherStops, EndsWithIndexesUnavailableInsteadOfWaiting) {
  InProcessNode node([](server::NodeConfig&) {});
  ASSERT_TRUE(node.started());
  ASSERT_NE(node.append_to_topic("orders", 3, 32), 0u);
  TopicTailCall tail(node.new_connection(), "orders", 0, 20s);
  std::size_t entries_read = 0;
  v1::ReadTopicResponse response;
  while (entries_read < 3 && tail.reader->Read(&response))
    entries_read += static_cast<std::size_t>(response.entries_size());
  ASSERT_EQ(entries_read, 3u);

  // The dispatcher persists what it indexed within 200 ms; removing the directory while it writes
  // could race with that write, so it is removed once the dispatcher is idle.
  std::this_thread::sleep_for(600ms);
  std::error_code removed;
  std::filesystem::remove_all(std::filesystem::path(node.data_dir()) / "derived", removed);
  ASSERT_FALSE(removed) << removed.message();
  const auto started = std::chrono::steady_clock::now();
  ASSERT_NE(node.append_to_topic("orders", 3, 32), 0u);  // indexed in memory, then persist fails
  const grpc::Status status = tail.drain_and_finish(&entries_read);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
  EXPECT_EQ(tail.reason(), "INDEXES_UNAVAILABLE") << status.error_message();
  EXPECT_LT(std::chrono::steady_clock::now() - started, 10s);

  // A new tail is refused the same way at once.
  TopicTailCall late(node.new_connection(), "orders", entries_read, 10s);
  const grpc::Status refused = late.drain_and_finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE) << refused.error_message();
  EXPECT_EQ(late.reason(), "INDEXES_UNAVAILABLE");
}

}  // namespace
}  // namespace raftlog::testing

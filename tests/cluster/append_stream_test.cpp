// Log/AppendStream over a real 3-node cluster, through the raw gRPC API: pipelined requests past the
// per-stream bound are each answered exactly once and land in the log in order, a refused request
// fails alone, a follower answers every request with the leader's address, the stream count is
// bounded, and a graceful stop ends open streams with UNAVAILABLE at once.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <thread>

#include "api_errors/error_details.h"
#include "api_errors/error_info.h"
#include "raftlog/v1/client.grpc.pb.h"
#include "testing/local_cluster.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;
namespace v1 = ::raftlog::v1;

constexpr int kAppendsPerStream = 4;  // --max-appends-per-stream
constexpr int kMaxStreams = 2;        // --max-append-streams

// One open AppendStream call (and the channel it needs).
struct OpenStream {
  explicit OpenStream(const std::string& address)
      : channel(grpc::CreateChannel(address, grpc::InsecureChannelCredentials())),
        stub(v1::Log::NewStub(channel)) {
    context.set_deadline(std::chrono::system_clock::now() + 30s);
    stream = stub->AppendStream(&context);
  }
  bool send(std::uint64_t request_id, const std::vector<std::string>& entries,
            std::uint64_t client_id = 0, std::uint64_t sequence = 0) {
    v1::AppendStreamRequest request;
    request.set_request_id(request_id);
    for (const std::string& entry : entries) request.mutable_append()->add_entries(entry);
    request.mutable_append()->set_client_id(client_id);
    request.mutable_append()->set_sequence(sequence);
    return stream->Write(request);
  }
  // The next single answer (the tests that use it have one request in flight).
  std::optional<v1::AppendStreamResult> receive_one() {
    v1::AppendStreamResponse response;
    if (!stream->Read(&response) || response.results_size() != 1) return std::nullopt;
    return response.results(0);
  }
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Log::Stub> stub;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<v1::AppendStreamRequest, v1::AppendStreamResponse>>
      stream;
};

class AppendStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LocalClusterOptions options;
    options.raftlogd_path = RAFTLOGD_PATH;
    options.max_entry_size_bytes = 1024;
    options.extra_flags = {"--max-appends-per-stream", std::to_string(kAppendsPerStream),
                           "--max-append-streams", std::to_string(kMaxStreams)};
    cluster_ = std::make_unique<LocalCluster>(options);
    cluster_->start_all();
    leader_ = cluster_->wait_for_leader();
    ASSERT_NE(leader_, 0) << cluster_->log_tail(1);
  }
  std::unique_ptr<LocalCluster> cluster_;
  int leader_ = 0;
};

TEST_F(AppendStreamTest,
       PipelinedRequestsPastTheBoundAreEachAnsweredOnceAndAnInvalidOneFailsAlone) {
  constexpr int kRequests =
      40;  // ten times the per-stream bound: the node must pause and resume reading
  constexpr int kInvalid = 17;  // an empty append
  OpenStream open(cluster_->address(leader_));
  // The writer does not wait for answers; the node's bound holds it back through flow control.
  std::thread writer([&] {
    for (int id = 1; id <= kRequests; ++id) {
      std::vector<std::string> entries;
      if (id != kInvalid) entries = {"p" + std::to_string(id)};
      if (!open.send(static_cast<std::uint64_t>(id), entries)) return;
    }
    open.stream->WritesDone();
  });
  std::map<std::uint64_t, v1::AppendStreamResult> answers;
  int duplicates = 0;
  v1::AppendStreamResponse response;
  while (open.stream->Read(&response)) {
    for (const v1::AppendStreamResult& result : response.results()) {
      if (!answers.emplace(result.request_id(), result).second) ++duplicates;
    }
  }
  writer.join();
  const grpc::Status finished = open.stream->Finish();
  EXPECT_TRUE(finished.ok()) << finished.error_message();  // ends OK after the half-close
  EXPECT_EQ(duplicates, 0);
  ASSERT_EQ(answers.size(), static_cast<std::size_t>(kRequests));

  const v1::AppendStreamResult& invalid = answers.at(kInvalid);
  EXPECT_EQ(invalid.code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_EQ(invalid.error_info().reason(), api_errors::reason::kEmptyAppend);
  EXPECT_FALSE(invalid.message().empty());

  // Every other request committed, in the order it was sent (one stream, one proposal order).
  std::uint64_t previous_index = 0;
  std::map<std::uint64_t, std::string> expected_at;
  for (const auto& [id, result] : answers) {
    if (id == kInvalid) continue;
    ASSERT_EQ(result.code(), 0) << "request " << id << ": " << result.message();
    EXPECT_EQ(result.response().first_index(), result.response().last_index());
    EXPECT_GT(result.response().first_index(), previous_index) << "request " << id;
    previous_index = result.response().first_index();
    expected_at[previous_index] = "p" + std::to_string(id);
  }
  ASSERT_TRUE(cluster_->wait_for_commit(leader_, previous_index));
  std::map<std::uint64_t, std::string> in_log;
  for (const client::Entry& entry : cluster_->read_all(leader_))
    in_log[entry.index] = entry.payload;
  for (const auto& [index, payload] : expected_at)
    EXPECT_EQ(in_log[index], payload) << "index " << index;
}

TEST_F(AppendStreamTest, AFollowerAnswersEveryRequestWithTheLeaderAndKeepsTheStreamOpen) {
  const int follower = leader_ == 1 ? 2 : 1;
  // Right after the election a follower may not have heard from the leader yet (it would answer
  // NO_LEADER): wait, bounded, until it names the leader.
  bool knows_leader = false;
  for (int attempt = 0; attempt < 100 && !knows_leader; ++attempt) {
    auto status = cluster_->status(follower);
    knows_leader = status && status->leader_id == static_cast<std::uint64_t>(leader_);
    if (!knows_leader) std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(knows_leader) << cluster_->log_tail(follower);
  OpenStream open(cluster_->address(follower));
  for (std::uint64_t id = 1; id <= 3; ++id) {
    ASSERT_TRUE(open.send(id, {"x"}));
    auto answer = open.receive_one();
    ASSERT_TRUE(answer.has_value()) << "request " << id;
    EXPECT_EQ(answer->request_id(), id);
    EXPECT_EQ(answer->code(), static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION));
    EXPECT_EQ(answer->error_info().reason(), api_errors::reason::kNotLeader);
    EXPECT_EQ(answer->error_info().leader_id(), static_cast<std::uint64_t>(leader_));
    EXPECT_EQ(answer->error_info().leader_address(), cluster_->address(leader_));
  }
  open.stream->WritesDone();
  EXPECT_TRUE(open.stream->Finish().ok());
}

TEST_F(AppendStreamTest, StreamsPastTheNodesBoundAreRefusedUntilOneCloses) {
  auto open_and_append = [&](std::uint64_t id) {
    auto open = std::make_unique<OpenStream>(cluster_->address(leader_));
    const bool answered = open->send(id, {"s"}) && open->receive_one().has_value();
    return std::make_pair(std::move(open), answered);
  };
  std::vector<std::unique_ptr<OpenStream>> streams;
  for (int i = 0; i < kMaxStreams; ++i) {
    auto [open, answered] = open_and_append(static_cast<std::uint64_t>(i + 1));
    ASSERT_TRUE(answered) << "stream " << i;
    streams.push_back(std::move(open));
  }
  {
    auto [refused, answered] = open_and_append(99);
    EXPECT_FALSE(answered);
    const grpc::Status status = refused->stream->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
    auto details = api_errors::error_details(refused->context);
    ASSERT_TRUE(details.has_value());
    EXPECT_EQ(details->reason, api_errors::reason::kTooManyPending);
  }
  streams.front()->stream->WritesDone();
  ASSERT_TRUE(streams.front()->stream->Finish().ok());
  streams.erase(streams.begin());
  // The node forgets the closed stream once gRPC is done with it, which may take a moment.
  bool reopened = false;
  for (int attempt = 0; attempt < 50 && !reopened; ++attempt) {
    auto [open, answered] = open_and_append(100 + static_cast<std::uint64_t>(attempt));
    reopened = answered;
    if (!reopened) {
      (void)open->stream->Finish();
      std::this_thread::sleep_for(20ms);
    }
  }
  EXPECT_TRUE(reopened);
}

TEST_F(AppendStreamTest, AGracefulStopEndsOpenStreamsWithUnavailableAtOnce) {
  OpenStream open(cluster_->address(leader_));
  ASSERT_TRUE(open.send(1, {"before stop"}));
  auto answer = open.receive_one();
  ASSERT_TRUE(answer.has_value());
  ASSERT_EQ(answer->code(), 0) << answer->message();
  // The stream is idle and open: the node must end it itself rather than wait for the client.
  const auto started = std::chrono::steady_clock::now();
  std::thread stopper([&] { EXPECT_EQ(cluster_->stop(leader_), 0); });
  v1::AppendStreamResponse response;
  EXPECT_FALSE(open.stream->Read(&response));
  const grpc::Status status = open.stream->Finish();
  const auto took = std::chrono::steady_clock::now() - started;
  stopper.join();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
  auto details = api_errors::error_details(open.context);
  ASSERT_TRUE(details.has_value());
  EXPECT_EQ(details->reason, api_errors::reason::kShuttingDown);
  // Well inside the node's 3 s shutdown grace, which would end the stream (CANCELLED) otherwise.
  EXPECT_LT(took, 1000ms);
}

}  // namespace
}  // namespace raftlog::testing

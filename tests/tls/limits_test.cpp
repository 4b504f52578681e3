// Client-facing limits (docs/configuration.md, "Limits"): each one is enforced with a clear status
// and leaves the log unchanged; the node keeps serving afterwards.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "raftlog/v1/client.grpc.pb.h"
#include "testing/local_cluster.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;
namespace v1 = ::raftlog::v1;

std::unique_ptr<v1::Log::Stub> stub(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(64 << 20);
  args.SetMaxReceiveMessageSize(64 << 20);
  return v1::Log::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
}

grpc::Status append(v1::Log::Stub& s, const std::vector<std::string>& entries,
                    v1::AppendResponse* response) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 10s);
  v1::AppendRequest request;
  for (const auto& e : entries) request.add_entries(e);
  return s.Append(&context, request, response);
}

class LimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LocalClusterOptions options;
    options.raftlogd_path = RAFTLOGD_PATH;
    options.nodes = 1;
    options.max_entry_size_bytes = 1024;
    options.extra_flags = {"--max-append-bytes", "4KiB", "--max-read-entries", "3",
                           "--max-tail-streams", "2"};
    cluster_ = std::make_unique<LocalCluster>(options);
    cluster_->start_all();
    ASSERT_EQ(cluster_->wait_for_leader(), 1) << cluster_->log_tail(1);
    log_ = stub(cluster_->address(1));
  }
  std::uint64_t last_index() {
    auto s = cluster_->status(1);
    return s ? s->last_index : 0;
  }
  std::unique_ptr<LocalCluster> cluster_;
  std::unique_ptr<v1::Log::Stub> log_;
};

TEST_F(LimitsTest, AppendBytesAndGrpcMessageSizeAreBounded) {
  v1::AppendResponse response;
  ASSERT_TRUE(append(*log_, {"seed"}, &response).ok());
  const std::uint64_t before = last_index();

  // Five entries of 1000 bytes each fit the entry size but not the 4 KiB per-append bound.
  grpc::Status too_large =
      append(*log_, std::vector<std::string>(5, std::string(1000, 'x')), &response);
  EXPECT_EQ(too_large.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(too_large.error_message().find("exceeds the per-append limit of 4096 bytes"),
            std::string::npos)
      << too_large.error_message();
  // Four fit.
  ASSERT_TRUE(append(*log_, std::vector<std::string>(4, std::string(1000, 'y')), &response).ok());
  EXPECT_EQ(response.last_index(), before + 4);

  // A message larger than the server's gRPC receive bound (logged at start-up; about 9 MiB by
  // default) is refused by gRPC before the node sees it.
  EXPECT_NE(cluster_->log_tail(1).find("limits: gRPC messages"), std::string::npos)
      << cluster_->log_tail(1);
  grpc::Status oversized = append(*log_, {std::string(16 << 20, 'z')}, &response);
  EXPECT_EQ(oversized.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << oversized.error_message();
  EXPECT_EQ(last_index(), before + 4);
  EXPECT_TRUE(append(*log_, {"after"}, &response).ok());
}

TEST_F(LimitsTest, ReadEntriesAndTailStreamsAreBounded) {
  v1::AppendResponse response;
  ASSERT_TRUE(append(*log_, {"a", "b", "c", "d", "e"}, &response).ok());
  ASSERT_TRUE(cluster_->wait_for_commit(1, response.last_index()));

  {
    grpc::ClientContext context;
    v1::ReadRequest request;
    request.set_from_index(1);
    request.set_max_entries(100);  // asks for more than the node allows
    v1::ReadResponse read;
    ASSERT_TRUE(log_->Read(&context, request, &read).ok());
    EXPECT_EQ(read.entries_size(), 3);
  }

  // Two Tail streams are allowed; the third is refused while they are open.
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::TailResponse>>> tails;
  for (int i = 0; i < 2; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    v1::TailRequest request;
    request.set_from_index(1);
    tails.push_back(log_->Tail(contexts.back().get(), request));
    v1::TailResponse first;
    ASSERT_TRUE(tails.back()->Read(&first)) << "tail " << i;  // the stream is open and serving
  }
  grpc::ClientContext third_context;
  third_context.set_deadline(std::chrono::system_clock::now() + 5s);
  v1::TailRequest request;
  request.set_from_index(1);
  auto third = log_->Tail(&third_context, request);
  v1::TailResponse ignored;
  while (third->Read(&ignored)) {
  }
  const grpc::Status refused = third->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_NE(refused.error_message().find("too many Tail streams on this node (2)"),
            std::string::npos)
      << refused.error_message();

  for (auto& context : contexts) context->TryCancel();
  for (auto& tail : tails) {
    while (tail->Read(&ignored)) {
    }
    (void)tail->Finish();
  }
}

}  // namespace
}  // namespace raftlog::testing

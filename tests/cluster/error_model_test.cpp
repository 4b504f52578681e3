// The standard gRPC error model over a real 3-node cluster (docs/errors.md): every refusal carries
// grpc-status-details-bin, a google.rpc.Status whose one detail is a google.rpc.ErrorInfo of domain
// raftlog.v1 with the reason word and the hints in its metadata, decoded here with a plain parse
// into the messages of proto/raftlog/v1/error_model.proto, and by Python's grpc
// (read_status_details.py). The older raftlog-error-bin trailer still comes with it.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>

#include "api_errors/error_info.h"
#include "raftlog/v1/client.grpc.pb.h"
#include "raftlog/v1/error_model.pb.h"
#include "shared/command_run.h"
#include "testing/local_cluster.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;
namespace v1 = ::raftlog::v1;
using Metadata = std::map<std::string, std::string>;

std::shared_ptr<grpc::Channel> channel_to(const std::string& address) {
  return grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
}

std::string trailer(const grpc::ClientContext& context, const std::string& key) {
  const auto& trailers = context.GetServerTrailingMetadata();
  const auto found = trailers.find(key);
  return found == trailers.end() ? "" : std::string(found->second.data(), found->second.size());
}

// The ErrorInfo of a refused call, checked to be standard: the trailer parses as google.rpc.Status,
// repeats the call's code and message, and holds exactly one Any of ErrorInfo's standard type URL
// with domain raftlog.v1. The older trailer names the same reason.
google::rpc::ErrorInfo standard_error_info(const grpc::ClientContext& context,
                                           const grpc::Status& status) {
  google::rpc::ErrorInfo info;
  const std::string bytes = trailer(context, "grpc-status-details-bin");
  EXPECT_FALSE(bytes.empty()) << "no grpc-status-details-bin on: " << status.error_message();
  EXPECT_EQ(status.error_details(), bytes) << "gRPC hands the trailer to the status as well";
  google::rpc::Status standard;
  EXPECT_TRUE(standard.ParseFromString(bytes));
  EXPECT_EQ(standard.code(), static_cast<int>(status.error_code()));
  EXPECT_EQ(standard.message(), status.error_message());
  EXPECT_EQ(standard.details_size(), 1);
  if (standard.details_size() < 1) return info;
  EXPECT_EQ(standard.details(0).type_url(), "type.googleapis.com/google.rpc.ErrorInfo");
  EXPECT_TRUE(standard.details(0).UnpackTo(&info));
  EXPECT_EQ(info.domain(), "raftlog.v1");
  EXPECT_FALSE(info.reason().empty());
  v1::ErrorInfo old;
  EXPECT_TRUE(old.ParseFromString(trailer(context, "raftlog-error-bin")));
  EXPECT_EQ(old.reason(), info.reason());
  return info;
}

Metadata metadata_of(const google::rpc::ErrorInfo& info) {
  return {info.metadata().begin(), info.metadata().end()};
}

// read_status_details.py's `key=value` lines, or nullopt (with the reason in *why) when this
// machine's python3 lacks grpcio or protobuf.
std::optional<std::map<std::string, std::string>> python_view(const std::string& arguments,
                                                              std::string* why) {
  const CommandRun run = run_command(std::string(RAFTLOG_TEST_PYTHON) + " " + RAFTLOG_SOURCE_DIR +
                                     "/tests/cluster/read_status_details.py --proto-dir " +
                                     RAFTLOG_PYTHON_PROTO_DIR + " " + arguments);
  *why = run.out;
  if (run.exit_code == 77) return std::nullopt;
  EXPECT_EQ(run.exit_code, 0) << run.out;
  std::map<std::string, std::string> lines;
  std::istringstream in(run.out);
  for (std::string line; std::getline(in, line);) {
    const auto equals = line.find('=');
    if (equals != std::string::npos) lines[line.substr(0, equals)] = line.substr(equals + 1);
  }
  return lines;
}

class ErrorModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LocalClusterOptions options;
    options.raftlogd_path = RAFTLOGD_PATH;
    cluster_ = std::make_unique<LocalCluster>(options);
    cluster_->start_all();
    leader_ = cluster_->wait_for_leader();
    ASSERT_NE(leader_, 0) << cluster_->log_tail(1);
    follower_ = leader_ == 1 ? 2 : 1;
    auto appended = cluster_->client()->append({"seed"});
    ASSERT_TRUE(appended.ok()) << appended.status().to_string();
    seed_index_ = appended->last_index;
    // Until the follower has heard from the leader it knows none and says NO_LEADER.
    ASSERT_TRUE(cluster_->wait_for_commit(follower_, seed_index_)) << cluster_->log_tail(follower_);
  }
  std::unique_ptr<LocalCluster> cluster_;
  int leader_ = 0;
  int follower_ = 0;
  std::uint64_t seed_index_ = 0;
};

TEST_F(ErrorModelTest, ANotLeaderRefusalNamesTheLeaderInTheStandardErrorInfo) {
  auto follower = v1::Log::NewStub(channel_to(cluster_->address(follower_)));
  grpc::ClientContext context;
  v1::AppendRequest request;
  request.add_entries("x");
  v1::AppendResponse response;
  const grpc::Status status = follower->Append(&context, request, &response);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << status.error_message();
  const google::rpc::ErrorInfo info = standard_error_info(context, status);
  EXPECT_EQ(info.reason(), "NOT_LEADER");
  EXPECT_EQ(metadata_of(info), (Metadata{{"leader_id", std::to_string(leader_)},
                                         {"leader_address", cluster_->address(leader_)}}));
  // The client library reads the same details.
  const auto details = api_errors::error_details(context);
  ASSERT_TRUE(details.has_value());
  EXPECT_EQ(details->leader_id, static_cast<std::uint64_t>(leader_));
  EXPECT_EQ(details->leader_address, cluster_->address(leader_));
}

TEST_F(ErrorModelTest, ReadsPastTheEndAndAtIndexZeroHaveTheirOwnReasons) {
  auto leader = v1::Log::NewStub(channel_to(cluster_->address(leader_)));
  {
    grpc::ClientContext context;
    v1::ReadRequest request;
    request.set_from_index(seed_index_ + 100);
    v1::ReadResponse response;
    const grpc::Status status = leader->Read(&context, request, &response);
    ASSERT_EQ(status.error_code(), grpc::StatusCode::OUT_OF_RANGE) << status.error_message();
    const google::rpc::ErrorInfo info = standard_error_info(context, status);
    EXPECT_EQ(info.reason(), "INDEX_NOT_YET_COMMITTED");
    Metadata metadata = metadata_of(info);
    EXPECT_EQ(metadata["first_index"], "1");
    const std::uint64_t commit = std::stoull(metadata["commit_index"]);
    EXPECT_GE(commit, seed_index_);
    EXPECT_LT(commit, seed_index_ + 99);
  }
  {
    grpc::ClientContext context;
    v1::ReadRequest request;  // from_index 0
    v1::ReadResponse response;
    const grpc::Status status = leader->Read(&context, request, &response);
    ASSERT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    const google::rpc::ErrorInfo info = standard_error_info(context, status);
    EXPECT_EQ(info.reason(), "BAD_INDEX_RANGE");
    EXPECT_TRUE(info.metadata().empty());
  }
}

TEST_F(ErrorModelTest, ALeadershipTransferToAnUnknownNodeHasAReason) {
  auto admin = v1::Admin::NewStub(channel_to(cluster_->address(leader_)));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 10s);
  v1::TransferLeadershipRequest request;
  request.set_target_id(99);
  v1::TransferLeadershipResponse response;
  const grpc::Status status = admin->TransferLeadership(&context, request, &response);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_EQ(standard_error_info(context, status).reason(), "TRANSFER_TARGET_UNKNOWN");
}

TEST_F(ErrorModelTest, PythonsGrpcReadsTheStandardDetails) {
  std::string why;
  auto not_leader =
      python_view("--address " + cluster_->address(follower_) + " --call append", &why);
  if (!not_leader) GTEST_SKIP() << why;
  EXPECT_EQ((*not_leader)["code"], "FAILED_PRECONDITION") << why;
  EXPECT_EQ((*not_leader)["status_code_matches"], "True") << why;
  EXPECT_EQ((*not_leader)["status_message_matches"], "True") << why;
  EXPECT_EQ((*not_leader)["details"], "1") << why;
  EXPECT_EQ((*not_leader)["type_url"], "type.googleapis.com/google.rpc.ErrorInfo") << why;
  EXPECT_EQ((*not_leader)["unpacked"], "True") << why;
  EXPECT_EQ((*not_leader)["reason"], "NOT_LEADER") << why;
  EXPECT_EQ((*not_leader)["domain"], "raftlog.v1") << why;
  EXPECT_EQ((*not_leader)["metadata.leader_id"], std::to_string(leader_)) << why;
  EXPECT_EQ((*not_leader)["metadata.leader_address"], cluster_->address(leader_)) << why;
  EXPECT_EQ((*not_leader)["raftlog_error_bin"], "True") << why;

  auto past_end = python_view("--address " + cluster_->address(leader_) +
                                  " --call read --from-index " + std::to_string(seed_index_ + 100),
                              &why);
  ASSERT_TRUE(past_end.has_value()) << why;
  EXPECT_EQ((*past_end)["code"], "OUT_OF_RANGE") << why;
  EXPECT_EQ((*past_end)["reason"], "INDEX_NOT_YET_COMMITTED") << why;
  EXPECT_EQ((*past_end)["metadata.first_index"], "1") << why;
  EXPECT_FALSE((*past_end)["metadata.commit_index"].empty()) << why;
}

}  // namespace
}  // namespace raftlog::testing

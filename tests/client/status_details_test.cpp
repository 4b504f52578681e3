// The standard grpc-status-details-bin payload (src/api_errors/status_details.h) on its own: what the
// server puts in it, and what the client library accepts back from bytes it cannot trust.
#include "api_errors/status_details.h"

#include <gtest/gtest.h>

#include "raftlog/v1/error_model.pb.h"

namespace raftlog::api_errors {
namespace {

ErrorDetails not_leader_details() {
  ErrorDetails details;
  details.leader_id = 3;
  details.leader_address = "127.0.0.1:7003";
  details.reason = std::string(reason::kNotLeader);
  return details;
}

// A google.rpc.Status holding one Any-packed ErrorInfo built by hand, as another server might send.
std::string status_with(const google::rpc::ErrorInfo& info,
                        const std::string& type_url_prefix = "type.googleapis.com") {
  google::rpc::Status status;
  status.set_code(9);
  status.add_details()->PackFrom(info, type_url_prefix);
  return status.SerializeAsString();
}

TEST(StatusDetails, IsAStandardStatusWithOneRaftlogErrorInfo) {
  google::rpc::Status status;
  ASSERT_TRUE(status.ParseFromString(status_details(grpc::StatusCode::FAILED_PRECONDITION,
                                                    "not the leader", not_leader_details())));
  EXPECT_EQ(status.code(), 9);
  EXPECT_EQ(status.message(), "not the leader");
  ASSERT_EQ(status.details_size(), 1);
  EXPECT_EQ(status.details(0).type_url(), "type.googleapis.com/google.rpc.ErrorInfo");
  google::rpc::ErrorInfo info;
  ASSERT_TRUE(status.details(0).UnpackTo(&info));
  EXPECT_EQ(info.reason(), "NOT_LEADER");
  EXPECT_EQ(info.domain(), "raftlog.v1");
  ASSERT_EQ(info.metadata_size(), 2);
  EXPECT_EQ(info.metadata().at("leader_id"), "3");
  EXPECT_EQ(info.metadata().at("leader_address"), "127.0.0.1:7003");
}

TEST(StatusDetails, MetadataHoldsOnlyTheHintsThatAreKnown) {
  ErrorDetails details;
  details.reason = std::string(reason::kIndexNotYetCommitted);
  details.first_index = 1;
  details.commit_index = 0;  // an empty log: zero is a value, not "unknown"
  google::rpc::Status status;
  ASSERT_TRUE(status.ParseFromString(
      status_details(grpc::StatusCode::OUT_OF_RANGE, "past the end", details)));
  google::rpc::ErrorInfo info;
  ASSERT_TRUE(status.details(0).UnpackTo(&info));
  ASSERT_EQ(info.metadata_size(), 2);
  EXPECT_EQ(info.metadata().at("first_index"), "1");
  EXPECT_EQ(info.metadata().at("commit_index"), "0");

  details = ErrorDetails{};
  details.reason = std::string(reason::kNoLeader);
  ASSERT_TRUE(status.ParseFromString(
      status_details(grpc::StatusCode::FAILED_PRECONDITION, "no leader", details)));
  ASSERT_TRUE(status.details(0).UnpackTo(&info));
  EXPECT_EQ(info.reason(), "NO_LEADER");
  EXPECT_TRUE(info.metadata().empty());
}

TEST(StatusDetails, ReadsBackWhatTheServerWrote) {
  ErrorDetails details = not_leader_details();
  EXPECT_EQ(details_from_status_details(
                status_details(grpc::StatusCode::FAILED_PRECONDITION, "m", details)),
            details);
  details = ErrorDetails{};
  details.reason = std::string(reason::kIndexTrimmed);
  details.first_index = 129;
  details.commit_index = 400;
  EXPECT_EQ(
      details_from_status_details(status_details(grpc::StatusCode::OUT_OF_RANGE, "m", details)),
      details);
}

TEST(StatusDetails, IgnoresWhatIsNotRaftlogs) {
  EXPECT_EQ(details_from_status_details("\x0a\xff garbage"), std::nullopt);
  EXPECT_EQ(details_from_status_details(""), std::nullopt);  // a Status without details

  google::rpc::ErrorInfo foreign;
  foreign.set_reason("RATE_LIMITED");
  foreign.set_domain("example.com");
  EXPECT_EQ(details_from_status_details(status_with(foreign)), std::nullopt);

  google::rpc::ErrorInfo ours;
  ours.set_reason("NOT_LEADER");
  ours.set_domain("raftlog.v1");
  EXPECT_EQ(details_from_status_details(status_with(ours, "example.com/types")), std::nullopt)
      << "only the standard type URL names google.rpc.ErrorInfo";
  const auto read = details_from_status_details(status_with(ours));
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->reason, "NOT_LEADER");
}

TEST(StatusDetails, MetadataThatIsNotADecimalNumberIsIgnored) {
  for (const std::string bad : {"", "12x", "-1", "+5", " 7", "0x10", "18446744073709551616"}) {
    google::rpc::ErrorInfo info;
    info.set_reason("INDEX_TRIMMED");
    info.set_domain("raftlog.v1");
    (*info.mutable_metadata())["leader_id"] = bad;
    (*info.mutable_metadata())["first_index"] = bad;
    (*info.mutable_metadata())["commit_index"] = "42";
    const auto read = details_from_status_details(status_with(info));
    ASSERT_TRUE(read.has_value()) << bad;
    EXPECT_EQ(read->leader_id, 0u) << bad;
    EXPECT_EQ(read->first_index, std::nullopt) << bad;
    EXPECT_EQ(read->commit_index, 42u) << bad;
  }
}

}  // namespace
}  // namespace raftlog::api_errors

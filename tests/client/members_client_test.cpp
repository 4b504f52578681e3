// MembersClient (src/client/admin.h) against a scriptable fake Membership service: a change retried
// after an ambiguous attempt (the first may have happened) answers success when the member list
// shows the wanted state, and the refusal otherwise.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "api_errors/error_info.h"
#include "client/admin.h"
#include "raftlog/v1/admin.grpc.pb.h"
#include "shared/loopback.h"

namespace raftlog::client {
namespace {

namespace pb = raftlog::v1;
using api_errors::error_status;

grpc::Status refusal(grpc::ServerContext* context, grpc::StatusCode code, std::string_view why) {
  ErrorDetails details;
  details.reason = std::string(why);
  return error_status(context, code, std::string(why), details);
}

// A leader whose configuration is {1, 2, 3} plus whatever the test's handlers change.
class FakeMembership final : public pb::Membership::Service {
 public:
  std::function<grpc::Status(grpc::ServerContext*, int call)> on_change;
  std::atomic<bool> has_4{false};
  std::atomic<bool> committed{true};
  std::atomic<int> changes{0};
  std::atomic<int> lists{0};
  // When > 0: node 4 appears (the change commits) at this ListMembers call, not before.
  std::atomic<int> add_4_at_list{0};

  grpc::Status ListMembers(grpc::ServerContext*, const pb::ListMembersRequest*,
                           pb::ListMembersResponse* response) override {
    if (++lists == add_4_at_list) has_4 = true;
    for (std::uint64_t id = 1; id <= (has_4 ? 4u : 3u); ++id) {
      pb::Member* member = response->add_members();
      member->set_id(id);
      member->set_address("127.0.0.1:" + std::to_string(7000 + id));
      member->set_voter(id != 4);
    }
    response->set_config_index(has_4 ? 9 : 5);
    response->set_config_committed(committed);
    response->set_leader_id(1);
    response->set_term(2);
    return grpc::Status::OK;
  }
  grpc::Status AddMember(grpc::ServerContext* context, const pb::AddMemberRequest*,
                         pb::ChangeMembersResponse*) override {
    return on_change(context, ++changes);
  }
  grpc::Status RemoveMember(grpc::ServerContext* context, const pb::RemoveMemberRequest*,
                            pb::ChangeMembersResponse*) override {
    return on_change(context, ++changes);
  }
};

class MembersClientTest : public ::testing::Test {
 protected:
  void SetUp() override { server_ = raftlog::testing::start_server({&fake_}); }
  void TearDown() override { server_.shutdown(); }
  std::unique_ptr<MembersClient> client() {
    Options options;
    options.endpoints = {server_.address()};
    options.call_timeout_ms = 500;
    options.retry_deadline_ms = 3000;
    options.backoff_min_ms = 5;
    options.backoff_max_ms = 50;
    auto created = MembersClient::create(options);
    EXPECT_TRUE(created.ok()) << created.status().to_string();
    return std::move(created).value();
  }
  FakeMembership fake_;
  raftlog::testing::StartedServer server_;
};

// The first add happened, but its answer was lost (UNAVAILABLE from the transport); the retry finds
// node 4 a member already.
TEST_F(MembersClientTest, ARetriedAddThatFindsTheMemberAddedSucceeds) {
  fake_.on_change = [this](grpc::ServerContext* context, int call) {
    if (call == 1) {
      fake_.has_4 = true;
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection reset");
    }
    return refusal(context, grpc::StatusCode::FAILED_PRECONDITION, reason::kAlreadyAMember);
  };
  Result<MembershipChange> added = client()->add(4, "127.0.0.1:7004", /*learner=*/true);
  ASSERT_TRUE(added.ok()) << added.status().to_string();
  EXPECT_EQ(added->learners, (std::vector<std::uint64_t>{4}));
  EXPECT_EQ(added->voters, (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_EQ(added->config_index, 9u);
  EXPECT_EQ(fake_.changes, 2);
}

// Without an ambiguous attempt, ALREADY_A_MEMBER is the answer: the add was someone else's.
TEST_F(MembersClientTest, AnAddOfAMemberWithoutAnAmbiguousAttemptIsRefused) {
  fake_.has_4 = true;
  fake_.on_change = [](grpc::ServerContext* context, int) {
    return refusal(context, grpc::StatusCode::FAILED_PRECONDITION, reason::kAlreadyAMember);
  };
  Result<MembershipChange> added = client()->add(4, "127.0.0.1:7004", true);
  ASSERT_FALSE(added.ok());
  ASSERT_TRUE(added.status().details().has_value());
  EXPECT_EQ(added.status().details()->reason, reason::kAlreadyAMember);
}

// A remove whose attempts all time out, but which happened: the list shows node 4 gone.
TEST_F(MembersClientTest, ARemoveThatTimedOutButHappenedSucceeds) {
  fake_.has_4 = true;
  fake_.on_change = [this](grpc::ServerContext*, int) {
    fake_.has_4 = false;
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline");
  };
  Result<MembershipChange> removed = client()->remove(4);
  ASSERT_TRUE(removed.ok()) << removed.status().to_string();
  EXPECT_EQ(removed->voters, (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_TRUE(removed->learners.empty());
}

// Ambiguous, and the list does not show the wanted state (or shows it uncommitted): the failure.
TEST_F(MembersClientTest, AnAmbiguousChangeTheListDoesNotConfirmFails) {
  fake_.on_change = [](grpc::ServerContext* context, int call) {
    if (call == 1) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection reset");
    return refusal(context, grpc::StatusCode::FAILED_PRECONDITION, reason::kWouldLoseQuorum);
  };
  Result<MembershipChange> added = client()->add(4, "127.0.0.1:7004", true);
  ASSERT_FALSE(added.ok());
  EXPECT_EQ(added.status().details()->reason, reason::kWouldLoseQuorum);
  fake_.changes = 0;
  fake_.committed = false;
  fake_.on_change = [this](grpc::ServerContext*, int) {
    fake_.has_4 = true;
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline");
  };
  EXPECT_FALSE(client()->add(4, "127.0.0.1:7004", true).ok()) << "its entry is not committed";
}

// The leader proposed the add and lost its leadership before the commit (LEADERSHIP_LOST: outcome
// unknown); the next leader committed it. Not retried (it may have happened), and confirmed by the
// list.
TEST_F(MembersClientTest, AnAddAnsweredLeadershipLostThatCommittedSucceeds) {
  fake_.on_change = [this](grpc::ServerContext* context, int) {
    fake_.has_4 = true;
    return refusal(context, grpc::StatusCode::UNAVAILABLE, reason::kLeadershipLost);
  };
  Result<MembershipChange> added = client()->add(4, "127.0.0.1:7004", /*learner=*/true);
  ASSERT_TRUE(added.ok()) << added.status().to_string();
  EXPECT_EQ(added->learners, (std::vector<std::uint64_t>{4}));
  EXPECT_EQ(fake_.changes, 1) << "a change whose outcome is unknown is not sent again";
}

// The first attempt's answer was lost; the retry finds it still in progress (CONF_CHANGE_IN_PROGRESS,
// a final refusal); the list shows the change only from its third call: success, not the refusal.
TEST_F(MembersClientTest, AnAmbiguousChangeTheListShowsOnlyLaterSucceeds) {
  fake_.add_4_at_list = 3;
  fake_.on_change = [](grpc::ServerContext* context, int call) {
    if (call == 1) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection reset");
    return refusal(context, grpc::StatusCode::UNAVAILABLE, reason::kConfChangeInProgress);
  };
  Result<MembershipChange> added = client()->add(4, "127.0.0.1:7004", /*learner=*/true);
  ASSERT_TRUE(added.ok()) << added.status().to_string();
  EXPECT_EQ(added->learners, (std::vector<std::uint64_t>{4}));
  EXPECT_GE(fake_.lists, 3);
}

// Ambiguous, and the list never shows the change: the failure keeps its reason and says the
// outcome is unknown.
TEST_F(MembersClientTest, AnUnconfirmedLeadershipLostChangeSaysTheOutcomeIsUnknown) {
  fake_.on_change = [](grpc::ServerContext* context, int) {
    return refusal(context, grpc::StatusCode::UNAVAILABLE, reason::kLeadershipLost);
  };
  Result<MembershipChange> removed = client()->remove(3);
  ASSERT_FALSE(removed.ok());
  ASSERT_TRUE(removed.status().details().has_value());
  EXPECT_EQ(removed.status().details()->reason, reason::kLeadershipLost);
  EXPECT_NE(removed.status().message().find("outcome unknown"), std::string::npos)
      << removed.status().message();
  EXPECT_GE(fake_.lists, 2) << "asked the list more than once";
}

}  // namespace
}  // namespace raftlog::client

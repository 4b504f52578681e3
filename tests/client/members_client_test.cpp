// MembersClient (src/client/admin.h) against a scriptable fake Membership service: a change retried
// after an ambiguous attempt (the first may have happened) answers success when the member list
// shows the wanted state, and the refusal otherwise.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "api_errors/error_info.h"
#include "client/admin.h"
#include "raftlog/v1/admin.grpc.pb.h"
#include "shared/command_run.h"
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
  std::atomic<bool> retired_4{false};  // node 4's removal committed: listed in retired_ids
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
    if (retired_4) response->add_retired_ids(4);
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
  std::unique_ptr<MembersClient> client(std::vector<std::string> endpoints = {},
                                        std::uint32_t retry_deadline_ms = 3000) {
    Options options;
    options.endpoints = endpoints.empty() ? std::vector<std::string>{server_.address()}
                                          : std::move(endpoints);
    options.call_timeout_ms = 500;
    options.retry_deadline_ms = retry_deadline_ms;
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
    fake_.retired_4 = true;
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

// A node that accepts connections and never answers (SIGSTOPped, a hung disk, a paused VM): a
// loopback listener that never calls accept(), so the kernel completes each handshake and nothing
// ever reads or writes.
class FrozenEndpoint {
 public:
  FrozenEndpoint() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_GE(fd_, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(::listen(fd_, 16), 0);
    socklen_t len = sizeof(addr);
    EXPECT_EQ(::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port_ = ntohs(addr.sin_port);
  }
  ~FrozenEndpoint() { ::close(fd_); }
  FrozenEndpoint(const FrozenEndpoint&) = delete;
  FrozenEndpoint& operator=(const FrozenEndpoint&) = delete;
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// The address of a loopback port nothing listens on (a frozen endpoint's, once closed): a
// connection is refused.
std::string dead_endpoint() {
  const FrozenEndpoint closed_at_return;
  return closed_at_return.address();
}

// drills6 M1/L7: a dead node first among the endpoints (the usual case while replacing a dead node).
// The refused connection sent nothing, so the leader's refusal is the answer: NOT_A_MEMBER for a
// typo, at once; it was taken as "may have reached the leader", and the list then confirmed the
// removal of a node that never was a member (exit 0).
TEST_F(MembersClientTest, ARefusedConnectionFirstLeavesTheLeadersRefusalDefinite) {
  fake_.on_change = [](grpc::ServerContext* context, int) {
    return refusal(context, grpc::StatusCode::INVALID_ARGUMENT, reason::kNotAMember);
  };
  const auto start = std::chrono::steady_clock::now();
  Result<MembershipChange> removed = client({dead_endpoint(), server_.address()}, 10000)->remove(42);
  ASSERT_FALSE(removed.ok()) << "node 42 was never a member";
  ASSERT_TRUE(removed.status().details().has_value());
  EXPECT_EQ(removed.status().details()->reason, reason::kNotAMember);
  EXPECT_EQ(removed.status().message().find("outcome unknown"), std::string::npos)
      << removed.status().message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3))
      << "the leader's refusal ends the command, not the 10 s budget";
}

// An attempt that may have reached the leader, then NOT_A_MEMBER: the list shows node 42 absent,
// but not retired (never removed by a committed change): the refusal stands.
TEST_F(MembersClientTest, ARemoveOfANeverMemberAfterAnAmbiguousAttemptIsNotConfirmed) {
  fake_.on_change = [](grpc::ServerContext* context, int call) {
    if (call == 1) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection reset");
    return refusal(context, grpc::StatusCode::INVALID_ARGUMENT, reason::kNotAMember);
  };
  Result<MembershipChange> removed = client({}, 1500)->remove(42);
  ASSERT_FALSE(removed.ok());
  ASSERT_TRUE(removed.status().details().has_value());
  EXPECT_EQ(removed.status().details()->reason, reason::kNotAMember);
}

// A refusal that an earlier attempt's success cannot explain (WOULD_LOSE_QUORUM: had the removal
// happened, the retry would have met NOT_A_MEMBER) is the answer even after an ambiguous attempt,
// without the member-list wait.
TEST_F(MembersClientTest, ARefusalTheChangeCannotExplainIsTheAnswerAfterAnAmbiguousAttempt) {
  fake_.on_change = [](grpc::ServerContext* context, int call) {
    if (call == 1) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection reset");
    return refusal(context, grpc::StatusCode::FAILED_PRECONDITION, reason::kWouldLoseQuorum);
  };
  const auto start = std::chrono::steady_clock::now();
  Result<MembershipChange> removed = client({}, 10000)->remove(3);
  ASSERT_FALSE(removed.ok());
  ASSERT_TRUE(removed.status().details().has_value());
  EXPECT_EQ(removed.status().details()->reason, reason::kWouldLoseQuorum);
  EXPECT_EQ(removed.status().message().find("outcome unknown"), std::string::npos)
      << removed.status().message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
}

using Clock = std::chrono::steady_clock;
std::int64_t ms_since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

// drills4 M1: a frozen first endpoint held `members list` for its whole --timeout-ms. Each attempt
// has its own deadline (call_timeout_ms, 500 ms here): the next endpoint answers.
TEST_F(MembersClientTest, AListMovesPastAFrozenFirstEndpoint) {
  FrozenEndpoint frozen;
  const auto start = Clock::now();
  Result<MemberList> list = client({frozen.address(), server_.address()}, 10000)->list();
  ASSERT_TRUE(list.ok()) << list.status().to_string();
  EXPECT_EQ(list->members.size(), 3u);
  EXPECT_EQ(list->served_by, server_.address());
  EXPECT_LT(ms_since(start), 3000) << "one attempt of 500 ms at the frozen node, not 10 s";
}

// A change's attempt at a frozen node ends after a few seconds (it waits for a commit, so longer
// than a list's), not the whole budget: the change is made through the next endpoint (here the
// leader; `members replace` of a hung node works).
TEST_F(MembersClientTest, AChangeMovesPastAFrozenFirstEndpoint) {
  FrozenEndpoint frozen;
  fake_.on_change = [this](grpc::ServerContext*, int) {
    fake_.has_4 = true;
    return grpc::Status::OK;
  };
  const auto start = Clock::now();
  Result<MembershipChange> added =
      client({frozen.address(), server_.address()}, 20000)->add(4, "127.0.0.1:7004", true);
  ASSERT_TRUE(added.ok()) << added.status().to_string();
  EXPECT_EQ(fake_.changes, 1);
  EXPECT_LT(ms_since(start), 9000) << "one attempt of about 5 s at the frozen node, not 20 s";
}

// bound_by bounds the whole command: an ambiguous attempt (the node answers nothing before the
// deadline) and the confirmation from the member list after it end by the command's deadline,
// where each had its own full budget before (a 60 s `members remove` took 126 s).
TEST_F(MembersClientTest, TheCommandDeadlineBoundsTheChangeAndItsConfirmation) {
  fake_.has_4 = true;
  fake_.on_change = [](grpc::ServerContext* context, int) {
    while (!context->IsCancelled() && context->deadline() > std::chrono::system_clock::now()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline");
  };
  auto members = client({server_.address()}, 2500);
  const auto start = Clock::now();
  members->bound_by(start + std::chrono::milliseconds(2500));
  Result<MembershipChange> removed = members->remove(4);
  ASSERT_FALSE(removed.ok());
  EXPECT_NE(removed.status().message().find("outcome unknown"), std::string::npos)
      << removed.status().message();
  EXPECT_LT(ms_since(start), 3500) << "the change and its confirmation within the 2.5 s bound";
}

// Membership client review, L-2: the change's attempts spent the command's deadline and the last
// one was ambiguous; the change did happen. The member list is checked once anyway (it was not,
// and the failure said "outcome unknown" without looking), and shows it: success.
TEST_F(MembersClientTest, AnAmbiguousChangeThatSpentTheDeadlineStillChecksTheListOnce) {
  fake_.on_change = [this](grpc::ServerContext* context, int) {
    fake_.has_4 = true;  // it happened; the answer never comes before the deadline
    while (!context->IsCancelled() && context->deadline() > std::chrono::system_clock::now()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline");
  };
  auto members = client({server_.address()}, 2500);
  const auto start = Clock::now();
  members->bound_by(start + std::chrono::milliseconds(800));
  Result<MembershipChange> added = members->add(4, "127.0.0.1:7004", /*learner=*/true);
  ASSERT_TRUE(added.ok()) << added.status().to_string();
  EXPECT_EQ(added->learners, (std::vector<std::uint64_t>{4}));
  EXPECT_EQ(fake_.lists, 1) << "one check, past the spent deadline";
  EXPECT_LT(ms_since(start), 800 + 500 + 500) << "the check gets one call timeout (500 ms) at most";
}

// Review of mend2, L3: with the deadline not spent when the confirmation starts (50 ms left, less
// than one call timeout of 500 ms), the polls stop at the deadline; they ran on for a call timeout.
TEST_F(MembersClientTest, TheConfirmationOfAnAmbiguousChangeEndsByTheDeadlineWhenTimeIsLeft) {
  const auto start = Clock::now();
  fake_.on_change = [this, start](grpc::ServerContext* context, int call) {
    if (call == 1) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection reset");
    std::this_thread::sleep_until(start + std::chrono::milliseconds(950));
    // The refusal an earlier attempt's success would explain, so the list must decide (a refusal it
    // cannot explain is the answer at once: ARefusalTheChangeCannotExplain...).
    return refusal(context, grpc::StatusCode::FAILED_PRECONDITION, reason::kAlreadyAMember);
  };
  auto members = client({server_.address()}, 2500);
  members->bound_by(start + std::chrono::milliseconds(1000));
  Result<MembershipChange> added = members->add(4, "127.0.0.1:7004", /*learner=*/true);
  ASSERT_FALSE(added.ok());
  EXPECT_NE(added.status().message().find("outcome unknown"), std::string::npos)
      << added.status().message();
  EXPECT_GE(fake_.lists, 1) << "the list was checked";
  EXPECT_LT(ms_since(start), 1250) << "polled past the 1 s deadline (until 950 + 500 ms)";
}

// drills4 M1 as the operator met it: `raftlogctl members list` gave its whole --timeout-ms to the
// first endpoint (the command set each attempt's deadline to it), so a frozen first node failed the
// list after 10 s although the next endpoint answers. Each attempt now has its own deadline (2 s
// for a list), and the command answers from the next endpoint well within its budget.
TEST_F(MembersClientTest, TheMembersListCommandMovesPastAFrozenFirstEndpoint) {
  FrozenEndpoint frozen;
  const auto start = Clock::now();
  const raftlog::testing::CommandRun run = raftlog::testing::run_command(
      std::string(RAFTLOGCTL_PATH) + " members list --json --timeout-ms 10000 --endpoints " +
      frozen.address() + "," + server_.address() + " 2>&1");
  const std::int64_t took_ms = ms_since(start);
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("\"config_index\":5"), std::string::npos) << run.out;
  EXPECT_LT(took_ms, 6000) << "one 2 s attempt at the frozen node, not the whole 10 s: " << run.out;
}

}  // namespace
}  // namespace raftlog::client

// raftlog.v1.Membership on a real one-node Server in process: request validation (ids, addresses),
// ListMembers on the leader, and the refusals' reason words through the MembersClient.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <thread>
#include <string>

#include <grpcpp/grpcpp.h>

#include "client/admin.h"
#include "node/temp_dir.h"
#include "raftlog/v1/admin.grpc.pb.h"
#include "server/membership_service.h"
#include "server/server.h"
#include "shared/loopback.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;
namespace v1 = raftlog::v1;

TEST(MembershipService, AddRequestsAreCheckedBeforeTheNodeSeesThem) {
  EXPECT_EQ(server::check_add_member(4, "10.0.0.4:7001"), "");
  EXPECT_EQ(server::check_add_member(4, "[::1]:7001"), "");
  EXPECT_NE(server::check_add_member(0, "10.0.0.4:7001"), "");
  EXPECT_NE(server::check_add_member(4, ""), "");
  EXPECT_NE(server::check_add_member(4, "no-port"), "");
  EXPECT_NE(server::check_add_member(4, "h:99999"), "");
  EXPECT_NE(server::check_add_member(4, std::string(129, 'a') + ":1"), "");
  EXPECT_NE(server::check_add_member(4, "tab\there:1"), "");
}

std::string reason_of(const client::Status& status) {
  return status.details() ? status.details()->reason : "";
}

TEST(MembershipService, ListsTheLeaderAndNamesEachRefusal) {
  server::testing::TempDir dir;
  server::NodeConfig config;
  config.node_id = 1;
  config.members[1] = loopback_address(pick_free_loopback_port());
  config.data_dir = dir.path();
  config.store.flush_mode = store::FlushMode::kAsync;
  config.store.segment_size_bytes = 64ULL << 20;
  config.disk_high_watermark = 1.0;
  config.disk_low_watermark = 0.99;
  std::string error;
  auto node = server::Server::start(config, &error);
  ASSERT_NE(node, nullptr) << error;
  client::Options options;
  options.endpoints = {node->bound_address()};
  options.retry_deadline_ms = 5000;
  auto created = client::MembersClient::create(options);
  ASSERT_TRUE(created.ok());
  std::unique_ptr<client::MembersClient> members = std::move(created).value();
  ASSERT_TRUE(eventually([&] { return members->list().ok(); }, 10s));
  auto list = members->list();
  ASSERT_TRUE(list.ok()) << list.status().to_string();
  ASSERT_EQ(list->members.size(), 1U);
  EXPECT_EQ(list->members[0].id, 1U);
  EXPECT_EQ(list->members[0].address, config.members[1]);
  EXPECT_TRUE(list->members[0].voter);
  EXPECT_TRUE(list->members[0].leader);
  EXPECT_EQ(list->bootstrap_voters, (std::vector<std::uint64_t>{1}));
  EXPECT_EQ(list->cluster_id, config.cluster_id);  // what raftlogd --join checks
  EXPECT_FALSE(list->cluster_id.empty());

  EXPECT_EQ(reason_of(members->add(4, "nowhere", true).status()), "BAD_ADDRESS");
  const auto taken = members->add(4, config.members[1], true);
  EXPECT_EQ(reason_of(taken.status()), "ADDRESS_IN_USE");
  // It names the member holding the address (drills7 L4: "another member already has ...").
  EXPECT_NE(taken.status().message().find("node 1 already has " + config.members[1] +
                                          ", the address given for node 4"),
            std::string::npos)
      << taken.status().message();
  EXPECT_EQ(reason_of(members->add(1, "127.0.0.1:9", true).status()), "ALREADY_A_MEMBER");
  EXPECT_EQ(reason_of(members->promote(7).status()), "NOT_A_MEMBER");
  EXPECT_EQ(reason_of(members->remove(1).status()), "WOULD_LOSE_QUORUM");
  // A learner nobody runs is added (it does not count toward commits), recorded with its address,
  // and cannot be promoted while it holds nothing.
  auto added = members->add(4, "127.0.0.1:9", true);
  ASSERT_TRUE(added.ok()) << added.status().to_string();
  EXPECT_EQ(added->learners, (std::vector<std::uint64_t>{4}));
  // The leader's list follows its published status, a round after the answer.
  client::Result<client::MemberList> with_learner = client::Status(client::StatusCode::kUnknown, "");
  ASSERT_TRUE(eventually(
      [&] {
        with_learner = members->list();
        return with_learner.ok() && with_learner->find(4) != nullptr;
      },
      5s));
  EXPECT_EQ(with_learner->find(4)->address, "127.0.0.1:9");
  EXPECT_FALSE(with_learner->find(4)->caught_up);
  EXPECT_EQ(reason_of(members->promote(4).status()), "LEARNER_BEHIND");
  ASSERT_TRUE(members->remove(4).ok());

  // ProbeMember (the founding check's and the add probe's question) answers who this node is, what
  // it holds and whether the asking id is retired here.
  auto stub = v1::Membership::NewStub(
      grpc::CreateChannel(config.members[1], grpc::InsecureChannelCredentials()));
  // Review of found6 L5: an add whose caller gives up while the leader probes the address (here a
  // socket that accepts and never speaks, so the probe waits its 1 s) is not proposed afterwards.
  {
    const int silent = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(silent, 0);
    sockaddr_in bound{};
    bound.sin_family = AF_INET;
    bound.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(bound);
    ASSERT_EQ(::bind(silent, reinterpret_cast<sockaddr*>(&bound), sizeof(bound)), 0);
    ASSERT_EQ(::listen(silent, 16), 0);
    ASSERT_EQ(::getsockname(silent, reinterpret_cast<sockaddr*>(&bound), &length), 0);
    const std::string address = loopback_address(ntohs(bound.sin_port));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 300ms);
    v1::AddMemberRequest request;
    request.set_id(5);
    request.set_address(address);
    request.set_learner(true);
    v1::ChangeMembersResponse changed;
    const grpc::Status status = stub->AddMember(&context, request, &changed);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
    std::this_thread::sleep_for(1500ms);  // past the probe's own deadline
    auto listed = members->list();
    ASSERT_TRUE(listed.ok()) << listed.status().to_string();
    EXPECT_EQ(listed->find(5), nullptr) << "proposed after the caller gave up";
    ::close(silent);
  }
  ASSERT_TRUE(eventually(
      [&] {
        grpc::ClientContext context;
        v1::ProbeMemberRequest request;
        request.set_asking_id(4);
        v1::ProbeMemberResponse answer;
        if (!stub->ProbeMember(&context, request, &answer).ok()) return false;
        EXPECT_EQ(answer.node_id(), 1u);
        EXPECT_EQ(answer.cluster_id(), config.cluster_id);
        EXPECT_TRUE(answer.leader());
        EXPECT_GE(answer.term(), 1u);
        EXPECT_GE(answer.last_index(), answer.config_index());
        return answer.asking_id_retired() && answer.config_index() > 0;
      },
      5s));
  node->shutdown();
}

// The add probe's verdict (drills7 M2): another id or another cluster at the address is refused,
// the right node (or one that names no cluster: an older node) is not.
TEST(MembershipService, AnAddProbeRefusesAnotherNodeOrCluster) {
  EXPECT_EQ(server::add_probe_problem(9, "h:1", "c", 9, "c"), "");
  EXPECT_EQ(server::add_probe_problem(9, "h:1", "c", 9, ""), "");
  const std::string other_node = server::add_probe_problem(9, "h:1", "c", 8, "c");
  EXPECT_NE(other_node.find("node 8 answers at h:1, not node 9"), std::string::npos) << other_node;
  const std::string other_cluster = server::add_probe_problem(9, "h:1", "c", 9, "d");
  EXPECT_NE(other_cluster.find("another cluster ('d'"), std::string::npos) << other_cluster;
}

}  // namespace
}  // namespace raftlog::testing

// raftlogd --join asking a member for the member list (server/join.h, fetch_join_record) against a
// fake Membership service on 127.0.0.1: what the remote answers decides between a refusal of this
// node's configuration (exit 2: its id is listed, a bootstrap voter's or retired, or the cluster
// answering is another one than its --cluster-id) and the remote's fault (exit 1: a bad bootstrap
// voter list).
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "raftlog/v1/admin.grpc.pb.h"
#include "server/join.h"
#include "server/node_tls.h"
#include "shared/loopback.h"

namespace raftlog::server {
namespace {

namespace pb = raftlog::v1;

class FakeMembership final : public pb::Membership::Service {
 public:
  std::function<void(pb::ListMembersResponse*)> fill;
  grpc::Status ListMembers(grpc::ServerContext*, const pb::ListMembersRequest*,
                           pb::ListMembersResponse* response) override {
    for (std::uint64_t id = 1; id <= 3; ++id) {
      pb::Member* member = response->add_members();
      member->set_id(id);
      member->set_address("127.0.0.1:" + std::to_string(7000 + id));
      member->set_voter(true);
    }
    for (std::uint64_t id = 1; id <= 3; ++id) response->add_bootstrap_voters(id);
    response->set_cluster_id("cluster-a");
    if (fill) fill(response);
    return grpc::Status::OK;
  }
};

class JoinFetchTest : public ::testing::Test {
 protected:
  void SetUp() override { server_ = raftlog::testing::start_server({&fake_}); }
  void TearDown() override { server_.shutdown(); }
  std::string fetch(std::uint64_t self, JoinRecord* record, bool* refused) {
    return fetch_join_record({server_.address()}, self, "cluster-a", NodeTls{}, 3000, record,
                             refused);
  }
  FakeMembership fake_;
  raftlog::testing::StartedServer server_;
};

TEST_F(JoinFetchTest, AGoodListIsTaken) {
  JoinRecord record;
  bool refused = true;
  EXPECT_EQ(fetch(4, &record, &refused), "");
  EXPECT_FALSE(refused);
  EXPECT_EQ(record.bootstrap_voters, (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_EQ(record.seed.size(), 3u);
}

TEST_F(JoinFetchTest, ABadBootstrapVoterListIsTheRemotesFaultNotARefusal) {
  const std::vector<std::function<void(pb::ListMembersResponse*)>> bad = {
      [](pb::ListMembersResponse* r) { r->add_bootstrap_voters(2); },  // twice
      [](pb::ListMembersResponse* r) { r->add_bootstrap_voters(0); },  // node 0
      [](pb::ListMembersResponse* r) {
        for (std::uint64_t id = 10; id < 80; ++id) r->add_bootstrap_voters(id);  // 73 voters
      },
  };
  for (std::size_t i = 0; i < bad.size(); ++i) {
    fake_.fill = bad[i];
    JoinRecord record;
    bool refused = true;
    const std::string problem = fetch(4, &record, &refused);
    EXPECT_NE(problem.find("bad member list"), std::string::npos) << i << ": " << problem;
    EXPECT_FALSE(refused) << i << ": exit 1, not 2";
  }
}

TEST_F(JoinFetchTest, ARetiredIdIsRefused) {
  fake_.fill = [](pb::ListMembersResponse* r) { r->add_retired_ids(4); };
  JoinRecord record;
  bool refused = false;
  const std::string problem = fetch(4, &record, &refused);
  EXPECT_NE(problem.find("removed from the cluster"), std::string::npos) << problem;
  EXPECT_TRUE(refused) << "exit 2";
}

TEST_F(JoinFetchTest, AnotherClustersIdIsRefusedNamingBothIds) {
  fake_.fill = [](pb::ListMembersResponse* r) { r->set_cluster_id("cluster-b"); };
  JoinRecord record;
  bool refused = false;
  const std::string problem = fetch(4, &record, &refused);
  EXPECT_NE(problem.find("the cluster answering is 'cluster-b'"), std::string::npos) << problem;
  EXPECT_NE(problem.find("--cluster-id 'cluster-a'"), std::string::npos) << problem;
  EXPECT_TRUE(refused) << "exit 2";
  EXPECT_TRUE(record.seed.empty()) << "nothing taken from another cluster's answer";
}

TEST_F(JoinFetchTest, ALeaderThatDoesNotSayItsClusterIdIsNotChecked) {
  fake_.fill = [](pb::ListMembersResponse* r) { r->clear_cluster_id(); };  // an older leader
  JoinRecord record;
  bool refused = true;
  EXPECT_EQ(fetch(4, &record, &refused), "");
  EXPECT_FALSE(refused);
  EXPECT_EQ(record.seed.size(), 3u);
}

TEST(JoinClusterId, OnlyADifferentNonEmptyAnswerIsAProblem) {
  EXPECT_EQ(join_cluster_id_problem("local-1", "local-1"), "");
  EXPECT_EQ(join_cluster_id_problem("", "local-1"), "");
  EXPECT_NE(join_cluster_id_problem("local-2", "local-1"), "");
}

}  // namespace
}  // namespace raftlog::server

// The founding check with real processes (server/founding_check.h; outside test drills7 H3): a
// member restarted under its id on an empty data directory with the founders' --members asks the
// other members first, and exits 2 naming one that holds the cluster's state, where before it
// founded at term 0 beside it. A founder that starts after the others founded, whose leader never
// replicated to it, still starts; so does a new cluster.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "cluster_test_support.h"
#include "testing/local_cluster.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;

// RAFTLOGD_UNDER_TEST names another raftlogd binary (to see a case fail on an older build).
LocalClusterOptions three_founders() {
  const char* other = std::getenv("RAFTLOGD_UNDER_TEST");
  return founders_options(other != nullptr ? other : RAFTLOGD_PATH, 3, 3);
}

// drills7 d30 (H3) at the entry: two of three members lose their whole data directories and are
// restarted under their ids while the third, which holds every acknowledged append, runs.
TEST(FoundingCheck, TwoOfThreeMembersWipedAndRestartedExitTwoNamingTheMemberWithData) {
  LocalCluster cluster(three_founders());
  cluster.start_all();
  const int data = cluster.wait_for_leader();
  ASSERT_NE(data, 0);
  std::vector<int> wiped;
  for (int id = 1; id <= 3; ++id) {
    if (id != data) wiped.push_back(id);
  }
  Acknowledged acknowledged;
  auto client = cluster.client({}, {data});
  const std::uint64_t last = append_entries(*client, 10, "acked", &acknowledged);
  for (int id : wiped) ASSERT_TRUE(cluster.wait_for_commit(id, last, 10s)) << "node " << id;
  for (int id : wiped) {
    cluster.kill(id);
    std::filesystem::remove_all(cluster.data_dir(id));
  }
  for (int id : wiped) cluster.start(id);
  for (int id : wiped) {
    const std::optional<int> exit_code = cluster.wait_for_exit(id, 15s);
    ASSERT_TRUE(exit_code.has_value())
        << "node " << id << " founded beside the member with data: " << cluster.log_tail(id);
    EXPECT_EQ(*exit_code, 2) << cluster.log_tail(id);
    const std::string log = cluster.log_tail(id);
    EXPECT_NE(log.find("member " + std::to_string(data) + " (" + cluster.address(data) + ")"),
              std::string::npos)
        << log;
    EXPECT_NE(log.find("members replace " + std::to_string(id)), std::string::npos) << log;
    EXPECT_FALSE(std::filesystem::exists(cluster.data_dir(id) + "/HARDSTATE")) << log;
    EXPECT_FALSE(std::filesystem::exists(cluster.data_dir(id) + "/log")) << log;
  }
  const auto status = cluster.status(data);
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->last_index, last) << cluster.log_tail(data);
  EXPECT_TRUE(status->second_leader.empty()) << status->second_leader;
}

// A slow host: two founders elect and take appends before the third ever started. Its empty
// directory is a first start, and the leader, which never replicated to it, says so.
TEST(FoundingCheck, AFounderStartedAfterTheOthersFoundedStartsAndCatchesUp) {
  LocalCluster cluster(three_founders());
  cluster.start(1);
  cluster.start(2);
  ASSERT_NE(leader_among(cluster, {1, 2}), 0) << cluster.log_tail(1);
  Acknowledged acknowledged;
  auto client = cluster.client({}, {1, 2});
  const std::uint64_t last = append_entries(*client, 5, "early", &acknowledged);
  cluster.start(3);
  ASSERT_TRUE(cluster.wait_for_commit(3, last, 20s)) << cluster.log_tail(3);
  EXPECT_NE(cluster.log_tail(3, 1 << 20).find("late founder"), std::string::npos)
      << cluster.log_tail(3);
  expect_holds_acknowledged(cluster, 3, acknowledged, std::nullopt);
}

// The check's question travels over the port's TLS with the node's own certificate, as --join's:
// with TLS for clients and peers and client certificates required, a follower wiped and restarted
// under its id is still asked about and refused (an answer lost to a TLS failure would let it
// found).
TEST(FoundingCheck, TheQuestionTravelsOverMutualTls) {
  LocalClusterOptions options = three_founders();
  options.tls = true;
  options.tls_client_certificates = true;
  LocalCluster cluster(options);
  cluster.start_all();
  const int leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0);
  const int wiped = leader == 1 ? 2 : 1;
  auto client = cluster.client({}, {leader});
  Acknowledged acknowledged;
  const std::uint64_t last = append_entries(*client, 3, "tls", &acknowledged);
  ASSERT_TRUE(cluster.wait_for_commit(wiped, last, 10s));
  cluster.kill(wiped);
  std::filesystem::remove_all(cluster.data_dir(wiped));
  cluster.start(wiped);
  const std::optional<int> exit_code = cluster.wait_for_exit(wiped, 15s);
  ASSERT_TRUE(exit_code.has_value()) << "founded: " << cluster.log_tail(wiped);
  EXPECT_EQ(*exit_code, 2) << cluster.log_tail(wiped);
  EXPECT_NE(cluster.log_tail(wiped).find("holds this cluster's state"), std::string::npos)
      << cluster.log_tail(wiped);
}

}  // namespace
}  // namespace raftlog::testing

// A one-member configuration on an empty data directory founds a new cluster only when told so
// (raftlogd --bootstrap-new-cluster; outside test drills7 H5): such a start cannot tell a new
// single-node cluster from a member whose disk was lost, and before this rule a joined voter
// restarted by its supervisor with `--members` naming itself alone (a documented restart form) on
// a lost disk founded a one-node cluster that acknowledged appends at a member's address.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <filesystem>
#include <optional>
#include <string>

#include "client/admin.h"
#include "cluster_test_support.h"
#include "testing/local_cluster.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;

// Adds `id` as a learner through the founders `endpoints`, then makes it a voter once caught up.
void add_voter(LocalCluster& cluster, const std::vector<int>& endpoints, int id) {
  client::Options options;
  for (int endpoint : endpoints) options.endpoints.push_back(cluster.address(endpoint));
  options.retry_deadline_ms = 20000;
  options.call_timeout_ms = 20000;
  auto created = client::MembersClient::create(options);
  ASSERT_TRUE(created.ok()) << created.status().message();
  std::unique_ptr<client::MembersClient> members = std::move(created).value();
  auto added = members->add(static_cast<std::uint64_t>(id), cluster.address(id), true);
  ASSERT_TRUE(added.ok()) << added.status().to_string() << cluster.log_tail(id);
  auto promoted = members->promote_when_caught_up(static_cast<std::uint64_t>(id), 20000);
  ASSERT_TRUE(promoted.ok()) << promoted.status().to_string() << cluster.log_tail(id);
}

// Node `id` is killed, its whole data directory is lost, and it is started again (as a supervisor
// would) with the same flags: it must exit 2 without founding anything, saying what to do.
void expect_lost_disk_start_refused(LocalCluster& cluster, int id) {
  cluster.kill(id);
  std::filesystem::remove_all(cluster.data_dir(id));
  cluster.start(id);
  const std::optional<int> exit_code = cluster.wait_for_exit(id, 15s);
  ASSERT_TRUE(exit_code.has_value())
      << "node " << id << " kept running on its lost disk: " << cluster.log_tail(id);
  EXPECT_EQ(*exit_code, 2) << cluster.log_tail(id);
  const std::string log = cluster.log_tail(id);
  EXPECT_NE(log.find("--bootstrap-new-cluster"), std::string::npos) << log;
  EXPECT_NE(log.find("members replace"), std::string::npos) << log;
  EXPECT_FALSE(std::filesystem::exists(cluster.data_dir(id) + "/log")) << log;
  EXPECT_FALSE(std::filesystem::exists(cluster.data_dir(id) + "/HARDSTATE")) << log;
}

// drills7 d31: node 4 joined and was made a voter; restarted without --join (`--members 4=ADDR`,
// the second documented restart form) on an empty directory.
TEST(BootstrapTest, AJoinedVoterRestartedOnALostDiskWithItsOwnAddressAloneExitsTwo) {
  LocalCluster cluster(founders_options(RAFTLOGD_PATH, 4, 3));
  for (int id = 1; id <= 3; ++id) cluster.start(id);
  ASSERT_NE(cluster.wait_for_leader(), 0) << cluster.log_tail(1);
  cluster.start(4);
  add_voter(cluster, {1, 2, 3}, 4);
  auto client = cluster.client({}, {1, 2, 3});
  ASSERT_TRUE(client->append({"before the loss"}).ok());
  cluster.start_without_join(4);
  expect_lost_disk_start_refused(cluster, 4);
  // The three others still form the cluster (4 is a voter that does not answer: 3 of 4 remain).
  EXPECT_TRUE(client->append({"after the loss"}).ok());
}

// drills7 d33: a cluster grown from one founder; the founder (started once with
// --bootstrap-new-cluster, which LocalCluster gives a one-member founder's first start only) loses
// its disk and is restarted with its unchanged `--members 1=ADDR`.
TEST(BootstrapTest, TheFounderOfAClusterGrownFromOneNodeRestartedOnALostDiskExitsTwo) {
  LocalCluster cluster(founders_options(RAFTLOGD_PATH, 3, 1));
  cluster.start(1);
  ASSERT_NE(leader_among(cluster, {1}, 10s), 0) << cluster.log_tail(1);
  EXPECT_NE(cluster.log_tail(1, 1 << 20).find("founding a new cluster"), std::string::npos)
      << cluster.log_tail(1);
  for (int id = 2; id <= 3; ++id) {
    cluster.start(id);
    add_voter(cluster, {1}, id);
  }
  expect_lost_disk_start_refused(cluster, 1);
  auto client = cluster.client({}, {2, 3});
  EXPECT_TRUE(client->append({"the two others go on"}).ok()) << cluster.log_tail(2);
}

// A single node: its first start needs the flag; later starts on its directory do not; a start with
// the flag on a directory that holds a node ignores it (a leftover flag must not stop a restart).
TEST(BootstrapTest, ASingleNodeFoundsItsClusterOnlyWithTheFlagAndRestartsWithout) {
  LocalClusterOptions options = founders_options(RAFTLOGD_PATH, 1, 0);
  options.bootstrap_flag_at_first_start = false;  // this test gives it by hand
  LocalCluster cluster(options);
  cluster.start(1);
  const std::optional<int> refused = cluster.wait_for_exit(1, 15s);
  ASSERT_TRUE(refused.has_value()) << "founded a cluster without the flag: " << cluster.log_tail(1);
  EXPECT_EQ(*refused, 2) << cluster.log_tail(1);
  EXPECT_NE(cluster.log_tail(1).find("--bootstrap-new-cluster"), std::string::npos)
      << cluster.log_tail(1);
  EXPECT_FALSE(std::filesystem::exists(cluster.data_dir(1) + "/IDENTITY")) << cluster.log_tail(1);

  cluster.set_node_flags(1, {"--bootstrap-new-cluster"});
  cluster.start(1);
  ASSERT_NE(leader_among(cluster, {1}, 10s), 0) << cluster.log_tail(1);
  auto client = cluster.client();
  auto appended = client->append({"one"});
  ASSERT_TRUE(appended.ok()) << appended.status().to_string();
  ASSERT_EQ(cluster.stop(1), 0);

  cluster.start(1);  // the flag again, on a directory that holds the node: ignored, with a warning
  ASSERT_NE(leader_among(cluster, {1}, 10s), 0) << cluster.log_tail(1);
  EXPECT_NE(cluster.log_tail(1).find("--bootstrap-new-cluster is ignored"), std::string::npos)
      << cluster.log_tail(1);
  ASSERT_EQ(cluster.stop(1), 0);

  cluster.set_node_flags(1, {});
  cluster.start(1);  // and without it
  ASSERT_NE(leader_among(cluster, {1}, 10s), 0) << cluster.log_tail(1);
  auto read = client->read(appended->first_index, 1, 0, /*linearizable=*/false);
  ASSERT_TRUE(read.ok()) << read.status().to_string();
  ASSERT_EQ(read->entries.size(), 1U);
  EXPECT_EQ(read->entries[0].payload, "one");
}

}  // namespace
}  // namespace raftlog::testing

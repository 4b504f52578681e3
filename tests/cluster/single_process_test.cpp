// One process per node (outside test drills7 D4): a second raftlogd started on a running node's data
// directory, or on its address with another directory, exits at once with the reason, and the
// cluster keeps every acknowledged entry. Before: the second process opened the same files and
// bound the same port (gRPC's SO_REUSEPORT), and an acknowledged append was lost.
#include <gtest/gtest.h>

#include <string>

#include "cluster_test_support.h"
#include "shared/command_run.h"
#include "testing/local_cluster.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;

// Node 1's identity and cluster flags, without its data directory.
std::string node_one_flags(const LocalCluster& cluster) {
  std::string members;
  for (int id = 1; id <= cluster.size(); ++id) {
    members += (id == 1 ? "" : ",") + std::to_string(id) + "=" + cluster.address(id);
  }
  return " --id 1 --members " + members + " --cluster-id " + cluster.cluster_id() +
         " --peer-secret-file " + cluster.peer_secret_file() +
         " --disk-high-watermark 1.0 --disk-low-watermark 0.99";
}

TEST(SingleProcessTest, ASecondRaftlogdOnANodesDirectoryOrAddressExitsAndNothingIsLost) {
  LocalClusterOptions options;
  options.raftlogd_path = RAFTLOGD_PATH;
  options.nodes = 3;
  LocalCluster cluster(options);
  cluster.start_all();
  ASSERT_NE(cluster.wait_for_leader(20s), 0);
  auto client = cluster.client();
  Acknowledged acknowledged;
  append_entries(*client, 40, "before", &acknowledged);

  // `timeout 8`: without the lock the second process runs on (exit 124) while it writes.
  const std::string second = std::string("timeout 8 ") + RAFTLOGD_PATH + node_one_flags(cluster);
  const CommandRun same_directory = run_command(second + " --data-dir " + cluster.data_dir(1));
  EXPECT_EQ(same_directory.exit_code, 2) << same_directory.out;
  EXPECT_NE(same_directory.out.find("is in use by another process (process " +
                                    std::to_string(cluster.pid(1)) + ")"),
            std::string::npos)
      << same_directory.out;

  // On an empty directory of its own it would found beside the running cluster: since found6 the
  // founding check refuses it first (exit 2), and past the check its listener is refused.
  const CommandRun empty_directory =
      run_command(second + " --data-dir " + cluster.data_dir(1) + "-second");
  EXPECT_EQ(empty_directory.exit_code, 2) << empty_directory.out;
  EXPECT_NE(empty_directory.out.find("holds this cluster's state"), std::string::npos)
      << empty_directory.out;
  const CommandRun same_address = run_command(second + " --data-dir " + cluster.data_dir(1) +
                                              "-second --skip-founding-check");
  EXPECT_EQ(same_address.exit_code, 1) << same_address.out;
  EXPECT_NE(same_address.out.find("cannot listen on " + cluster.address(1)), std::string::npos)
      << same_address.out;

  append_entries(*client, 40, "after", &acknowledged);
  ASSERT_TRUE(cluster.running(1));
  for (int id = 1; id <= 3; ++id) expect_holds_acknowledged(cluster, id, acknowledged, std::nullopt);
}

}  // namespace
}  // namespace raftlog::testing

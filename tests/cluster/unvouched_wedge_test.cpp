// The way out of the unvouched wedge over real raftlogd processes (outside test drills7 H4, d30b):
// two of three nodes lose only log/ while the third holds every acknowledged append and has lost
// its leadership for want of a quorum. The two unvouched nodes refuse it and each other: nothing is
// ever elected. Their status then says they may be waiting for an operator, and one of them
// restarted with --unvouched-may-elect naming the node that holds the log lets that node win; every
// acknowledged append is then on all three.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "cluster_test_support.h"
#include "testing/local_cluster.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;

TEST(UnvouchedWedge, TwoLostLogsWedgeTheClusterUntilOneNodeMayElectTheHolder) {
  LocalClusterOptions options;
  options.raftlogd_path = RAFTLOGD_PATH;
  options.nodes = 3;
  LocalCluster cluster(options);
  cluster.start_all();
  const int holder = cluster.wait_for_leader();
  ASSERT_NE(holder, 0);
  std::vector<int> lost;
  for (int id = 1; id <= 3; ++id) {
    if (id != holder) lost.push_back(id);
  }
  Acknowledged acknowledged;
  {
    auto client = cluster.client();
    append_entries(*client, 40, "before", &acknowledged);
  }
  ASSERT_EQ(acknowledged.size(), 40U);
  for (int id : lost) cluster.kill(id);
  // The holder steps down once it has heard from no majority for an election timeout (check
  // quorum), so the two restarted nodes hear no leader's word.
  ASSERT_TRUE(poll_until([&] {
    const auto status = cluster.status(holder);
    return status.has_value() && status->role != client::Role::kLeader;
  })) << cluster.log_tail(holder);
  for (int id : lost) {
    std::filesystem::remove_all(std::filesystem::path(cluster.data_dir(id)) / "log");
    cluster.start(id);
  }
  EXPECT_EQ(leader_among(cluster, {1, 2, 3}, 5s), 0) << "the wedge did not form";
  for (int id : lost) {
    const auto status = cluster.status(id);
    ASSERT_TRUE(status.has_value()) << cluster.log_tail(id);
    EXPECT_TRUE(status->unvouched) << cluster.log_tail(id);
  }
  // After long enough without a leader, status says an operator may be needed, not only "no
  // leader" (which read as an election in progress).
  std::string hint;
  EXPECT_TRUE(poll_until(
      [&] {
        const auto status = cluster.status(lost[0]);
        if (status.has_value()) hint = status->unvouched_hint;
        return !hint.empty();
      },
      20s, 200ms))
      << cluster.log_tail(lost[0]);
  EXPECT_NE(hint.find("--unvouched-may-elect"), std::string::npos) << hint;
  ASSERT_EQ(leader_among(cluster, {1, 2, 3}, 1s), 0) << "still wedged";

  // The operator checked that `holder` holds the cluster's log (raftlogctl status: the only node
  // with entries) and restarts one unvouched node naming it.
  ASSERT_EQ(cluster.stop(lost[0]), 0) << cluster.log_tail(lost[0]);
  cluster.set_node_flags(lost[0], {"--unvouched-may-elect", std::to_string(holder)});
  cluster.start(lost[0]);
  EXPECT_EQ(leader_among(cluster, {1, 2, 3}, 20s), holder) << cluster.log_tail(lost[0]);
  const std::string log = cluster.log_tail(lost[0], 1 << 20);
  EXPECT_NE(log.find("told to vote for node " + std::to_string(holder)), std::string::npos) << log;
  {
    auto client = cluster.client();
    append_entries(*client, 10, "after", &acknowledged);
  }
  for (int id = 1; id <= 3; ++id) {
    expect_holds_acknowledged(cluster, id, acknowledged, std::nullopt);
    EXPECT_TRUE(poll_until([&] {
      const auto status = cluster.status(id);
      return status.has_value() && !status->unvouched;
    })) << "node " << id << "\n" << cluster.log_tail(id);
  }
}

}  // namespace
}  // namespace raftlog::testing

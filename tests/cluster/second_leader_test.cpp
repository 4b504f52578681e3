// drills7 H3 on real processes (docs/raft.md, "A second leader of a term"): a 3-node cluster in
// term 1 with acknowledged appends; the two followers lose their whole data directories and restart
// under their ids at term 0 while the leader is paused; they elect one of themselves in term 1, the
// term the data node led, and take appends. Before: the data node followed the second leader of
// term 1 (equal terms pass the log-matching check), all three SERVING, the nodes disagreeing at every
// index the fork wrote. Now the data node refuses the second leader: it takes none of its entries,
// reports NOT_SERVING and a critical line naming both leaders and the term, and keeps every
// acknowledged append; the second leader is told and logs a critical line too.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "cluster_test_support.h"
#include "shared/command_run.h"
#include "testing/local_cluster.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;
using raftlog::testing::run_command;

int health_exit(LocalCluster& cluster, int id) {
  return run_command(std::string(RAFTLOGCTL_PATH) + " health --timeout-ms 2000 --endpoints " +
                     cluster.address(id))
      .exit_code;
}

std::string whole_log(LocalCluster& cluster, int id) {
  std::ifstream in(cluster.log_file(id));
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

TEST(SecondLeader, TwoWipedFollowersElectingALeaderOfTheDataNodesTermAreRefused) {
  LocalClusterOptions options;
  options.raftlogd_path = RAFTLOGD_PATH;
  options.nodes = 3;
  LocalCluster cluster(options);
  cluster.start_all();
  const int data = cluster.wait_for_leader();
  ASSERT_NE(data, 0);
  // A fresh cluster elects in term 1 (pre-vote: no term is spent on a lost election).
  ASSERT_EQ(cluster.status(data)->term, 1u) << cluster.log_tail(data);
  std::vector<int> wiped;
  for (int id = 1; id <= 3; ++id) {
    if (id != data) wiped.push_back(id);
  }
  Acknowledged acknowledged;
  {
    auto client = cluster.client({}, {data});
    const std::uint64_t last = append_entries(*client, 20, "acked", &acknowledged);
    for (int id : wiped) ASSERT_TRUE(cluster.wait_for_commit(id, last, 10s)) << "node " << id;
  }
  const std::uint64_t data_last = cluster.status(data)->last_index;

  // The data node stays away (SIGSTOP) while both followers lose their disks and restart empty.
  cluster.pause(data);
  for (int id : wiped) {
    cluster.kill(id);
    std::filesystem::remove_all(cluster.data_dir(id));
  }
  for (int id : wiped) cluster.start(id);
  const int fork = leader_among(cluster, wiped, 20s);
  ASSERT_NE(fork, 0) << cluster.log_tail(wiped[0]) << cluster.log_tail(wiped[1]);
  ASSERT_EQ(cluster.status(fork)->term, 1u) << "the wiped pair reuses term 1";
  Acknowledged forked;
  {
    auto client = cluster.client({}, {fork});
    // More than the data node holds: the fork's entries reach beyond its log.
    append_entries(*client, 30, "fork", &forked);
  }

  cluster.resume(data);
  // The data node is NOT_SERVING while the second leader's messages keep coming.
  EXPECT_TRUE(poll_until([&] { return health_exit(cluster, data) != 0; }, 10s))
      << cluster.log_tail(data);
  std::this_thread::sleep_for(3s);  // many heartbeats and election timeouts of both leaders
  EXPECT_NE(health_exit(cluster, data), 0) << cluster.log_tail(data);
  const auto status = cluster.status(data);
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->term, 1u) << "nothing moved the data node's term";
  EXPECT_NE(status->leader_id, static_cast<std::uint64_t>(fork)) << cluster.log_tail(data);
  EXPECT_EQ(status->last_index, data_last) << "it took the second leader's entries\n"
                                           << cluster.log_tail(data);
  const std::string second = status->second_leader;
  EXPECT_NE(second.find("term 1"), std::string::npos) << second;
  EXPECT_NE(second.find("node " + std::to_string(fork)), std::string::npos) << second;

  // Every acknowledged append is on it, at its index, and nothing of the fork's in its place.
  std::map<std::uint64_t, std::string> held;
  for (const client::Entry& e : cluster.read_all(data)) held[e.index] = e.payload;
  for (const auto& [index, payload] : acknowledged) {
    EXPECT_EQ(held[index], payload) << "index " << index;
  }
  for (const auto& [index, payload] : held) {
    EXPECT_EQ(payload.rfind("fork", 0), std::string::npos) << "index " << index;
  }

  // Both sides said so at critical level, naming both leaders and the term.
  const std::string data_log = whole_log(cluster, data);
  EXPECT_NE(data_log.find(" critical node " + std::to_string(data) + ": node " +
                          std::to_string(fork) + " sent leader messages of term 1"),
            std::string::npos)
      << cluster.log_tail(data);
  EXPECT_NE(data_log.find("two leaders of term 1"), std::string::npos) << cluster.log_tail(data);
  EXPECT_TRUE(poll_until([&] {
    return whole_log(cluster, fork).find("refused this node's leadership of term 1") !=
           std::string::npos;
  }, 10s)) << cluster.log_tail(fork);
}

}  // namespace
}  // namespace raftlog::testing

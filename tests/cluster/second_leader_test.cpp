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
#include <cstdlib>
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

// RAFTLOGD_UNDER_TEST names another raftlogd binary (to see a case fail on an older build).
std::string raftlogd_path() {
  const char* other = std::getenv("RAFTLOGD_UNDER_TEST");
  return other != nullptr ? other : RAFTLOGD_PATH;
}

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
  options.raftlogd_path = raftlogd_path();
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
  // One after the other: started together, both may campaign in term 1 at once, split the votes
  // and elect in term 2, above the data node's term (the committed-conflict case, not this one).
  cluster.start(wiped[0]);
  std::this_thread::sleep_for(400ms);
  cluster.start(wiped[1]);
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

// Review M1: the drill's own path. The data node steps down for want of a quorum (check-quorum,
// still in term 1) before the wiped pair elects its leader of term 1, and as a follower or
// pre-candidate of term 1 it used to follow that leader. It must take none of its
// entries: no fork payload at an index where it holds an acknowledged append, nothing beyond.
TEST(SecondLeader, TheDataNodeThatSteppedDownDoesNotFollowTheWipedPairsLeader) {
  LocalClusterOptions options;
  options.raftlogd_path = raftlogd_path();
  options.nodes = 3;
  LocalCluster cluster(options);
  cluster.start_all();
  const int data = cluster.wait_for_leader();
  ASSERT_NE(data, 0);
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
  for (int id : wiped) {
    cluster.kill(id);
    std::filesystem::remove_all(cluster.data_dir(id));
  }
  // Check-quorum: the data node stops leading within an election timeout, still in term 1.
  ASSERT_TRUE(poll_until([&] {
    const auto status = cluster.status(data);
    return status.has_value() && status->role != client::Role::kLeader &&
           status->role != client::Role::kUnknown && status->leader_id == 0;
  }, 10s)) << cluster.log_tail(data);
  // Kept away while the pair elects (SIGSTOP, as a follower of term 1 now): a pre-vote it rejected
  // would tell a wiped node term 1, and the pair would elect in term 2, above the data node's term
  // (the committed-conflict case, not this one). drills7 got term 1 by timing alone.
  cluster.pause(data);
  cluster.start(wiped[0]);
  std::this_thread::sleep_for(400ms);  // one after the other: no split vote
  cluster.start(wiped[1]);
  const int fork = leader_among(cluster, wiped, 20s);
  ASSERT_NE(fork, 0) << cluster.log_tail(wiped[0]) << cluster.log_tail(wiped[1]);
  ASSERT_EQ(cluster.status(fork)->term, 1u) << "the wiped pair reuses term 1\n"
                                            << cluster.log_tail(data) << cluster.log_tail(fork);
  {
    auto client = cluster.client({}, {fork});
    Acknowledged forked;
    append_entries(*client, 30, "fork", &forked);  // beyond the data node's log
  }
  cluster.resume(data);
  std::this_thread::sleep_for(3s);  // the fork's heartbeats and appends reach the data node
  const auto status = cluster.status(data);
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->term, 1u);
  EXPECT_NE(status->leader_id, static_cast<std::uint64_t>(fork)) << cluster.log_tail(data);
  EXPECT_EQ(status->last_index, data_last) << "it took the second leader's entries\n"
                                           << cluster.log_tail(data);
  EXPECT_NE(health_exit(cluster, data), 0) << cluster.log_tail(data);
  std::map<std::uint64_t, std::string> held;
  for (const client::Entry& e : cluster.read_all(data)) held[e.index] = e.payload;
  for (const auto& [index, payload] : acknowledged) {
    EXPECT_EQ(held[index], payload) << "index " << index;
  }
  for (const auto& [index, payload] : held) {
    EXPECT_EQ(payload.rfind("fork", 0), std::string::npos) << "index " << index;
  }
}

}  // namespace
}  // namespace raftlog::testing

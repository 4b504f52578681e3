// drills7 H3 on real processes (docs/raft.md, "A second leader of a term"): a 3-node cluster in
// term 1 with acknowledged appends; two nodes lose their whole data directories and restart under
// their ids at term 0; they elect one of themselves in term 1, the term the data node led or
// followed, and take appends. Before: the data node followed the second leader of term 1 (equal
// terms pass the log-matching check), all three SERVING, the nodes disagreeing at every index the
// fork wrote. Now the data node refuses the second leader: it takes none of its entries, reports
// NOT_SERVING and a critical line naming both leaders and the term, and keeps every acknowledged
// append; the second leader is told and logs a critical line too. With the old leader in the wiped
// pair and elected again under its own id (review oneterm5 H1), the leadership nonce tells the two
// leaderships of that id apart.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

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

LocalClusterOptions three_nodes() {
  LocalClusterOptions options;
  options.raftlogd_path = raftlogd_path();
  options.nodes = 3;
  return options;
}

// Three nodes that elected leader_ in term 1 (pre-vote: no term is spent on a lost election) and
// hold 20 acknowledged appends made through it, up to leader_last_, on every node.
class SecondLeader : public ::testing::Test {
 protected:
  SecondLeader() : cluster_(three_nodes()) {}

  void SetUp() override {
    cluster_.start_all();
    leader_ = cluster_.wait_for_leader();
    ASSERT_NE(leader_, 0);
    ASSERT_EQ(cluster_.status(leader_)->term, 1u) << cluster_.log_tail(leader_);
    for (int id = 1; id <= 3; ++id) {
      if (id != leader_) followers_.push_back(id);
    }
    auto client = cluster_.client({}, {leader_});
    const std::uint64_t last = append_entries(*client, 20, "acked", &acknowledged_);
    for (int id : followers_) {
      ASSERT_TRUE(cluster_.wait_for_commit(id, last, 10s)) << "node " << id;
    }
    leader_last_ = cluster_.status(leader_)->last_index;
  }

  // Kill -9 and a lost data directory.
  void wipe(const std::vector<int>& ids) {
    for (int id : ids) {
      cluster_.kill(id);
      std::filesystem::remove_all(cluster_.data_dir(id));
    }
  }

  // The wiped pair starts again and elects `first` in term 1 (the term the data node led or
  // followed), which takes 30 appends, more than the data node holds: the fork's entries reach
  // beyond its log. `second` waits 2-4 s before it would campaign (--election-ticks 100), so
  // `first` campaigns alone: two campaigns of term 1 at once may split the votes and elect in term
  // 2, above the data node's term (the committed-conflict case, not this one). The fork's leader
  // (0 after a test failure).
  int pair_elects_in_term_one_and_forks(int first, int second) {
    cluster_.set_node_flags(second, {"--election-ticks", "100"});
    cluster_.start(first);
    cluster_.start(second);
    const int fork = leader_among(cluster_, {first, second}, 20s);
    EXPECT_NE(fork, 0) << cluster_.log_tail(first) << cluster_.log_tail(second);
    if (fork == 0) return 0;
    EXPECT_EQ(fork, first) << cluster_.log_tail(second);
    EXPECT_EQ(cluster_.status(fork)->term, 1u) << "the wiped pair reuses term 1";
    if (::testing::Test::HasFailure()) return 0;
    auto client = cluster_.client({}, {fork});
    Acknowledged forked;
    append_entries(*client, 30, "fork", &forked);
    return fork;
  }

  // The data node, running again, refuses the fork for good: NOT_SERVING while its messages keep
  // coming, still in term 1, following nobody of the fork, its log as it was (every acknowledged
  // append at its index, none of the fork's entries). Its status's second-leader sentence.
  std::string expect_data_node_refuses(int data, int fork, std::uint64_t data_last) {
    EXPECT_TRUE(poll_until([&] { return health_exit(cluster_, data) != 0; }, 10s))
        << cluster_.log_tail(data);
    std::this_thread::sleep_for(3s);  // many heartbeats and election timeouts of both leaders
    EXPECT_NE(health_exit(cluster_, data), 0) << cluster_.log_tail(data);
    const auto status = cluster_.status(data);
    EXPECT_TRUE(status.has_value());
    if (!status.has_value()) return {};
    EXPECT_EQ(status->term, 1u) << "nothing moved the data node's term";
    EXPECT_NE(status->leader_id, static_cast<std::uint64_t>(fork)) << cluster_.log_tail(data);
    EXPECT_EQ(status->last_index, data_last) << "it took the second leader's entries\n"
                                             << cluster_.log_tail(data);
    std::map<std::uint64_t, std::string> held;
    for (const client::Entry& e : cluster_.read_all(data)) held[e.index] = e.payload;
    for (const auto& [index, payload] : acknowledged_) {
      EXPECT_EQ(held[index], payload) << "index " << index;
    }
    for (const auto& [index, payload] : held) {
      EXPECT_EQ(payload.rfind("fork", 0), std::string::npos) << "index " << index;
    }
    return status->second_leader;
  }

  // A line of node `id`'s log holding `text` appears within 10 s.
  bool logs_within_10s(int id, const std::string& text) {
    return poll_until([&] { return whole_log(cluster_, id).find(text) != std::string::npos; }, 10s);
  }

  LocalCluster cluster_;
  int leader_ = 0;
  std::vector<int> followers_;
  Acknowledged acknowledged_;
  std::uint64_t leader_last_ = 0;
};

TEST_F(SecondLeader, TwoWipedFollowersElectingALeaderOfTheDataNodesTermAreRefused) {
  const int data = leader_;
  // The data node stays away (SIGSTOP) while both followers lose their disks and restart empty.
  cluster_.pause(data);
  wipe(followers_);
  const int fork = pair_elects_in_term_one_and_forks(followers_[0], followers_[1]);
  ASSERT_NE(fork, 0);
  cluster_.resume(data);
  const std::string second = expect_data_node_refuses(data, fork, leader_last_);
  EXPECT_NE(second.find("term 1"), std::string::npos) << second;
  EXPECT_NE(second.find("node " + std::to_string(fork)), std::string::npos) << second;
  // Both sides said so at critical level, naming both leaders and the term.
  EXPECT_TRUE(logs_within_10s(data, " critical node " + std::to_string(data) + ": node " +
                                        std::to_string(fork) + " sent leader messages of term 1"))
      << cluster_.log_tail(data);
  EXPECT_TRUE(logs_within_10s(data, "two leaders of term 1")) << cluster_.log_tail(data);
  EXPECT_TRUE(logs_within_10s(fork, "refused this node's leadership of term 1"))
      << cluster_.log_tail(fork);
}

// Review M1: the drill's own path. The data node steps down for want of a quorum (check-quorum,
// still in term 1) before the wiped pair elects its leader of term 1, and as a follower or
// pre-candidate of term 1 it used to follow that leader. It must take none of its
// entries: no fork payload at an index where it holds an acknowledged append, nothing beyond.
TEST_F(SecondLeader, TheDataNodeThatSteppedDownDoesNotFollowTheWipedPairsLeader) {
  const int data = leader_;
  wipe(followers_);
  // Check-quorum: the data node stops leading within an election timeout, still in term 1.
  ASSERT_TRUE(poll_until(
      [&] {
        const auto status = cluster_.status(data);
        return status.has_value() && status->role != client::Role::kLeader &&
               status->role != client::Role::kUnknown && status->leader_id == 0;
      },
      10s))
      << cluster_.log_tail(data);
  // Kept away while the pair elects (SIGSTOP, as a follower of term 1 now): a pre-vote it rejected
  // would tell a wiped node term 1, and the pair would elect in term 2, above the data node's term
  // (the committed-conflict case, not this one). drills7 got term 1 by timing alone.
  cluster_.pause(data);
  const int fork = pair_elects_in_term_one_and_forks(followers_[0], followers_[1]);
  ASSERT_NE(fork, 0);
  cluster_.resume(data);
  expect_data_node_refuses(data, fork, leader_last_);
}

// Review oneterm5 H1: the leader is in the wiped pair (two times in three when two of three disks
// go) and is elected again under its own id in term 1. The data node, a follower of that id in
// term 1, used to follow it again (same id, same term: nothing told the two leaderships apart)
// and, all SERVING, keep its own entries where the new leader wrote others at the same (index,
// term). Now the new leadership's nonce differs from the one the data node keeps in HARDSTATE:
// refused. The data node runs throughout as a follower of term 1 (the path drills7 H3 lost data
// on; review oneterm5 M1), paused only while the pair elects (a pre-vote it rejected would tell
// the pair term 1, and they would elect in term 2: the committed-conflict case, not this one).
TEST_F(SecondLeader, TheWipedLeaderElectedAgainUnderItsIdInItsTermIsRefused) {
  const int old_leader = leader_;
  const int data = followers_[0];
  const int wiped_follower = followers_[1];
  const std::uint64_t data_last = cluster_.status(data)->last_index;
  wipe({old_leader, wiped_follower});
  ASSERT_TRUE(poll_until(
      [&] {
        const auto status = cluster_.status(data);
        return status.has_value() && status->leader_id == 0;
      },
      10s))
      << cluster_.log_tail(data);
  cluster_.pause(data);
  const int fork = pair_elects_in_term_one_and_forks(old_leader, wiped_follower);
  ASSERT_EQ(fork, old_leader);
  cluster_.resume(data);
  const std::string second = expect_data_node_refuses(data, fork, data_last);
  EXPECT_NE(second.find("another leadership nonce"), std::string::npos) << second;
  EXPECT_TRUE(logs_within_10s(data, "as another leadership (nonce")) << cluster_.log_tail(data);
  EXPECT_TRUE(logs_within_10s(fork, "it knows another leadership of this node's id"))
      << cluster_.log_tail(fork);
  // The fork knows it lost its state (review of nonce6, M2): not a healthy replica either.
  EXPECT_TRUE(poll_until([&] { return health_exit(cluster_, fork) != 0; }, 10s))
      << cluster_.log_tail(fork);
}

}  // namespace
}  // namespace raftlog::testing

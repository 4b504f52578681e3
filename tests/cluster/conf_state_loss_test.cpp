// A node that lost CONFSTATE after its log was trimmed past a membership change, over real raftlogd
// processes (outside test finding drills2 F2): it used to start on the founders' configuration,
// count a retired node's vote and commit a second entry at an acknowledged index. It now refuses to
// start (exit 1, the documented reason), and the documented remedy — replace it under a new id on
// an empty directory (raftlogd --join, raftlogctl members replace) — leaves a cluster that holds
// every acknowledged append.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cluster_test_support.h"
#include "shared/command_run.h"
#include "testing/local_cluster.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;
std::string endpoints_of(LocalCluster& cluster, const std::vector<int>& ids) {
  std::string endpoints;
  for (int id : ids) endpoints += (endpoints.empty() ? "" : ",") + cluster.address(id);
  return endpoints;
}

TEST(ConfStateLossTest, ANodeTrimmedPastAChangeRefusesToStartWithoutConfStateAndIsReplaced) {
  LocalClusterOptions options;
  options.raftlogd_path = RAFTLOGD_PATH;
  options.nodes = 5;
  options.founding_members = 3;  // 4 and 5 join
  options.segment_size_bytes = 64 << 10;
  options.max_entry_size_bytes = 8 << 10;
  LocalCluster cluster(options);
  for (int id = 1; id <= 3; ++id) cluster.start(id);
  ASSERT_NE(leader_among(cluster, {1, 2, 3}), 0) << cluster.log_tail(1);
  Acknowledged acknowledged;
  {
    auto client = cluster.client({}, {1, 2, 3});
    append_entries(*client, 20, "before", &acknowledged);
  }

  // The tester's `cluster replace 2`: node 4 added, node 2 removed (voters {1, 3, 4}).
  cluster.start(4);
  const CommandRun replace = run_command(std::string(RAFTLOGCTL_PATH) + " members replace 2 4 " +
                                         cluster.address(4) + " --timeout-ms 20000 --endpoints " +
                                         endpoints_of(cluster, {1, 2, 3}));
  ASSERT_EQ(replace.exit_code, 0) << replace.out << cluster.log_tail(4);
  ASSERT_EQ(cluster.stop(2), 0) << cluster.log_tail(2);
  const int leader = leader_among(cluster, {1, 3, 4});
  ASSERT_NE(leader, 0) << cluster.log_tail(1);
  const int victim = leader == 3 ? 1 : 3;  // a follower, so the rest keep their leader
  auto client = cluster.client({}, {1, 3, 4});
  const std::optional<client::NodeStatus> after_change = cluster.status(leader);
  ASSERT_TRUE(after_change.has_value());
  const std::uint64_t change_committed = after_change->commit_index;

  // Enough entries for several 64 KiB segments, then the victim's log is trimmed past the change.
  const std::uint64_t last = append_entries(*client, 120, "after-change", &acknowledged);
  ASSERT_TRUE(cluster.wait_for_commit(victim, last, 20s)) << cluster.log_tail(victim);
  std::uint64_t first = 0;
  poll_until([&] {
    auto trimmed = client->trim(cluster.address(victim), last);
    if (trimmed.ok()) first = trimmed->first_index;
    return first > change_committed + 1;
  });
  ASSERT_GT(first, change_committed + 1) << "node " << victim << " was not trimmed past the change";

  // CONFSTATE removed: the restart is refused with the reason and the remedy, nothing served.
  ASSERT_EQ(cluster.stop(victim), 0) << cluster.log_tail(victim);
  ASSERT_TRUE(std::filesystem::remove(cluster.data_dir(victim) + "/CONFSTATE"));
  cluster.start(victim);
  const std::optional<int> exit_code = cluster.wait_for_exit(victim, 15s);
  ASSERT_TRUE(exit_code.has_value()) << "node " << victim << " started without CONFSTATE\n"
                                     << cluster.log_tail(victim);
  EXPECT_EQ(*exit_code, 1);
  const std::string refused = cluster.log_tail(victim, 1 << 16);
  EXPECT_NE(refused.find("CONFSTATE holds no configuration record"), std::string::npos) << refused;
  EXPECT_NE(refused.find("replace this node under a new id"), std::string::npos) << refused;

  // The remedy (docs/operations.md, "Damaged data at startup"): node 5 on an empty directory
  // (--join) replaces it; the two members left are a majority of {1, 3, 4}.
  cluster.start(5);
  const CommandRun swap = run_command(
      std::string(RAFTLOGCTL_PATH) + " members replace " + std::to_string(victim) + " 5 " +
      cluster.address(5) + " --timeout-ms 20000 --endpoints " + endpoints_of(cluster, {1, 3, 4}));
  ASSERT_EQ(swap.exit_code, 0) << swap.out << cluster.log_tail(5);
  append_entries(*client, 10, "after-replace", &acknowledged);
  const int other = victim == 1 ? 3 : 1;
  for (int id : {other, 4, 5}) expect_holds_acknowledged(cluster, id, acknowledged, 0);
}

}  // namespace
}  // namespace raftlog::testing

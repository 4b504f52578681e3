// drills7 H2 with real processes: founders {1, 2, 3}; `members replace 1 4` and `replace 2 5` retire
// founders 1 and 2; their old hosts then start raftlogd 1 and 2 again on empty directories with the
// founders' --members (a configuration-management run that still lists them; docs/operations.md
// forbids it). Before retired5 the pair elected each other, served and acknowledged appends, and a
// real member followed its term. Now no append is acknowledged by them, they report removed (naming
// the member that said so) and NOT_SERVING, refuse appends and reads with NODE_REMOVED, and the real
// cluster's term and log are untouched. Since found6 they do not get that far: a real member among
// the founders' --members answers the founding check that they are retired (exit 2); past the check
// (--skip-founding-check) the members' word holds them, and it outlives their restart.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <thread>
#include <string>

#include "cluster_test_support.h"
#include "shared/command_run.h"
#include "testing/local_cluster.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;

TEST(RetiredFoundersTest, RetiredFoundersRestartedEmptyServeNothingAndLeaveTheClusterAlone) {
  LocalClusterOptions options;
  options.raftlogd_path = RAFTLOGD_PATH;
  options.nodes = 5;
  options.founding_members = 3;
  LocalCluster cluster(options);
  for (int id = 1; id <= 5; ++id) cluster.start(id);
  ASSERT_NE(leader_among(cluster, {1, 2, 3}), 0) << cluster.log_tail(1);
  const std::string ctl = std::string(RAFTLOGCTL_PATH) + " --timeout-ms 20000 ";
  const std::string founders =
      "--endpoints " + cluster.address(1) + "," + cluster.address(2) + "," + cluster.address(3) + " ";
  auto real_client = cluster.client({}, {3, 4, 5});
  Acknowledged acknowledged;
  append_entries(*real_client, 5, "before", &acknowledged);
  for (const auto& [old_id, new_id] : {std::pair{1, 4}, std::pair{2, 5}}) {
    const CommandRun replaced =
        run_command(ctl + founders + "members replace " + std::to_string(old_id) + " " +
                    std::to_string(new_id) + " " + cluster.address(new_id));
    ASSERT_EQ(replaced.exit_code, 0) << replaced.out << cluster.log_tail(new_id);
  }
  append_entries(*real_client, 5, "between", &acknowledged);
  cluster.kill(1);
  cluster.kill(2);
  const int real_leader = leader_among(cluster, {3, 4, 5});
  ASSERT_NE(real_leader, 0);
  const std::optional<client::NodeStatus> before = cluster.status(real_leader);
  ASSERT_TRUE(before.has_value());
  for (int id : {1, 2}) {
    std::filesystem::remove_all(cluster.data_dir(id));
    std::filesystem::create_directories(cluster.data_dir(id));
    cluster.start(id);  // the founders' --members, as before
  }
  // The founding check (server/founding_check.h): node 3, a real member among the founders'
  // --members, lists them as retired, and each exits 2 before it writes anything.
  for (int id : {1, 2}) {
    const std::optional<int> exit_code = cluster.wait_for_exit(id, 15s);
    ASSERT_TRUE(exit_code.has_value()) << "node " << id << " founded: " << cluster.log_tail(id);
    EXPECT_EQ(*exit_code, 2) << cluster.log_tail(id);
    const std::string log = cluster.log_tail(id);
    EXPECT_NE(log.find("member 3 (" + cluster.address(3) + ") lists node " + std::to_string(id) +
                       " as retired"),
              std::string::npos)
        << log;
    EXPECT_FALSE(std::filesystem::exists(cluster.data_dir(id) + "/HARDSTATE")) << log;
  }
  // Past the check (the operator's override here; as when no real member is reachable): the
  // members' word keeps them out.
  for (int id : {1, 2}) {
    cluster.set_node_flags(id, {"--skip-founding-check"});
    cluster.start(id);
  }

  // For 8 s, appends through the retired pair alone are refused, every one (raftlogctl, as an
  // operator's script would: on main it printed "appended at index 4 (term 5)").
  const std::string through_pair = std::string(RAFTLOGCTL_PATH) + " --timeout-ms 1000 --endpoints " +
                                   cluster.address(1) + "," + cluster.address(2) + " append --value x";
  int rogue_acknowledged = 0;
  std::string acknowledged_by_pair;
  const auto watch_until = std::chrono::steady_clock::now() + 8s;
  while (std::chrono::steady_clock::now() < watch_until) {
    const CommandRun attempt = run_command(through_pair);
    if (attempt.exit_code == 0) {
      ++rogue_acknowledged;
      acknowledged_by_pair += attempt.out;
    }
    std::this_thread::sleep_for(200ms);
  }
  EXPECT_EQ(rogue_acknowledged, 0) << acknowledged_by_pair << cluster.log_tail(1)
                                   << cluster.log_tail(2);
  for (int id : {1, 2}) {
    const std::optional<client::NodeStatus> status = cluster.status(id);
    ASSERT_TRUE(status.has_value()) << cluster.log_tail(id);
    EXPECT_TRUE(status->removed) << "node " << id << "\n" << cluster.log_tail(id);
    EXPECT_TRUE(status->removed_by >= 3 && status->removed_by <= 5)
        << "node " << id << " names " << status->removed_by;
    EXPECT_NE(status->role, client::Role::kLeader) << "node " << id;
    const CommandRun health =
        run_command(std::string(RAFTLOGCTL_PATH) + " --endpoints " + cluster.address(id) + " health");
    EXPECT_NE(health.exit_code, 0) << health.out;
    EXPECT_NE(health.out.find("NOT_SERVING"), std::string::npos) << health.out;
    const CommandRun append = run_command(std::string(RAFTLOGCTL_PATH) + " --timeout-ms 2000 " +
                                          "--endpoints " + cluster.address(id) + " append --value x");
    EXPECT_NE(append.exit_code, 0) << append.out;
    EXPECT_NE(append.out.find("NODE_REMOVED"), std::string::npos) << append.out;
    EXPECT_NE(append.out.find("is retired"), std::string::npos) << append.out;
  }

  // The real cluster: the same leader in the same term, and every acknowledged append everywhere.
  const std::optional<client::NodeStatus> after = cluster.status(real_leader);
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->role, client::Role::kLeader);
  EXPECT_EQ(after->term, before->term) << "retired ids moved the real cluster's term";
  for (int id : {3, 4, 5}) {
    const std::optional<client::NodeStatus> member = cluster.status(id);
    ASSERT_TRUE(member.has_value());
    EXPECT_EQ(member->term, before->term) << "node " << id;
    EXPECT_FALSE(member->removed) << "node " << id;
  }
  append_entries(*real_client, 5, "after", &acknowledged);
  for (int id : {3, 4, 5}) expect_holds_acknowledged(cluster, id, acknowledged, std::nullopt);

  // The word outlives a restart (DATA_DIR/REMOVED): every real member stopped, so nobody can tell
  // the pair again, and the pair restarted. Before the record they forgot the word and elected
  // each other at once (2 of the founders' 3 voters).
  std::map<int, std::uint64_t> told_by;
  for (int id : {1, 2}) told_by[id] = cluster.status(id)->removed_by;
  for (int id : {3, 4, 5}) ASSERT_EQ(cluster.stop(id), 0);
  for (int id : {1, 2}) {
    ASSERT_EQ(cluster.stop(id), 0);
    EXPECT_TRUE(std::filesystem::exists(cluster.data_dir(id) + "/REMOVED")) << "node " << id;
    cluster.set_node_flags(id, {});
  }
  for (int id : {1, 2}) cluster.start(id);
  EXPECT_EQ(leader_among(cluster, {1, 2}, 6s), 0) << cluster.log_tail(1) << cluster.log_tail(2);
  for (int id : {1, 2}) {
    const std::optional<client::NodeStatus> status = cluster.status(id);
    ASSERT_TRUE(status.has_value()) << cluster.log_tail(id);
    EXPECT_TRUE(status->removed) << "node " << id << "\n" << cluster.log_tail(id);
    EXPECT_EQ(status->removed_by, told_by[id]) << "node " << id;
    EXPECT_EQ(status->role, client::Role::kFollower) << "node " << id;
    const CommandRun health = run_command(std::string(RAFTLOGCTL_PATH) + " --endpoints " +
                                          cluster.address(id) + " health");
    EXPECT_NE(health.out.find("NOT_SERVING"), std::string::npos) << health.out;
    const CommandRun append = run_command(std::string(RAFTLOGCTL_PATH) + " --timeout-ms 2000 " +
                                          "--endpoints " + cluster.address(id) + " append --value x");
    EXPECT_NE(append.out.find("NODE_REMOVED"), std::string::npos) << append.out;
  }
  // A damaged record is refused with what to check, not read as "no word".
  ASSERT_EQ(cluster.stop(1), 0);
  {
    std::ofstream damaged(cluster.data_dir(1) + "/REMOVED", std::ios::trunc);
    damaged << "not a record";
  }
  cluster.start(1);
  const std::optional<int> exit_code = cluster.wait_for_exit(1, 15s);
  ASSERT_TRUE(exit_code.has_value()) << cluster.log_tail(1);
  EXPECT_NE(*exit_code, 0);
  EXPECT_NE(cluster.log_tail(1).find("members list"), std::string::npos) << cluster.log_tail(1);
}

}  // namespace
}  // namespace raftlog::testing

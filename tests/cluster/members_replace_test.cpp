// `raftlogctl members replace` as an operator meets it (outside test drills7): run before the new
// node was started, it stops after its add, and the same command run again once the node runs
// finishes the replace (M1: it was refused ALREADY_A_MEMBER, and its hint "promote it" left the dead
// node a voter); a learner's replacement stays a learner (M4: it became a voter, the cluster one
// voter larger).
#include <gtest/gtest.h>

#include <string>

#include "client/admin.h"
#include "cluster_test_support.h"
#include "shared/command_run.h"
#include "testing/local_cluster.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;

TEST(MembersReplaceTest, AnInterruptedReplaceFinishesWhenRunAgainAndALearnersReplacementStaysOne) {
  LocalClusterOptions options;
  options.raftlogd_path = RAFTLOGD_PATH;
  options.nodes = 6;
  options.founding_members = 3;
  LocalCluster cluster(options);
  for (int id = 1; id <= 3; ++id) cluster.start(id);
  const int leader = leader_among(cluster, {1, 2, 3});
  ASSERT_NE(leader, 0) << cluster.log_tail(1);
  const std::string ctl = std::string(RAFTLOGCTL_PATH) + " --endpoints " + cluster.address(1) +
                          "," + cluster.address(2) + "," + cluster.address(3) + " members ";
  const int old_voter = leader == 3 ? 2 : 3;

  // Node 4 is not running yet: the replace adds it and stops, saying what is left.
  const CommandRun first = run_command(ctl + "replace " + std::to_string(old_voter) + " 4 " +
                                       cluster.address(4) + " --timeout-ms 2000");
  EXPECT_NE(first.exit_code, 0) << first.out;
  EXPECT_NE(first.out.find("node 4 added as a learner"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("run this `members replace` again"), std::string::npos) << first.out;
  cluster.start(4);
  const CommandRun again = run_command(ctl + "replace " + std::to_string(old_voter) + " 4 " +
                                       cluster.address(4) + " --timeout-ms 20000");
  ASSERT_EQ(again.exit_code, 0) << again.out << cluster.log_tail(4);
  EXPECT_NE(again.out.find("is a learner at " + cluster.address(4) + " already"), std::string::npos)
      << again.out;
  EXPECT_NE(again.out.find("node 4 caught up and is a voter"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("node " + std::to_string(old_voter) + " removed"), std::string::npos)
      << again.out;

  // The same id at another address is another node: refused, nothing changed.
  const CommandRun elsewhere = run_command(ctl + "replace 1 4 " + cluster.address(6));
  EXPECT_NE(elsewhere.exit_code, 0) << elsewhere.out;
  EXPECT_NE(elsewhere.out.find("is a member already, at " + cluster.address(4)), std::string::npos)
      << elsewhere.out;

  // A learner replaced: the replacement is a learner, the voters stay three.
  cluster.start(5);
  cluster.start(6);
  const CommandRun learner =
      run_command(ctl + "add 5 " + cluster.address(5) + " --learner --timeout-ms 20000");
  ASSERT_EQ(learner.exit_code, 0) << learner.out;
  const CommandRun replace_learner =
      run_command(ctl + "replace 5 6 " + cluster.address(6) + " --timeout-ms 20000");
  ASSERT_EQ(replace_learner.exit_code, 0) << replace_learner.out << cluster.log_tail(6);
  EXPECT_NE(replace_learner.out.find("node 6 caught up and stays a learner"), std::string::npos)
      << replace_learner.out;

  client::Options admin;
  for (int id = 1; id <= 4; ++id) admin.endpoints.push_back(cluster.address(id));
  auto members = client::MembersClient::create(admin);
  ASSERT_TRUE(members.ok()) << members.status().to_string();
  client::MemberList list;
  ASSERT_TRUE(poll_until([&] {
    auto listed = members.value()->list();
    if (!listed.ok()) return false;
    list = std::move(listed).value();
    return list.find(5) == nullptr && list.find(6) != nullptr;
  }));
  std::size_t voters = 0;
  for (const client::Member& m : list.members) voters += m.voter ? 1 : 0;
  EXPECT_EQ(voters, 3U);
  EXPECT_FALSE(list.find(6)->voter);
  EXPECT_NE(list.find(4), nullptr);
  EXPECT_EQ(list.find(static_cast<std::uint64_t>(old_voter)), nullptr);
}

}  // namespace
}  // namespace raftlog::testing

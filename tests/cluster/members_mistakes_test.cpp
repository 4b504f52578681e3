// `raftlogctl members add` with a mistyped id (drills7 M2): node 4 runs at its address waiting to be
// added (--join); the operator types `members add 5 <node 4's address>`. The learner never catches
// up, and the answer said "is it running?" while the leader's transport knew that the node at that
// address is node 4, not node 5 (its peer authenticator is refused there). Now the answer carries
// what the leader knows.
#include <gtest/gtest.h>

#include <string>

#include "cluster_test_support.h"
#include "shared/command_run.h"
#include "testing/local_cluster.h"

namespace raftlog::testing {
namespace {

TEST(MembersMistakesTest, AnAddWithAnotherNodesAddressSaysWhatTheLeaderKnows) {
  LocalClusterOptions options;
  options.raftlogd_path = RAFTLOGD_PATH;
  options.nodes = 4;
  options.founding_members = 3;
  LocalCluster cluster(options);
  for (int id = 1; id <= 4; ++id) cluster.start(id);
  ASSERT_NE(leader_among(cluster, {1, 2, 3}), 0) << cluster.log_tail(1);
  // Node 4 listens (it waits to be added): the leader's dial reaches it, not a closed port.
  ASSERT_TRUE(poll_until([&] { return cluster.status(4).has_value(); })) << cluster.log_tail(4);
  const std::string ctl = std::string(RAFTLOGCTL_PATH) + " --endpoints " + cluster.address(1) +
                          "," + cluster.address(2) + "," + cluster.address(3) + " members ";
  const CommandRun mistyped =
      run_command(ctl + "add 5 " + cluster.address(4) + " --timeout-ms 5000");
  const std::string& out = mistyped.out;
  EXPECT_NE(mistyped.exit_code, 0) << out;
  EXPECT_NE(out.find("node 5 did not catch up"), std::string::npos) << out;
  EXPECT_EQ(out.find("is it running?"), std::string::npos) << out;
  EXPECT_NE(out.find("the leader's last attempt to reach it there failed"), std::string::npos)
      << out;
  EXPECT_NE(out.find("not node 4"), std::string::npos) << out << cluster.log_tail(4);
}

}  // namespace
}  // namespace raftlog::testing

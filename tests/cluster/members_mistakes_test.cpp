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

// drills7 L2: `transfer-leader` to a learner was refused TRANSFER_TARGET_UNKNOWN, which
// docs/errors.md describes as "a node that is not a member", with "not a voter" in the message. A
// learner now has its own word and a message that says what to do; every refusal prints its word,
// also with --json.
TEST(MembersMistakesTest, ATransferToALearnerOrANonMemberNamesItsReason) {
  LocalClusterOptions options;
  options.raftlogd_path = RAFTLOGD_PATH;
  options.nodes = 4;
  options.founding_members = 3;
  LocalCluster cluster(options);
  for (int id = 1; id <= 3; ++id) cluster.start(id);
  ASSERT_NE(leader_among(cluster, {1, 2, 3}), 0) << cluster.log_tail(1);
  const std::string ctl = std::string(RAFTLOGCTL_PATH) + " --endpoints " + cluster.address(1) +
                          "," + cluster.address(2) + "," + cluster.address(3) + " ";
  // Node 4 never starts: a learner is a member whether or not it runs.
  const CommandRun added =
      run_command(ctl + "members add 4 " + cluster.address(4) + " --learner --timeout-ms 10000");
  ASSERT_EQ(added.exit_code, 0) << added.out;
  for (const std::string json : {"", " --json"}) {
    const CommandRun to_learner = run_command(ctl + "transfer-leader --to 4" + json);
    EXPECT_EQ(to_learner.exit_code, 1) << to_learner.out;
    EXPECT_NE(to_learner.out.find("FAILED_PRECONDITION"), std::string::npos) << to_learner.out;
    EXPECT_NE(to_learner.out.find("node 4 is a learner, not a voter"), std::string::npos)
        << to_learner.out;
    EXPECT_NE(to_learner.out.find("(TRANSFER_TARGET_LEARNER)"), std::string::npos)
        << to_learner.out;
    const CommandRun to_stranger = run_command(ctl + "transfer-leader --to 9" + json);
    EXPECT_EQ(to_stranger.exit_code, 1) << to_stranger.out;
    EXPECT_NE(to_stranger.out.find("node 9 is not a member"), std::string::npos)
        << to_stranger.out;
    EXPECT_NE(to_stranger.out.find("(TRANSFER_TARGET_UNKNOWN)"), std::string::npos)
        << to_stranger.out;
  }
}

}  // namespace
}  // namespace raftlog::testing

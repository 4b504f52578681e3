// `raftlogctl members add` with a mistyped id or address (drills7 M2): node 4 runs at its address
// waiting to be added (--join); the operator types `members add 5 <node 4's address>`. Before the
// leader probed the address, the add committed, the learner never caught up, and the natural repair
// (`members remove 5`) retired id 5 for good (or, with the right id at another joiner's address,
// the real id). Now the leader asks the node at the address who it is before it proposes
// (raftlog.v1.Membership/ProbeMember) and refuses with WRONG_NODE_AT_ADDRESS: nothing committed,
// no id retired. The same for a node of another cluster.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "client/admin.h"
#include "cluster_test_support.h"
#include "shared/command_run.h"
#include "testing/local_cluster.h"

namespace raftlog::testing {
namespace {

client::Options founders_endpoints(LocalCluster& cluster) {
  client::Options options;
  for (int id = 1; id <= 3; ++id) options.endpoints.push_back(cluster.address(id));
  return options;
}

client::MemberList list_members(LocalCluster& cluster) {
  auto created = client::MembersClient::create(founders_endpoints(cluster));
  EXPECT_TRUE(created.ok());
  if (!created.ok()) return {};
  auto listed = created.value()->list();
  EXPECT_TRUE(listed.ok()) << listed.status().to_string();
  return listed.ok() ? listed.value() : client::MemberList{};
}

TEST(MembersMistakesTest, AnAddOfAnotherNodesOrClustersAddressIsRefusedBeforeItCommits) {
  LocalCluster cluster(founders_options(RAFTLOGD_PATH, 4, 3));
  for (int id = 1; id <= 4; ++id) cluster.start(id);
  ASSERT_NE(leader_among(cluster, {1, 2, 3}), 0) << cluster.log_tail(1);
  // Node 4 listens (it waits to be added): the probe reaches it, not a closed port.
  ASSERT_TRUE(poll_until([&] { return cluster.status(4).has_value(); })) << cluster.log_tail(4);
  const client::MemberList before = list_members(cluster);
  const std::string ctl = std::string(RAFTLOGCTL_PATH) + " --endpoints " + cluster.address(1) +
                          "," + cluster.address(2) + "," + cluster.address(3) + " members ";

  const CommandRun mistyped =
      run_command(ctl + "add 5 " + cluster.address(4) + " --timeout-ms 5000");
  EXPECT_NE(mistyped.exit_code, 0) << mistyped.out;
  EXPECT_NE(mistyped.out.find("WRONG_NODE_AT_ADDRESS"), std::string::npos) << mistyped.out;
  EXPECT_NE(mistyped.out.find("node 4 answers at " + cluster.address(4) + ", not node 5"),
            std::string::npos)
      << mistyped.out;

  // A one-node cluster of its own (another cluster id) at the address given.
  LocalCluster other(founders_options(RAFTLOGD_PATH, 1, 1));
  other.start(1);
  ASSERT_NE(leader_among(other, {1}), 0) << other.log_tail(1);
  const CommandRun foreign = run_command(ctl + "add 5 " + other.address(1) + " --timeout-ms 5000");
  EXPECT_NE(foreign.exit_code, 0) << foreign.out;
  EXPECT_NE(foreign.out.find("WRONG_NODE_AT_ADDRESS"), std::string::npos) << foreign.out;
  EXPECT_NE(foreign.out.find("another cluster"), std::string::npos) << foreign.out;

  // Nothing was proposed: the same configuration, id 5 neither a member nor retired.
  const client::MemberList after = list_members(cluster);
  EXPECT_EQ(after.config_index, before.config_index);
  EXPECT_EQ(after.find(5), nullptr);
  EXPECT_TRUE(after.retired_ids.empty());

  // The right id at that address, and an address where nothing answers yet, are added.
  const CommandRun right = run_command(ctl + "add 4 " + cluster.address(4) + " --timeout-ms 20000");
  EXPECT_EQ(right.exit_code, 0) << right.out << cluster.log_tail(4);
  // (The RPC alone: raftlogctl would then wait for a learner that never starts to catch up.)
  auto members = client::MembersClient::create(founders_endpoints(cluster));
  ASSERT_TRUE(members.ok());
  auto added = members.value()->add(6, "127.0.0.1:1", /*learner=*/true);
  EXPECT_TRUE(added.ok()) << added.status().to_string();
  EXPECT_NE(list_members(cluster).find(6), nullptr);
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

// raftlogctl against a real 3-node cluster: the commands an operator types, their exit codes and
// their --json output.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "shared/command_run.h"
#include "testing/local_cluster.h"

namespace raftlog::testing {
namespace {

TEST(CliTest, StatusAppendReadTransferFlushAgainstALiveCluster) {
  LocalClusterOptions options;
  options.raftlogd_path = RAFTLOGD_PATH;
  LocalCluster cluster(options);
  cluster.start_all();
  const int leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0);
  const std::string ctl = std::string(RAFTLOGCTL_PATH) + " ";
  const std::string endpoints = " --endpoints " + cluster.endpoints();

  CommandRun status = run_command(ctl + "status --json" + endpoints);
  ASSERT_EQ(status.exit_code, 0) << status.out;
  EXPECT_NE(status.out.find("\"role\":\"leader\""), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("\"id\":" + std::to_string(leader)), std::string::npos) << status.out;
  // Every node shows the configuration in force: the --members voters, no learners.
  std::size_t configurations = 0;
  for (std::size_t at = status.out.find("\"voters\":[1,2,3],\"learners\":[]");
       at != std::string::npos;
       at = status.out.find("\"voters\":[1,2,3],\"learners\":[]", at + 1)) {
    ++configurations;
  }
  EXPECT_EQ(configurations, 3U) << status.out;
  const CommandRun text = run_command(ctl + "status" + endpoints);
  EXPECT_NE(text.out.find("    configuration: voters 1, 2, 3\n"), std::string::npos) << text.out;
  // Every node's disk: its use and high watermark (the test cluster's own: this machine's disk
  // may be fuller than the default 90 %), none past it (drills4 M2).
  EXPECT_NE(text.out.find(" DISK "), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("DISK PAST"), std::string::npos) << text.out;
  const std::string disk_fields =
      "\"disk_over_high_watermark\":false,\"disk_keeping_leadership\":false";
  std::size_t disks = 0;
  for (std::size_t at = status.out.find(disk_fields); at != std::string::npos;
       at = status.out.find(disk_fields, at + 1)) {
    ++disks;
  }
  EXPECT_EQ(disks, 3U) << status.out;

  CommandRun append = run_command("printf 'one\\ntwo\\n' | " + ctl + "append --json" + endpoints);
  ASSERT_EQ(append.exit_code, 0) << append.out;
  EXPECT_NE(append.out.find("\"first_index\":2"), std::string::npos)
      << append.out;  // 1 is the no-op
  EXPECT_NE(append.out.find("\"first_index\":3"), std::string::npos) << append.out;

  CommandRun read = run_command(ctl + "read --from 1 --linearizable" + endpoints);
  ASSERT_EQ(read.exit_code, 0) << read.out;
  EXPECT_EQ(read.out, "INDEX\tTERM\tPAYLOAD\n1\t1\t(noop)\n2\t1\tone\n3\t1\ttwo\n");
  CommandRun bare = run_command(ctl + "read --from 1 --linearizable --no-headers" + endpoints);
  EXPECT_EQ(bare.out, "1\t1\t(noop)\n2\t1\tone\n3\t1\ttwo\n");
  // Stopped by --count with more committed: a hint (on stderr; run_command merges it).
  CommandRun first_two =
      run_command(ctl + "read --from 1 --count 2 --linearizable --no-headers" + endpoints);
  ASSERT_EQ(first_two.exit_code, 0) << first_two.out;
  EXPECT_EQ(first_two.out,
            "1\t1\t(noop)\n2\t1\tone\n1 more entries (through index 3); use --count or --from 3\n");
  CommandRun all_three =
      run_command(ctl + "read --from 1 --count 3 --linearizable --no-headers" + endpoints);
  EXPECT_EQ(all_three.out.find("more entries"), std::string::npos) << all_three.out;

  // Global flags before the command, and `leader`.
  CommandRun leader_line = run_command(ctl + endpoints + " --json leader");
  ASSERT_EQ(leader_line.exit_code, 0) << leader_line.out;
  EXPECT_NE(leader_line.out.find("\"leader_id\":" + std::to_string(leader)), std::string::npos)
      << leader_line.out;
  EXPECT_NE(leader_line.out.find("\"leader_address\":\"" + cluster.address(leader) + "\""),
            std::string::npos)
      << leader_line.out;
  CommandRun version = run_command(ctl + "--version");
  EXPECT_EQ(version.exit_code, 0) << version.out;
  EXPECT_EQ(version.out.rfind("raftlogctl ", 0), 0U) << version.out;
  EXPECT_NE(status.out.find("\"version\":\""), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("\"revision\":\""), std::string::npos) << status.out;

  CommandRun tail = run_command(ctl + "tail --from 2 --json" + endpoints);
  ASSERT_EQ(tail.exit_code, 0) << tail.out;
  EXPECT_NE(tail.out.find("\"payload\":\"two\""), std::string::npos) << tail.out;

  const int target = leader == 3 ? 1 : leader + 1;
  CommandRun transfer =
      run_command(ctl + "transfer-leader --to " + std::to_string(target) + endpoints);
  ASSERT_EQ(transfer.exit_code, 0) << transfer.out;
  EXPECT_NE(transfer.out.find("node " + std::to_string(target) + " is leader"), std::string::npos)
      << transfer.out;

  CommandRun flush = run_command(ctl + "flush" + endpoints);
  EXPECT_EQ(flush.exit_code, 0) << flush.out;
  EXPECT_NE(flush.out.find("flushed through index"), std::string::npos) << flush.out;
  // trim: every node answers with its first retained index (1: one segment, nothing to delete).
  CommandRun trim = run_command(ctl + "trim --before 2" + endpoints);
  EXPECT_EQ(trim.exit_code, 0) << trim.out;
  EXPECT_NE(trim.out.find("first retained index 1"), std::string::npos) << trim.out;
  CommandRun trim_json = run_command(ctl + "trim --before 2 --json" + endpoints);
  EXPECT_EQ(trim_json.exit_code, 0) << trim_json.out;
  EXPECT_NE(trim_json.out.find("\"first_index\":1"), std::string::npos) << trim_json.out;
  EXPECT_EQ(run_command(ctl + "trim" + endpoints).exit_code, 2);  // --before is required

  // Usage errors exit 2; a refused request exits 1 with the server's reason.
  EXPECT_EQ(run_command(ctl + "read --bogus" + endpoints).exit_code, 2);
  EXPECT_EQ(run_command(ctl + "transfer-leader" + endpoints).exit_code, 2);
  // 0 is never a node id: a usage error, as for `members remove 0` (it was sent and exited 1).
  const CommandRun to_zero = run_command(ctl + "transfer-leader --to 0" + endpoints);
  EXPECT_EQ(to_zero.exit_code, 2) << to_zero.out;
  EXPECT_NE(to_zero.out.find("allowed 1.."), std::string::npos) << to_zero.out;
  CommandRun past_end = run_command(ctl + "read --from 1000" + endpoints);
  EXPECT_EQ(past_end.exit_code, 1) << past_end.out;
  EXPECT_NE(past_end.out.find("OUT_OF_RANGE"), std::string::npos) << past_end.out;
  EXPECT_NE(past_end.out.find("past the committed end"), std::string::npos) << past_end.out;
  CommandRun unknown_target = run_command(ctl + "transfer-leader --to 9" + endpoints);
  EXPECT_EQ(unknown_target.exit_code, 1) << unknown_target.out;
  EXPECT_NE(unknown_target.out.find("INVALID_ARGUMENT"), std::string::npos) << unknown_target.out;
}

TEST(CliTest, ADownNodeIsShownInWordsAndLeaderNeedsOneNodeThatKnows) {
  LocalClusterOptions options;
  options.raftlogd_path = RAFTLOGD_PATH;
  LocalCluster cluster(options);
  cluster.start_all();
  const int leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0);
  const std::string ctl = std::string(RAFTLOGCTL_PATH) + " ";
  const int down = leader == 3 ? 1 : 3;
  cluster.kill(down);
  CommandRun status =
      run_command(ctl + "status --timeout-ms 2000 --endpoints " + cluster.endpoints());
  EXPECT_EQ(status.exit_code, 0) << status.out;  // the other nodes answered
  EXPECT_NE(status.out.find(cluster.address(down) + " "), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("DOWN (connection refused: no node listening)"), std::string::npos)
      << status.out;
  EXPECT_EQ(status.out.find("failed to connect to all addresses"), std::string::npos) << status.out;
  CommandRun health =
      run_command(ctl + "health --timeout-ms 2000 --endpoints " + cluster.address(down));
  EXPECT_EQ(health.exit_code, 1) << health.out;
  EXPECT_NE(health.out.find("ENDPOINT"), std::string::npos) << health.out;  // column header
  EXPECT_NE(health.out.find("DOWN (connection refused"), std::string::npos) << health.out;
  // `leader` through the dead node plus a live one: the live one knows.
  const int live = down == 1 ? 2 : 1;
  CommandRun found = run_command(ctl + "leader --timeout-ms 2000 --endpoints " +
                                 cluster.address(down) + "," + cluster.address(live));
  EXPECT_EQ(found.exit_code, 0) << found.out;
  EXPECT_EQ(found.out.rfind(
                "node " + std::to_string(leader) + " at " + cluster.address(leader) + " (term ", 0),
            0U)
      << found.out;
  CommandRun none =
      run_command(ctl + "leader --timeout-ms 1000 --endpoints " + cluster.address(down));
  EXPECT_EQ(none.exit_code, 1) << none.out;
  EXPECT_NE(none.out.find("no leader known (0 of 1 endpoints answered"), std::string::npos)
      << none.out;
  // drills6 L10: a transfer to the dead node (silent for over a second by now, the election
  // timeout is at most 400 ms) is refused at once with why, not retried until --timeout-ms.
  const auto transfer_started = std::chrono::steady_clock::now();
  CommandRun to_dead = run_command(ctl + "transfer-leader --timeout-ms 8000 --to " +
                                   std::to_string(down) + " --endpoints " + cluster.endpoints());
  const auto transfer_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::steady_clock::now() - transfer_started)
                               .count();
  EXPECT_EQ(to_dead.exit_code, 1) << to_dead.out;
  EXPECT_NE(to_dead.out.find("FAILED_PRECONDITION"), std::string::npos) << to_dead.out;
  EXPECT_NE(to_dead.out.find("node " + std::to_string(down) + " has not answered this leader"),
            std::string::npos)
      << to_dead.out;
  EXPECT_NE(to_dead.out.find("is it running?"), std::string::npos) << to_dead.out;
  EXPECT_LT(transfer_ms, 4000) << "retried toward the deadline: " << to_dead.out;
  EXPECT_EQ(cluster.wait_for_leader(), leader) << "leadership stayed";
}

}  // namespace
}  // namespace raftlog::testing

// A node removed by a committed change that keeps running (not stopped yet, as docs/operations.md
// allows) serves no reads: its log stops at its removal for good. Outside test drills7 D8b/c: a
// plain read there answered "past the committed end ...; retry once it is committed" for good,
// raftlogctl and the Python client listing it first never reached a member, and a tail on it
// waited for ever. Now Read, Tail and the Topics calls answer UNAVAILABLE, NODE_REMOVED, and
// clients move on to the next endpoint.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "client/admin.h"
#include "cluster_test_support.h"
#include "shared/command_run.h"
#include "testing/local_cluster.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;

TEST(RemovedNodeTest, ARemovedNodeStillRunningRefusesReadsAndClientsReadFromAMember) {
  LocalClusterOptions options;
  options.raftlogd_path = RAFTLOGD_PATH;
  options.nodes = 3;
  LocalCluster cluster(options);
  cluster.start_all();
  const int leader = cluster.wait_for_leader(20s);
  ASSERT_NE(leader, 0);
  auto client = cluster.client();
  Acknowledged acknowledged;
  append_entries(*client, 10, "before", &acknowledged);

  const int removed = leader == 3 ? 2 : 3;
  const int member = 6 - leader - removed;
  client::Options admin;
  admin.endpoints = {cluster.address(leader), cluster.address(member)};
  auto members = client::MembersClient::create(admin);
  ASSERT_TRUE(members.ok()) << members.status().to_string();
  auto change = members.value()->remove(static_cast<std::uint64_t>(removed));
  ASSERT_TRUE(change.ok()) << change.status().to_string();
  ASSERT_TRUE(poll_until(
      [&] {
        const auto status = cluster.status(removed);
        return status.has_value() && status->removed;
      },
      10s))
      << cluster.log_tail(removed);
  const std::uint64_t last = append_entries(*client, 10, "after", &acknowledged);
  ASSERT_TRUE(cluster.running(removed));

  const std::string ctl = std::string(RAFTLOGCTL_PATH) + " --timeout-ms 3000 ";
  // The removed node alone: every read says why and where to go, not "retry once committed".
  const CommandRun alone = run_command(ctl + "--endpoints " + cluster.address(removed) +
                                       " read --from " + std::to_string(last) + " --no-headers");
  EXPECT_NE(alone.exit_code, 0) << alone.out;
  EXPECT_NE(alone.out.find("UNAVAILABLE: " + cluster.address(removed) + ": node " +
                           std::to_string(removed) + " was removed from the cluster"),
            std::string::npos)
      << alone.out;
  EXPECT_NE(alone.out.find("(NODE_REMOVED)"), std::string::npos) << alone.out;  // the reason word
  const CommandRun below = run_command(ctl + "--endpoints " + cluster.address(removed) +
                                       " read --from 1 --count 1 --no-headers");
  EXPECT_NE(below.exit_code, 0) << below.out;  // not served from the frozen log either
  EXPECT_NE(below.out.find("was removed from the cluster"), std::string::npos) << below.out;

  // Listed first, it is passed over: the read and a tail from index 1 get every entry from a member.
  const std::string removed_first =
      "--endpoints " + cluster.address(removed) + "," + cluster.address(member) + " ";
  const CommandRun read = run_command(ctl + removed_first + "read --from " +
                                      std::to_string(last) + " --count 1 --no-headers");
  EXPECT_EQ(read.exit_code, 0) << read.out;
  EXPECT_NE(read.out.find(acknowledged.at(last)), std::string::npos) << read.out;

  client::Options tail_options;
  tail_options.endpoints = {cluster.address(removed), cluster.address(member)};
  tail_options.retry_deadline_ms = 10000;
  auto tail_client = client::Client::create(tail_options);
  ASSERT_TRUE(tail_client.ok()) << tail_client.status().to_string();
  std::vector<std::string> tailed;
  client::TailOptions tail;
  tail.from_index = 1;
  tail.duration_ms = 15000;
  const auto tailed_to = tail_client.value()->tail(tail, [&](const client::Entry& entry) {
    if (acknowledged.contains(entry.index)) tailed.push_back(entry.payload);
    return entry.index < last;
  });
  EXPECT_TRUE(tailed_to.ok()) << tailed_to.status().to_string();
  ASSERT_EQ(tailed.size(), acknowledged.size());
  std::size_t i = 0;
  for (const auto& [index, payload] : acknowledged) EXPECT_EQ(tailed[i++], payload) << index;
}

}  // namespace
}  // namespace raftlog::testing

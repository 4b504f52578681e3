// Consumer groups over a real 3-node cluster: offsets committed (one committer running through a
// `kill -9` of the leader) are fetched back from the new leader, and from the killed node once it
// restarted and took leadership back; offsets whose commit entries retention trimmed survive a
// kill -9 of every node; `raftlogctl group` commands, their output and their usage errors.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <optional>
#include <thread>

#include "client/groups.h"
#include "cluster_test_support.h"
#include "shared/command_run.h"
#include "testing/local_cluster.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<client::Groups> groups_client(LocalCluster& cluster,
                                              const std::vector<int>& ids = {1, 2, 3}) {
  client::Options options;
  for (int id : ids) options.endpoints.push_back(cluster.address(id));
  options.retry_deadline_ms = 20000;
  auto groups = client::Groups::create(options);
  EXPECT_TRUE(groups.ok());
  return groups.ok() ? std::move(groups).value() : nullptr;
}

// group -> topic -> offset, as fetched.
std::map<std::string, std::uint64_t> fetch_all(client::Groups& groups, const std::string& group) {
  std::map<std::string, std::uint64_t> out;
  auto fetched = groups.fetch(group);
  EXPECT_TRUE(fetched.ok()) << group << ": " << fetched.status().to_string();
  if (!fetched.ok()) return out;
  for (const client::GroupTopicOffset& offset : fetched->offsets) out[offset.topic] = offset.offset;
  return out;
}

void append_topic(client::Client& writer, const std::string& topic, int count,
                  std::size_t bytes = 8) {
  for (int i = 0; i < count; ++i) {
    auto r = writer.append({std::string(bytes, 'e')}, {{topic, {}}});
    ASSERT_TRUE(r.ok()) << r.status().message();
  }
}

TEST(GroupsCluster, AcknowledgedOffsetsSurviveAKill9OfTheLeader) {
  LocalClusterOptions options;
  options.raftlogd_path = RAFTLOGD_PATH;
  LocalCluster cluster(options);
  cluster.start_all();
  const int leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0) << cluster.log_tail(1);
  auto writer = cluster.client();
  ASSERT_NO_FATAL_FAILURE(append_topic(*writer, "orders", 200));
  ASSERT_NO_FATAL_FAILURE(append_topic(*writer, "payments", 20));
  auto groups = groups_client(cluster);
  ASSERT_NE(groups, nullptr);

  std::map<std::string, std::map<std::string, std::uint64_t>> acknowledged;
  for (int g = 0; g < 5; ++g) {
    const std::string group = "group-" + std::to_string(g);
    for (const std::string topic : {"orders", "payments"}) {
      const std::uint64_t offset = static_cast<std::uint64_t>(g * 3 + (topic == "orders" ? 1 : 2));
      auto committed = groups->commit(group, topic, offset);
      ASSERT_TRUE(committed.ok()) << committed.status().to_string();
      acknowledged[group][topic] = offset;
    }
  }

  // One committer moves "live" forward through the kill: every acknowledged offset must be
  // fetched back; a commit whose answer was lost may or may not have landed.
  std::atomic<std::uint64_t> last_acknowledged{0};
  std::atomic<std::uint64_t> last_attempted{0};
  std::atomic<bool> stop{false};
  std::thread committer([&] {
    auto own = groups_client(cluster);
    for (std::uint64_t offset = 1; offset <= 200 && !stop.load(); ++offset) {
      last_attempted.store(offset);
      if (own->commit("live", "orders", offset).ok()) last_acknowledged.store(offset);
      std::this_thread::sleep_for(5ms);
    }
  });
  std::this_thread::sleep_for(300ms);
  cluster.kill(leader);
  const int new_leader = cluster.wait_for_leader(10s, {leader});
  ASSERT_NE(new_leader, 0);
  std::this_thread::sleep_for(500ms);
  stop.store(true);
  committer.join();
  ASSERT_GT(last_acknowledged.load(), 0U);

  auto after = groups_client(cluster, {1, 2, 3});
  for (const auto& [group, offsets] : acknowledged) {
    EXPECT_EQ(fetch_all(*after, group), offsets) << group;
  }
  const std::uint64_t live = fetch_all(*after, "live")["orders"];
  EXPECT_GE(live, last_acknowledged.load());
  EXPECT_LE(live, last_attempted.load());
  auto listing = after->list();
  ASSERT_TRUE(listing.ok()) << listing.status().to_string();
  EXPECT_EQ(listing->groups.size(), 6U);
  EXPECT_TRUE(listing->complete);

  // The killed node recovers its table (file + replay) and answers the same once leader again.
  cluster.start(leader);
  auto leader_status = cluster.status(new_leader);
  ASSERT_TRUE(leader_status.has_value());
  ASSERT_TRUE(cluster.wait_for_commit(leader, leader_status->commit_index, 20s));
  const CommandRun transfer =
      run_command(std::string(RAFTLOGCTL_PATH) + " transfer-leader --to " + std::to_string(leader) +
                  " --endpoints " + cluster.endpoints());
  ASSERT_EQ(transfer.exit_code, 0) << transfer.out;
  ASSERT_EQ(cluster.wait_for_leader(10s), leader);
  auto on_old_leader = groups_client(cluster, {leader});
  for (const auto& [group, offsets] : acknowledged) {
    EXPECT_EQ(fetch_all(*on_old_leader, group), offsets) << group;
  }
  EXPECT_EQ(fetch_all(*on_old_leader, "live")["orders"], live);
}

TEST(GroupsCluster, OffsetsOutliveTheirTrimmedCommitEntriesAcrossAKill9OfEveryNode) {
  LocalClusterOptions options;
  options.raftlogd_path = RAFTLOGD_PATH;
  options.segment_size_bytes = 256 << 10;
  LocalCluster cluster(options);
  cluster.start_all();
  ASSERT_NE(cluster.wait_for_leader(), 0) << cluster.log_tail(1);
  auto writer = cluster.client();
  ASSERT_NO_FATAL_FAILURE(append_topic(*writer, "orders", 10));
  auto groups = groups_client(cluster);
  ASSERT_NE(groups, nullptr);
  auto committed = groups->commit("billing", "orders", 9);
  ASSERT_TRUE(committed.ok()) << committed.status().to_string();
  // About 1.5 MiB after the commit: several segments to trim.
  ASSERT_NO_FATAL_FAILURE(append_topic(*writer, "filler", 200, 8 << 10));
  auto last = writer->append({"end"});
  ASSERT_TRUE(last.ok());
  // A slot change makes every table persist within 200 ms, moving the retention hold past the
  // filler (a boundary-only move would wait up to 10 s).
  auto other = groups->commit("other", "orders", 1);
  ASSERT_TRUE(other.ok()) << other.status().to_string();
  for (int id = 1; id <= 3; ++id) ASSERT_TRUE(cluster.wait_for_commit(id, other->index, 20s));
  std::this_thread::sleep_for(600ms);
  const CommandRun trim =
      run_command(std::string(RAFTLOGCTL_PATH) + " trim --before " +
                  std::to_string(last->last_index) + " --endpoints " + cluster.endpoints());
  ASSERT_EQ(trim.exit_code, 0) << trim.out;
  // A trim answers before its deletion has run (it follows over each node's next loop rounds:
  // docs/design.md, "Known limits"): every node's log must start past the commit entry before the
  // kill.
  for (int id = 1; id <= 3; ++id) {
    std::optional<client::NodeStatus> status;
    EXPECT_TRUE(poll_until([&] {
      status = cluster.status(id);
      return status.has_value() && status->first_index > committed->index;
    })) << "node " << id << " kept the commit entry (first index "
        << (status ? status->first_index : 0) << ")";
  }
  for (int id = 1; id <= 3; ++id) cluster.kill(id);
  for (int id = 1; id <= 3; ++id) cluster.start(id);
  ASSERT_NE(cluster.wait_for_leader(), 0);
  auto after = groups_client(cluster);
  EXPECT_EQ(fetch_all(*after, "billing"), (std::map<std::string, std::uint64_t>{{"orders", 9}}));
  auto listing = after->list();
  ASSERT_TRUE(listing.ok()) << listing.status().to_string();
  EXPECT_TRUE(listing->complete);
}

TEST(GroupsCluster, RaftlogctlGroupCommandsAndTheirUsageErrors) {
  const std::string ctl = std::string(RAFTLOGCTL_PATH) + " ";
  // Usage errors exit 2 before anything is sent (nothing listens on these endpoints).
  const std::string nowhere = " --endpoints 127.0.0.1:1";
  EXPECT_EQ(run_command(ctl + "group commit --group g --topic t" + nowhere).exit_code, 2);
  EXPECT_EQ(run_command(ctl + "group commit --group g --offset 1" + nowhere).exit_code, 2);
  EXPECT_EQ(run_command(ctl + "group commit --group g --topic t --offset x" + nowhere).exit_code,
            2);
  EXPECT_EQ(run_command(ctl + "group commit --group g --topic t --offset -1" + nowhere).exit_code,
            2);
  EXPECT_EQ(run_command(ctl + "group show" + nowhere).exit_code, 2);
  EXPECT_EQ(run_command(ctl + "group show --group g --group h" + nowhere).exit_code, 2);
  EXPECT_EQ(run_command(ctl + "group list extra" + nowhere).exit_code, 2);
  EXPECT_EQ(run_command(ctl + "group frob" + nowhere).exit_code, 2);
  const CommandRun help = run_command(ctl + "group commit --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--offset"), std::string::npos) << help.out;

  LocalClusterOptions options;
  options.raftlogd_path = RAFTLOGD_PATH;
  LocalCluster cluster(options);
  cluster.start_all();
  ASSERT_NE(cluster.wait_for_leader(), 0) << cluster.log_tail(1);
  auto writer = cluster.client();
  ASSERT_NO_FATAL_FAILURE(append_topic(*writer, "orders", 5));
  const std::string endpoints = " --endpoints " + cluster.endpoints();

  const CommandRun commit =
      run_command(ctl + "group commit --group billing --topic orders --offset 3" + endpoints);
  ASSERT_EQ(commit.exit_code, 0) << commit.out;
  EXPECT_EQ(commit.out.rfind("committed billing orders 3 at index ", 0), 0U) << commit.out;
  const CommandRun json = run_command(ctl + endpoints +
                                      " --json group commit --group audit "
                                      "--topic orders --offset 5");
  ASSERT_EQ(json.exit_code, 0) << json.out;
  EXPECT_NE(json.out.find("\"group\":\"audit\",\"topic\":\"orders\",\"offset\":5,\"index\":"),
            std::string::npos)
      << json.out;
  const CommandRun show = run_command(ctl + "group show --group billing" + endpoints);
  ASSERT_EQ(show.exit_code, 0) << show.out;
  EXPECT_EQ(show.out.rfind("TOPIC", 0), 0U) << show.out;
  EXPECT_NE(show.out.find("\norders"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find(" 3 "), std::string::npos) << show.out;
  const CommandRun show_json =
      run_command(ctl + "group show --group billing --topic orders --json" + endpoints);
  EXPECT_NE(show_json.out.find("{\"group\":\"billing\",\"topic\":\"orders\",\"offset\":3,"),
            std::string::npos)
      << show_json.out;
  const CommandRun nobody = run_command(ctl + "group show --group nobody --json" + endpoints);
  EXPECT_EQ(nobody.exit_code, 1);
  EXPECT_EQ(nobody.out, "group show: group nobody has no committed offset\n");  // drills5 L2
  const CommandRun list = run_command(ctl + "group list --json" + endpoints);
  ASSERT_EQ(list.exit_code, 0) << list.out;
  EXPECT_EQ(list.out,
            "{\"group\":\"audit\",\"topics\":1,\"unknown_topics\":0}\n"
            "{\"group\":\"billing\",\"topics\":1,\"unknown_topics\":0}\n");
  const CommandRun beyond =
      run_command(ctl + "group commit --group billing --topic orders --offset 6" + endpoints);
  EXPECT_EQ(beyond.exit_code, 1) << beyond.out;
  EXPECT_NE(beyond.out.find("past the end offset 5"), std::string::npos) << beyond.out;
  const CommandRun bad =
      run_command(ctl + "group commit --group bad/name --topic orders --offset 1" + endpoints);
  EXPECT_EQ(bad.exit_code, 1) << bad.out;
  EXPECT_NE(bad.out.find("INVALID_ARGUMENT"), std::string::npos) << bad.out;
  // The log shows the commits as such.
  const CommandRun read = run_command(ctl + "read --from 1 --linearizable" + endpoints);
  EXPECT_NE(read.out.find("(group-commit)"), std::string::npos) << read.out;
}

}  // namespace
}  // namespace raftlog::testing

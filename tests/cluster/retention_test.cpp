// Retention over a real 3-node cluster: `raftlogctl trim`/Admin.Trim and the size and age policies
// delete only whole committed segments, reads below the first retained index are OUT_OF_RANGE
// (reason INDEX_TRIMMED), the leader keeps what a live follower still needs (that follower catches
// up after a restart), and a follower silent for longer than the grace period is reported as
// needing trimmed entries and is rebuilt from a healthy follower's copy as docs/operations.md says.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <thread>

#include "cluster_test_support.h"
#include "shared/command_run.h"
#include "testing/http_get.h"
#include "testing/local_cluster.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;

// 2 KiB entries: ~30 per segment.
LocalClusterOptions small_segments() { return small_segment_options(RAFTLOGD_PATH); }

// Appends `count` 2 KiB entries; returns the last index.
std::uint64_t append_entries(client::Client& client, int count, const std::string& tag) {
  std::uint64_t last = 0;
  for (int i = 0; i < count; ++i) {
    auto result = client.append({tag + "-" + std::to_string(i) + std::string(2000, 'r')});
    EXPECT_TRUE(result.ok()) << result.status().message();
    if (result.ok()) last = result->last_index;
  }
  return last;
}

// Waits until `predicate` holds (bounded).
template <typename Predicate>
bool eventually(Predicate predicate, std::chrono::milliseconds timeout = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (predicate()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return predicate();
}

TEST(RetentionTest, TrimDeletesWholeCommittedSegmentsAndKeepsWhatALiveFollowerNeeds) {
  LocalCluster cluster(small_segments());
  cluster.start_all();
  const int leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0) << cluster.log_tail(1);
  auto client = cluster.client();
  const std::uint64_t last = append_entries(*client, 200, "a");
  ASSERT_GE(last, 200U);
  for (int id = 1; id <= 3; ++id) ASSERT_TRUE(cluster.wait_for_commit(id, last));

  // Trim every node below 150. A trim answers before its deletion has run (it follows over the
  // node's next loop rounds, docs/design.md "Known limits"): asked again until it has ended, then
  // its answer checked.
  for (int id = 1; id <= 3; ++id) {
    ASSERT_GT(trim_until_settled(cluster, *client, id, 150, 1, 10s), 0U) << "node " << id;
    auto trimmed = client->trim(cluster.address(id), 150);
    ASSERT_TRUE(trimmed.ok()) << trimmed.status().message();
    EXPECT_GT(trimmed->first_index, 1U) << "node " << id;
    EXPECT_LE(trimmed->first_index, 150U) << "node " << id;  // whole segments only
    // Status is published after the node's loop round that ran the trim.
    EXPECT_TRUE(eventually([&] {
      auto status = cluster.status(id);
      return status.has_value() && status->first_index == trimmed->first_index;
    })) << "node "
        << id;
    // Below the first retained index: OUT_OF_RANGE; from it on, the entries are intact.
    auto only_this = cluster.client({}, {id});
    auto below = only_this->read(trimmed->first_index - 1, 10, 1 << 20, false);
    ASSERT_FALSE(below.ok()) << "node " << id;
    EXPECT_EQ(below.status().code(), client::StatusCode::kOutOfRange) << below.status().message();
    // Gone for good, not "not yet": the reason says which, and where the log now starts.
    ASSERT_TRUE(below.status().details().has_value()) << "node " << id;
    EXPECT_EQ(below.status().details()->reason, client::reason::kIndexTrimmed) << "node " << id;
    EXPECT_EQ(below.status().details()->first_index, trimmed->first_index) << "node " << id;
    auto from_first = only_this->read(trimmed->first_index, 10, 1 << 20, false);
    ASSERT_TRUE(from_first.ok()) << from_first.status().message();
    ASSERT_FALSE(from_first->entries.empty());
    EXPECT_EQ(from_first->entries.front().index, trimmed->first_index);
  }
  const auto leader_status = cluster.status(leader);
  ASSERT_TRUE(leader_status.has_value());
  auto entries = cluster.read_all(leader);
  ASSERT_FALSE(entries.empty());
  EXPECT_EQ(entries.front().index, leader_status->first_index);
  EXPECT_EQ(entries.back().index, last);

  // A follower goes down; the leader must keep what it needs, even when asked to trim everything.
  const int follower = leader == 1 ? 2 : 1;
  const std::uint64_t follower_has = cluster.status(follower)->last_index;
  cluster.kill(follower);
  const std::uint64_t later = append_entries(*client, 150, "b");
  auto on_leader = client->trim(cluster.address(leader), later + 1);
  ASSERT_TRUE(on_leader.ok()) << on_leader.status().message();
  EXPECT_LE(on_leader->limit, follower_has + 1);
  EXPECT_LE(on_leader->first_index, follower_has + 1);
  cluster.start(follower);
  ASSERT_TRUE(cluster.wait_for_commit(follower, later, 20s)) << cluster.log_tail(follower);
  const auto follower_entries = cluster.read_all(follower);
  ASSERT_FALSE(follower_entries.empty());
  EXPECT_EQ(follower_entries.back().index, later);
}

// The leader's retention hold travels to its followers (src/replica/retention_hold.h): a follower
// asked to trim keeps what a stranded node (stopped, within the grace period) still needs, so when
// it becomes leader itself it catches that node up by replication, without a snapshot. Before the
// hold, the follower trimmed by its own commit index and the new leader had to send one.
TEST(RetentionTest, AFollowerKeepsWhatTheLeaderHoldsAndCatchesAStrandedNodeUpAfterALeaderChange) {
  LocalCluster cluster(small_segments());
  cluster.start_all();
  const int leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0) << cluster.log_tail(1);
  const int stranded = leader == 1 ? 2 : 1;
  const int keeper = 6 - leader - stranded;
  auto client = cluster.client();
  const std::uint64_t before = append_entries(*client, 20, "a");
  for (int id = 1; id <= 3; ++id) ASSERT_TRUE(cluster.wait_for_commit(id, before));
  const std::uint64_t stranded_has = cluster.status(stranded)->last_index;
  cluster.kill(stranded);
  const std::uint64_t later = append_entries(*client, 200, "b");  // about 7 segments
  ASSERT_TRUE(cluster.wait_for_commit(keeper, later));
  // A heartbeat after the last append carries the leader's hold to the keeper.
  std::this_thread::sleep_for(500ms);

  auto on_keeper = client->trim(cluster.address(keeper), later + 1);
  ASSERT_TRUE(on_keeper.ok()) << on_keeper.status().message();
  EXPECT_LE(on_keeper->limit, stranded_has + 1) << "the leader's hold did not reach the keeper";
  EXPECT_LE(on_keeper->first_index, stranded_has + 1);
  auto on_leader = client->trim(cluster.address(leader), later + 1);
  ASSERT_TRUE(on_leader.ok()) << on_leader.status().message();
  EXPECT_LE(on_leader->first_index, stranded_has + 1);

  // The leader goes; the keeper (the only node with the whole log) wins once the stranded node is
  // back, and catches it up from its own log.
  cluster.kill(leader);
  cluster.start(stranded);
  ASSERT_TRUE(eventually(
      [&] {
        auto status = cluster.status(keeper);
        return status.has_value() && status->role == client::Role::kLeader;
      },
      30s))
      << cluster.log_tail(keeper);
  ASSERT_TRUE(cluster.wait_for_commit(stranded, later, 30s)) << cluster.log_tail(stranded);
  const auto new_leader = cluster.status(keeper);
  const auto caught_up = cluster.status(stranded);
  ASSERT_TRUE(new_leader.has_value() && caught_up.has_value());
  EXPECT_EQ(new_leader->snapshot_encodes, 0U) << "the new leader needed a snapshot";
  EXPECT_EQ(new_leader->snapshots_sent, 0U);
  EXPECT_EQ(caught_up->snapshots_received, 0U);
  const auto entries = cluster.read_all(stranded);
  ASSERT_FALSE(entries.empty());
  EXPECT_EQ(entries.front().index, 1U) << "replicated from where it stopped, not installed";
  EXPECT_GE(entries.back().index, later);  // and the new leader's own entry of its term
}

TEST(RetentionTest, SizePolicyRunsByItself) {
  LocalClusterOptions options = small_segments();
  options.extra_flags = {"--retention-max-bytes=400000", "--retention-check-interval-ms=100"};
  LocalCluster cluster(options);
  cluster.start_all();
  ASSERT_NE(cluster.wait_for_leader(), 0) << cluster.log_tail(1);
  auto client = cluster.client();
  const std::uint64_t last = append_entries(*client, 300, "s");  // ~600 KB of log
  for (int id = 1; id <= 3; ++id) {
    ASSERT_TRUE(cluster.wait_for_commit(id, last));
    EXPECT_TRUE(eventually([&] {
      auto status = cluster.status(id);
      return status.has_value() && status->first_index > 1;
    })) << "node "
        << id << " never applied the size limit\n"
        << cluster.log_tail(id);
  }
  auto entries = cluster.read_all(1);
  ASSERT_FALSE(entries.empty());
  EXPECT_EQ(entries.back().index, last);
}

TEST(RetentionTest, AgePolicyRunsByItself) {
  LocalClusterOptions options = small_segments();
  options.nodes = 1;
  options.extra_flags = {"--retention-max-age-s=2", "--retention-check-interval-ms=100"};
  LocalCluster cluster(options);
  // The first segment's file is created (and preallocated) when the node starts, and its
  // modification time, the age retention reads, need not move with writes through the mapping: it
  // may be as old as the start, so the clock runs from before it (under load, starting and electing
  // alone could take longer than the age limit).
  const auto started = std::chrono::steady_clock::now();
  cluster.start_all();
  ASSERT_NE(cluster.wait_for_leader(), 0) << cluster.log_tail(1);
  auto client = cluster.client();
  const std::uint64_t last = append_entries(*client, 120, "t");
  // Segments younger than the age limit stay (checked only when the start and the appends were
  // quick enough for the first segment to be surely younger than 2 s).
  auto status = cluster.status(1);
  ASSERT_TRUE(status.has_value());
  if (std::chrono::steady_clock::now() - started < 1500ms) {
    EXPECT_EQ(status->first_index, 1U);
  }
  EXPECT_TRUE(eventually([&] {
    auto now = cluster.status(1);
    return now.has_value() && now->first_index > 1;
  })) << cluster.log_tail(1);
  auto entries = cluster.read_all(1);
  ASSERT_FALSE(entries.empty());
  EXPECT_EQ(entries.back().index, last);  // the active segment always stays
}

TEST(RetentionTest, AFollowerSilentPastTheGraceCatchesUpFromTheLeadersSnapshot) {
  LocalClusterOptions options = small_segments();
  options.metrics = true;
  options.extra_flags = {"--retention-follower-grace-ms=500"};
  LocalCluster cluster(options);
  cluster.start_all();
  const int leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0) << cluster.log_tail(1);
  auto client = cluster.client();
  const int follower = leader == 1 ? 2 : 1;
  ASSERT_TRUE(cluster.wait_for_commit(follower, append_entries(*client, 10, "c")));
  cluster.kill(follower);
  std::this_thread::sleep_for(800ms);  // past the grace period
  // A consumer group's offset, committed while the follower is down: it reaches the follower in
  // the snapshot (its commit entry is trimmed below).
  const std::string ctl = std::string(RAFTLOGCTL_PATH) + " ";
  const CommandRun topic_append = run_command(
      ctl + "append --topic orders --value o --endpoints " + cluster.endpoints());
  ASSERT_EQ(topic_append.exit_code, 0) << topic_append.out;
  const CommandRun group_commit =
      run_command(ctl + "group commit --group billing --topic orders --offset 0 --endpoints " +
                  cluster.endpoints());
  ASSERT_EQ(group_commit.exit_code, 0) << group_commit.out;
  const std::uint64_t last = append_entries(*client, 150, "d");
  // A trim is also held at the consumer group table's persisted boundary, which trails the commit
  // index by up to one persist interval (200 ms): retried until that has caught up.
  auto trimmed = client->trim(cluster.address(leader), last + 1);
  ASSERT_TRUE(trimmed.ok()) << trimmed.status().message();
  for (int attempt = 0; attempt < 50 && trimmed.ok() && trimmed->first_index <= 20; ++attempt) {
    std::this_thread::sleep_for(100ms);
    trimmed = client->trim(cluster.address(leader), last + 1);
  }
  ASSERT_TRUE(trimmed.ok()) << trimmed.status().message();
  EXPECT_GT(trimmed->first_index, 20U)  // the silent follower no longer holds the log back
      << "trim limit " << trimmed->limit;
  ASSERT_TRUE(eventually([&] {
    auto status = cluster.status(leader);
    if (!status.has_value()) return false;
    for (const auto& peer : status->peers) {
      if (peer.id == static_cast<std::uint64_t>(follower)) return peer.behind_first_index;
    }
    return false;
  })) << run_command(ctl + "status --timeout-ms 2000 --endpoints " + cluster.endpoints()).out
      << cluster.log_tail(leader);
  const auto metrics = http_get(cluster.metrics_address(leader), "/metrics");
  ASSERT_TRUE(metrics.has_value());
  EXPECT_NE(metrics->find("raftlog_peer_behind_first_index{node_id=\"" + std::to_string(leader) +
                          "\",peer=\"" + std::to_string(follower) + "\"} 1"),
            std::string::npos);

  // Started again, the node catches up by itself: the leader sends its snapshot in place of the
  // trimmed entries, the node installs it and replication continues after it. No rebuild.
  cluster.start(follower);
  const std::uint64_t after = append_entries(*client, 5, "e");
  ASSERT_TRUE(cluster.wait_for_commit(follower, after, 20s)) << cluster.log_tail(follower);
  EXPECT_NE(cluster.log_tail(follower).find("installing the leader's snapshot"), std::string::npos)
      << cluster.log_tail(follower);
  EXPECT_NE(cluster.log_tail(leader).find("catches up from this leader's snapshot"),
            std::string::npos)
      << cluster.log_tail(leader);
  // The snapshot may stand for every entry the leader held (its point is where its topic table is
  // committed): the entries appended now reach the node by replication, after it.
  const std::uint64_t replicated = append_entries(*client, 5, "g");
  ASSERT_TRUE(cluster.wait_for_commit(follower, replicated, 20s)) << cluster.log_tail(follower);
  const auto caught_up = cluster.read_all(follower);
  const auto reference = cluster.read_all(leader);
  ASSERT_FALSE(caught_up.empty())
      << run_command(ctl + "status --timeout-ms 2000 --endpoints " + cluster.address(follower)).out
      << run_command(ctl + "read --timeout-ms 2000 --from " +
                     std::to_string(cluster.status(follower)->first_index) + " --endpoints " +
                     cluster.address(follower))
             .out
      << cluster.log_tail(follower);
  ASSERT_FALSE(reference.empty());
  EXPECT_GT(caught_up.front().index, 11U) << "the trimmed entries were replaced by the snapshot";
  EXPECT_LE(caught_up.front().index, after + 1);
  EXPECT_EQ(caught_up.back().index, replicated);
  std::map<std::uint64_t, std::string> by_index;
  for (const auto& entry : reference) by_index[entry.index] = entry.payload;
  for (const auto& entry : caught_up) {
    if (entry.index < reference.front().index) continue;
    const auto it = by_index.find(entry.index);
    ASSERT_NE(it, by_index.end()) << "index " << entry.index;
    EXPECT_EQ(it->second, entry.payload) << "index " << entry.index;
  }
  ASSERT_TRUE(eventually([&] {
    auto status = cluster.status(leader);
    if (!status.has_value()) return false;
    for (const auto& peer : status->peers) {
      if (peer.behind_first_index) return false;
    }
    return true;
  })) << cluster.log_tail(leader);
  // Caught up, the node serves: health SERVING, not stranded.
  ASSERT_TRUE(eventually([&] {
    return run_command(ctl + "health --timeout-ms 2000 --endpoints " + cluster.address(follower))
               .exit_code == 0;
  })) << cluster.log_tail(follower);
  EXPECT_EQ(cluster.status(follower)->stranded_below_index, 0U);
  // Its consumer group table is the leader's, not one with every offset unknown.
  ASSERT_TRUE(eventually([&] {
    return cluster.log_tail(follower, 20000).find("adopted the leader's") != std::string::npos;
  })) << cluster.log_tail(follower);
  EXPECT_EQ(cluster.log_tail(follower, 20000).find("every group offset is unknown"),
            std::string::npos)
      << cluster.log_tail(follower);
  // A restart keeps what the snapshot brought: the node opens and serves again.
  cluster.kill(follower);
  cluster.start(follower);
  const std::uint64_t after_restart = append_entries(*client, 3, "f");
  ASSERT_TRUE(cluster.wait_for_commit(follower, after_restart, 20s)) << cluster.log_tail(follower);
}

}  // namespace
}  // namespace raftlog::testing

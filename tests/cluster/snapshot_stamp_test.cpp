// Review of since4, H1, end to end over real raftlogd processes: a follower stranded behind a trim
// whose first retained entry is plain, appended after stamped entries that the trim removed, catches
// up from the leader's snapshot and answers time lookups (the Topics FindByTime RPC that
// `raftlogctl read --since` makes) as the leader does: the leader's first index for a time a
// trimmed entry reached, not the first stamped entry after the plain ones. Also after the
// follower restarts, and after its indexes are rebuilt from the installed SNAPSHOT alone. The
// running max stamp travels in the snapshot's head (framed version 6, src/replica/
// snapshot_frames.h; docs/design.md, "Time lookups after a trim").
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "client/topics.h"
#include "cluster_test_support.h"
#include "snapshot_cluster_support.h"
#include "testing/local_cluster.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;

LocalClusterOptions stamp_cluster() {
  LocalClusterOptions options;
  options.raftlogd_path = RAFTLOGD_PATH;
  options.nodes = 3;
  options.segment_size_bytes = 64 << 10;
  options.max_entry_size_bytes = 8 << 10;
  // A silent follower no longer holds retention back after half a second.
  options.extra_flags = {"--retention-follower-grace-ms=500"};
  return options;
}

// `count` entries of `topic` (stamped by the leader) in one append; the last index.
std::uint64_t append_stamped(client::Client& client, const std::string& topic, int count,
                             Acknowledged* acknowledged) {
  std::vector<std::string> payloads;
  std::vector<client::EntryAttributes> attributes;
  for (int i = 0; i < count; ++i) {
    payloads.push_back(topic + "-" + std::to_string(i));
    attributes.push_back(client::EntryAttributes{topic, {}});
  }
  auto result = client.append(payloads, attributes);
  EXPECT_TRUE(result.ok()) << result.status().message();
  if (!result.ok()) return 0;
  for (std::size_t i = 0; i < payloads.size(); ++i) {
    (*acknowledged)[result->first_index + i] = payloads[i];
  }
  return result->last_index;
}

// What node `id` alone answers to FindByTime(t) over the whole log: the index, 0 when nothing is
// found, nullopt when the call failed.
std::optional<std::uint64_t> find_on(LocalCluster& cluster, int id, std::uint64_t t) {
  client::Options options;
  options.endpoints = {cluster.address(id)};
  auto topics = client::Topics::create(options);
  if (!topics.ok()) return std::nullopt;
  auto found = topics.value()->find_by_time(t, "");
  EXPECT_TRUE(found.ok()) << "node " << id << ": " << found.status().message();
  if (!found.ok()) return std::nullopt;
  return found->found ? found->index : 0;
}

// Waits until node `id`'s derived indexes cover `last`; says where they and the commit index were
// when they did not.
bool indexed_through(LocalCluster& cluster, int id, std::uint64_t last) {
  std::optional<client::NodeStatus> status;
  const bool reached = poll_until(
      [&] {
        status = cluster.status(id);
        return status.has_value() && status->derived_indexed_through >= last;
      },
      60s, 100ms);
  if (!reached && status.has_value()) {
    ADD_FAILURE() << "node " << id << ": indexed through " << status->derived_indexed_through
                  << " of " << last << ", commit index " << status->commit_index << ", log ["
                  << status->first_index << ", " << status->last_index << "]";
  }
  return reached;
}

TEST(SnapshotStampCluster, AFollowerCaughtUpFromASnapshotAnswersTimeLookupsAsTheLeader) {
  LocalCluster cluster(stamp_cluster());
  Acknowledged acknowledged;
  StrandedFollower nodes = strand_a_follower(cluster, &acknowledged);
  ASSERT_NE(nodes.first_leader, 0);
  const int leader = nodes.first_leader;
  const int follower = nodes.follower;
  client::Client& client = *nodes.client;

  // "old" (stamped), then plain entries over several segments, then "new" in a later millisecond.
  const std::uint64_t last_old = append_stamped(client, "old", 4, &acknowledged);
  ASSERT_NE(last_old, 0u);
  const std::uint64_t last_plain = append_entries(client, 150, "plain", &acknowledged);
  ASSERT_NE(last_plain, 0u);
  std::this_thread::sleep_for(5ms);
  const std::uint64_t last_new = append_stamped(client, "new", 3, &acknowledged);
  ASSERT_NE(last_new, 0u);
  std::uint64_t old_stamp = 0;
  std::uint64_t new_stamp = 0;
  for (const client::Entry& entry : cluster.read_all(leader)) {
    if (entry.index == last_old) old_stamp = entry.timestamp_ms;
    if (entry.index == last_plain + 1) new_stamp = entry.timestamp_ms;
  }
  ASSERT_GT(old_stamp, 0u);
  ASSERT_GT(new_stamp, old_stamp);

  // The leader trims past "old": its log starts with a plain entry.
  const std::uint64_t first = trim_past(cluster, client, leader, last_plain, last_old + 1);
  ASSERT_GT(first, last_old);
  ASSERT_LE(first, last_plain) << "the first retained entry must be a plain one";

  cluster.start(follower);
  ASSERT_TRUE(cluster.wait_for_commit(follower, last_new, 60s)) << cluster.log_tail(follower);
  ASSERT_TRUE(indexed_through(cluster, leader, last_new)) << cluster.log_tail(leader);
  ASSERT_TRUE(indexed_through(cluster, follower, last_new)) << cluster.log_tail(follower);
  const auto status = cluster.status(follower);
  ASSERT_TRUE(status.has_value());
  ASSERT_GE(status->snapshots_received, 1u) << "it caught up from a snapshot";
  ASSERT_EQ(status->first_index, first) << "the snapshot at the leader's first index - 1";

  // For every time the follower answers as the leader does; a time a trimmed entry reached is
  // answered with the first (plain) entry, which follows it. Failed before: the follower answered
  // last_plain + 1 (the first stamped entry after the plain ones) for 0, 1 and old_stamp, so
  // `read --since` against it left out first..last_plain.
  const std::vector<std::uint64_t> times{0, 1, old_stamp, old_stamp + 1, new_stamp};
  const auto expect_as_leader = [&](const std::string& when) {
    for (const std::uint64_t t : times) {
      const std::optional<std::uint64_t> on_leader = find_on(cluster, leader, t);
      ASSERT_TRUE(on_leader.has_value()) << when;
      EXPECT_EQ(find_on(cluster, follower, t), on_leader) << when << ", time " << t;
      if (t <= old_stamp) {
        EXPECT_EQ(*on_leader, first) << when << ", time " << t;
      }
    }
  };
  expect_as_leader("after the catch-up");

  // After a restart (its indexes resume from their files), and after a restart with derived/ gone
  // (rebuilt from the log, seeded from the installed SNAPSHOT alone). A restarted follower counts
  // its own entries committed only once an append of the leader's term vouches for them (the
  // unvouched guard, docs/design.md): one plain append each time, which no lookup here finds.
  const auto restarted = [&](const std::string& tag) {
    cluster.start(follower);
    const std::uint64_t last = append_entries(client, 1, tag, &acknowledged);
    ASSERT_TRUE(cluster.wait_for_commit(follower, last, 60s)) << cluster.log_tail(follower);
    ASSERT_TRUE(indexed_through(cluster, leader, last)) << cluster.log_tail(leader);
    ASSERT_TRUE(indexed_through(cluster, follower, last)) << cluster.log_tail(follower);
  };
  cluster.kill(follower);
  ASSERT_NO_FATAL_FAILURE(restarted("restart"));
  expect_as_leader("after the follower's restart");
  cluster.kill(follower);
  std::filesystem::remove_all(cluster.data_dir(follower) + "/derived");
  ASSERT_NO_FATAL_FAILURE(restarted("rebuild"));
  expect_as_leader("after the follower's indexes were rebuilt");
  expect_holds_acknowledged(cluster, follower, acknowledged, first, 30s);
}

}  // namespace
}  // namespace raftlog::testing

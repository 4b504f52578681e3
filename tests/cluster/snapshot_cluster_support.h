// The set-up the real-process snapshot tests share (snapshot_catchup_test.cpp,
// snapshot_continuation_test.cpp): a follower stranded behind the leader's retention, trims that
// retry past the consumer group table's hold, the leader killed while the follower's
// SNAPSHOT.partial holds part of its snapshot, and the last check that every node holds every
// acknowledged entry.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <iostream>
#include <string>
#include <thread>

#include "cluster_test_support.h"
#include "server/snapshot_partial_file.h"
#include "testing/local_cluster.h"

namespace raftlog::testing {

// Trims `id`'s log below `before` once the consumer group table's retention hold (one persist
// interval behind what the node's indexes applied, so far behind while they index thousands of new
// topics) no longer holds it back, then until the trim has ended past `past`
// (trim_until_settled): a follower caught up before the trim's end would start below where the
// leader's log ends up starting.
inline std::uint64_t trim_past(LocalCluster& cluster, client::Client& client, int id,
                               std::uint64_t before, std::uint64_t past,
                               std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  using namespace std::chrono_literals;
  EXPECT_TRUE(poll_until(
      [&] {
        const auto status = cluster.status(id);
        return status.has_value() &&
               (status->groups_retention_hold == 0 || status->groups_retention_hold >= before);
      },
      std::max<std::chrono::milliseconds>(timeout, 120s), 100ms))
      << "node " << id << "'s consumer group table still holds its log below " << before;
  return trim_until_settled(cluster, client, id, before, past, timeout);
}

// A three-node cluster, started, whose node `follower` was stopped (kill -9) after it acknowledged
// five entries ("e"), and long enough ago (past a --retention-follower-grace-ms of 500) that its
// leader trims without it. `client`: one for the cluster, made once a leader was elected.
struct StrandedFollower {
  int first_leader = 0;  // 0: no leader was elected (a test failure)
  int follower = 0;
  int second = 0;  // the third node
  std::unique_ptr<client::Client> client;
};
inline StrandedFollower strand_a_follower(LocalCluster& cluster, Acknowledged* acknowledged) {
  StrandedFollower nodes;
  cluster.start_all();
  nodes.first_leader = cluster.wait_for_leader();
  EXPECT_NE(nodes.first_leader, 0) << cluster.log_tail(1);
  if (nodes.first_leader == 0) return nodes;
  nodes.follower = nodes.first_leader == 1 ? 2 : 1;
  nodes.second = 6 - nodes.first_leader - nodes.follower;
  nodes.client = cluster.client();
  EXPECT_TRUE(
      cluster.wait_for_commit(nodes.follower, append_entries(*nodes.client, 5, "e", acknowledged)));
  cluster.kill(nodes.follower);
  std::this_thread::sleep_for(std::chrono::milliseconds(800));  // past the follower grace
  return nodes;
}

// Kills `leader` (kill -9) as soon as `follower`'s SNAPSHOT.partial holds more than `min_bytes`
// (a local stat every millisecond: the file exists only while the partial is incomplete), within
// `timeout`. The file's size then, or 0 when it never got there (the kill tested nothing).
inline std::uintmax_t kill_leader_mid_transfer(LocalCluster& cluster, int follower, int leader,
                                               std::uintmax_t min_bytes,
                                               std::chrono::milliseconds timeout) {
  const std::string partial =
      cluster.data_dir(follower) + "/" + std::string(server::kSnapshotPartialFileName);
  std::uintmax_t partial_bytes = 0;
  poll_until(
      [&] {
        std::error_code error;
        const std::uintmax_t size = std::filesystem::file_size(partial, error);
        if (error || size <= min_bytes) return false;
        cluster.kill(leader);
        partial_bytes = size;
        return true;
      },
      timeout, std::chrono::milliseconds(1));
  std::cout << "killed leader " << leader << " with the follower's SNAPSHOT.partial "
            << partial_bytes << " bytes long" << std::endl;
  return partial_bytes;
}

// Whether node `id` reports itself leader within `timeout`.
inline bool wait_until_leading(LocalCluster& cluster, int id,
                               std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  return poll_until(
      [&] {
        auto status = cluster.status(id);
        return status.has_value() && status->role == client::Role::kLeader;
      },
      timeout);
}

// Restarts the killed `leader`, appends `appends` entries ("h") through whoever leads, and checks
// that each of the three nodes commits them within `commit_timeout` and holds every acknowledged
// entry from `first` on.
struct ConvergeTimeouts {
  std::chrono::milliseconds commit;
  std::chrono::milliseconds holds;
};
inline void expect_all_converge(LocalCluster& cluster, int leader, Acknowledged& acknowledged,
                                std::uint64_t first, int appends, ConvergeTimeouts timeouts) {
  cluster.start(leader);
  const std::uint64_t final_index = append_entries(*cluster.client(), appends, "h", &acknowledged);
  for (int id = 1; id <= 3; ++id) {
    ASSERT_TRUE(cluster.wait_for_commit(id, final_index, timeouts.commit)) << cluster.log_tail(id);
    expect_holds_acknowledged(cluster, id, acknowledged, first, timeouts.holds);
  }
}

}  // namespace raftlog::testing

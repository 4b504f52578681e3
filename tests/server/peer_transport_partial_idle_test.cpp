// A partial snapshot a restart restored from SNAPSHOT.partial idles (snapshot_partial_idle_timeout,
// 30 s in raftlogd) only from the first message of a leader, not from the moment the transport was
// built: a follower whose start-up takes long (a large log's recovery, its indexes' rebuild) must
// still hold the partial when its leader's retry can resume it.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "node/temp_dir.h"
#include "peer_transport_support.h"
#include "server/snapshot_chunks.h"
#include "server/snapshot_partial_file.h"
#include "snapshot_chunk_support.h"

namespace raftlog::server {
namespace {

using namespace raftlog::server::peer_testing;  // peer_transport_support.h
using snapshot_testing::chunks_of;
using snapshot_testing::snapshot_data;
using snapshot_testing::snapshot_message;

constexpr std::chrono::milliseconds kIdleTimeout{300};

// Writes what an earlier run of node 2 kept: the first `chunks` chunks of `message` from node 1.
void keep_partial_file(const std::string& path, const raft::Message& message, std::size_t chunks) {
  SnapshotReassembler reassembler;
  SnapshotPartialFile file(path, SnapshotPartialExpectations{"test-cluster", 2});
  std::vector<SnapshotChunk> all = chunks_of(message);
  ASSERT_GT(all.size(), chunks);
  std::string problem;
  for (std::size_t i = 0; i < chunks; ++i) {
    EXPECT_FALSE(reassembler.add(all[i], std::chrono::steady_clock::now(), &problem).has_value());
    ASSERT_EQ(problem, "");
    ASSERT_EQ(file.follow(reassembler, message.from), "");
  }
}

TEST(PeerTransportPartialIdle, ARestoredPartialIdlesFromTheFirstLeaderMessageNotFromTheStart) {
  testing::TempDir data_dir;
  const std::string partial_path = data_dir.path() + "/SNAPSHOT.partial";
  const raft::Message snapshot =
      snapshot_message(1, 4, 900, snapshot_data(5 * kSnapshotChunkBytes, 3));
  ASSERT_NO_FATAL_FAILURE(keep_partial_file(partial_path, snapshot, 3));

  const auto addresses = pick_addresses({1, 2});
  PeerTransportOptions options = test_options(2, addresses);
  options.snapshot_partial_path = partial_path;
  options.snapshot_partial_idle_timeout = kIdleTimeout;
  TestNode follower(options, port_of(addresses.at(2)));
  ASSERT_EQ(follower.transport().snapshot_receive_status().counters.partials_restored, 1U);

  // No leader is heard for three idle timeouts (the node is still starting, or no leader is up):
  // the partial stays, and so does its receipt.
  std::this_thread::sleep_for(3 * kIdleTimeout);
  SnapshotReceiveStatus waiting = follower.transport().snapshot_receive_status();
  ASSERT_EQ(waiting.partials.size(), 1U) << "the restored partial idled out before any leader";
  EXPECT_EQ(waiting.partials[0].received_bytes, 3 * kSnapshotChunkBytes);
  EXPECT_EQ(waiting.counters.partials_expired, 0U);

  // A leader's heartbeat starts the clock: without a chunk the partial now idles out.
  TestNode leader(test_options(1, addresses), port_of(addresses.at(1)));
  // Taken before the send: the follower's clock starts when the heartbeat arrives, later, so the
  // expiry is at least kIdleTimeout after this (a time taken after the arrival could be up to a
  // poll late and make the bound below fail at random).
  const auto sent = std::chrono::steady_clock::now();
  ASSERT_TRUE(leader.transport().send(heartbeat(1, 2, 1)));
  ASSERT_TRUE(eventually([&] { return follower.received_count() == 1; }, 10s));
  ASSERT_TRUE(eventually(
      [&] {
        const SnapshotReceiveStatus status = follower.transport().snapshot_receive_status();
        return status.partials.empty() && status.counters.partials_expired == 1;
      },
      10s));
  EXPECT_GE(std::chrono::steady_clock::now() - sent, kIdleTimeout);
}

}  // namespace
}  // namespace raftlog::server

// PeerTransport with snapshots larger than one message: the sender's append lane cuts them into
// chunks within its window, the receiver reassembles them across the real gRPC stream and hands
// its node one whole message, and heartbeats on the control lane keep flowing meanwhile.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "peer_transport_support.h"
#include "server/snapshot_chunks.h"
#include "util/prng.h"

namespace raftlog::server {
namespace {

using namespace raftlog::server::peer_testing;  // peer_transport_support.h

raft::Message large_snapshot(raft::NodeId from, raft::NodeId to, std::size_t bytes) {
  raft::Message message;
  message.type = raft::MessageType::kSnapshot;
  message.from = from;
  message.to = to;
  message.term = 3;
  message.commit = 500;
  raft::Snapshot& snapshot = message.snapshot.emplace();
  snapshot.index = 500;
  snapshot.term = 2;
  snapshot.conf.voters = {1, 2};
  std::string data(bytes, '\0');
  util::SplitMix64Prng prng(bytes);
  for (char& c : data) c = static_cast<char>(prng.below(256));
  snapshot.data = std::move(data);
  return message;
}

TEST(PeerTransportSnapshot, ALargeSnapshotArrivesWholeWhileHeartbeatsKeepFlowing) {
  const auto addresses = pick_addresses({1, 2});
  TestNode sender(test_options(1, addresses), port_of(addresses.at(1)));
  TestNode receiver(test_options(2, addresses), port_of(addresses.at(2)));
  const raft::Message snapshot = large_snapshot(1, 2, 20 * kSnapshotChunkBytes + 333);
  ASSERT_TRUE(sender.transport().send(snapshot));
  constexpr raft::Index kHeartbeats = 50;
  for (raft::Index n = 1; n <= kHeartbeats; ++n) {
    ASSERT_TRUE(sender.transport().send(heartbeat(1, 2, n)));
  }
  ASSERT_TRUE(eventually([&] { return receiver.received_count() == kHeartbeats + 1; }, 20s))
      << "received " << receiver.received_count() << "; " << describe(sender.stats_for(2));
  int snapshots = 0;
  for (const raft::Message& message : receiver.received()) {
    if (message.type != raft::MessageType::kSnapshot) continue;
    ++snapshots;
    EXPECT_EQ(message, snapshot);  // every field, the data byte for byte
  }
  EXPECT_EQ(snapshots, 1);
  const PeerStats stats = sender.stats_for(2);
  ASSERT_TRUE(stats.snapshot.has_value());
  EXPECT_EQ(stats.snapshot->state, SnapshotSendProgress::State::kSent);
  EXPECT_EQ(stats.snapshot->sent_bytes, snapshot.snapshot->data.size());
  EXPECT_EQ(stats.snapshots_sent, 1U);
  EXPECT_EQ(stats.append.dropped_oversize, 0U);
  const SnapshotReceiveStatus received = receiver.transport().snapshot_receive_status();
  EXPECT_TRUE(received.partials.empty());
  EXPECT_EQ(received.counters.snapshots_delivered, 1U);
  EXPECT_EQ(received.counters.chunks_received, 21U);
  EXPECT_EQ(received.counters.chunks_refused, 0U);
  ASSERT_TRUE(received.last_delivered.has_value());
  EXPECT_EQ(received.last_delivered->index, 500U);
}

TEST(PeerTransportSnapshot, ANewerSnapshotForTheSamePeerReplacesTheOneBeingSent) {
  const auto addresses = pick_addresses({1, 2});
  TestNode sender(test_options(1, addresses), port_of(addresses.at(1)));
  TestNode receiver(test_options(2, addresses), port_of(addresses.at(2)));
  raft::Message older = large_snapshot(1, 2, 30 * kSnapshotChunkBytes);
  raft::Message newer = large_snapshot(1, 2, 3 * kSnapshotChunkBytes + 1);
  newer.term = 4;
  newer.snapshot->index = 650;
  ASSERT_TRUE(sender.transport().send(older));
  ASSERT_TRUE(sender.transport().send(newer));
  ASSERT_TRUE(eventually(
      [&] {
        return receiver.transport().snapshot_receive_status().counters.snapshots_delivered >= 1;
      },
      20s));
  std::this_thread::sleep_for(200ms);
  // Whatever part of the older one left before it was replaced, only the newer one is delivered.
  const std::vector<raft::Message> received = receiver.received();
  ASSERT_EQ(received.size(), 1U);
  EXPECT_EQ(received[0], newer);
  EXPECT_EQ(sender.stats_for(2).snapshots_abandoned, 1U);
}

}  // namespace
}  // namespace raftlog::server

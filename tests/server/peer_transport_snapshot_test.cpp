// PeerTransport with snapshots larger than one message: the sender's append lane cuts them into
// chunks within its window, the receiver reassembles them across the real gRPC stream and hands
// its node one whole message, and heartbeats on the control lane keep flowing meanwhile.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "node/temp_dir.h"
#include "peer_transport_support.h"
#include "server/message_codec.h"
#include "server/snapshot_chunks.h"
#include "util/crc32c.h"
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

// Review L3 of the format: a node whose own term passed the sender's (it campaigned, or answered
// a higher term) refuses the sender's chunks as stale even before any leader of the higher term
// was heard: its core would ignore the snapshot anyway.
TEST(PeerTransportSnapshot, ChunksBelowTheReceiversOwnTermAreRefusedAsStale) {
  const auto addresses = pick_addresses({1, 2});
  TestNode sender(test_options(1, addresses), port_of(addresses.at(1)));
  TestNode receiver(test_options(2, addresses), port_of(addresses.at(2)));
  raft::Message vote;
  vote.type = raft::MessageType::kVote;
  vote.from = 2;
  vote.to = 1;
  vote.term = 9;  // above the snapshot's message term (3)
  ASSERT_TRUE(receiver.transport().send(vote));
  raft::Message pre_vote = vote;
  pre_vote.type = raft::MessageType::kPreVote;
  pre_vote.term = 50;  // a pre-vote names a term it did not take: not this node's term
  ASSERT_TRUE(receiver.transport().send(pre_vote));
  const raft::Message snapshot = large_snapshot(1, 2, 4 * kSnapshotChunkBytes + 7);
  ASSERT_TRUE(sender.transport().send(snapshot));
  ASSERT_TRUE(eventually(
      [&] {
        return receiver.transport().snapshot_receive_status().counters.chunks_received >= 5;
      },
      20s));
  const SnapshotReceiveStatus received = receiver.transport().snapshot_receive_status();
  EXPECT_EQ(received.counters.chunks_refused, 5U);
  EXPECT_EQ(received.counters.snapshots_delivered, 0U);
  EXPECT_TRUE(received.partials.empty());
  // A message at its own term (9) is not stale: a whole snapshot of term 9 gets through.
  raft::Message current = large_snapshot(1, 2, 4 * kSnapshotChunkBytes + 7);
  current.term = 9;
  ASSERT_TRUE(sender.transport().send(current));
  ASSERT_TRUE(eventually(
      [&] {
        return receiver.transport().snapshot_receive_status().counters.snapshots_delivered == 1;
      },
      20s))
      << receiver.transport().snapshot_receive_status().counters.chunks_refused;
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

// Node 2 holds the first three chunks of `snapshot` from node 1: an earlier send lost its fourth
// chunk, and the fifth arrived after the gap (refused; the partial stays).
void seed_partial_with_a_gap(TestNode& receiver, const std::string& address,
                             const raft::Message& snapshot) {
  ASSERT_TRUE(raw_batch_stream(address, {chunk_batch(snapshot, {0, 1, 2, 4})}).ok());
  ASSERT_TRUE(eventually(
      [&] {
        const SnapshotReceiveStatus status = receiver.transport().snapshot_receive_status();
        return status.counters.chunks_refused == 1 && status.partials.size() == 1;
      },
      10s));
  EXPECT_EQ(receiver.transport().snapshot_receive_status().partials[0].received_bytes,
            3 * kSnapshotChunkBytes);
}

// The follower's (node 2's) first answer to the leader (node 1): it carries the follower's receipt
// of the partial it keeps, which the leader then holds.
void answer_the_leader(TestNode& receiver, TestNode& sender) {
  ASSERT_TRUE(receiver.transport().send(heartbeat(2, 1, 1)));
  ASSERT_TRUE(eventually([&] { return sender.received_count() == 1; }, 10s));
}

// The leader (re)sends `snapshot`: the follower receives it whole, every field and the data byte
// for byte, as its first message.
void resend_and_expect_it_whole(TestNode& sender, TestNode& receiver,
                                const raft::Message& snapshot) {
  ASSERT_TRUE(sender.transport().send(snapshot));
  ASSERT_TRUE(eventually([&] { return receiver.received_count() == 1; }, 20s))
      << describe(sender.stats_for(2));
  EXPECT_EQ(receiver.received()[0], snapshot);
}

// A leader (node 1) and a follower (node 2) holding the first three chunks of a ten-chunk snapshot
// from it (seed_partial_with_a_gap), which has answered the leader once since.
struct FollowerHoldingAPartial {
  // Fatal failures return from here: call it inside ASSERT_NO_FATAL_FAILURE.
  void seed_partial_and_answer() {
    ASSERT_NO_FATAL_FAILURE(seed_partial_with_a_gap(receiver, addresses.at(2), snapshot));
    ASSERT_NO_FATAL_FAILURE(answer_the_leader(receiver, sender));
  }

  const std::map<raft::NodeId, std::string> addresses = pick_addresses({1, 2});
  TestNode sender{test_options(1, addresses), port_of(addresses.at(1))};
  TestNode receiver{test_options(2, addresses), port_of(addresses.at(2))};
  const raft::Message snapshot = large_snapshot(1, 2, 10 * kSnapshotChunkBytes + 5);
  const std::uint64_t total = snapshot.snapshot->data.size();
};

// A chunk lost mid-transfer: the follower's next message to the leader carries its receipt, and
// the leader's retry of the same data sends only what the follower lacks.
TEST(PeerTransportSnapshot, ARetryResumesAtTheReceiptTheFollowersMessagesCarry) {
  FollowerHoldingAPartial nodes;
  ASSERT_NO_FATAL_FAILURE(nodes.seed_partial_and_answer());
  auto& [addresses, sender, receiver, snapshot, total] = nodes;
  ASSERT_NO_FATAL_FAILURE(resend_and_expect_it_whole(sender, receiver, snapshot));
  const PeerStats stats = sender.stats_for(2);
  EXPECT_EQ(stats.snapshots_resumed, 1U);
  EXPECT_EQ(stats.snapshot_bytes_skipped, 3 * kSnapshotChunkBytes);
  ASSERT_TRUE(stats.snapshot.has_value());
  EXPECT_EQ(stats.snapshot->skipped_bytes, 3 * kSnapshotChunkBytes);
  EXPECT_EQ(stats.snapshot->sent_bytes, total - 3 * kSnapshotChunkBytes);
  // What crossed the wire in all: 4 chunks before, the rest after: far below twice the data.
  EXPECT_LT(4 * kSnapshotChunkBytes + stats.snapshot->sent_bytes, total * 3 / 2);
  EXPECT_EQ(receiver.transport().snapshot_receive_status().counters.chunks_duplicate, 0U);
}

// A follower restart mid-transfer (kill -9, upgrade): its transport kept the partial in its data
// directory (SNAPSHOT.partial); the transport built anew there restores it, its first message
// carries the restored receipt, and the leader's retry sends only the rest.
TEST(PeerTransportSnapshot, AReceiverRebuiltOnItsDataDirectoryResumesAtTheRestoredReceipt) {
  testing::TempDir data_dir;
  const std::string partial_path = data_dir.path() + "/SNAPSHOT.partial";
  const auto addresses = pick_addresses({1, 2});
  PeerTransportOptions receiver_options = test_options(2, addresses);
  receiver_options.snapshot_partial_path = partial_path;
  TestNode sender(test_options(1, addresses), port_of(addresses.at(1)));
  const raft::Message snapshot = large_snapshot(1, 2, 10 * kSnapshotChunkBytes + 5);
  const std::uint64_t total = snapshot.snapshot->data.size();
  const std::uint64_t held = 5 * kSnapshotChunkBytes;
  {
    TestNode receiver(receiver_options, port_of(addresses.at(2)));
    // Half the transfer arrived when the follower went down.
    ASSERT_TRUE(raw_batch_stream(addresses.at(2), {chunk_batch(snapshot, {0, 1, 2, 3, 4})}).ok());
    ASSERT_TRUE(eventually(
        [&] {
          const SnapshotReceiveStatus status = receiver.transport().snapshot_receive_status();
          return status.partials.size() == 1 && status.partials[0].received_bytes == held;
        },
        10s));
  }
  ASSERT_TRUE(std::filesystem::exists(partial_path));
  TestNode receiver(receiver_options, port_of(addresses.at(2)));
  const SnapshotReceiveStatus restored = receiver.transport().snapshot_receive_status();
  EXPECT_EQ(restored.counters.partials_restored, 1U);
  EXPECT_EQ(restored.counters.bytes_restored, held);
  ASSERT_EQ(restored.partials.size(), 1U);
  EXPECT_EQ(restored.partials[0].from, 1U);
  EXPECT_EQ(restored.partials[0].received_bytes, held);

  ASSERT_NO_FATAL_FAILURE(answer_the_leader(receiver, sender));
  ASSERT_NO_FATAL_FAILURE(resend_and_expect_it_whole(sender, receiver, snapshot));
  const PeerStats stats = sender.stats_for(2);
  EXPECT_EQ(stats.snapshots_resumed, 1U);
  EXPECT_EQ(stats.snapshot_bytes_skipped, held);
  ASSERT_TRUE(stats.snapshot.has_value());
  EXPECT_EQ(stats.snapshot->sent_bytes, total - held);
  // What crossed the wire in all: half before the restart, the rest after: the data once.
  EXPECT_EQ(held + stats.snapshot->sent_bytes, total);
  const SnapshotReceiveStatus after = receiver.transport().snapshot_receive_status();
  EXPECT_EQ(after.counters.chunks_duplicate, 0U);
  EXPECT_EQ(after.counters.chunks_refused, 0U);
  EXPECT_TRUE(after.partials.empty());
  EXPECT_FALSE(std::filesystem::exists(partial_path)) << "the completed partial's file stayed";
}

// Mixed versions: a follower of a build without receipts never acknowledges, and its latest
// message (without a receipt) clears an older one, so the leader sends it everything from 0 (which
// an older follower needs: it reassembles only from offset 0).
TEST(PeerTransportSnapshot, WithoutAReceiptTheLeaderSendsFromOffsetZero) {
  FollowerHoldingAPartial nodes;
  ASSERT_NO_FATAL_FAILURE(nodes.seed_partial_and_answer());  // its answer with a receipt
  auto& [addresses, sender, receiver, snapshot, total] = nodes;
  pb::RaftMessage old_build_answer;
  encode_message(heartbeat(2, 1, 2), "test-cluster", &old_build_answer);
  ASSERT_TRUE(raw_stream(addresses.at(1), {old_build_answer}).ok());
  ASSERT_TRUE(eventually([&] { return sender.received_count() == 2; }, 10s));
  ASSERT_NO_FATAL_FAILURE(resend_and_expect_it_whole(sender, receiver, snapshot));
  const PeerStats stats = sender.stats_for(2);
  EXPECT_EQ(stats.snapshots_resumed, 0U);
  ASSERT_TRUE(stats.snapshot.has_value());
  EXPECT_EQ(stats.snapshot->sent_bytes, total);
  // This (new) receiver skipped the three chunks it held instead of starting over.
  EXPECT_EQ(receiver.transport().snapshot_receive_status().counters.chunks_duplicate, 3U);
}

}  // namespace
}  // namespace raftlog::server

namespace raftlog::server {
namespace {

// Review drills5 M4: the follower held a partial of snapshot 500 when its commit index passed 500
// by ordinary replication (a new leader that still held the entries). The partial, its receipt and
// its SNAPSHOT.partial go at once, not after the 30 s idle timeout: status stops saying RECEIVING.
TEST(PeerTransportSnapshot, APartialAtOrBelowTheCommitIndexIsDroppedAtOnceWithItsFile) {
  testing::TempDir data_dir;
  const std::string partial_path = data_dir.path() + "/SNAPSHOT.partial";
  const auto addresses = pick_addresses({1, 2});
  PeerTransportOptions receiver_options = test_options(2, addresses);
  receiver_options.snapshot_partial_path = partial_path;
  TestNode receiver(receiver_options, port_of(addresses.at(2)));
  const raft::Message snapshot = large_snapshot(1, 2, 10 * kSnapshotChunkBytes + 5);
  ASSERT_TRUE(raw_batch_stream(addresses.at(2), {chunk_batch(snapshot, {0, 1, 2})}).ok());
  ASSERT_TRUE(eventually(
      [&] { return receiver.transport().snapshot_receive_status().partials.size() == 1; }, 10s));
  ASSERT_TRUE(std::filesystem::exists(partial_path));
  receiver.transport().drop_snapshot_partials_through(499);  // below the point: still of use
  EXPECT_EQ(receiver.transport().snapshot_receive_status().partials.size(), 1U);
  EXPECT_TRUE(std::filesystem::exists(partial_path));
  receiver.transport().drop_snapshot_partials_through(500);
  EXPECT_TRUE(receiver.transport().snapshot_receive_status().partials.empty());
  EXPECT_FALSE(std::filesystem::exists(partial_path));
}

}  // namespace
}  // namespace raftlog::server

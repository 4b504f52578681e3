// PeerTransport outbound bounds: per-lane message and byte bounds on the queue (also while the peer
// is down), lanes that keep heartbeats and votes moving past a full or slow append lane, and the
// message size limit for single messages and for batches.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "peer_transport_support.h"

namespace raftlog::server {
namespace {

using namespace raftlog::server::peer_testing;  // peer_transport_support.h

TEST(PeerTransport, FullQueueDropsAndCountsPerLane) {
  const auto addresses = pick_addresses({1, 2});  // node 2 never starts
  PeerTransportOptions options = test_options(1, addresses);
  options.max_queued_messages = 8;
  options.max_queued_control_messages = 5;
  options.max_message_age_ms = 60000;
  TestNode node1(options, port_of(addresses.at(1)));
  int accepted_appends = 0;
  int accepted_heartbeats = 0;
  for (raft::Index n = 1; n <= 100; ++n) {
    accepted_appends += node1.transport().send(empty_append(1, 2, n)) ? 1 : 0;
    accepted_heartbeats += node1.transport().send(heartbeat(1, 2, n)) ? 1 : 0;
  }
  EXPECT_EQ(accepted_appends, 8);
  EXPECT_EQ(accepted_heartbeats, 5);
  const PeerStats stats = node1.stats_for(2);
  EXPECT_EQ(stats.append.queued_messages, 8u);
  EXPECT_EQ(stats.append.dropped_queue_full, 92u);
  EXPECT_EQ(stats.control.queued_messages, 5u);
  EXPECT_EQ(stats.control.queued_bytes, 5u * 64u);
  EXPECT_EQ(stats.control.dropped_queue_full, 95u);
  EXPECT_EQ(stats.queued_messages, 13u);
  EXPECT_EQ(stats.dropped_queue_full, 187u);
  EXPECT_EQ(stats.sent_messages, 0u);
}

TEST(PeerTransport, AFullAppendLaneDoesNotStopHeartbeatsOrVotes) {
  const auto addresses = pick_addresses({1, 2});  // node 2 starts late
  PeerTransportOptions options = test_options(1, addresses);
  options.max_queued_messages = 4;
  options.max_message_age_ms = 60000;
  TestNode node1(options, port_of(addresses.at(1)));
  for (raft::Index n = 1; n <= 4; ++n) ASSERT_TRUE(node1.transport().send(empty_append(1, 2, n)));
  EXPECT_FALSE(node1.transport().send(empty_append(1, 2, 5)));  // the append lane is full
  // Before lanes, these shared the full queue and were dropped.
  EXPECT_TRUE(node1.transport().send(heartbeat(1, 2, 100)));
  raft::Message vote = heartbeat(1, 2, 101);
  vote.type = raft::MessageType::kVote;
  EXPECT_TRUE(node1.transport().send(vote));

  TestNode node2(test_options(2, addresses), port_of(addresses.at(2)));
  ASSERT_TRUE(eventually([&] { return node2.received_count() == 6; }, 5s))
      << node2.received_count();
  std::set<raft::Index> contexts;
  for (const raft::Message& message : node2.received()) contexts.insert(message.context);
  EXPECT_EQ(contexts, (std::set<raft::Index>{1, 2, 3, 4, 100, 101}));
}

TEST(PeerTransport, HeartbeatsOvertakeLargeAppendsTheReceiverIsStillTaking) {
  // Node 2 holds on to the first append (its handler blocks), so that stream stops reading and node
  // 1's large appends back up behind it, in gRPC's buffers and in node 1's queue. A heartbeat sent
  // after them must still arrive: on one stream it would wait until every append ahead of it was
  // taken.
  const auto addresses = pick_addresses({1, 2});
  std::mutex gate_mu;
  std::condition_variable gate_cv;
  bool gate_open = false;
  std::atomic<bool> first_append_held{false};
  auto hold_first_append = [&](const raft::Message& message) {
    if (message.type != raft::MessageType::kAppend || message.context != 1) return;
    first_append_held.store(true);
    std::unique_lock lock(gate_mu);
    gate_cv.wait_for(lock, 10s, [&] { return gate_open; });  // bounded even if the test fails early
  };
  auto open_gate = [&] {
    {
      std::lock_guard lock(gate_mu);
      gate_open = true;
    }
    gate_cv.notify_all();
  };
  TestNode node2(test_options(2, addresses), port_of(addresses.at(2)), hold_first_append);
  TestNode node1(test_options(1, addresses), port_of(addresses.at(1)));

  constexpr raft::Index kAppends = 6;
  for (raft::Index n = 1; n <= kAppends; ++n) {
    raft::Message append = empty_append(1, 2, n);
    append.index = n - 1;
    append.log_term = n == 1 ? 0 : 1;
    raft::Entry entry;
    entry.index = n;
    entry.term = 1;
    entry.payload =
        std::string(1u << 20, 'a');  // above the inline-encoding size: the encoder thread writes it
    append.entries.push_back(std::move(entry));
    ASSERT_TRUE(node1.transport().send(std::move(append)));
  }
  ASSERT_TRUE(eventually([&] { return first_append_held.load(); }, 5s));
  ASSERT_TRUE(node1.transport().send(heartbeat(1, 2, 1000)));
  const bool heartbeat_arrived = eventually(
      [&] {
        for (const raft::Message& message : node2.received()) {
          if (message.type == raft::MessageType::kHeartbeat && message.context == 1000) return true;
        }
        return false;
      },
      3s);
  const std::size_t appends_before_release = node2.received_count() - (heartbeat_arrived ? 1 : 0);
  open_gate();
  EXPECT_TRUE(heartbeat_arrived) << "the heartbeat waited behind the appends";
  EXPECT_EQ(appends_before_release, 0u)
      << "the first append is still held, and the others are behind it";
  ASSERT_TRUE(eventually([&] { return node2.received_count() == kAppends + 1; }, 10s))
      << node2.received_count();
  raft::Index previous = 0;
  for (const raft::Message& message : node2.received()) {
    if (message.type != raft::MessageType::kAppend) continue;
    EXPECT_EQ(message.context, previous + 1) << "appends out of order";
    previous = message.context;
    ASSERT_EQ(message.entries.size(), 1u);
    EXPECT_EQ(message.entries[0].payload.size(), 1u << 20);
  }
  EXPECT_TRUE(eventually([&] { return node1.stats_for(2).append.sent_messages == kAppends; }, 2s));
  EXPECT_EQ(node1.stats_for(2).control.sent_messages, 1u);
  EXPECT_TRUE(node1.stats_for(2).append.connected);
  EXPECT_TRUE(node1.stats_for(2).control.connected);
}

TEST(PeerTransport, QueueByteBoundDropsAndCounts) {
  const auto addresses = pick_addresses({1, 2});  // node 2 never starts
  PeerTransportOptions options = test_options(1, addresses);
  options.max_queued_bytes = 5000;  // each message below costs 64 + 1000 + 48 = 1112 bytes
  options.max_message_age_ms = 60000;
  TestNode node1(options, port_of(addresses.at(1)));
  int accepted = 0;
  for (raft::Index n = 1; n <= 10; ++n) {
    raft::Message message = heartbeat(1, 2, n);
    message.type = raft::MessageType::kAppend;
    raft::Entry entry;
    entry.index = 1;
    entry.term = 1;
    entry.payload = std::string(1000, 'x');
    message.entries.push_back(entry);
    accepted += node1.transport().send(std::move(message)) ? 1 : 0;
  }
  EXPECT_EQ(accepted, 4);
  EXPECT_EQ(node1.stats_for(2).dropped_queue_full, 6u);
  EXPECT_EQ(node1.stats_for(2).queued_bytes, 4u * 1112u);
}

TEST(PeerTransport, QueueBoundHoldsWhileThePeerIsDownAndReconnectsRetry) {
  const auto addresses = pick_addresses({1, 2});  // node 2 starts late
  PeerTransportOptions options = test_options(1, addresses);
  options.max_queued_control_messages = 8;  // heartbeats travel on the control lane
  options.max_message_age_ms = 60000;
  TestNode node1(options, port_of(addresses.at(1)));
  // Sends spread over several reconnect attempts: each attempt takes the first message out of the
  // queue to write it and puts it back when the call fails, and the bound must count it all along.
  std::uint64_t accepted = 0;
  std::uint64_t attempts = 0;
  for (raft::Index n = 1; n <= 200; ++n) {
    accepted += node1.transport().send(heartbeat(1, 2, n)) ? 1 : 0;
    const PeerStats stats = node1.stats_for(2);
    ASSERT_LE(stats.queued_messages, 8u);
    ASSERT_LE(stats.queued_bytes, 8u * 64u);  // a heartbeat costs 64 bytes of header, no entries
    attempts = stats.connect_failures;
    if (n % 20 == 0) std::this_thread::sleep_for(30ms);
  }
  EXPECT_EQ(accepted, 8u);
  EXPECT_GE(attempts, 2u) << "the test meant to span several reconnect attempts";
  PeerStats stats = node1.stats_for(2);
  EXPECT_EQ(stats.queued_messages, 8u);
  EXPECT_EQ(stats.dropped_queue_full, 192u);
  EXPECT_EQ(stats.sent_messages, 0u);

  // The peer comes up: the 8 queued messages arrive, first to last, exactly once.
  TestNode node2(test_options(2, addresses), port_of(addresses.at(2)));
  ASSERT_TRUE(eventually([&] { return node2.received_count() == 8; }, 5s));
  std::this_thread::sleep_for(50ms);
  const std::vector<raft::Message> received = node2.received();
  ASSERT_EQ(received.size(), 8u);
  for (std::size_t i = 0; i < received.size(); ++i) EXPECT_EQ(received[i].context, i + 1);
  EXPECT_TRUE(eventually([&] { return node1.stats_for(2).sent_messages == 8; }, 1s));
  stats = node1.stats_for(2);
  EXPECT_EQ(stats.queued_messages, 0u);
  EXPECT_EQ(stats.queued_bytes, 0u);
}

TEST(PeerTransport, UnknownRecipientDropped) {
  const auto addresses = pick_addresses({1, 2});
  TestNode node1(test_options(1, addresses), port_of(addresses.at(1)));
  EXPECT_FALSE(node1.transport().send(heartbeat(1, 9, 1)));
  EXPECT_EQ(node1.transport().dropped_unknown_peer(), 1u);
}

TEST(PeerTransport, OversizeOutboundMessageDroppedAndCounted) {
  const auto addresses = pick_addresses({1, 2});
  PeerTransportOptions options1 = test_options(1, addresses);
  PeerTransportOptions options2 = test_options(2, addresses);
  options1.limits.max_message_bytes = 4096;
  // A long cluster id makes the encoded message larger than the queue's size estimate, so the
  // sender's exact check is the one that catches the second message below.
  options1.cluster_id = options2.cluster_id = std::string(200, 'c');
  TestNode node1(options1, port_of(addresses.at(1)));
  TestNode node2(options2, port_of(addresses.at(2)));

  auto append_with_payload = [](raft::Index n, std::size_t payload_bytes) {
    raft::Message message = heartbeat(1, 2, n);
    message.type = raft::MessageType::kAppend;
    raft::Entry entry;
    entry.index = 1;
    entry.term = 1;
    entry.payload = std::string(payload_bytes, 'y');
    message.entries.push_back(entry);
    return message;
  };
  EXPECT_FALSE(node1.transport().send(append_with_payload(1, 5000)));  // caught in send()
  // Passes send()'s payload check (4000 + 48 <= 4096) but encodes to more than 4096 bytes.
  EXPECT_TRUE(node1.transport().send(append_with_payload(2, 4000)));
  EXPECT_TRUE(node1.transport().send(append_with_payload(3, 100)));
  ASSERT_TRUE(eventually([&] { return node2.received_count() == 1; }, 3s));
  EXPECT_EQ(node2.received().at(0).context, 3u);
  // The sender updates its counters after the write returns, possibly after the receiver saw it.
  EXPECT_TRUE(eventually([&] { return node1.stats_for(2).sent_messages == 1; }, 1s));
  EXPECT_EQ(node1.stats_for(2).dropped_oversize, 2u);
}

TEST(PeerTransport, BatchesStayWithinTheMessageSizeLimit) {
  const auto addresses = pick_addresses({1, 2});
  PeerTransportOptions options1 = test_options(1, addresses);
  PeerTransportOptions options2 = test_options(2, addresses);
  // Each append below encodes to a little over 3 KiB: two fit in a batch of 8 KiB, three do not.
  // Without the sender's bound the first batch would hold all 40 (about 120 KiB), over the receiver's
  // gRPC limit (8 KiB + 64 KiB of headroom): that stream would fail again and again and deliver nothing.
  options1.limits.max_message_bytes = options2.limits.max_message_bytes = 8192;
  options1.max_message_age_ms = options2.max_message_age_ms = 60000;
  TestNode node1(options1, port_of(addresses.at(1)));
  // Queue everything before the peer exists, so the first batches are as large as they can be.
  constexpr raft::Index kMessages = 40;
  for (raft::Index n = 1; n <= kMessages; ++n) {
    raft::Message append = heartbeat(1, 2, n);
    append.type = raft::MessageType::kAppend;
    raft::Entry entry;
    entry.index = n;
    entry.term = 1;
    entry.payload = std::string(3000, 'p');
    append.index = n - 1;
    append.log_term = n == 1 ? 0 : 1;
    append.entries.push_back(entry);
    ASSERT_TRUE(node1.transport().send(std::move(append)));
  }
  TestNode node2(options2, port_of(addresses.at(2)));
  ASSERT_TRUE(eventually([&] { return node2.received_count() == kMessages; }, 5s))
      << node2.received_count();
  const std::vector<raft::Message> received = node2.received();
  for (std::size_t i = 0; i < received.size(); ++i) EXPECT_EQ(received[i].context, i + 1);
  EXPECT_TRUE(eventually([&] { return node1.stats_for(2).sent_messages == kMessages; }, 1s));
  EXPECT_EQ(node1.stats_for(2).dropped_oversize, 0u);
  EXPECT_EQ(node2.transport().inbound_stats().rejected_streams, 0u);
}

}  // namespace
}  // namespace raftlog::server

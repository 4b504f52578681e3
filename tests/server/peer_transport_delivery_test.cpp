// PeerTransport delivery: options are validated; messages arrive in order within each lane among
// three nodes and across a reconnect; a dead peer blocks nobody and its stale messages expire; stop
// is bounded and nothing is delivered after it.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "peer_transport_support.h"

namespace raftlog::server {
namespace {

using namespace raftlog::server::peer_testing;  // peer_transport_support.h

TEST(PeerTransport, ValidatesOptions) {
  PeerTransportOptions options = test_options(1, {{2, "127.0.0.1:1"}});
  EXPECT_EQ(validate_options(options), "");
  PeerTransportOptions bad = options;
  bad.cluster_id.clear();
  EXPECT_NE(validate_options(bad), "");
  bad = options;
  bad.peers[1] = "127.0.0.1:2";
  EXPECT_NE(validate_options(bad).find("own id"), std::string::npos);
  bad = options;
  bad.reconnect_backoff_min_ms = 500;
  bad.reconnect_backoff_max_ms = 100;
  EXPECT_NE(validate_options(bad), "");
  bad = options;
  bad.max_queued_messages = 0;
  EXPECT_NE(validate_options(bad), "");
  bad = options;
  bad.max_queued_control_messages = 0;
  EXPECT_NE(validate_options(bad).find("max_queued_control_messages"), std::string::npos);
  bad.max_queued_control_messages = 1024;
  bad.peer_secret = "too short";
  EXPECT_NE(validate_options(bad).find("peer_secret"), std::string::npos);
  bad.peer_secret = kTestSecret;
  EXPECT_EQ(validate_options(bad), "");
}

TEST(PeerTransport, ThreeNodesExchangeMessagesInOrderWithinEachLane) {
  const auto addresses = pick_addresses({1, 2, 3});
  std::map<raft::NodeId, std::unique_ptr<TestNode>> nodes;
  for (const auto& [id, address] : addresses) {
    nodes[id] = std::make_unique<TestNode>(test_options(id, addresses), port_of(address));
  }
  constexpr raft::Index kMessagesPerPair = 300;
  for (raft::Index n = 1; n <= kMessagesPerPair; ++n) {
    for (const auto& [from, node] : nodes) {
      for (const auto& [to, unused] : nodes) {
        if (from == to) continue;
        raft::Message message = heartbeat(from, to, n);
        if (n % 10 == 0) {  // some appends with entries, to carry payloads across as well
          message.type = raft::MessageType::kAppend;
          message.index = n;
          message.log_term = 1;
          raft::Entry entry;
          entry.index = n + 1;
          entry.term = 1;
          entry.client_id = from;
          entry.sequence = n;
          entry.payload = "entry " + std::to_string(n);
          message.entries.push_back(entry);
        }
        ASSERT_TRUE(node->transport().send(std::move(message)));
      }
    }
  }
  for (const auto& [id, node] : nodes) {
    TestNode* raw = node.get();
    ASSERT_TRUE(eventually([&] { return raw->received_count() == 2 * kMessagesPerPair; }, 5s))
        << "node " << id << " received " << raw->received_count();
  }
  for (const auto& [id, node] : nodes) {
    // Appends and heartbeats travel on different lanes: each lane keeps its own order.
    std::map<std::pair<raft::NodeId, bool>, raft::Index> last_seen;  // (from, append) -> context
    for (const raft::Message& message : node->received()) {
      EXPECT_EQ(message.to, id);
      const bool append = message.type == raft::MessageType::kAppend;
      raft::Index& last = last_seen[{message.from, append}];
      const raft::Index expected = append ? last + 10 : last + 1 + ((last + 1) % 10 == 0 ? 1 : 0);
      EXPECT_EQ(message.context, expected) << "out of order from node " << message.from;
      last = message.context;
      if (append) {
        ASSERT_EQ(message.entries.size(), 1u);
        EXPECT_EQ(message.entries[0].payload, "entry " + std::to_string(message.context));
      }
    }
    TestNode* raw = node.get();
    EXPECT_TRUE(eventually(
        [&] {
          for (const PeerStats& stats : raw->transport().peer_stats()) {
            if (stats.sent_messages != kMessagesPerPair) return false;
          }
          return true;
        },
        1s));
    for (const PeerStats& stats : node->transport().peer_stats()) {
      EXPECT_EQ(stats.sent_messages, kMessagesPerPair);
      EXPECT_EQ(stats.dropped_queue_full + stats.dropped_expired + stats.dropped_send_failed, 0u);
      EXPECT_TRUE(stats.connected);
      EXPECT_NE(stats.last_send_ok, std::chrono::steady_clock::time_point{});
    }
    EXPECT_EQ(node->transport().inbound_stats().received_messages, 2 * kMessagesPerPair);
  }
}

TEST(PeerTransport, DeadPeerDoesNotBlockOthersAndStaleMessagesExpireBeforeReconnect) {
  const auto addresses = pick_addresses({1, 2, 3});
  PeerTransportOptions options1 = test_options(1, addresses);
  options1.max_message_age_ms = 300;
  TestNode node1(options1, port_of(addresses.at(1)));
  TestNode node2(test_options(2, addresses), port_of(addresses.at(2)));
  // Node 3 is down: nothing listens on its port.

  const auto send_started = std::chrono::steady_clock::now();
  for (raft::Index n = 1; n <= 100; ++n) ASSERT_TRUE(node1.transport().send(heartbeat(1, 3, n)));
  for (raft::Index n = 1; n <= 100; ++n) ASSERT_TRUE(node1.transport().send(heartbeat(1, 2, n)));
  EXPECT_LT(std::chrono::steady_clock::now() - send_started, 200ms) << "send() blocked";
  ASSERT_TRUE(eventually([&] { return node2.received_count() == 100; }, 2s));
  EXPECT_FALSE(node1.stats_for(3).connected);
  EXPECT_EQ(node1.stats_for(3).sent_messages, 0u);
  ASSERT_TRUE(eventually([&] { return node1.stats_for(3).connect_failures > 0; }, 2s));
  EXPECT_NE(node1.stats_for(3).last_error, "");

  // Let the queued messages go stale, then bring node 3 up: only fresh messages reach it.
  std::this_thread::sleep_for(400ms);
  TestNode node3(test_options(3, addresses), port_of(addresses.at(3)));
  // Fresh messages, one every 20 ms until ten arrived: the reconnect can take longer than the 300 ms
  // age bound on a loaded machine, and then the first fresh ones expire as well.
  raft::Index next = 1001;
  auto last_send = std::chrono::steady_clock::now() - 1s;
  ASSERT_TRUE(eventually(
      [&] {
        if (node3.received_count() >= 10) return true;
        if (next <= 1250 && std::chrono::steady_clock::now() - last_send >= 20ms) {
          EXPECT_TRUE(node1.transport().send(heartbeat(1, 3, next++)));
          last_send = std::chrono::steady_clock::now();
        }
        return false;
      },
      5s))
      << node3.received_count() << " received; " << describe(node1.stats_for(3));
  std::this_thread::sleep_for(50ms);
  const std::vector<raft::Message> received = node3.received();
  raft::Index previous = 1000;  // no stale message (1..100) may arrive, and the fresh ones in order
  for (const raft::Message& message : received) {
    EXPECT_GT(message.context, previous);
    previous = message.context;
  }
  EXPECT_TRUE(
      eventually([&] { return node1.stats_for(3).sent_messages == node3.received_count(); }, 1s));
  const PeerStats stats = node1.stats_for(3);
  EXPECT_GE(stats.dropped_expired, 100u);
  EXPECT_EQ(stats.dropped_expired + stats.sent_messages + stats.queued_messages,
            100u + (next - 1001));
  EXPECT_TRUE(stats.connected);
}

TEST(PeerTransport, MessagesStayInOrderAcrossAReconnect) {
  const auto addresses = pick_addresses({1, 2});
  PeerTransportOptions options1 = test_options(1, addresses);
  options1.max_message_age_ms =
      60000;  // nothing may expire: every message queued while down arrives
  TestNode node1(options1, port_of(addresses.at(1)));
  auto node2 = std::make_unique<TestNode>(test_options(2, addresses), port_of(addresses.at(2)));
  for (raft::Index n = 1; n <= 50; ++n) ASSERT_TRUE(node1.transport().send(heartbeat(1, 2, n)));
  ASSERT_TRUE(eventually([&] { return node2->received_count() == 50; }, 3s));
  ASSERT_TRUE(eventually([&] { return node1.stats_for(2).sent_messages == 50; }, 1s));

  // Take node 2 down. Node 1 learns it when a write on the old stream fails; message 51 may be lost
  // on the dead connection (gRPC took it), which the transport documents.
  node2->shut_down();
  node2.reset();
  ASSERT_TRUE(node1.transport().send(heartbeat(1, 2, 51)));
  ASSERT_TRUE(eventually([&] { return !node1.stats_for(2).connected; }, 3s));
  // Queued while the peer is down, some of them while a reconnect attempt holds one in flight.
  for (raft::Index n = 52; n <= 100; ++n) {
    ASSERT_TRUE(node1.transport().send(heartbeat(1, 2, n)));
    if (n % 10 == 0) std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(eventually([&] { return node1.stats_for(2).connect_failures >= 2; }, 3s));

  TestNode node2_again(test_options(2, addresses), port_of(addresses.at(2)));
  ASSERT_TRUE(eventually(
      [&] {
        const std::vector<raft::Message> received = node2_again.received();
        return !received.empty() && received.back().context == 100;
      },
      5s));
  const std::vector<raft::Message> received = node2_again.received();
  std::set<raft::Index> seen;
  raft::Index previous = 50;
  for (const raft::Message& message : received) {
    EXPECT_GT(message.context, previous) << "out of order or duplicated after the reconnect";
    previous = message.context;
    seen.insert(message.context);
  }
  for (raft::Index n = 52; n <= 100; ++n)
    EXPECT_EQ(seen.count(n), 1u) << "message " << n << " lost";
  const PeerStats stats = node1.stats_for(2);
  EXPECT_EQ(stats.dropped_expired + stats.dropped_queue_full + stats.dropped_send_failed, 0u);
  EXPECT_TRUE(eventually([&] { return node1.stats_for(2).queued_messages == 0; }, 1s));
  EXPECT_TRUE(node1.stats_for(2).connected);
}

TEST(PeerTransport, StopIsBoundedAndEndsCallbacks) {
  const auto addresses = pick_addresses({1, 2, 3});  // node 3 stays down
  TestNode node1(test_options(1, addresses), port_of(addresses.at(1)));
  TestNode node2(test_options(2, addresses), port_of(addresses.at(2)));
  for (raft::Index n = 1; n <= 50; ++n) {
    ASSERT_TRUE(node1.transport().send(heartbeat(1, 2, n)));
    ASSERT_TRUE(node1.transport().send(heartbeat(1, 3, n)));
    ASSERT_TRUE(node2.transport().send(heartbeat(2, 1, n)));
  }
  ASSERT_TRUE(
      eventually([&] { return node1.received_count() == 50 && node2.received_count() == 50; }, 3s));

  // Node 2's inbound stream from node 1 is open; stopping node 2 must end it and its callbacks.
  const auto stop_started = std::chrono::steady_clock::now();
  EXPECT_TRUE(node2.transport().stop());
  EXPECT_LT(std::chrono::steady_clock::now() - stop_started, 1500ms);
  EXPECT_EQ(node2.transport().inbound_stats().open_streams, 0u);
  const std::size_t after_stop = node2.received_count();
  EXPECT_FALSE(node2.transport().send(heartbeat(2, 1, 51)));
  for (raft::Index n = 51; n <= 60; ++n) node1.transport().send(heartbeat(1, 2, n));
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(node2.received_count(), after_stop);

  const auto stop1_started = std::chrono::steady_clock::now();
  EXPECT_TRUE(node1.transport().stop());  // one peer refusing, one dead
  EXPECT_LT(std::chrono::steady_clock::now() - stop1_started, 1500ms);
  EXPECT_TRUE(node1.transport().stop());  // idempotent
}

TEST(PeerTransport, SendFromManyThreadsWhileStoppingNeverDeliversAfterStop) {
  const auto addresses = pick_addresses({1, 2});
  TestNode node1(test_options(1, addresses), port_of(addresses.at(1)));
  TestNode node2(test_options(2, addresses), port_of(addresses.at(2)));
  std::atomic<bool> done{false};
  std::vector<std::thread> senders;
  for (int t = 0; t < 3; ++t) {
    senders.emplace_back([&, t] {
      // Bounded: at most 20,000 sends per thread, ending early once stop() has run.
      for (raft::Index n = 1; n <= 20000 && !done.load(); ++n) {
        node1.transport().send(heartbeat(1, 2, static_cast<raft::Index>(t) * 100000 + n));
        if (n % 256 == 0) std::this_thread::yield();
      }
    });
  }
  ASSERT_TRUE(eventually([&] { return node2.received_count() > 500; }, 5s));
  EXPECT_TRUE(node2.transport().stop());
  const std::size_t after_stop = node2.received_count();
  EXPECT_TRUE(node1.transport().stop());
  done.store(true);
  for (std::thread& sender : senders) sender.join();
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(node2.received_count(), after_stop);
  EXPECT_FALSE(node1.transport().send(heartbeat(1, 2, 1)));
  const PeerStats stats = node1.stats_for(2);
  EXPECT_EQ(stats.queued_messages, 0u);
  EXPECT_FALSE(stats.connected);
}

}  // namespace
}  // namespace raftlog::server

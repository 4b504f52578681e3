#include "server/transport.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "loopback.h"
#include "raftlog/peer/v1/peer.grpc.pb.h"
#include "server/message_codec.h"

namespace raftlog::server {
namespace {

namespace pb = raftlog::peer::v1;
using raftlog::testing::eventually;
using raftlog::testing::loopback_address;
using raftlog::testing::pick_free_loopback_port;
using namespace std::chrono_literals;

// Options fast enough for tests: short backoff and connect timeout.
PeerTransportOptions test_options(raft::NodeId self, const std::map<raft::NodeId, std::string>& addresses) {
  PeerTransportOptions options;
  options.cluster_id = "test-cluster";
  options.self_id = self;
  for (const auto& [id, address] : addresses) {
    if (id != self) options.peers[id] = address;
  }
  options.reconnect_backoff_min_ms = 10;
  options.reconnect_backoff_max_ms = 100;
  options.connect_timeout_ms = 200;
  options.stop_timeout_ms = 1000;
  return options;
}

raft::Message heartbeat(raft::NodeId from, raft::NodeId to, raft::Index sequence_number) {
  raft::Message message;
  message.type = raft::MessageType::kHeartbeat;
  message.from = from;
  message.to = to;
  message.term = 1;
  message.context = sequence_number;  // identifies the message in order checks
  return message;
}

// A transport plus the gRPC server its Peer service runs on, recording what it receives.
class TestNode {
 public:
  TestNode(PeerTransportOptions options, int port) {
    transport_ = std::make_unique<PeerTransport>(std::move(options), [this](raft::Message message) {
      std::lock_guard lock(mu_);
      received_.push_back(std::move(message));
    });
    server_ = raftlog::testing::start_server({transport_->service()}, port,
                                             static_cast<int>(transport_->max_receive_message_bytes()));
    transport_->start();
  }
  ~TestNode() { shut_down(); }

  void shut_down() {
    if (!transport_) return;
    EXPECT_TRUE(transport_->stop());
    server_.shutdown();
    transport_.reset();
  }

  PeerTransport& transport() { return *transport_; }
  std::vector<raft::Message> received() const {
    std::lock_guard lock(mu_);
    return received_;
  }
  std::size_t received_count() const {
    std::lock_guard lock(mu_);
    return received_.size();
  }
  PeerStats stats_for(raft::NodeId peer) const {
    for (const PeerStats& stats : transport_->peer_stats()) {
      if (stats.id == peer) return stats;
    }
    ADD_FAILURE() << "no stats for peer " << peer;
    return {};
  }

 private:
  std::unique_ptr<PeerTransport> transport_;
  raftlog::testing::StartedServer server_;
  mutable std::mutex mu_;
  std::vector<raft::Message> received_;
};

std::map<raft::NodeId, std::string> pick_addresses(std::initializer_list<raft::NodeId> ids) {
  std::map<raft::NodeId, std::string> addresses;
  for (const raft::NodeId id : ids) {
    const int port = pick_free_loopback_port();
    EXPECT_NE(port, 0);
    addresses[id] = loopback_address(port);
  }
  return addresses;
}

int port_of(const std::string& address) { return std::stoi(address.substr(address.rfind(':') + 1)); }

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
}

TEST(PeerTransport, ThreeNodesExchangeMessagesInOrder) {
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
    std::map<raft::NodeId, raft::Index> last_seen;
    for (const raft::Message& message : node->received()) {
      EXPECT_EQ(message.to, id);
      EXPECT_EQ(message.context, last_seen[message.from] + 1) << "out of order from node " << message.from;
      last_seen[message.from] = message.context;
      if (message.type == raft::MessageType::kAppend) {
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
  for (raft::Index n = 1001; n <= 1010; ++n) ASSERT_TRUE(node1.transport().send(heartbeat(1, 3, n)));
  ASSERT_TRUE(eventually([&] { return node3.received_count() == 10; }, 5s)) << node3.received_count();
  std::this_thread::sleep_for(50ms);
  const std::vector<raft::Message> received = node3.received();
  ASSERT_EQ(received.size(), 10u);
  for (std::size_t i = 0; i < received.size(); ++i) EXPECT_EQ(received[i].context, 1001 + i);
  EXPECT_TRUE(eventually([&] { return node1.stats_for(3).sent_messages == 10; }, 1s));
  const PeerStats stats = node1.stats_for(3);
  EXPECT_EQ(stats.dropped_expired, 100u);
  EXPECT_EQ(stats.sent_messages, 10u);
  EXPECT_TRUE(stats.connected);
}

TEST(PeerTransport, FullQueueDropsAndCounts) {
  const auto addresses = pick_addresses({1, 2});  // node 2 never starts
  PeerTransportOptions options = test_options(1, addresses);
  options.max_queued_messages = 8;
  options.max_message_age_ms = 60000;
  TestNode node1(options, port_of(addresses.at(1)));
  int accepted = 0;
  for (raft::Index n = 1; n <= 100; ++n) accepted += node1.transport().send(heartbeat(1, 2, n)) ? 1 : 0;
  EXPECT_EQ(accepted, 8);
  const PeerStats stats = node1.stats_for(2);
  EXPECT_EQ(stats.queued_messages, 8u);
  EXPECT_EQ(stats.dropped_queue_full, 92u);
  EXPECT_EQ(stats.sent_messages, 0u);
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
    entry.payload.assign(1000, 'x');
    message.entries.push_back(entry);
    accepted += node1.transport().send(std::move(message)) ? 1 : 0;
  }
  EXPECT_EQ(accepted, 4);
  EXPECT_EQ(node1.stats_for(2).dropped_queue_full, 6u);
  EXPECT_EQ(node1.stats_for(2).queued_bytes, 4u * 1112u);
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
    entry.payload.assign(payload_bytes, 'y');
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

TEST(PeerTransport, WrongClusterIdRefused) {
  const auto addresses = pick_addresses({1, 2});
  PeerTransportOptions options1 = test_options(1, addresses);
  options1.cluster_id = "alpha";
  PeerTransportOptions options2 = test_options(2, addresses);
  options2.cluster_id = "beta";
  TestNode node1(options1, port_of(addresses.at(1)));
  TestNode node2(options2, port_of(addresses.at(2)));
  for (raft::Index n = 1; n <= 5; ++n) ASSERT_TRUE(node1.transport().send(heartbeat(1, 2, n)));
  ASSERT_TRUE(eventually([&] { return node1.stats_for(2).last_error.find("cluster id") != std::string::npos; }, 3s))
      << node1.stats_for(2).last_error;
  const PeerStats stats = node1.stats_for(2);
  EXPECT_NE(stats.last_error.find("gRPC status 9"), std::string::npos);  // FAILED_PRECONDITION
  EXPECT_FALSE(stats.connected);
  EXPECT_EQ(stats.sent_messages, 0u);  // the handshake tells refused streams apart from delivery
  EXPECT_EQ(node2.received_count(), 0u);
  EXPECT_GE(node2.transport().inbound_stats().rejected_streams, 1u);
}

// Opens a raw Peer/Stream to `address`, writes `messages`, and returns the final status.
grpc::Status raw_stream(const std::string& address, const std::vector<pb::RaftMessage>& messages) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(64 << 20);
  auto channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  auto stub = pb::Peer::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 3s);
  pb::StreamSummary summary;
  auto writer = stub->Stream(&context, &summary);
  for (const pb::RaftMessage& message : messages) {
    if (!writer->Write(message)) break;
  }
  writer->WritesDone();
  return writer->Finish();
}

TEST(PeerTransport, InboundChecksRefuseBadStreams) {
  const auto addresses = pick_addresses({1, 2});
  PeerTransportOptions options = test_options(2, addresses);
  options.limits.max_message_bytes = 16 * 1024;
  TestNode node2(options, port_of(addresses.at(2)));

  auto valid = [] {
    pb::RaftMessage message;
    encode_message(heartbeat(1, 2, 1), "test-cluster", &message);
    return message;
  };
  {
    const grpc::Status status = raw_stream(addresses.at(2), {valid(), valid()});
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(node2.received_count(), 2u);
  }
  struct Case {
    const char* name;
    std::function<void(pb::RaftMessage&)> corrupt;
    grpc::StatusCode expected;
    const char* fragment;
  };
  const std::vector<Case> cases = {
      {"wrong cluster", [](pb::RaftMessage& m) { m.set_cluster_id("other"); }, grpc::StatusCode::FAILED_PRECONDITION,
       "cluster id"},
      {"wrong recipient", [](pb::RaftMessage& m) { m.set_to(7); }, grpc::StatusCode::FAILED_PRECONDITION,
       "message for node 7"},
      {"unknown sender", [](pb::RaftMessage& m) { m.set_from(9); }, grpc::StatusCode::FAILED_PRECONDITION,
       "not a peer"},
      {"unknown type", [](pb::RaftMessage& m) { m.set_type(static_cast<pb::MessageType>(77)); },
       grpc::StatusCode::INVALID_ARGUMENT, "unknown message type"},
      {"oversize", [](pb::RaftMessage& m) {
         m.set_type(pb::APPEND);
         pb::LogEntry* entry = m.add_entries();
         entry->set_index(1);
         entry->set_term(1);
         entry->set_payload(std::string(20 * 1024, 'z'));
       },
       grpc::StatusCode::INVALID_ARGUMENT, "exceeds the limit"},
      {"beyond the gRPC receive limit", [](pb::RaftMessage& m) {
         m.set_type(pb::APPEND);
         pb::LogEntry* entry = m.add_entries();
         entry->set_index(1);
         entry->set_term(1);
         entry->set_payload(std::string(200 * 1024, 'z'));
       },
       grpc::StatusCode::RESOURCE_EXHAUSTED, ""},
  };
  for (const Case& test_case : cases) {
    SCOPED_TRACE(test_case.name);
    pb::RaftMessage bad = valid();
    test_case.corrupt(bad);
    // A valid message first: the check applies to every message, not only the first.
    const grpc::Status status = raw_stream(addresses.at(2), {valid(), bad, valid()});
    EXPECT_EQ(status.error_code(), test_case.expected) << status.error_message();
    EXPECT_NE(status.error_message().find(test_case.fragment), std::string::npos) << status.error_message();
  }
  // Each bad stream delivered only its leading valid message.
  EXPECT_EQ(node2.received_count(), 2u + cases.size());
  EXPECT_GE(node2.transport().inbound_stats().rejected_streams, cases.size() - 1);
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
  ASSERT_TRUE(eventually([&] { return node1.received_count() == 50 && node2.received_count() == 50; }, 3s));

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

}  // namespace
}  // namespace raftlog::server

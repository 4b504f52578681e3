#include "server/transport.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "raftlog/peer/v1/peer.grpc.pb.h"
#include "server/message_codec.h"
#include "server/peer_auth.h"
#include "shared/loopback.h"

namespace raftlog::server {
namespace {

namespace pb = raftlog::peer::v1;
using raftlog::testing::eventually;
using raftlog::testing::loopback_address;
using raftlog::testing::pick_free_loopback_port;
using namespace std::chrono_literals;

constexpr const char* kTestSecret = "a-test-peer-secret-of-32-bytes!!";

// Options fast enough for tests: short backoff and connect timeout.
PeerTransportOptions test_options(raft::NodeId self,
                                  const std::map<raft::NodeId, std::string>& addresses) {
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

// Runs on a gRPC thread for every message a TestNode receives, before it is recorded.
using ReceiveHook = std::function<void(const raft::Message&)>;

// A transport plus the gRPC server its Peer service runs on, recording what it receives.
class TestNode {
 public:
  TestNode(PeerTransportOptions options, int port, ReceiveHook hook = {}) : hook_(std::move(hook)) {
    transport_ = std::make_unique<PeerTransport>(std::move(options), [this](raft::Message message) {
      if (hook_) hook_(message);
      std::lock_guard lock(mu_);
      received_.push_back(std::move(message));
    });
    server_ = raftlog::testing::start_server(
        {transport_->service()}, port, static_cast<int>(transport_->max_receive_message_bytes()));
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
  const ReceiveHook hook_;
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

// For failure messages: the counters that tell a stuck stream from one that keeps reconnecting.
std::string describe(const PeerStats& stats) {
  return "connects " + std::to_string(stats.connects) + ", failures " +
         std::to_string(stats.connect_failures) + ", queued " +
         std::to_string(stats.queued_messages) + ", sent " + std::to_string(stats.sent_messages) +
         ", expired " + std::to_string(stats.dropped_expired) + ", connected " +
         (stats.connected ? "yes" : "no") + ", last error: " + stats.last_error;
}

int port_of(const std::string& address) {
  return std::stoi(address.substr(address.rfind(':') + 1));
}

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

raft::Message empty_append(raft::NodeId from, raft::NodeId to, raft::Index sequence_number) {
  raft::Message message = heartbeat(from, to, sequence_number);
  message.type = raft::MessageType::kAppend;
  return message;
}

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

TEST(PeerTransport, WrongClusterIdRefused) {
  const auto addresses = pick_addresses({1, 2});
  PeerTransportOptions options1 = test_options(1, addresses);
  options1.cluster_id = "alpha";
  PeerTransportOptions options2 = test_options(2, addresses);
  options2.cluster_id = "beta";
  TestNode node1(options1, port_of(addresses.at(1)));
  TestNode node2(options2, port_of(addresses.at(2)));
  for (raft::Index n = 1; n <= 5; ++n) ASSERT_TRUE(node1.transport().send(heartbeat(1, 2, n)));
  ASSERT_TRUE(eventually(
      [&] { return node1.stats_for(2).last_error.find("cluster id") != std::string::npos; }, 3s))
      << node1.stats_for(2).last_error;
  const PeerStats stats = node1.stats_for(2);
  EXPECT_NE(stats.last_error.find("gRPC status 9"), std::string::npos);  // FAILED_PRECONDITION
  EXPECT_FALSE(stats.connected);
  EXPECT_EQ(stats.sent_messages, 0u);  // the handshake tells refused streams apart from delivery
  EXPECT_EQ(node2.received_count(), 0u);
  EXPECT_GE(node2.transport().inbound_stats().rejected_streams, 1u);
}

// Opens a raw client stream to `address` with `open` (Peer/Stream or Peer/StreamBatches), with the
// peer authenticator `auth` unless empty, writes `elements`, and returns the final status.
template <typename Element, typename Open>
grpc::Status write_raw(const std::string& address, const std::vector<Element>& elements, Open open,
                       const std::string& auth = "") {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(64 << 20);
  auto channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  auto stub = pb::Peer::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 3s);
  if (!auth.empty()) context.AddMetadata(std::string(kPeerAuthMetadataKey), auth);
  pb::StreamSummary summary;
  auto writer = open(*stub, &context, &summary);
  for (const Element& element : elements) {
    if (!writer->Write(element)) break;
  }
  writer->WritesDone();
  return writer->Finish();
}

grpc::Status raw_stream(const std::string& address, const std::vector<pb::RaftMessage>& messages,
                        const std::string& auth = "") {
  return write_raw(
      address, messages,
      [](pb::Peer::Stub& stub, grpc::ClientContext* context, pb::StreamSummary* summary) {
        return stub.Stream(context, summary);
      },
      auth);
}

grpc::Status raw_batch_stream(const std::string& address,
                              const std::vector<pb::RaftMessageBatch>& batches,
                              const std::string& auth = "") {
  return write_raw(
      address, batches,
      [](pb::Peer::Stub& stub, grpc::ClientContext* context, pb::StreamSummary* summary) {
        return stub.StreamBatches(context, summary);
      },
      auth);
}

TEST(PeerTransport, PeerSecretAuthenticatesEveryInboundStream) {
  const auto addresses = pick_addresses({1, 2, 3});
  PeerTransportOptions options = test_options(2, addresses);
  options.peer_secret = kTestSecret;
  TestNode node2(options, port_of(addresses.at(2)));
  // A forged heartbeat from node 1 carrying an absurd commit index.
  auto forged = [](raft::NodeId from) {
    raft::Message message = heartbeat(from, 2, 1);
    message.commit = 1ULL << 60;
    pb::RaftMessage wire;
    encode_message(message, "test-cluster", &wire);
    return wire;
  };
  struct Case {
    const char* name;
    std::string auth;
    grpc::StatusCode expected;
    const char* fragment;
  };
  const std::vector<Case> cases = {
      {"no authenticator", "", grpc::StatusCode::UNAUTHENTICATED, "carried no raftlog-peer-auth"},
      {"another secret", peer_auth_token("another-secret-of-some-length", "test-cluster", 1, 2),
       grpc::StatusCode::UNAUTHENTICATED, "does not match"},
      {"another cluster", peer_auth_token(kTestSecret, "other-cluster", 1, 2),
       grpc::StatusCode::UNAUTHENTICATED, "does not match"},
      {"another recipient", peer_auth_token(kTestSecret, "test-cluster", 1, 3),
       grpc::StatusCode::UNAUTHENTICATED, "is for node 3"},
      {"not a peer", peer_auth_token(kTestSecret, "test-cluster", 9, 2),
       grpc::StatusCode::UNAUTHENTICATED, "not a peer"},
      {"malformed", "v1 1 2 not-a-mac", grpc::StatusCode::UNAUTHENTICATED, "does not match"},
      {"speaks for another peer", peer_auth_token(kTestSecret, "test-cluster", 3, 2),
       grpc::StatusCode::PERMISSION_DENIED,
       "authenticated as node 3 but sent a message from node 1"},
  };
  for (const Case& test_case : cases) {
    SCOPED_TRACE(test_case.name);
    const grpc::Status status = raw_stream(addresses.at(2), {forged(1)}, test_case.auth);
    EXPECT_EQ(status.error_code(), test_case.expected) << status.error_message();
    EXPECT_NE(status.error_message().find(test_case.fragment), std::string::npos)
        << status.error_message();
    pb::RaftMessageBatch batch;
    *batch.add_messages() = forged(1);
    const grpc::Status batched = raw_batch_stream(addresses.at(2), {batch}, test_case.auth);
    EXPECT_EQ(batched.error_code(), test_case.expected) << batched.error_message();
  }
  EXPECT_EQ(node2.received_count(), 0u);
  EXPECT_GE(node2.transport().inbound_stats().rejected_streams, 2 * cases.size());

  const grpc::Status genuine =
      raw_stream(addresses.at(2), {forged(1)}, peer_auth_token(kTestSecret, "test-cluster", 1, 2));
  EXPECT_TRUE(genuine.ok()) << genuine.error_message();
  EXPECT_EQ(node2.received_count(), 1u);
}

TEST(PeerTransport, NodesSharingThePeerSecretTalkAndAnotherSecretIsRefused) {
  const auto addresses = pick_addresses({1, 2, 3});
  std::map<raft::NodeId, std::unique_ptr<TestNode>> nodes;
  for (const auto& [id, address] : addresses) {
    PeerTransportOptions options = test_options(id, addresses);
    options.peer_secret = id == 3 ? "the-wrong-secret-for-node-3" : kTestSecret;
    nodes[id] = std::make_unique<TestNode>(options, port_of(address));
  }
  for (raft::Index n = 1; n <= 3; ++n) {
    ASSERT_TRUE(nodes[1]->transport().send(heartbeat(1, 2, n)));
    ASSERT_TRUE(nodes[3]->transport().send(heartbeat(3, 2, n)));
    ASSERT_TRUE(nodes[2]->transport().send(heartbeat(2, 1, n)));
  }
  ASSERT_TRUE(eventually(
      [&] { return nodes[2]->received_count() == 3 && nodes[1]->received_count() == 3; }, 3s))
      << describe(nodes[1]->stats_for(2));
  ASSERT_TRUE(eventually(
      [&] { return nodes[3]->stats_for(2).last_error.find("gRPC status 16") != std::string::npos; },
      3s))  // UNAUTHENTICATED
      << describe(nodes[3]->stats_for(2));
  EXPECT_EQ(nodes[3]->stats_for(2).sent_messages, 0u);
  for (const raft::Message& message : nodes[2]->received()) EXPECT_EQ(message.from, 1u);
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
      {"wrong cluster", [](pb::RaftMessage& m) { m.set_cluster_id("other"); },
       grpc::StatusCode::FAILED_PRECONDITION, "cluster id"},
      {"wrong recipient", [](pb::RaftMessage& m) { m.set_to(7); },
       grpc::StatusCode::FAILED_PRECONDITION, "message for node 7"},
      {"unknown sender", [](pb::RaftMessage& m) { m.set_from(9); },
       grpc::StatusCode::FAILED_PRECONDITION, "not a peer"},
      {"unknown type", [](pb::RaftMessage& m) { m.set_type(static_cast<pb::MessageType>(77)); },
       grpc::StatusCode::INVALID_ARGUMENT, "unknown message type"},
      {"oversize",
       [](pb::RaftMessage& m) {
         m.set_type(pb::APPEND);
         pb::LogEntry* entry = m.add_entries();
         entry->set_index(1);
         entry->set_term(1);
         entry->set_payload(std::string(20 * 1024, 'z'));
       },
       grpc::StatusCode::INVALID_ARGUMENT, "exceeds the limit"},
      {"beyond the gRPC receive limit",
       [](pb::RaftMessage& m) {
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
    EXPECT_NE(status.error_message().find(test_case.fragment), std::string::npos)
        << status.error_message();
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

TEST(PeerTransport, InboundBatchesAreCheckedWholeAndDeliveredInOrder) {
  const auto addresses = pick_addresses({1, 2});
  TestNode node2(test_options(2, addresses), port_of(addresses.at(2)));
  auto message = [](raft::Index n) {
    pb::RaftMessage wire;
    encode_message(heartbeat(1, 2, n), "test-cluster", &wire);
    return wire;
  };
  auto batch_of = [&](raft::Index first, int count) {
    pb::RaftMessageBatch batch;
    for (int i = 0; i < count; ++i)
      *batch.add_messages() = message(first + static_cast<raft::Index>(i));
    return batch;
  };
  {
    const grpc::Status status =
        raw_batch_stream(addresses.at(2), {batch_of(1, 3), batch_of(4, 64)});
    EXPECT_TRUE(status.ok()) << status.error_message();
    const std::vector<raft::Message> received = node2.received();
    ASSERT_EQ(received.size(), 67u);
    for (std::size_t i = 0; i < received.size(); ++i) EXPECT_EQ(received[i].context, i + 1);
  }
  {
    SCOPED_TRACE("a bad message anywhere in a batch: none of that batch is delivered");
    pb::RaftMessageBatch bad = batch_of(100, 3);
    bad.mutable_messages(2)->set_to(7);
    const grpc::Status status =
        raw_batch_stream(addresses.at(2), {batch_of(98, 2), bad, batch_of(200, 1)});
    EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << status.error_message();
    EXPECT_NE(status.error_message().find("message for node 7"), std::string::npos)
        << status.error_message();
    EXPECT_EQ(node2.received_count(), 69u);  // the first batch only
  }
  {
    SCOPED_TRACE("a batch's messages must all come from the stream's sender");
    pb::RaftMessageBatch mixed = batch_of(300, 2);
    mixed.mutable_messages(1)->set_from(3);
    const grpc::Status status = raw_batch_stream(addresses.at(2), {mixed});
    EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << status.error_message();
  }
  for (const int count : {0, 65}) {
    SCOPED_TRACE("batch of " + std::to_string(count));
    const grpc::Status status = raw_batch_stream(addresses.at(2), {batch_of(400, count)});
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_NE(status.error_message().find("a batch must hold 1 to 64 messages"), std::string::npos)
        << status.error_message();
  }
  EXPECT_EQ(node2.received_count(), 69u);
  EXPECT_GE(node2.transport().inbound_stats().rejected_streams, 4u);
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

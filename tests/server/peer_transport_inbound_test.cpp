// PeerTransport inbound checks: streams from another cluster, with a bad or missing peer
// authenticator, or carrying invalid messages or batches are refused, and what they carried is not
// delivered.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "peer_transport_support.h"
#include "server/message_codec.h"

namespace raftlog::server {
namespace {

using namespace raftlog::server::peer_testing;  // peer_transport_support.h

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
      // Authenticated, but neither configured nor able to say where to answer it
      // (peer_transport_admission_test.cpp has the rest of the admission rules).
      {"not a peer, no advertised address", peer_auth_token(kTestSecret, "test-cluster", 9, 2),
       grpc::StatusCode::FAILED_PRECONDITION, "advertised no address"},
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

}  // namespace
}  // namespace raftlog::server

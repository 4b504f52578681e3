// Who may talk to a node (server/peer_admission.h): besides its configured peers, any node that
// authenticated for this cluster and advertised where it is reached, bounded, forgotten when idle;
// never without authentication. And the outbound links that follow: answered at the advertised
// address, retired links freed, a failed add retried, a removed peer's queued messages written.
#include <atomic>

#include "peer_transport_support.h"
#include "server/peer_outbound.h"
#include "server/peer_protocol.h"

namespace raftlog::server::peer_testing {
namespace {

PeerTransportOptions secret_options(raft::NodeId self,
                                    const std::map<raft::NodeId, std::string>& peers) {
  PeerTransportOptions options = test_options(self, peers);
  options.peer_secret = kTestSecret;
  return options;
}

// One heartbeat from `from` to `to` on a raw StreamBatches stream carrying the authenticator of
// `from` and, unless empty, `advertised` as its address.
grpc::Status heartbeat_stream(const std::string& address, raft::NodeId from, raft::NodeId to,
                              const std::string& advertised) {
  grpc::ChannelArguments args;
  auto channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  auto stub = pb::Peer::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 3s);
  context.AddMetadata(std::string(kPeerAuthMetadataKey),
                      peer_auth_token(kTestSecret, "test-cluster", from, to));
  if (!advertised.empty()) context.AddMetadata(std::string(kPeerAddressKey), advertised);
  pb::StreamSummary summary;
  auto writer = stub->StreamBatches(&context, &summary);
  pb::RaftMessageBatch batch;
  encode_message(heartbeat(from, to, 1), "test-cluster", batch.add_messages());
  writer->Write(batch);
  writer->WritesDone();
  return writer->Finish();
}

// The jepsen case in miniature: node 1's configurations do not list node 2 (a joiner replaying an
// old configuration, or a member that was down while 2 was added), yet 2 leads. Node 1 must take
// 2's messages and answer it at the address 2 advertises.
TEST(PeerTransportAdmission, AnAuthenticatedNodeOutsideTheConfigurationIsHeardAndAnswered) {
  const auto addresses = pick_addresses({1, 2});
  TestNode node1(secret_options(1, {}), port_of(addresses.at(1)));
  PeerTransportOptions two = secret_options(2, addresses);
  two.advertise_address = addresses.at(2);
  TestNode node2(two, port_of(addresses.at(2)));
  ASSERT_TRUE(eventually(
      [&] {
        node2.transport().send(heartbeat(2, 1, 1));
        return node1.received_count() > 0;
      },
      5s))
      << describe(node2.stats_for(1));
  EXPECT_EQ(node1.transport().inbound_stats().unconfigured_peers, 1U);
  // The answer goes to the advertised address.
  ASSERT_TRUE(eventually(
      [&] {
        node1.transport().send(heartbeat(1, 2, 2));
        return node2.received_count() > 0;
      },
      5s));
  EXPECT_EQ(node1.stats_for(2).address, addresses.at(2));
  // Once the configuration lists it, it is a configured peer (no longer counted as unconfigured).
  node1.transport().set_peers({{2, addresses.at(2)}});
  EXPECT_EQ(node1.transport().inbound_stats().unconfigured_peers, 0U);
  EXPECT_EQ(node1.transport().peer_stats().size(), 1U);
}

TEST(PeerTransportAdmission, WithoutAuthenticationOnlyConfiguredPeersAreHeard) {
  const auto addresses = pick_addresses({1, 2});
  TestNode node1(test_options(1, {}), port_of(addresses.at(1)));
  PeerTransportOptions two = test_options(2, addresses);
  two.advertise_address = addresses.at(2);
  TestNode node2(two, port_of(addresses.at(2)));
  for (int i = 0; i < 10; ++i) {
    node2.transport().send(heartbeat(2, 1, 1 + i));
    std::this_thread::sleep_for(30ms);
  }
  EXPECT_EQ(node1.received_count(), 0U);
  EXPECT_GT(node1.transport().inbound_stats().rejected_streams, 0U);
  EXPECT_EQ(node1.transport().inbound_stats().unconfigured_peers, 0U);
  EXPECT_TRUE(node1.transport().peer_stats().empty());
}

TEST(PeerTransportAdmission, AnUnconfiguredNodeMustAdvertiseAValidAddress) {
  const auto addresses = pick_addresses({1});
  TestNode node1(secret_options(1, {}), port_of(addresses.at(1)));
  struct Case {
    const char* name;
    std::string advertised;
    const char* fragment;
  };
  const std::vector<Case> cases = {
      {"none", "", "advertised no address"},
      {"no port", "127.0.0.1", "advertised address"},
      {"port zero", "127.0.0.1:0", "advertised address"},
      // (gRPC itself refuses control bytes in metadata; a space is the case left to us.)
      {"a space", "host name:7001", "advertised address"},
      {"too long", std::string(200, 'a') + ":7001", "longer than"},
  };
  for (const Case& test_case : cases) {
    SCOPED_TRACE(test_case.name);
    const grpc::Status status = heartbeat_stream(addresses.at(1), 7, 1, test_case.advertised);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << status.error_message();
    EXPECT_NE(status.error_message().find(test_case.fragment), std::string::npos)
        << status.error_message();
  }
  EXPECT_EQ(node1.received_count(), 0U);
  EXPECT_EQ(node1.transport().inbound_stats().refused_unconfigured_streams, cases.size());
  EXPECT_TRUE(node1.transport().peer_stats().empty()) << "nothing was dialled";
}

// At most kMaxUnconfiguredPeers at once; one silent for kUnconfiguredPeerIdle makes room.
TEST(PeerTransportAdmission, UnconfiguredPeersAreBoundedAndForgottenWhenIdle) {
  const auto addresses = pick_addresses({1});
  TestNode node1(secret_options(1, {}), port_of(addresses.at(1)));
  const std::size_t bound = PeerTransportOptions::kMaxUnconfiguredPeers;
  for (raft::NodeId id = 10; id < 10 + bound; ++id) {
    // Nobody listens at the advertised addresses: the dial-back fails, the admission stands.
    const grpc::Status status =
        heartbeat_stream(addresses.at(1), id, 1, "127.0.0.1:" + std::to_string(1000 + id));
    EXPECT_TRUE(status.ok()) << id << ": " << status.error_message();
  }
  EXPECT_EQ(node1.received_count(), bound);
  EXPECT_EQ(node1.transport().inbound_stats().unconfigured_peers, bound);
  EXPECT_EQ(node1.transport().inbound_stats().admitted_unconfigured_peers, bound);
  EXPECT_EQ(node1.transport().peer_stats().size(), bound);
  const grpc::Status over = heartbeat_stream(addresses.at(1), 99, 1, "127.0.0.1:1099");
  EXPECT_EQ(over.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << over.error_message();
  EXPECT_EQ(node1.transport().inbound_stats().refused_unconfigured_streams, 1U);
  // An admitted one is still heard.
  EXPECT_TRUE(heartbeat_stream(addresses.at(1), 10, 1, "127.0.0.1:1010").ok());
  // Silent long enough, they are forgotten and their links go; a newcomer is admitted.
  ASSERT_TRUE(eventually([&] { return node1.transport().inbound_stats().unconfigured_peers == 0; },
                         PeerTransportOptions::kUnconfiguredPeerIdle + 3s));
  EXPECT_TRUE(node1.transport().peer_stats().empty());
  EXPECT_EQ(node1.transport().inbound_stats().forgotten_unconfigured_peers, bound);
  EXPECT_TRUE(heartbeat_stream(addresses.at(1), 99, 1, "127.0.0.1:1099").ok());
  EXPECT_EQ(node1.transport().inbound_stats().unconfigured_peers, 1U);
  EXPECT_EQ(node1.transport().inbound_stats().admitted_unconfigured_peers, bound + 1);
}

// A removed peer's links used to be kept until restart, at most 256 of them: past that no peer
// could be added, and a failed add was only retried when the configuration changed again.
TEST(PeerTransportAdmission, RetiredLinksAreFreedSoPeersCanBeAddedForever) {
  const auto addresses = pick_addresses({1});
  TestNode node1(test_options(1, {}), port_of(addresses.at(1)));
  const int rounds = static_cast<int>(PeerOutbound::kMaxRetiredPeers) + 44;
  for (int round = 0; round < rounds; ++round) {
    node1.transport().set_peers({{5, "127.0.0.1:2000"}});
    node1.transport().set_peers({});
    if (round % 16 == 15) std::this_thread::sleep_for(20ms);
  }
  node1.transport().set_peers({{5, "127.0.0.1:5"}});
  // The add succeeds at once or, while retired links are still being freed, by a retry.
  ASSERT_TRUE(eventually([&] { return node1.transport().peer_stats().size() == 1; }, 10s));
  EXPECT_EQ(node1.transport().peer_stats().front().address, "127.0.0.1:5");
  EXPECT_TRUE(eventually([&] { return node1.transport().retired_links() == 0; }, 10s))
      << node1.transport().retired_links() << " retired links still alive";
}

// A removed peer's queued messages are still written (a removed node's last heartbeat tells it its
// removal committed); they used to be dropped with the link.
TEST(PeerTransportAdmission, ARemovedPeersQueuedMessagesAreStillWritten) {
  const auto addresses = pick_addresses({1, 2});
  TestNode node1(test_options(1, addresses), port_of(addresses.at(1)));
  TestNode node2(test_options(2, addresses), port_of(addresses.at(2)));
  ASSERT_TRUE(eventually(
      [&] {
        node1.transport().send(heartbeat(1, 2, 1));
        return node2.received_count() > 0;
      },
      5s));
  ASSERT_TRUE(eventually([&] { return node1.stats_for(2).connected; }, 5s));
  constexpr int kBurst = 200;
  constexpr raft::Index kFirst = 1000;
  for (int i = 0; i < kBurst; ++i) ASSERT_TRUE(node1.transport().send(heartbeat(1, 2, kFirst + i)));
  node1.transport().set_peers({});
  EXPECT_FALSE(node1.transport().send(heartbeat(1, 2, 999))) << "no longer sent to";
  auto burst_received = [&] {
    std::size_t count = 0;
    for (const raft::Message& message : node2.received()) {
      count += message.context >= kFirst && message.context < kFirst + kBurst ? 1 : 0;
    }
    return count;
  };
  EXPECT_TRUE(eventually([&] { return burst_received() == kBurst; }, 3s))
      << burst_received() << " of " << kBurst;
  EXPECT_TRUE(eventually([&] { return node1.transport().retired_links() == 0; }, 5s));
}

}  // namespace
}  // namespace raftlog::server::peer_testing

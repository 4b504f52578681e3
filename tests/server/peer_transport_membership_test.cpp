// PeerTransport::set_peers: the transport follows the configuration. A peer added at runtime is
// dialled and accepted; one removed is no longer sent to nor accepted; one at a new address is
// dialled there; the bounds hold.
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <sstream>
#include <thread>

#include "peer_transport_support.h"
#include "server/peer_outbound.h"
#include "server/peer_stream_auth.h"

namespace raftlog::server::peer_testing {
namespace {

TEST(PeerTransportMembership, APeerAddedAtRuntimeIsDialledAndAccepted) {
  const auto addresses = pick_addresses({1, 2});
  PeerTransportOptions one = test_options(1, {});  // knows nobody yet
  one.peer_secret = kTestSecret;
  PeerTransportOptions two = test_options(2, addresses);
  two.peer_secret = kTestSecret;
  TestNode node1(one, port_of(addresses.at(1)));
  TestNode node2(two, port_of(addresses.at(2)));
  EXPECT_FALSE(node1.transport().send(heartbeat(1, 2, 1)));  // unknown peer: dropped
  // Node 1 refuses node 2's streams until 2 is its peer: nothing arrives.
  EXPECT_TRUE(node2.transport().send(heartbeat(2, 1, 2)));
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(node1.received_count(), 0U);
  node1.transport().set_peers({{2, addresses.at(2)}});
  ASSERT_TRUE(eventually([&] {
    node1.transport().send(heartbeat(1, 2, 3));
    return node2.received_count() > 0;
  }, 5s)) << describe(node1.stats_for(2));
  ASSERT_TRUE(eventually([&] {
    node2.transport().send(heartbeat(2, 1, 4));
    return node1.received_count() > 0;
  }, 5s)) << describe(node2.stats_for(1));
  for (const raft::Message& message : node1.received()) EXPECT_EQ(message.from, 2U);
}

// A peer added long after this node started (a new member) got the "unreachable since start"
// warning at its first failed dial, naming the node's age: the start-up grace counts from the
// peer's addition now, and the line says so.
TEST(PeerTransportMembership, APeerAddedAfterTheStartGetsItsOwnStartUpGrace) {
  std::ostringstream lines;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(lines);
  spdlog::default_logger()->sinks().push_back(sink);
  const spdlog::level::level_enum level = spdlog::get_level();
  spdlog::set_level(spdlog::level::info);
  {
    const auto addresses = pick_addresses({1, 2});  // nothing listens at node 2's
    TestNode node1(test_options(1, {}), port_of(addresses.at(1)));
    std::this_thread::sleep_for(kPeerStartupGrace + 500ms);
    node1.transport().set_peers({{2, addresses.at(2)}});
    const auto until = std::chrono::steady_clock::now() + 1500ms;
    while (std::chrono::steady_clock::now() < until) {
      node1.transport().send(heartbeat(1, 2, 1));
      std::this_thread::sleep_for(100ms);
    }
  }
  spdlog::set_level(level);
  auto& sinks = spdlog::default_logger()->sinks();
  sinks.erase(std::remove(sinks.begin(), sinks.end(), sink), sinks.end());
  const std::string log = lines.str();
  EXPECT_NE(log.find("peer 2 ("), std::string::npos) << "no dial failure logged:\n" << log;
  EXPECT_EQ(log.find("unreachable since"), std::string::npos) << log;
}

TEST(PeerTransportMembership, ARemovedPeerIsNeitherSentToNorAccepted) {
  const auto addresses = pick_addresses({1, 2});
  TestNode node1(test_options(1, addresses), port_of(addresses.at(1)));
  TestNode node2(test_options(2, addresses), port_of(addresses.at(2)));
  ASSERT_TRUE(eventually([&] {
    node2.transport().send(heartbeat(2, 1, 1));
    return node1.received_count() > 0;
  }, 5s));
  node1.transport().set_peers({});
  EXPECT_FALSE(node1.transport().send(heartbeat(1, 2, 2)));
  EXPECT_TRUE(node1.transport().peer_stats().empty());
  // Node 2's open stream is refused at its next message; nothing more is delivered.
  std::this_thread::sleep_for(100ms);
  const std::size_t before = node1.received_count();
  for (int i = 0; i < 20; ++i) {
    node2.transport().send(heartbeat(2, 1, 10 + i));
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(node1.received_count(), before);
  EXPECT_GT(node1.transport().inbound_stats().rejected_streams, 0U);
}

TEST(PeerTransportMembership, APeerAtANewAddressIsDialledThere) {
  const auto addresses = pick_addresses({1, 2, 3});
  TestNode node1(test_options(1, {{2, addresses.at(2)}}), port_of(addresses.at(1)));
  // Node "2" now listens where 3's port was (a node moved to a new address).
  TestNode moved(test_options(2, {{1, addresses.at(1)}}), port_of(addresses.at(3)));
  node1.transport().set_peers({{2, addresses.at(3)}});
  ASSERT_TRUE(eventually([&] {
    node1.transport().send(heartbeat(1, 2, 1));
    return moved.received_count() > 0;
  }, 5s)) << describe(node1.stats_for(2));
  EXPECT_EQ(node1.stats_for(2).address, addresses.at(3));
}

TEST(PeerTransportMembership, SetPeersKeepsItsBoundsAndSkipsInvalidEntries) {
  const auto addresses = pick_addresses({1});
  TestNode node1(test_options(1, {}), port_of(addresses.at(1)));
  std::map<raft::NodeId, std::string> many;
  many[0] = "127.0.0.1:1";  // id 0
  many[1] = "127.0.0.1:2";  // this node
  many[2] = "";             // no address
  for (raft::NodeId id = 10; id < 10 + PeerTransportOptions::kMaxPeers + 5; ++id)
    many[id] = "127.0.0.1:" + std::to_string(20000 + id);
  node1.transport().set_peers(many);
  EXPECT_EQ(node1.transport().peer_stats().size(), PeerTransportOptions::kMaxPeers);
  for (const PeerStats& stats : node1.transport().peer_stats()) EXPECT_GE(stats.id, 10U);
  // Removing and adding again, many times over, stays bounded (retired links are capped).
  for (int round = 0; round < 8; ++round) {
    node1.transport().set_peers({});
    node1.transport().set_peers({{5, "127.0.0.1:5"}});
  }
  EXPECT_EQ(node1.transport().peer_stats().size(), 1U);
}

// A peer removed while one of its streams was starting (the reconnect timer opening it while
// set_peers removed the peer): the removal's TryCancel ran while StartCall was still running, gRPC
// 1.51 then never completed the call, and stop() waited for it forever (seen in
// SetPeersKeepsItsBoundsAndSkipsInvalidEntries, about once in a hundred runs). Forced here: each
// round removes the peer from another thread just as its first stream calls StartCall. A removed
// link is freed only once its stream ended.
TEST(PeerTransportMembership, APeerRemovedWhileItsStreamStartsLetsThatStreamEnd) {
  const auto addresses = pick_addresses({1, 2});  // nothing listens at 2's: every stream fails
  // A node's gRPC server runs while its links' channels come and go (gRPC 1.51 aborts when the
  // last user of its shared callback completion queue goes inside a reaction, as a freed retired
  // link's channels may): node 1's here.
  TestNode node1(test_options(1, {}), port_of(addresses.at(1)));
  // On the heap: if a stream never ends, nothing it points into may be freed.
  struct Rig {
    explicit Rig(PeerTransportOptions transport_options)
        : options(std::move(transport_options)), auth(options), outbound(options, auth, receipts) {}
    PeerTransportOptions options;
    PeerStreamAuth auth;
    SnapshotReceipts receipts;
    PeerOutbound outbound;
  };
  auto rig = std::make_unique<Rig>(test_options(1, {}));
  PeerOutbound& outbound = rig->outbound;

  std::mutex mu;
  std::condition_variable cv;
  bool remove_requested = false;  // under mu
  bool quit = false;              // under mu
  std::atomic<bool> removing{false};
  std::thread remover([&] {
    for (;;) {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return remove_requested || quit; });
      if (quit) return;
      remove_requested = false;
      lock.unlock();
      removing = true;
      outbound.remove_peer(2);
    }
  });
  // Runs just before a StartCall (on the adding thread or, for a reconnect, the timer's): at the
  // round's chosen stream, lets the remover go and returns as it starts, so that its cancel and
  // StartCall run at the same time.
  std::atomic<int> opened{0};
  std::atomic<int> remove_at_open{1};
  outbound.set_before_start_call_for_testing([&](raft::NodeId) {
    if (++opened != remove_at_open) return;
    {
      std::lock_guard lock(mu);
      remove_requested = true;
    }
    cv.notify_one();
    const auto until = std::chrono::steady_clock::now() + 1s;
    while (!removing && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  });
  outbound.start();

  constexpr int kRounds = 600;
  int round = 0;
  for (; round < kRounds; ++round) {
    removing = false;
    opened = 0;
    remove_at_open = 3 + round % 6;  // a reconnect after failed streams, as in the hang seen
    ASSERT_TRUE(outbound.add_peer(2, addresses.at(2)));
    if (!eventually([&] { return outbound.peer_stats().empty() && outbound.retired_links() == 0; },
                    10s)) {
      break;
    }
  }
  {
    std::lock_guard lock(mu);
    quit = true;
  }
  cv.notify_one();
  remover.join();
  if (round < kRounds) {
    ADD_FAILURE() << "round " << round << ": the removed peer's stream did not end within 10 s "
                  << "(stop() would wait for it forever); its transport is left behind";
    (void)rig.release();
    return;
  }
  outbound.stop();
}

}  // namespace
}  // namespace raftlog::server::peer_testing

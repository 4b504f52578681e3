// The peer transport's queue-full drops on raftlogd's /metrics page
// (raftlog_peer_queue_full_drops_total): a message dropped at a full lane moves that lane's counter,
// and the count stays when its peer is removed (unlike the per-peer stats, which go with the link).
#include <gtest/gtest.h>

#include <optional>
#include <sstream>
#include <string>

#include "peer_transport_support.h"
#include "server/metrics.h"
#include "testing/http_get.h"

namespace raftlog::server::peer_testing {
namespace {

// The value of the sample `series` (name and labels as the page prints them), if the page has it.
std::optional<double> sample(const std::string& page, const std::string& series) {
  std::istringstream lines(page);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.starts_with(series + " ")) return std::stod(line.substr(series.size() + 1));
  }
  return std::nullopt;
}

std::optional<double> queue_full_drops(const Metrics& metrics, const std::string& lane) {
  const auto page = raftlog::testing::http_get(metrics.bound_address(), "/metrics");
  if (!page) return std::nullopt;
  return sample(*page, "raftlog_peer_queue_full_drops_total{node_id=\"1\",lane=\"" + lane + "\"}");
}

TEST(PeerTransportMetrics, AQueueFullDropMovesItsLanesCounterAndOutlivesThePeer) {
  const auto addresses = pick_addresses({1, 2});  // nothing listens at 2's: the queue only fills
  PeerTransportOptions options = test_options(1, {{2, addresses.at(2)}});
  options.max_queued_control_messages = 4;
  options.max_message_age_ms = 60'000;  // nothing leaves the queue by age during the test
  TestNode node1(options, port_of(addresses.at(1)));
  std::string error;
  auto metrics = Metrics::start(1, "127.0.0.1:0", ::testing::TempDir(), &error);
  ASSERT_NE(metrics, nullptr) << error;
  metrics->set_outbound_source([&] { return node1.transport().outbound_totals(); });
  EXPECT_EQ(queue_full_drops(*metrics, "control"), 0.0);
  EXPECT_EQ(queue_full_drops(*metrics, "append"), 0.0);

  constexpr int kSent = 20;
  int refused = 0;
  for (int i = 0; i < kSent; ++i) refused += node1.transport().send(heartbeat(1, 2, i)) ? 0 : 1;
  // The lane holds at most 4 (the one being written included); every other heartbeat is dropped.
  EXPECT_GE(refused, kSent - 4);
  const PeerStats stats = node1.stats_for(2);
  EXPECT_EQ(stats.control.dropped_queue_full, static_cast<std::uint64_t>(refused));
  EXPECT_EQ(node1.transport().outbound_totals().dropped_queue_full_control,
            static_cast<std::uint64_t>(refused));
  EXPECT_EQ(queue_full_drops(*metrics, "control"), static_cast<double>(refused));
  EXPECT_EQ(queue_full_drops(*metrics, "append"), 0.0);

  // The removed peer's counters go with its link; the total stays.
  node1.transport().set_peers({});
  EXPECT_TRUE(node1.transport().peer_stats().empty());
  EXPECT_EQ(queue_full_drops(*metrics, "control"), static_cast<double>(refused));
  metrics->set_outbound_source({});
}

}  // namespace
}  // namespace raftlog::server::peer_testing

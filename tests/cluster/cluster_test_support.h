// What the real-process cluster tests share: polling until a condition holds within a bound, the
// leader among some nodes, appending while remembering every acknowledged index and payload (in
// the caller's thread or a bounded background load), and checking that a node holds them all.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "testing/local_cluster.h"

namespace raftlog::testing {

// Every acknowledged append: index -> payload.
using Acknowledged = std::map<std::uint64_t, std::string>;

// A cluster of `raftlogd_path` processes with small segments (64 KiB, entries up to 8 KiB): a few
// hundred entries fill several sealed segments, which a test can then trim, checkpoint or corrupt.
LocalClusterOptions small_segment_options(const std::string& raftlogd_path);

// A cluster of `nodes` raftlogd processes of which the first `founders` found it (the others start
// with --join).
LocalClusterOptions founders_options(const std::string& raftlogd_path, int nodes, int founders);

// Polls `predicate` every `poll` until it holds or `timeout` passed; its last answer. (Unlike
// shared/loopback.h's eventually, which polls in-process state every 5 ms: a poll here is usually
// an RPC to a node's process.)
template <typename Predicate>
bool poll_until(Predicate predicate,
                std::chrono::milliseconds timeout = std::chrono::milliseconds(20'000),
                std::chrono::milliseconds poll = std::chrono::milliseconds(50)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (predicate()) return true;
    std::this_thread::sleep_for(poll);
  }
  return predicate();
}

// Asks node `id` to trim below `before` until its answer's first index is past `past` and has stayed
// the same, as has its status's, for 1.5 s (within `timeout` + 1.5 s); that first index (0 when it
// never passed `past`: a test failure). A trim answers before its deletion has run, which goes on
// over the node's next loop rounds (scan slices, unlinks, each some ms apart) and ends when nothing
// whole below its point can go (docs/design.md, "Known limits").
std::uint64_t trim_until_settled(LocalCluster& cluster, client::Client& client, int id,
                                 std::uint64_t before, std::uint64_t past,
                                 std::chrono::milliseconds timeout);

// A node among `ids` that reports itself leader within `timeout`; 0 when none does. (Unlike
// LocalCluster::wait_for_leader, only these nodes are asked and no majority must agree.)
int leader_among(LocalCluster& cluster, const std::vector<int>& ids,
                 std::chrono::milliseconds timeout = std::chrono::milliseconds(20'000));

// Appends `count` entries one by one, each `tag`-i followed by 2,000 bytes of `filler`; every
// acknowledged index and payload goes into *acknowledged. A failed append is a test failure. The
// last index acknowledged (0 if none).
std::uint64_t append_entries(client::Client& client, int count, const std::string& tag,
                             Acknowledged* acknowledged, char filler = 'c');

// Checks that node `id` holds every acknowledged payload at its index, once it committed the last.
// `from`: nullopt, every acknowledged index (the node's log must reach back to the first); a
// value, those at or above it and at or above the node's first retained index, of which there must
// be some (a node trimmed, or caught up by a snapshot).
void expect_holds_acknowledged(LocalCluster& cluster, int id, const Acknowledged& acknowledged,
                               std::optional<std::uint64_t> from,
                               std::chrono::milliseconds commit_timeout =
                                   std::chrono::milliseconds(20'000));

// Appends from its own thread, one entry per call, remembering every acknowledged index and
// payload, until stop(), max_appends or max_duration. Payload i: "load-i", or "load-i-" filled
// with 'l' to payload_bytes.
struct BackgroundLoadOptions {
  std::vector<int> endpoints;
  int max_appends = 1000;
  std::chrono::milliseconds max_duration = std::chrono::milliseconds(60'000);
  std::chrono::milliseconds interval{0};  // between two appends
  std::size_t payload_bytes = 0;          // 0: no filling
  bool share_append_stream = true;        // client::Options
};

class BackgroundLoad {
 public:
  BackgroundLoad(LocalCluster& cluster, BackgroundLoadOptions options);
  ~BackgroundLoad() { stop(); }
  BackgroundLoad(const BackgroundLoad&) = delete;
  BackgroundLoad& operator=(const BackgroundLoad&) = delete;

  void stop();
  Acknowledged acknowledged() const;
  std::size_t count() const;
  int failures() const;

 private:
  void run(LocalCluster& cluster, const BackgroundLoadOptions& options);

  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  Acknowledged acknowledged_;
  int failures_ = 0;
  std::thread thread_;
};

}  // namespace raftlog::testing

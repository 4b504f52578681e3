// Catch-up by replication over real raftlogd processes, default timing (issue 15; docs/design.md,
// "Catching up by replication"): a follower that was down while its leader took in well over a
// hundred MiB catches up from the leader's store, not from a snapshot (retention off), and the
// catch-up costs no election: no node's term moves and no other node is ever named leader, while a
// small append load keeps running; every acknowledged append is on every node at the end.
//
// The leader's in-flight window per follower is bounded in bytes (raft::Config::max_inflight_bytes,
// 16 MiB in raftlogd) and a heartbeat answer frees no slot of a full window before an election
// timeout without an append answer. Without the byte window the first acknowledgement of such a
// follower made the leader read and queue up to 64 x 8 MiB in one loop round: seconds without a
// heartbeat, and the other follower's election (the drills, F6).
//
// Whether an election happens depends on the machine's load; what the window is for does not: the
// test also bounds the leader's longest Raft loop round during the catch-up (its
// raftlog_raft_loop_round_seconds histogram, scraped before and after: no round past the 512 ms
// bucket), and the messages its transport dropped at a full append lane (none)
// (raftlog_peer_queue_full_drops_total). Measured with and without the window: docs/benchmarks.md,
// "A real-process test of \"no election during a catch-up\"".
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cluster_test_support.h"
#include "testing/http_get.h"
#include "testing/local_cluster.h"
#include "testing/loop_rounds.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// The log the follower misses: 160 MiB in 64 KiB entries, 16 per Append (1 MiB), appended within
// kFillTimeout.
constexpr std::size_t kFillEntryBytes = 64 << 10;
constexpr int kFillEntriesPerAppend = 16;
constexpr int kFillAppends = 160;
constexpr auto kFillTimeout = 90s;
constexpr auto kCatchUpTimeout = 60s;
// The load while the follower catches up: one 1 KiB entry every 20 ms, at most this many.
constexpr int kMaxLoadAppends = 3000;
constexpr auto kMaxLoadDuration = 120s;
constexpr auto kLoadInterval = 20ms;
// How often every node's status is sampled for its term and leader.
constexpr auto kSampleInterval = 20ms;
// The leader's longest loop round during the catch-up, as the upper bound of its histogram bucket
// (0.5 ms doubling to 4 s): at most the 512 ms bucket. Measured (docs/benchmarks.md) with the window
// in the 64-256 ms buckets (8 runs without an election at load 4-7; raftlog-bench catch-up at load
// 10-13: 256 ms), without it 512-1024 ms. One bucket of margin over what the window gave, so a
// loaded test machine does not fail it by a few ms; it reaches past the 200 ms base election
// timeout, so it does not promise "no election" (the term checks below do): it fails the
// second-long rounds of the old behaviour. What fails the old behaviour in every measured run is
// the drops bound below (4-30 dropped without the window, none with it).
constexpr double kMaxLongestRoundLeSeconds = 0.512;
// The append-lane messages the leader may drop at a full queue: none. The window (16 MiB per
// follower) fits the append lane's bound (64 MiB) by design; without it 4-30 were dropped per run.
constexpr double kMaxAppendQueueFullDrops = 0;

LocalClusterOptions catch_up_cluster() {
  LocalClusterOptions options;
  options.raftlogd_path = RAFTLOGD_PATH;
  options.nodes = 3;
  // raftlogd's default segments and limits (no retention: nothing is trimmed, so the follower
  // cannot be caught up by a snapshot), default Raft timing.
  options.segment_size_bytes = 64ULL << 20;
  options.max_entry_size_bytes = 1 << 20;
  options.metrics = true;  // the leader's loop rounds and queue-full drops
  return options;
}

// The payload of entry `position` of fill append `call`: distinct per entry, rebuilt to check.
std::string fill_payload(int call, int position) {
  std::string payload = "fill-" + std::to_string(call) + "-" + std::to_string(position) + "-";
  payload.resize(kFillEntryBytes, static_cast<char>('a' + (call + position) % 26));
  return payload;
}

// Every acknowledged entry: the fill's appends by their first index (payloads rebuilt), the load's
// by index with their payloads.
struct FillAndLoad {
  std::map<std::uint64_t, int> fill_calls;  // first index -> call
  std::map<std::uint64_t, std::string> load;
  std::uint64_t last_index() const {
    std::uint64_t last = 0;
    if (!fill_calls.empty()) last = fill_calls.rbegin()->first + kFillEntriesPerAppend - 1;
    if (!load.empty()) last = std::max(last, load.rbegin()->first);
    return last;
  }
};

// Appends the fill through `endpoints`; false (with a failure recorded) when an append fails or the
// fill takes longer than kFillTimeout.
bool fill(LocalCluster& cluster, const std::vector<int>& endpoints, FillAndLoad* acknowledged) {
  client::Options options;
  for (int id : endpoints) options.endpoints.push_back(cluster.address(id));
  options.retry_deadline_ms = 20000;
  options.call_timeout_ms = 20000;
  auto created = client::Client::create(options);
  if (!created.ok()) {
    ADD_FAILURE() << created.status().message();
    return false;
  }
  const auto deadline = Clock::now() + kFillTimeout;
  for (int call = 0; call < kFillAppends; ++call) {
    if (Clock::now() > deadline) {
      ADD_FAILURE() << "the fill took longer than " << kFillTimeout.count() << " s (" << call
                    << " of " << kFillAppends << " appends)";
      return false;
    }
    std::vector<std::string> payloads;
    for (int position = 0; position < kFillEntriesPerAppend; ++position) {
      payloads.push_back(fill_payload(call, position));
    }
    auto appended = created.value()->append(payloads);
    if (!appended.ok()) {
      ADD_FAILURE() << "fill append " << call << ": " << appended.status().message();
      return false;
    }
    acknowledged->fill_calls[appended->first_index] = call;
  }
  return true;
}

// Samples every node's term and leader until stopped: the terms and leaders any node reported.
class LeadershipWatch {
 public:
  explicit LeadershipWatch(LocalCluster& cluster)
      : thread_([this, &cluster] {
          // Bounded: stops when stop() is called (the test's bounded steps call it).
          while (!stop_.load()) {
            for (int id = 1; id <= cluster.size(); ++id) {
              const std::optional<client::NodeStatus> status = cluster.status(id);
              if (!status.has_value()) continue;
              std::lock_guard lock(mu_);
              ++samples_;
              terms_.insert(status->term);
              if (status->leader_id != 0) leaders_.insert(status->leader_id);
              if (status->role == client::Role::kLeader) leading_.insert(status->node_id);
              if (status->role == client::Role::kCandidate ||
                  status->role == client::Role::kPreCandidate) {
                campaigning_.insert(status->node_id);
              }
            }
            std::this_thread::sleep_for(kSampleInterval);
          }
        }) {}
  ~LeadershipWatch() { stop(); }
  LeadershipWatch(const LeadershipWatch&) = delete;
  LeadershipWatch& operator=(const LeadershipWatch&) = delete;

  void stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  std::set<std::uint64_t> terms() const { return locked(terms_); }
  std::set<std::uint64_t> leaders() const { return locked(leaders_); }
  std::set<std::uint64_t> leading() const { return locked(leading_); }
  std::set<std::uint64_t> campaigning() const { return locked(campaigning_); }
  std::uint64_t samples() const {
    std::lock_guard lock(mu_);
    return samples_;
  }

 private:
  std::set<std::uint64_t> locked(const std::set<std::uint64_t>& set) const {
    std::lock_guard lock(mu_);
    return set;
  }

  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::uint64_t samples_ = 0;
  std::set<std::uint64_t> terms_;
  std::set<std::uint64_t> leaders_;
  std::set<std::uint64_t> leading_;
  std::set<std::uint64_t> campaigning_;
  std::thread thread_;
};

// Reads node `id`'s committed log from index 1 up to `last` (node-local reads) and counts the
// acknowledged entries it lacks or holds with other bytes.
std::size_t missing_on(LocalCluster& cluster, int id, const FillAndLoad& acknowledged,
                       std::uint64_t last) {
  client::Options options;
  options.retry_deadline_ms = 5000;
  auto reader = cluster.client(options, {id});
  std::size_t missing = 0;
  std::size_t checked = 0;
  std::uint64_t next = 1;
  auto fill_call = acknowledged.fill_calls.begin();
  // Bounded: each read returns at least one entry or the loop ends.
  while (next <= last) {
    auto read = reader->read(next, 0, 0, /*linearizable=*/false);
    if (!read.ok() || read->entries.empty()) break;
    for (const client::Entry& entry : read->entries) {
      if (entry.index > last) break;
      next = entry.index + 1;
      while (fill_call != acknowledged.fill_calls.end() &&
             fill_call->first + kFillEntriesPerAppend <= entry.index) {
        ++fill_call;
      }
      if (fill_call != acknowledged.fill_calls.end() && fill_call->first <= entry.index) {
        ++checked;
        const int position = static_cast<int>(entry.index - fill_call->first);
        if (entry.payload != fill_payload(fill_call->second, position)) ++missing;
        continue;
      }
      const auto load = acknowledged.load.find(entry.index);
      if (load == acknowledged.load.end()) continue;  // a leader's no-op, or an unacknowledged one
      ++checked;
      if (entry.payload != load->second) ++missing;
    }
  }
  const std::size_t expected =
      acknowledged.fill_calls.size() * kFillEntriesPerAppend + acknowledged.load.size();
  return missing + (expected - std::min(expected, checked));
}

// The leader's raftlog_peer_queue_full_drops_total{lane="append"}, or nullopt.
std::optional<double> append_queue_full_drops(LocalCluster& cluster, int id) {
  const std::optional<std::string> page = http_get(cluster.metrics_address(id), "/metrics");
  if (!page) return std::nullopt;
  return metric_sample(*page, "raftlog_peer_queue_full_drops_total{node_id=\"" +
                                  std::to_string(id) + "\",lane=\"append\"}");
}

TEST(CatchUpByReplicationTest, AFollowerBackAfter160MiBCatchesUpWithoutAnElection) {
  LocalCluster cluster(catch_up_cluster());
  cluster.start_all();
  const int leader = cluster.wait_for_leader(15s);
  ASSERT_NE(leader, 0) << cluster.log_tail(1);
  const int follower = leader == 3 ? 2 : 3;
  const int other = 6 - leader - follower;
  ASSERT_EQ(cluster.stop(follower), 0) << cluster.log_tail(follower);

  FillAndLoad acknowledged;
  const auto fill_started = Clock::now();
  ASSERT_TRUE(fill(cluster, {leader, other}, &acknowledged));
  const double fill_s = std::chrono::duration<double>(Clock::now() - fill_started).count();
  const std::uint64_t fill_last = acknowledged.last_index();
  const std::optional<client::NodeStatus> before = cluster.status(leader);
  ASSERT_TRUE(before.has_value());
  ASSERT_EQ(before->role, client::Role::kLeader) << "leadership moved during the fill";
  ASSERT_EQ(before->first_index, 1U) << "the leader trimmed: the follower would need a snapshot";
  const std::uint64_t term = before->term;
  const std::optional<LoopRounds> rounds_before = scrape_loop_rounds(cluster.metrics_address(leader));
  ASSERT_TRUE(rounds_before.has_value()) << "no metrics from the leader";
  const std::optional<double> drops_before = append_queue_full_drops(cluster, leader);
  ASSERT_TRUE(drops_before.has_value()) << "the leader serves no queue-full drops";

  LeadershipWatch watch(cluster);
  // One 1 KiB append every kLoadInterval, each on its own call, until stopped.
  BackgroundLoad load(cluster, {.endpoints = {1, 2, 3},
                                .max_appends = kMaxLoadAppends,
                                .max_duration = kMaxLoadDuration,
                                .interval = kLoadInterval,
                                .payload_bytes = 1024,
                                .share_append_stream = false});
  const auto restarted = Clock::now();
  cluster.start(follower);
  const bool caught_up = cluster.wait_for_commit(follower, fill_last, kCatchUpTimeout);
  const double catch_up_s = std::chrono::duration<double>(Clock::now() - restarted).count();
  // A little more load once the follower holds the fill, so that some of it reaches all three.
  std::this_thread::sleep_for(500ms);
  load.stop();
  watch.stop();
  const std::optional<LoopRounds> rounds_after = scrape_loop_rounds(cluster.metrics_address(leader));
  const std::optional<double> drops_after = append_queue_full_drops(cluster, leader);
  ASSERT_TRUE(rounds_after.has_value() && drops_after.has_value()) << "no metrics from the leader";
  const LoopRounds during = rounds_after->minus(*rounds_before);
  const double drops = *drops_after - *drops_before;
  std::cout << "fill of " << kFillAppends << " MiB in " << fill_s << " s; catch-up in "
            << catch_up_s << " s; " << watch.samples() << " status samples; "
            << load.acknowledged().size() << " load appends acknowledged, " << load.failures()
            << " failed; leader: " << during.count << " loop rounds, " << during.over(0.128)
            << " over 128 ms, longest <= " << during.longest_bound() << " s, " << drops
            << " append messages dropped at a full queue\n";

  ASSERT_TRUE(caught_up) << "node " << follower << " did not reach index " << fill_last
                         << " within " << kCatchUpTimeout.count() << " s\n"
                         << cluster.log_tail(follower);
  EXPECT_GT(watch.samples(), 0U);
  // What the byte window is for, whatever the load: no round long enough to starve heartbeats,
  // and no flood of appends the lane cannot hold.
  EXPECT_LE(during.longest_bound(), kMaxLongestRoundLeSeconds)
      << "the leader's longest loop round during the catch-up";
  EXPECT_LE(drops, kMaxAppendQueueFullDrops) << "append messages the leader dropped at a full queue";
  EXPECT_EQ(watch.terms(), std::set<std::uint64_t>{term})
      << "a node's term moved during the catch-up: an election\n"
      << cluster.log_tail(other) << cluster.log_tail(leader);
  EXPECT_EQ(watch.leaders(), std::set<std::uint64_t>{static_cast<std::uint64_t>(leader)});
  EXPECT_EQ(watch.leading(), std::set<std::uint64_t>{static_cast<std::uint64_t>(leader)});
  // Pre-votes move no term, so they are reported, not failed: the restarted follower may ask before
  // the leader's first heartbeat reaches it (the leader redials it with backoff); the follower that
  // stayed up asks when a heartbeat came later than its election timeout (docs/design.md, "Known
  // limits": the catch-up's appends still delay heartbeats on a loaded machine).
  for (std::uint64_t id : watch.campaigning()) {
    std::cout << "node " << id << (id == static_cast<std::uint64_t>(follower) ? " (restarted)" : "")
              << " asked for pre-votes during the catch-up\n";
  }

  // What a long round did: every node logs the parts of a round over half its election timeout
  // (the slow-round line, docs/operations.md); printed for the record, not asserted.
  for (int id = 1; id <= 3; ++id) {
    std::ifstream node_log(cluster.log_file(id));
    for (std::string line; std::getline(node_log, line);) {
      if (line.find("a loop round took") != std::string::npos) {
        std::cout << "node " << id << (id == leader ? " (leader)" : "") << ": " << line << "\n";
      }
    }
  }

  // By replication: the follower installed no snapshot and holds the log from index 1.
  const std::optional<client::NodeStatus> follower_status = cluster.status(follower);
  ASSERT_TRUE(follower_status.has_value());
  EXPECT_EQ(follower_status->snapshots_received, 0U);
  EXPECT_EQ(follower_status->first_index, 1U);

  acknowledged.load = load.acknowledged();
  EXPECT_GT(acknowledged.load.size(), 0U) << "no append was acknowledged during the catch-up";
  const std::uint64_t last = acknowledged.last_index();
  for (int id = 1; id <= 3; ++id) {
    ASSERT_TRUE(cluster.wait_for_commit(id, last, 20s)) << cluster.log_tail(id);
    EXPECT_EQ(missing_on(cluster, id, acknowledged, last), 0U)
        << "node " << id << " lacks acknowledged appends";
    const std::optional<client::NodeStatus> status = cluster.status(id);
    ASSERT_TRUE(status.has_value());
    EXPECT_EQ(status->term, term) << "node " << id;
    EXPECT_EQ(status->leader_id, static_cast<std::uint64_t>(leader)) << "node " << id;
  }
}

}  // namespace
}  // namespace raftlog::testing

// The Node's event loop: inputs wake it without waiting for a tick, a leader back from a stalled
// loop makes up its missed heartbeats, and what it does is reported to NodeEvents.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "node_test_support.h"

namespace raftlog::server {
namespace {

using namespace raftlog::server::testing;  // node_test_support.h

TEST(Node, InputsWakeTheLoopWithoutWaitingForATick) {
  // The loop is woken by push() only while it sleeps (the loop_sleeping_ flag). A lost wake-up
  // would leave an input waiting for the next tick, here 250 ms: 400 appends that each need two
  // inputs (the append, then the flush notice) would then take an average of half a tick each, over
  // 10 s in all (measured with push() never notifying), instead of well under one.
  TempDir dir;
  NodeConfig config = test_config(dir.path(), 1);
  config.tick_ms = 250;
  config.election_ticks = 3;  // a single node still elects itself within 1.5 s
  config.heartbeat_ticks = 1;
  config.store.flush_mode =
      store::FlushMode::kAsync;  // no fsync per append: only the wake-ups count
  FakePeers sender;
  auto node = open_node(config, &sender);
  ASSERT_NE(node, nullptr);
  node->start();
  ASSERT_TRUE(wait_for_leader(*node));

  constexpr int kThreads = 4;
  constexpr int kAppendsPerThread = 100;
  std::atomic<int> slow_appends{0};  // took longer than 100 ms (a tick is 250 ms)
  std::atomic<int> failed_appends{0};
  const auto started = std::chrono::steady_clock::now();
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < kAppendsPerThread; ++i) {
        const auto append_started = std::chrono::steady_clock::now();
        const AppendResult result =
            append_and_wait(*node, {"w" + std::to_string(t) + "-" + std::to_string(i)});
        if (!result.error.ok()) failed_appends.fetch_add(1);
        if (std::chrono::steady_clock::now() - append_started >= 100ms) slow_appends.fetch_add(1);
      }
    });
  }
  for (std::thread& writer : writers) writer.join();
  const auto elapsed = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(failed_appends.load(), 0);
  // A machine stall can make a few appends slow; lost wake-ups make most of them slow.
  EXPECT_LT(slow_appends.load(), kThreads * kAppendsPerThread / 10);
  EXPECT_LT(elapsed, 5s);
  EXPECT_GE(node->commit_index(), static_cast<std::uint64_t>(kThreads * kAppendsPerThread));
}

TEST(Node, ALeaderBackFromAStalledLoopSendsItsHeartbeatAtOnce) {
  // The loop runs its ticks at most once per round. A leader whose loop was held up (a round that
  // wrote a large batch, a machine too busy to run it) used to get one tick per stall, so with
  // heartbeat_ticks = 8 its heartbeats went out only every 8th stall while the followers' election
  // timers kept running. Now it makes up to heartbeat_ticks of the missed ticks: one heartbeat per
  // stall longer than a heartbeat interval. Each stall here is an append's completion callback, which
  // runs on the loop thread, sleeping for 15 ticks.
  TempDir dir;
  NodeConfig config = test_config(dir.path(), 2);
  config.tick_ms = 10;
  config.heartbeat_ticks = 8;
  config.election_ticks = 20;
  config.store.flush_mode =
      store::FlushMode::kAsync;  // an append commits within a few short rounds
  FakeCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.start_leader(config));

  constexpr int kStalls = 8;
  std::vector<std::size_t>
      sent_after_stall;  // how many messages had been sent when each stall ended
  for (int stall = 0; stall < kStalls; ++stall) {
    auto ended = std::make_shared<std::promise<std::size_t>>();
    std::future<std::size_t> ended_future = ended->get_future();
    cluster.node->append({"stall " + std::to_string(stall)}, 0, 0,
                         [&cluster, ended](AppendResult result) {
                           EXPECT_TRUE(result.error.ok()) << result.error.message;
                           std::this_thread::sleep_for(150ms);
                           ended->set_value(cluster.sender.sent().size());
                         });
    ASSERT_EQ(ended_future.wait_for(kWait), std::future_status::ready);
    sent_after_stall.push_back(ended_future.get());
  }
  const std::vector<raft::Message> sent = cluster.sender.sent();
  int heartbeats = 0;
  for (std::size_t i = sent_after_stall.front(); i < sent_after_stall.back(); ++i) {
    if (sent[i].type == raft::MessageType::kHeartbeat) ++heartbeats;
  }
  EXPECT_GE(heartbeats, kStalls - 1)
      << "heartbeats between the end of the first and of the last stall";
  EXPECT_EQ(cluster.node->status().role, raft::Role::kLeader);
}

// What the node reports to NodeEvents (the metrics' counters) matches what it did.
class CountingEvents final : public NodeEvents {
 public:
  void append_proposed() override { ++proposed; }
  void append_committed(std::uint64_t entries, std::uint64_t payload_bytes,
                        std::chrono::steady_clock::duration latency) override {
    committed_entries += entries;
    committed_bytes += payload_bytes;
    if (latency.count() > 0) ++positive_latencies;
  }
  void leader_changed() override { ++leader_changes; }
  void election_finished(bool won) override { ++(won ? elections_won : elections_lost); }
  void segments_deleted(std::uint64_t count) override { deleted_segments += count; }
  void store_flushed(const store::CommitLog::FlushCycle& cycle) override {
    flushed_entries += cycle.entries;
    ++flush_cycles;
  }
  std::atomic<std::uint64_t> proposed{0}, committed_entries{0}, committed_bytes{0},
      positive_latencies{0};
  std::atomic<std::uint64_t> leader_changes{0}, elections_won{0}, elections_lost{0};
  std::atomic<std::uint64_t> flushed_entries{0}, flush_cycles{0}, deleted_segments{0};
};

TEST(Node, ReportsProposalsCommitsElectionsAndFlushesToEvents) {
  TempDir dir;
  CountingEvents events;
  FakeCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.start_leader(test_config(dir.path(), 1), &events));
  Node& node = *cluster.node;
  EXPECT_EQ(events.elections_won.load(), 1U);
  EXPECT_EQ(events.leader_changes.load(), 1U);
  const AppendResult first = append_and_wait(node, {"abc", "de"});
  ASSERT_TRUE(first.error.ok()) << first.error.message;
  const AppendResult second = append_and_wait(node, {"fghij"}, 9, 1);
  ASSERT_TRUE(second.error.ok()) << second.error.message;
  const AppendResult retry = append_and_wait(node, {"fghij"}, 9, 1);  // a duplicate: not new work
  ASSERT_TRUE(retry.error.ok() && retry.duplicate);
  EXPECT_EQ(events.proposed.load(), 2U);
  EXPECT_EQ(events.committed_entries.load(), 3U);
  EXPECT_EQ(events.committed_bytes.load(), 10U);
  EXPECT_EQ(events.positive_latencies.load(), 2U);
  EXPECT_GE(events.flush_cycles.load(), 1U);
  EXPECT_GE(events.flushed_entries.load(), 3U);  // the leader's no-op entry may be flushed too
  node.stop();
}

}  // namespace
}  // namespace raftlog::server

// A follower stranded behind its leader's retention catches up by itself through the replicas'
// snapshots (src/replica/replica_snapshot.cpp, docs/raft.md "Snapshots"): the leader fills the data,
// the follower installs it and replication continues after it; the installed dedup table answers
// retries of appends the follower never held, and a power cut after the install keeps it.
#include <gtest/gtest.h>

#include <algorithm>

#include "replica/snapshot_data.h"
#include "test_cluster.h"

namespace raftlog::raft {
namespace {

using testing::TestCluster;

std::string segment_filling_payload(Index index) {
  return "e" + std::to_string(index) + std::string(40 << 10, '.');
}

void with_snapshots(Config& config) { config.snapshots = true; }
void short_follower_grace(replica::ReplicaConfig& config) {
  config.retention_follower_grace_ms = 5 * config.tick_ms;
}

// Node 3 misses 2..21 (client 9's appends, sequence = index), the leader trims below 15.
void strand_node_3(TestCluster& c) {
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.isolate(3);
  for (Index i = 2; i <= 21; ++i) {
    ASSERT_TRUE(c.propose(1, {segment_filling_payload(i)}, 9, i).proposed()) << i;
  }
  c.deliver_all();
  ASSERT_EQ(c.raft(1).commit_index(), 21u);
  for (int i = 0; i < 6; ++i) {
    c.tick(1);
    c.deliver_all();
  }
  const replica::TrimResult trimmed = c.trim(1, 15);
  ASSERT_TRUE(trimmed.error.ok()) << trimmed.error.message;
  ASSERT_EQ(c.node(1).log.first_index(), 15u);
}

TEST(SnapshotCatchUp, AStrandedFollowerInstallsTheLeadersSnapshotAndCatchesUp) {
  TestCluster c({1, 2, 3}, with_snapshots, short_follower_grace);
  ASSERT_NO_FATAL_FAILURE(strand_node_3(c));
  c.heal();
  c.tick_all(10);
  EXPECT_EQ(c.replica(1).snapshot_stats().sent, 1u);
  EXPECT_EQ(c.replica(3).snapshot_stats().installed, 1u);
  EXPECT_EQ(c.raft(3).stranded_below(), 0u);
  // The leader's snapshot point is where its topic table is committed (21), at or above its first
  // index - 1 (14): node 3's log starts right after it.
  const Index point = c.replica(3).snapshot_stats().last_installed_index;
  EXPECT_GE(point, 14u);
  EXPECT_LE(point, 21u);
  EXPECT_EQ(c.node(3).log.first_index(), point + 1);
  // Replication continues after the snapshot: a new entry commits on every node, the same there.
  const auto proposal = c.propose(1, {"after"}, 9, 100);
  c.tick_all(3);
  ASSERT_TRUE(proposal.answer.answered());
  const Index last = c.raft(1).last_index();
  EXPECT_EQ(c.node(3).log.last_index(), last);
  EXPECT_EQ(c.raft(3).commit_index(), last);
  EXPECT_EQ(c.node(3).log.entry(last).payload, c.node(1).log.entry(last).payload);
  // The installed dedup table answers retries of appends node 3 never held.
  for (std::uint64_t sequence = 2; sequence <= point; ++sequence) {
    replica::DedupTable::Range range;
    EXPECT_EQ(c.replica(3).dedup_lookup(9, sequence, {segment_filling_payload(sequence)}, &range),
              replica::DedupTable::Lookup::kFound)
        << sequence;
    EXPECT_EQ(range.first, sequence);
  }
  // A power cut keeps it: the open loads SNAPSHOT before it rebuilds from the log.
  c.crash_restart(3);
  replica::DedupTable::Range range;
  EXPECT_EQ(c.replica(3).dedup_lookup(9, 5, {segment_filling_payload(5)}, &range),
            replica::DedupTable::Lookup::kFound);
  EXPECT_EQ(c.node(3).log.first_index(), point + 1);
  EXPECT_EQ(c.replica(3).snapshot_stats().installed, 0u) << "nothing installed again";
  // A follower commits on heartbeats only what an append of this leader proved (the core's rule),
  // so the next entry brings the commit index along.
  ASSERT_TRUE(c.propose(1, {"after the restart"}).proposed());
  c.tick_all(5);
  EXPECT_EQ(c.node(3).log.last_index(), c.raft(1).last_index());
  EXPECT_EQ(c.raft(3).commit_index(), c.raft(1).commit_index());
}

TEST(SnapshotCatchUp, AMangledSnapshotIsRefusedUntilAnIntactOneArrives) {
  TestCluster c({1, 2, 3}, with_snapshots, short_follower_grace);
  ASSERT_NO_FATAL_FAILURE(strand_node_3(c));
  int mangled = 0;
  c.set_mutator([&](Message& m) {
    if (m.type == MessageType::kSnapshot && mangled < 2) {
      ++mangled;
      std::string data(m.snapshot->data.view());
      data[data.size() / 2] = static_cast<char>(data[data.size() / 2] ^ 0x40);
      m.snapshot->data = data;
    }
  });
  c.heal();
  c.tick_all(10);
  EXPECT_EQ(mangled, 1);
  EXPECT_EQ(c.replica(3).snapshot_stats().refused, 1u);
  EXPECT_EQ(c.replica(3).snapshot_stats().installed, 0u);
  EXPECT_EQ(c.node(3).log.first_index(), 1u) << "nothing of a refused snapshot is installed";
  // The leader sends another after Config::snapshot_retry_ticks; this one is mangled too, the next
  // one is not.
  for (int i = 0; i < 3 && c.replica(3).snapshot_stats().installed == 0; ++i) {
    c.tick_all(static_cast<int>(c.replica(1).config().raft.snapshot_retry_ticks) + 5);
  }
  EXPECT_EQ(c.replica(3).snapshot_stats().refused, 2u);
  EXPECT_EQ(c.replica(3).snapshot_stats().installed, 1u);
  EXPECT_EQ(c.raft(3).commit_index(), c.raft(1).commit_index());
}

// Review S1: a snapshot whose transfer takes longer than the leader's retry timeout (a slow link)
// used to start over at every timeout and never arrive. The transport's progress (the bytes gone
// out) restarts the timer, so it arrives, once, and installs.
TEST(SnapshotCatchUp, ASnapshotSlowerToSendThanTheRetryTimeoutArrivesWhole) {
  TestCluster c({1, 2, 3}, with_snapshots, short_follower_grace);
  ASSERT_NO_FATAL_FAILURE(strand_node_3(c));
  const int retry_ticks = c.replica(1).config().raft.snapshot_retry_ticks;
  c.set_snapshot_link_rate(1);
  c.heal();
  c.tick_all(3);
  const std::uint64_t size = c.slow_snapshot_bytes(1, 3);
  ASSERT_GT(size, static_cast<std::uint64_t>(2 * retry_ticks)) << "no (large enough) snapshot";
  // Three retry timeouts to carry it whole.
  c.set_snapshot_link_rate(std::max<std::uint64_t>(1, size / (3 * retry_ticks)));
  for (int i = 0; i < 6 * retry_ticks && c.replica(3).snapshot_stats().installed == 0; ++i) {
    c.tick_all(1);
  }
  EXPECT_EQ(c.replica(3).snapshot_stats().installed, 1u);
  EXPECT_EQ(c.replica(1).snapshot_stats().sent, 1u) << "sent again while it was still moving";
  c.tick_all(5);
  EXPECT_EQ(c.raft(3).stranded_below(), 0u);
  EXPECT_EQ(c.raft(3).commit_index(), c.raft(1).commit_index());
}

// Beyond the sender's budget the least recently used dedup clients are left out; a snapshot whose
// mandatory part does not fit is not sent at all, and the follower stays stranded.
TEST(SnapshotCatchUp, TheDataIsBoundedByTheSendersBudget) {
  TestCluster c({1, 2, 3}, with_snapshots, [](replica::ReplicaConfig& config) {
    short_follower_grace(config);
    config.max_snapshot_data_bytes = 64;  // less than the configuration alone
  });
  ASSERT_NO_FATAL_FAILURE(strand_node_3(c));
  c.heal();
  c.tick_all(10);
  EXPECT_EQ(c.replica(1).snapshot_stats().sent, 0u);
  EXPECT_GE(c.replica(1).snapshot_stats().too_large, 1u);
  EXPECT_EQ(c.raft(3).stranded_below(), 15u);
}

}  // namespace
}  // namespace raftlog::raft

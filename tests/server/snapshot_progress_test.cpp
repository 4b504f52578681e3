// What status, metrics and health make of the transport's snapshot counters (server/
// snapshot_progress.h, health_reporter.h): a leader's snapshot in flight until the follower
// acknowledges its index; a follower receiving, then installing until its commit index reaches the
// snapshot, NOT_SERVING with the reason meanwhile.
#include "server/snapshot_progress.h"

#include <gtest/gtest.h>

#include "server/health_reporter.h"

namespace raftlog::server {
namespace {

using namespace std::chrono_literals;
const std::chrono::steady_clock::time_point kNow = std::chrono::steady_clock::time_point(5000s);

NodeStatus leader_with_peer(std::uint64_t peer, std::uint64_t match) {
  NodeStatus status;
  status.node_id = 1;
  status.role = raft::Role::kLeader;
  status.leader_id = 1;
  status.term = 4;  // the term sending() names
  PeerStatus tracked;
  tracked.id = peer;
  tracked.match_index = match;
  status.peers.push_back(tracked);
  return status;
}

PeerStats sending(std::uint64_t peer, SnapshotSendProgress::State state) {
  PeerStats stats;
  stats.id = peer;
  stats.snapshot = SnapshotSendProgress{4, 900, 5000000, 2000000, state, 0, std::nullopt};
  stats.snapshots_started = 1;
  return stats;
}

TEST(SnapshotProgress, ALeadersSnapshotIsInFlightUntilTheFollowerAcknowledgesItsIndex) {
  SnapshotTransfers transfers = snapshot_transfers(
      leader_with_peer(2, 10), {sending(2, SnapshotSendProgress::State::kSending)}, {}, kNow);
  ASSERT_EQ(transfers.sending.size(), 1U);
  EXPECT_EQ(transfers.sending[0].state, SnapshotTransfer::State::kSending);
  EXPECT_EQ(transfers.sending[0].bytes_done, 2000000U);
  EXPECT_EQ(transfers.sending[0].bytes_total, 5000000U);
  EXPECT_EQ(transfers.snapshots_started, 1U);
  transfers = snapshot_transfers(leader_with_peer(2, 10),
                                 {sending(2, SnapshotSendProgress::State::kSent)}, {}, kNow);
  ASSERT_EQ(transfers.sending.size(), 1U);
  EXPECT_EQ(transfers.sending[0].state, SnapshotTransfer::State::kSent);
  // Acknowledged, abandoned, or no longer the leader: nothing in flight.
  EXPECT_TRUE(snapshot_transfers(leader_with_peer(2, 900),
                                 {sending(2, SnapshotSendProgress::State::kSent)}, {}, kNow)
                  .sending.empty());
  EXPECT_TRUE(snapshot_transfers(leader_with_peer(2, 10),
                                 {sending(2, SnapshotSendProgress::State::kAbandoned)}, {}, kNow)
                  .sending.empty());
  // Sent in an earlier term of this node's leadership (it led, lost it, leads again): the new
  // leader's match 0 is not news that the follower lacks it.
  NodeStatus leads_again = leader_with_peer(2, 0);
  leads_again.term = 6;
  EXPECT_TRUE(snapshot_transfers(leads_again, {sending(2, SnapshotSendProgress::State::kSent)}, {},
                                 kNow)
                  .sending.empty());
  NodeStatus follower = leader_with_peer(2, 10);
  follower.role = raft::Role::kFollower;
  EXPECT_TRUE(
      snapshot_transfers(follower, {sending(2, SnapshotSendProgress::State::kSending)}, {}, kNow)
          .sending.empty());
}

TEST(SnapshotProgress, AFollowerReceivesThenInstallsAndIsNotServingMeanwhile) {
  NodeStatus status;
  status.node_id = 2;
  status.role = raft::Role::kFollower;
  status.leader_id = 1;
  status.commit_index = 40;
  EXPECT_EQ(not_serving_reason(status, snapshot_transfers(status, {}, {}, kNow)), "");

  SnapshotReceiveStatus receive;
  receive.partials.push_back(SnapshotReceiveProgress{1, 4, 900, 3000, 9000});
  SnapshotTransfers transfers = snapshot_transfers(status, {}, receive, kNow);
  ASSERT_TRUE(transfers.receiving.has_value());
  EXPECT_EQ(transfers.receiving->state, SnapshotTransfer::State::kReceiving);
  EXPECT_EQ(not_serving_reason(status, transfers),
            "receiving a snapshot of the log up to index 900 from node 1 (3000 of 9000 bytes)");

  receive.partials.clear();
  receive.last_delivered = SnapshotDelivery{1, 4, 900, 9000, kNow - 1s};
  transfers = snapshot_transfers(status, {}, receive, kNow);
  ASSERT_TRUE(transfers.receiving.has_value());
  EXPECT_EQ(transfers.receiving->state, SnapshotTransfer::State::kInstalling);
  EXPECT_EQ(not_serving_reason(status, transfers),
            "installing a snapshot of the log up to index 900 from node 1");
  // Installed: the commit index reached the snapshot's.
  status.commit_index = 900;
  EXPECT_EQ(not_serving_reason(status, snapshot_transfers(status, {}, receive, kNow)), "");
  // A delivery the core dropped is not reported for ever.
  status.commit_index = 40;
  EXPECT_FALSE(snapshot_transfers(status, {}, receive, kNow + kSnapshotInstallReportWindow)
                   .receiving.has_value());
  // A storage fault still comes first.
  status.catching_up = true;
  status.catching_up_to_index = 50;
  EXPECT_NE(not_serving_reason(status, snapshot_transfers(status, {}, receive, kNow))
                .find("after a storage fault"),
            std::string::npos);
}

// A resumed send: the bytes the follower acknowledged count as done, and are shown apart.
TEST(SnapshotProgress, AResumedSendCountsTheSkippedBytesAsDoneAndSaysSo) {
  PeerStats stats = sending(2, SnapshotSendProgress::State::kSending);
  stats.snapshot->skipped_bytes = 3000000;
  stats.snapshot->sent_bytes = 500000;
  stats.snapshots_resumed = 1;
  stats.snapshot_bytes_skipped = 3000000;
  const SnapshotTransfers transfers =
      snapshot_transfers(leader_with_peer(2, 10), {stats}, {}, kNow);
  ASSERT_EQ(transfers.sending.size(), 1U);
  EXPECT_EQ(transfers.sending[0].bytes_done, 3500000U);
  EXPECT_EQ(transfers.sending[0].bytes_skipped, 3000000U);
  EXPECT_EQ(transfers.sending[0].bytes_total, 5000000U);
  EXPECT_EQ(transfers.snapshots_resumed, 1U);
  EXPECT_EQ(transfers.snapshot_bytes_skipped, 3000000U);
}

// A send that could not resume from the follower's partial says why, and the node's totals sum the
// misses of every peer by reason (the metric and `status`).
TEST(SnapshotProgress, ASendThatMissedTheResumeSaysWhyAndTheMissesAreSummedByReason) {
  PeerStats missed = sending(2, SnapshotSendProgress::State::kSending);
  missed.snapshot->resume_missed = ResumeMiss::kBytes;
  missed.snapshot_resume_missed[ResumeMiss::kBytes] = 2;
  missed.snapshot_resume_missed[ResumeMiss::kPoint] = 1;
  PeerStats other = sending(3, SnapshotSendProgress::State::kSending);
  other.snapshot_resume_missed[ResumeMiss::kPoint] = 4;
  other.snapshot_resume_missed[ResumeMiss::kBeyondSent] = 1;
  SnapshotTransfers transfers = snapshot_transfers(leader_with_peer(2, 10), {missed, other}, {}, kNow);
  ASSERT_EQ(transfers.sending.size(), 1U);
  EXPECT_EQ(transfers.sending[0].resume_missed, "bytes");
  EXPECT_EQ(transfers.snapshot_resume_missed[ResumeMiss::kPoint], 5U);
  EXPECT_EQ(transfers.snapshot_resume_missed[ResumeMiss::kBytes], 2U);
  EXPECT_EQ(transfers.snapshot_resume_missed[ResumeMiss::kBeyondSent], 1U);
  transfers = snapshot_transfers(leader_with_peer(3, 10), {other}, {}, kNow);
  ASSERT_EQ(transfers.sending.size(), 1U);
  EXPECT_EQ(transfers.sending[0].resume_missed, "") << "started at 0 with no receipt: no miss";
}

}  // namespace
}  // namespace raftlog::server

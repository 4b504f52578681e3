// A new leader's continuation over the real transport (docs/design.md, "Snapshot transfer", *A new
// leader continues*): the cut (a copy of up to 64 MiB of its data after the follower's splice point
// and a walk of its frames) runs on the outbound's encoder thread, not in send() on the caller's
// thread (the Raft loop's), the follower splices and receives the whole data, and a newer snapshot
// handed to the lane while the cut runs overtakes it.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "node/temp_dir.h"
#include "peer_transport_support.h"
#include "replica/snapshot_frames.h"
#include "server/peer_outbound.h"
#include "server/peer_stream_auth.h"
#include "server/snapshot_chunks.h"
#include "snapshot_splice_support.h"

namespace raftlog::server {
namespace {

using namespace raftlog::server::peer_testing;         // peer_transport_support.h
namespace splice = raftlog::server::snapshot_testing;  // snapshot_splice_support.h

// The new leader's (node 3's) sending side alone, with its own receipts board.
struct NewLeaderOutbound {
  explicit NewLeaderOutbound(PeerTransportOptions transport_options)
      : options(std::move(transport_options)), auth(options), outbound(options, auth, receipts) {}
  PeerTransportOptions options;
  PeerStreamAuth auth;
  SnapshotReceipts receipts;
  PeerOutbound outbound;

  PeerStats stats_for(raft::NodeId peer) const {
    for (const PeerStats& stats : outbound.peer_stats()) {
      if (stats.id == peer) return stats;
    }
    ADD_FAILURE() << "no stats for peer " << peer;
    return {};
  }
};

// Holds the encoder thread inside the test hook until released, and says where it ran.
class CutGate {
 public:
  void enter() {
    std::unique_lock lock(mu_);
    thread_ = std::this_thread::get_id();
    ++entered_;
    cv_.wait_for(lock, 20s, [&] { return released_ >= entered_; });
  }
  void release() {
    {
      std::lock_guard lock(mu_);
      ++released_;
    }
    cv_.notify_all();
  }
  int entered() const {
    std::lock_guard lock(mu_);
    return entered_;
  }
  std::thread::id thread() const {
    std::lock_guard lock(mu_);
    return thread_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::thread::id thread_;
  int entered_ = 0;
  int released_ = 0;
};

// The receipt a follower holding the first two chunks of `snapshot` sends (the same chunks through
// a reassembler, as the follower's messages carry it).
std::optional<SnapshotReceipt> receipt_after_two_chunks(const raft::Message& snapshot) {
  SnapshotReassembler same;
  std::string problem;
  const std::vector<SnapshotChunk> chunks = splice::chunks_of(snapshot);
  for (std::size_t i = 0; i < 2; ++i) same.add(chunks[i], splice::kT0, &problem);
  return same.receipt();
}

// The follower holds one partial of the first two chunks (what the old leader's send left it).
bool holds_two_chunk_partial(TestNode& follower) {
  const SnapshotReceiveStatus status = follower.transport().snapshot_receive_status();
  return status.partials.size() == 1 &&
         status.partials[0].received_bytes == 2 * kSnapshotChunkBytes;
}

TEST(PeerTransportContinuation, TheCutRunsOffTheSendersThreadAndANewerSnapshotOvertakesIt) {
  const auto addresses = pick_addresses({1, 2, 3});
  TestNode follower(test_options(2, addresses), port_of(addresses.at(2)));
  // The old leader (node 1, term 2) sent the follower the first two chunks of its framed data.
  const raft::Message old_snapshot = splice::at_point(1, 2, splice::leader_encoding(2, 3, 0));
  ASSERT_TRUE(raw_batch_stream(addresses.at(2), {chunk_batch(old_snapshot, {0, 1})}).ok());
  ASSERT_TRUE(eventually([&] { return holds_two_chunk_partial(follower); }, 10s));
  // Its receipt as the follower's messages carry it (the same chunks through a reassembler here).
  const std::optional<SnapshotReceipt> receipt = receipt_after_two_chunks(old_snapshot);
  ASSERT_TRUE(receipt && receipt->splice);

  auto leader = std::make_unique<NewLeaderOutbound>(test_options(3, addresses));
  leader->receipts.record(2, receipt);
  CutGate gate;
  leader->outbound.set_before_continuation_cut_for_testing([&](raft::NodeId) { gate.enter(); });
  leader->outbound.start();

  // send() returns while the cut waits on the encoder thread.
  const raft::Message new_snapshot = splice::at_point(3, 3, splice::leader_encoding(3, 4, 99));
  ASSERT_TRUE(leader->outbound.send(new_snapshot));
  ASSERT_TRUE(eventually([&] { return gate.entered() == 1; }, 10s));
  EXPECT_NE(gate.thread(), std::this_thread::get_id());
  EXPECT_EQ(leader->stats_for(2).append.snapshots_started, 0U) << "pushed only once it is cut";
  gate.release();
  ASSERT_TRUE(eventually([&] { return follower.received_count() == 1; }, 20s))
      << describe(leader->stats_for(2));
  const raft::Message spliced = follower.received()[0];
  ASSERT_TRUE(spliced.snapshot);
  store::Result<replica::SnapshotData> decoded =
      replica::decode_snapshot_data(spliced.snapshot->data.view());
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_EQ(decoded->section, "leader 99");
  EXPECT_EQ(follower.transport().snapshot_receive_status().counters.partials_spliced, 1U);
  EXPECT_EQ(leader->stats_for(2).append.snapshots_continued, 1U);

  // The receipt still names the old partial (the board keeps a peer's latest): the next send of
  // the same snapshot cuts again; a newer snapshot (another point) handed to the lane meanwhile is
  // sent, and the late cut is dropped, not pushed over it.
  ASSERT_TRUE(leader->outbound.send(new_snapshot));
  ASSERT_TRUE(eventually([&] { return gate.entered() == 2; }, 10s));
  raft::Message newer = splice::snapshot_message(3, 3, 95'000, splice::snapshot_data(3 << 20, 5));
  ASSERT_TRUE(leader->outbound.send(newer));  // pushed to the lane before the cut ends
  // The encoder thread also writes the lane's large batches: the newer snapshot's chunks wait for
  // the cut to end (a cut holds up those writes for as long as it takes).
  gate.release();
  ASSERT_TRUE(eventually([&] { return follower.received_count() == 2; }, 20s))
      << describe(leader->stats_for(2));
  std::this_thread::sleep_for(300ms);  // the late cut, had it been pushed, would start sending
  const LaneStats after = leader->stats_for(2).append;
  EXPECT_EQ(after.snapshots_continued, 1U);
  EXPECT_EQ(after.snapshots_started, 2U) << "the late cut was not pushed";
  ASSERT_TRUE(after.snapshot.has_value());
  EXPECT_EQ(after.snapshot->index, 95'000U);
  EXPECT_EQ(follower.received_count(), 2U);
  EXPECT_EQ(follower.received()[1].snapshot->index, 95'000U);
  leader->outbound.stop();
}

// Review resume4 L2: a retry of a continued transfer that broke takes the continuation the lane
// keeps (send() cuts nothing) and resumes it at the follower's receipt. The follower (its partial
// kept in SNAPSHOT.partial) is down while the new leader first sends, so that transfer makes no
// chunk; its receipt, once the new leader knows the spliced data is what it holds, names the
// spliced data at the point; the follower restarts, restores the old leader's bytes, and splices
// the resumed transfer.
TEST(PeerTransportContinuation, ARetryOfABrokenContinuedTransferTakesTheKeptCopy) {
  testing::TempDir data_dir;
  const auto addresses = pick_addresses({1, 2, 3});
  PeerTransportOptions follower_options = test_options(2, addresses);
  follower_options.snapshot_partial_path = data_dir.path() + "/SNAPSHOT.partial";
  const raft::Message old_snapshot = splice::at_point(1, 2, splice::leader_encoding(2, 3, 0));
  {
    TestNode follower(follower_options, port_of(addresses.at(2)));
    ASSERT_TRUE(raw_batch_stream(addresses.at(2), {chunk_batch(old_snapshot, {0, 1})}).ok());
    ASSERT_TRUE(eventually([&] { return holds_two_chunk_partial(follower); }, 10s));
  }  // the follower goes down with its partial on disk
  const std::optional<SnapshotReceipt> receipt = receipt_after_two_chunks(old_snapshot);
  ASSERT_TRUE(receipt && receipt->splice);

  auto leader = std::make_unique<NewLeaderOutbound>(test_options(3, addresses));
  leader->receipts.record(2, receipt);
  std::atomic<int> cuts{0};
  leader->outbound.set_before_continuation_cut_for_testing([&](raft::NodeId) { ++cuts; });
  leader->outbound.start();
  const raft::Message new_snapshot = splice::at_point(3, 3, splice::leader_encoding(3, 4, 99));
  ASSERT_TRUE(leader->outbound.send(new_snapshot));
  ASSERT_TRUE(
      eventually([&] { return leader->stats_for(2).append.snapshots_continued == 1; }, 10s));
  EXPECT_EQ(cuts.load(), 1);

  // The follower's receipt of the spliced data (what it holds once it spliced: the point).
  const SnapshotContinuation cut =
      make_snapshot_continuation(new_snapshot.snapshot->data, *receipt->splice);
  leader->receipts.record(2, SnapshotReceipt{cut.spliced_identity(splice::kPoint, 2),
                                             receipt->splice->kept_bytes, receipt->splice});
  ASSERT_TRUE(leader->outbound.send(new_snapshot));
  const LaneStats retried = leader->stats_for(2).append;
  EXPECT_EQ(cuts.load(), 1) << "the kept continuation was handed back: no second cut";
  EXPECT_EQ(retried.snapshots_continued, 1U);
  EXPECT_EQ(retried.snapshots_resumed, 1U);
  EXPECT_EQ(retried.snapshot_bytes_skipped, receipt->splice->kept_bytes);

  // The follower comes back with the old leader's bytes and splices the resumed transfer.
  TestNode follower(follower_options, port_of(addresses.at(2)));
  EXPECT_EQ(follower.transport().snapshot_receive_status().counters.partials_restored, 1U);
  ASSERT_TRUE(eventually([&] { return follower.received_count() == 1; }, 20s))
      << describe(leader->stats_for(2));
  EXPECT_EQ(follower.transport().snapshot_receive_status().counters.partials_spliced, 1U);
  store::Result<replica::SnapshotData> decoded =
      replica::decode_snapshot_data(follower.received()[0].snapshot->data.view());
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_EQ(decoded->section, "leader 99");
  leader->outbound.stop();
}

// A follower from before data digests (its receipt names neither the data's digest nor its kept
// frames'): the lane would neither resume nor continue its partial (ResumeMiss::kDigest), so no
// continuation is cut for it on the encoder thread (a copy of up to 64 MiB per retry for nothing);
// the transfer starts at 0.
TEST(PeerTransportContinuation, NoContinuationIsCutForAReceiptWithoutDigests) {
  const auto addresses = pick_addresses({1, 2, 3});
  std::optional<SnapshotReceipt> receipt =
      receipt_after_two_chunks(splice::at_point(1, 2, splice::leader_encoding(2, 3, 0)));
  ASSERT_TRUE(receipt && receipt->splice && receipt->splice->kept_digest);
  receipt->snapshot.data_digest.reset();
  receipt->splice->kept_digest.reset();
  auto leader = std::make_unique<NewLeaderOutbound>(test_options(3, addresses));
  leader->receipts.record(2, receipt);
  std::atomic<int> cuts{0};
  leader->outbound.set_before_continuation_cut_for_testing([&](raft::NodeId) { ++cuts; });
  leader->outbound.start();
  ASSERT_TRUE(leader->outbound.send(splice::at_point(3, 3, splice::leader_encoding(3, 4, 99))));
  ASSERT_TRUE(eventually(
      [&] {
        return leader->stats_for(2).append.snapshot_resume_missed[ResumeMiss::kDigest] == 1;
      },
      10s));
  EXPECT_EQ(cuts.load(), 0);
  EXPECT_EQ(leader->stats_for(2).append.snapshots_continued, 0U);
  leader->outbound.stop();
}

}  // namespace
}  // namespace raftlog::server

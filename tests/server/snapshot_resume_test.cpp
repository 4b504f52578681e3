// Resuming snapshot transfers (server/snapshot_chunks.h, "Resuming"; peer_queue.h push_snapshot)
// without gRPC streams: the receiver's receipt, the codec's checks of a receipt from the network, a
// sender that starts at the acknowledged offset and ignores receipts it must not trust, a transfer
// that loses a chunk and resumes, and a new leader that continues the old one's partial.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "raftlog/peer/v1/peer.pb.h"
#include "server/message_codec.h"
#include "server/peer_queue.h"
#include "server/snapshot_chunks.h"
#include "snapshot_chunk_support.h"
#include "util/crc32c.h"

namespace raftlog::server {
namespace {

using namespace snapshot_testing;  // snapshot_chunk_support.h

SnapshotIdentity identity_of(const raft::Message& message) {
  const std::uint32_t crc = util::crc32c::value(message.snapshot->data.view());
  return SnapshotIdentity{message.snapshot->index, message.snapshot->term,
                          message.snapshot->data.size(), crc,
                          replica::snapshot_data_digest(message.snapshot->data.view(), crc)};
}

std::uint64_t data_bytes(const std::vector<SnapshotChunk>& chunks) {
  std::uint64_t bytes = 0;
  for (const SnapshotChunk& chunk : chunks) bytes += chunk.data.size();
  return bytes;
}

TEST(SnapshotReceipt, TheCodecCarriesAReceiptOnAnyMessageAndChecksIt) {
  pb::RaftMessage wire;
  std::string problem;
  EXPECT_FALSE(decode_snapshot_receipt(wire, &problem).has_value());
  EXPECT_EQ(problem, "");  // none: not a problem
  const SnapshotReceipt receipt{SnapshotIdentity{900, 4, 3u << 20, 0xdeadbeef}, 1u << 20};
  encode_snapshot_receipt(receipt, &wire);
  pb::RaftMessage parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire.SerializeAsString()));
  EXPECT_EQ(decode_snapshot_receipt(parsed, &problem), receipt);
  EXPECT_EQ(problem, "");

  // Hostile values: each is ignored with a problem to log, never trusted.
  const auto refused = [&](const std::function<void(pb::SnapshotReceipt*)>& mangle,
                           const std::string& fragment) {
    pb::RaftMessage copy = parsed;
    mangle(copy.mutable_snapshot_receipt());
    std::string why;
    EXPECT_FALSE(decode_snapshot_receipt(copy, &why).has_value()) << fragment;
    EXPECT_NE(why.find(fragment), std::string::npos) << why;
  };
  refused([](pb::SnapshotReceipt* r) { r->set_index(0); }, "index 0");
  refused([](pb::SnapshotReceipt* r) { r->set_index(kMaxSnapshotIndex + 1); }, "index");
  refused([](pb::SnapshotReceipt* r) { r->set_term(0); }, "term 0");
  refused([](pb::SnapshotReceipt* r) { r->set_term(raft::kMaxTerm + 1); }, "term");
  refused([](pb::SnapshotReceipt* r) { r->set_total_bytes(0); }, "total of 0");
  refused([](pb::SnapshotReceipt* r) { r->set_total_bytes(kMaxSnapshotBytes + 1); }, "total of");
  refused([](pb::SnapshotReceipt* r) { r->set_received_bytes(0); }, "acknowledges 0");
  refused([](pb::SnapshotReceipt* r) { r->set_received_bytes(3u << 20); }, "acknowledges");
  refused([](pb::SnapshotReceipt* r) { r->set_received_bytes(~std::uint64_t{0}); }, "acknowledges");
}

TEST(SnapshotReceipt, TheReceiverAcknowledgesItsNewestPartial) {
  SnapshotReassembler reassembler;
  std::string problem;
  EXPECT_FALSE(reassembler.receipt().has_value());
  const raft::Message a = snapshot_message(1, 4, 900, snapshot_data(3 * kSnapshotChunkBytes, 11));
  std::vector<SnapshotChunk> chunks = chunks_of(a);
  EXPECT_FALSE(reassembler.add(chunks[0], kT0, &problem));
  EXPECT_FALSE(reassembler.add(chunks[1], kT0, &problem));
  ASSERT_TRUE(reassembler.receipt().has_value());
  EXPECT_EQ(*reassembler.receipt(), (SnapshotReceipt{identity_of(a), 2 * kSnapshotChunkBytes}));
  EXPECT_TRUE(reassembler.add(chunks[2], kT0, &problem).has_value());
  EXPECT_FALSE(reassembler.receipt().has_value()) << "a delivered snapshot needs no receipt";
}

TEST(SnapshotReceipt, TheBoardKeepsEachPeersLatestWithinItsBound) {
  SnapshotReceipts receipts;
  const SnapshotReceipt receipt{SnapshotIdentity{900, 4, 3u << 20, 7}, 1u << 20};
  receipts.record(2, receipt);
  EXPECT_EQ(receipts.from_peer(2), receipt);
  receipts.record(2, std::nullopt);  // its latest message carried none: it holds no partial
  EXPECT_FALSE(receipts.from_peer(2).has_value());
  for (raft::NodeId peer = 1; peer <= SnapshotReceipts::kMaxPeersTracked + 10; ++peer) {
    receipts.record(peer, receipt);
  }
  EXPECT_TRUE(receipts.from_peer(SnapshotReceipts::kMaxPeersTracked).has_value());
  EXPECT_FALSE(receipts.from_peer(SnapshotReceipts::kMaxPeersTracked + 1).has_value());
  receipts.set_own(receipt, kT0 + kSnapshotPartialIdleTimeout);
  EXPECT_EQ(receipts.own(kT0), receipt);
  // Review F3: the partial it names idles out: no longer acknowledged, even before anything else
  // touches the reassembler.
  EXPECT_FALSE(receipts.own(kT0 + kSnapshotPartialIdleTimeout).has_value());
}

TEST(SnapshotReceipt, TheReceiptIsValidUntilItsPartialWouldExpire) {
  SnapshotReassembler reassembler;
  std::string problem;
  const raft::Message a = snapshot_message(1, 4, 900, snapshot_data(3 * kSnapshotChunkBytes, 19));
  std::vector<SnapshotChunk> chunks = chunks_of(a);
  EXPECT_FALSE(reassembler.add(chunks[0], kT0, &problem));
  EXPECT_FALSE(reassembler.add(chunks[1], kT0 + 10s, &problem));
  Clock::time_point valid_until{};
  ASSERT_TRUE(reassembler.receipt(&valid_until).has_value());
  EXPECT_EQ(valid_until, kT0 + 10s + kSnapshotPartialIdleTimeout);
}

TEST(SnapshotResume, TheLaneStartsAtTheAcknowledgedOffsetAndCountsIt) {
  const raft::Message message =
      snapshot_message(1, 4, 900, snapshot_data(6 * kSnapshotChunkBytes + 5, 12));
  const SnapshotIdentity identity = identity_of(message);
  LaneQueue lane(append_lane_limits());
  const std::uint64_t acknowledged = 2 * kSnapshotChunkBytes + 100;  // any byte, not a chunk's
  ASSERT_EQ(lane.push_snapshot(message, identity.data_crc32c, kT0,
                               SnapshotReceipt{identity, acknowledged}),
            LaneQueue::Admission::kQueued);
  const std::vector<SnapshotChunk> chunks = drain(lane);
  ASSERT_FALSE(chunks.empty());
  EXPECT_EQ(chunks.front().place.offset, acknowledged);
  EXPECT_EQ(data_bytes(chunks), identity.total_bytes - acknowledged);
  ASSERT_TRUE(lane.snapshot_progress().has_value());
  EXPECT_EQ(lane.snapshot_progress()->state, SnapshotSendProgress::State::kSent);
  EXPECT_EQ(lane.snapshot_progress()->skipped_bytes, acknowledged);
  EXPECT_EQ(lane.snapshot_progress()->sent_bytes, identity.total_bytes - acknowledged);
  EXPECT_EQ(lane.counters().snapshots_resumed, 1u);
  EXPECT_EQ(lane.counters().snapshot_bytes_skipped, acknowledged);
  EXPECT_EQ(lane.counters().snapshots_sent, 1u);
}

// A receipt comes from the network: one that does not name this very data, names no byte or every
// byte, or claims more than this lane ever made of it, is ignored and the transfer starts at 0.
TEST(SnapshotResume, AReceiptTheLaneMustNotTrustIsIgnored) {
  const raft::Message message =
      snapshot_message(1, 4, 900, snapshot_data(4 * kSnapshotChunkBytes, 13));
  const SnapshotIdentity identity = identity_of(message);
  const std::uint64_t half = identity.total_bytes / 2;
  // Each with the reason its miss is counted under (none: the codec refuses such a receipt).
  std::vector<std::pair<SnapshotReceipt, std::optional<ResumeMiss>>> hostile;
  SnapshotIdentity other = identity;
  other.index = 901;
  hostile.push_back({{other, half}, ResumeMiss::kPoint});
  other = identity;
  other.term = 3;
  hostile.push_back({{other, half}, ResumeMiss::kPoint});
  other = identity;
  other.total_bytes += 1;
  hostile.push_back({{other, half}, ResumeMiss::kBytes});
  other = identity;
  other.data_crc32c ^= 1;
  hostile.push_back({{other, half}, ResumeMiss::kBytes});
  hostile.push_back({{identity, 0}, std::nullopt});
  hostile.push_back({{identity, identity.total_bytes}, std::nullopt});
  hostile.push_back({{identity, identity.total_bytes + 1}, std::nullopt});
  for (const auto& [receipt, reason] : hostile) {
    LaneQueue lane(append_lane_limits());
    ASSERT_EQ(lane.push_snapshot(message, identity.data_crc32c, kT0, receipt),
              LaneQueue::Admission::kQueued);
    const std::vector<SnapshotChunk> chunks = drain(lane);
    ASSERT_FALSE(chunks.empty());
    EXPECT_EQ(chunks.front().place.offset, 0u) << receipt.received_bytes;
    EXPECT_EQ(data_bytes(chunks), identity.total_bytes);
    EXPECT_EQ(lane.counters().snapshots_resumed, 0u);
    EXPECT_EQ(lane.snapshot_progress()->resume_missed, reason) << receipt.received_bytes;
    ResumeMissCounts expected;
    if (reason) expected[*reason] = 1;
    EXPECT_EQ(lane.counters().snapshot_resume_missed.by_reason, expected.by_reason);
  }

  // Past what this lane sent of the same data: it made one window, the peer claims more.
  const raft::Message larger =
      snapshot_message(1, 4, 900, snapshot_data(8 * kSnapshotChunkBytes, 17));
  const SnapshotIdentity larger_identity = identity_of(larger);
  LaneQueue lane(append_lane_limits());
  ASSERT_EQ(lane.push_snapshot(larger, larger_identity.data_crc32c, kT0),
            LaneQueue::Admission::kQueued);
  lane.take_batch();  // the first window's chunks are made
  lane.write_failed();
  lane.expire(Clock::now() + 1h);  // dropped: the transfer is abandoned
  ASSERT_EQ(lane.snapshot_progress()->state, SnapshotSendProgress::State::kAbandoned);
  ASSERT_EQ(lane.push_snapshot(larger, larger_identity.data_crc32c, kT0,
                               SnapshotReceipt{larger_identity, kSnapshotWindowBytes + 1}),
            LaneQueue::Admission::kQueued);
  EXPECT_EQ(lane.snapshot_progress()->skipped_bytes, 0u) << "more than the lane ever made";
  EXPECT_EQ(lane.counters().snapshots_resumed, 0u);
  EXPECT_EQ(lane.snapshot_progress()->resume_missed, ResumeMiss::kBeyondSent);
  EXPECT_EQ(lane.counters().snapshot_resume_missed[ResumeMiss::kBeyondSent], 1u);
}

// What a leader change mid-transfer gives today: the new leader's snapshot at the same point has
// other bytes (its dedup table, timestamp floor and node section are its own), so the follower's
// receipt names the same index and term with another length or CRC: a miss of reason "bytes",
// and the transfer starts at 0. A retry by the same leader still resumes and counts no miss.
TEST(SnapshotResume, ANewLeaderWithOtherDataAtTheSamePointCountsABytesMiss) {
  const raft::Message old_leader =
      snapshot_message(1, 4, 900, snapshot_data(4 * kSnapshotChunkBytes + 3, 15));
  raft::Message new_leader = snapshot_message(1, 4, 900, snapshot_data(4 * kSnapshotChunkBytes, 16));
  new_leader.from = 3;
  new_leader.term = 5;
  SnapshotReassembler receiver;
  std::string problem;
  const std::vector<SnapshotChunk> old_chunks = chunks_of(old_leader);
  EXPECT_FALSE(receiver.add(old_chunks[0], kT0, &problem));
  EXPECT_FALSE(receiver.add(old_chunks[1], kT0, &problem));
  const std::optional<SnapshotReceipt> receipt = receiver.receipt();
  ASSERT_TRUE(receipt.has_value());
  LaneQueue lane(append_lane_limits());
  const SnapshotIdentity identity = identity_of(new_leader);
  ASSERT_EQ(lane.push_snapshot(new_leader, identity.data_crc32c, kT0, receipt),
            LaneQueue::Admission::kQueued);
  EXPECT_EQ(lane.snapshot_progress()->skipped_bytes, 0u);
  EXPECT_EQ(lane.snapshot_progress()->resume_missed, ResumeMiss::kBytes);
  EXPECT_EQ(lane.counters().snapshot_resume_missed[ResumeMiss::kBytes], 1u);
  EXPECT_EQ(lane.counters().snapshot_resume_missed[ResumeMiss::kPoint], 0u);
  // The old leader at its own retry resumes from the same receipt: no miss.
  LaneQueue old_lane(append_lane_limits());
  const SnapshotIdentity old_identity = identity_of(old_leader);
  ASSERT_EQ(old_lane.push_snapshot(old_leader, old_identity.data_crc32c, kT0, receipt),
            LaneQueue::Admission::kQueued);
  EXPECT_EQ(old_lane.snapshot_progress()->skipped_bytes, 2 * kSnapshotChunkBytes);
  EXPECT_FALSE(old_lane.snapshot_progress()->resume_missed.has_value());
  EXPECT_EQ(old_lane.counters().snapshot_resume_missed.by_reason, ResumeMissCounts{}.by_reason);
}

// A follower that restarts from its SNAPSHOT.partial can hold more than the leader last heard:
// the leader's retries while it was down started at the stale receipt and were abandoned after a
// window. The restored receipt lies within what an earlier transfer of the same data made, so the
// lane trusts it although the latest transfer made less.
TEST(SnapshotResume, AReceiptWithinWhatAnEarlierTransferMadeIsTrusted) {
  const raft::Message message =
      snapshot_message(1, 4, 900, snapshot_data(12 * kSnapshotChunkBytes, 19));
  const SnapshotIdentity identity = identity_of(message);
  LaneQueue lane(append_lane_limits());
  ASSERT_EQ(lane.push_snapshot(message, identity.data_crc32c, kT0), LaneQueue::Admission::kQueued);
  for (int window = 0; window < 2; ++window) {  // two windows written: 8 chunks made
    lane.take_batch();
    BatchPlan plan(lane.limits());
    for (std::size_t i = 0; i < lane.writing().size(); ++i) plan.add(kSnapshotChunkBytes + 4096);
    lane.settle_batch(plan);
    lane.write_sent(kT0);
  }
  const std::uint64_t made_first = 8 * kSnapshotChunkBytes;
  // The follower went down; the leader's retry starts at its last receipt (1 chunk), makes one
  // window that the dead stream never delivers, and is abandoned: it reached 5 chunks.
  ASSERT_EQ(lane.push_snapshot(message, identity.data_crc32c, kT0,
                               SnapshotReceipt{identity, kSnapshotChunkBytes}),
            LaneQueue::Admission::kQueued);
  lane.take_batch();
  lane.write_failed();
  lane.expire(Clock::now() + 1h);
  ASSERT_EQ(lane.snapshot_progress()->state, SnapshotSendProgress::State::kAbandoned);
  // Restarted, the follower acknowledges 7 chunks: more than the latest transfer made, within the
  // first's.
  const std::uint64_t restored = 7 * kSnapshotChunkBytes;
  ASSERT_EQ(
      lane.push_snapshot(message, identity.data_crc32c, kT0, SnapshotReceipt{identity, restored}),
      LaneQueue::Admission::kQueued);
  EXPECT_EQ(lane.snapshot_progress()->skipped_bytes, restored);
  const std::vector<SnapshotChunk> rest = drain(lane);
  ASSERT_FALSE(rest.empty());
  EXPECT_EQ(rest.front().place.offset, restored);
  EXPECT_EQ(data_bytes(rest), identity.total_bytes - restored);
  // Still no more than any transfer made: past the first's 8 chunks is refused.
  ASSERT_EQ(lane.push_snapshot(message, identity.data_crc32c, kT0,
                               SnapshotReceipt{identity, identity.total_bytes - 1}),
            LaneQueue::Admission::kQueued);
  EXPECT_EQ(lane.snapshot_progress()->skipped_bytes, identity.total_bytes - 1)
      << "the third transfer made every chunk: the whole data was sent";
  LaneQueue other(append_lane_limits());
  ASSERT_EQ(other.push_snapshot(message, identity.data_crc32c, kT0), LaneQueue::Admission::kQueued);
  other.take_batch();
  other.write_failed();
  other.expire(Clock::now() + 1h);
  ASSERT_EQ(other.push_snapshot(message, identity.data_crc32c, kT0,
                                SnapshotReceipt{identity, made_first}),
            LaneQueue::Admission::kQueued);
  EXPECT_EQ(other.snapshot_progress()->skipped_bytes, 0u) << "above the one window it made";
}

// A leader that queued a snapshot for a follower that was down (nothing made of it), lost the
// lead, and leads again in a later term: meanwhile another leader sent the follower the same
// bytes (its encoding identical), which the follower holds legitimately. What this lane made in an
// earlier term says nothing about them: it trusts the receipt as a leader that sent none does.
// Within one term the beyond-sent check stands. (Found reading SnapshotCatchUpTest.ALeaderChange
// MidTransfer...: a new leader that had led during the trims would count "beyond_sent".)
TEST(SnapshotResume, ALeaderAgainInALaterTermTrustsWhatAnotherLeaderSentMeanwhile) {
  raft::Message message = snapshot_message(1, 4, 900, snapshot_data(6 * kSnapshotChunkBytes, 23));
  const SnapshotIdentity identity = identity_of(message);
  LaneQueue lane(append_lane_limits());
  ASSERT_EQ(lane.push_snapshot(message, identity.data_crc32c, kT0), LaneQueue::Admission::kQueued);
  // The follower is down: no write takes a chunk; the same term's receipt of 2 chunks is refused.
  const SnapshotReceipt receipt{identity, 2 * kSnapshotChunkBytes};
  ASSERT_EQ(lane.push_snapshot(message, identity.data_crc32c, kT0, receipt),
            LaneQueue::Admission::kQueued);
  EXPECT_EQ(lane.snapshot_progress()->resume_missed, ResumeMiss::kBeyondSent);
  // Leading again in term 6, the same data: resumed at the receipt.
  message.term = 6;
  ASSERT_EQ(lane.push_snapshot(message, identity.data_crc32c, kT0, receipt),
            LaneQueue::Admission::kQueued);
  EXPECT_FALSE(lane.snapshot_progress()->resume_missed.has_value());
  EXPECT_EQ(lane.snapshot_progress()->skipped_bytes, 2 * kSnapshotChunkBytes);
  EXPECT_EQ(lane.counters().snapshots_resumed, 1U);
  const std::vector<SnapshotChunk> rest = drain(lane);
  ASSERT_FALSE(rest.empty());
  EXPECT_EQ(rest.front().place.offset, 2 * kSnapshotChunkBytes);
}

// The whole path without gRPC: a chunk is dropped mid-transfer (its write failed, it expired),
// the receiver keeps what arrived before it, its receipt reaches the sender, and the sender's
// retry sends only the rest: the bytes carried stay well below twice the snapshot.
TEST(SnapshotResume, ATransferThatLostAChunkResumesFromTheReceipt) {
  const raft::Message message =
      snapshot_message(1, 4, 900, snapshot_data(12 * kSnapshotChunkBytes + 77, 14));
  const SnapshotIdentity identity = identity_of(message);
  LaneQueue lane(append_lane_limits());
  SnapshotReassembler receiver;
  SnapshotReceipts sender_board;
  std::string problem;
  std::uint64_t carried = 0;
  ASSERT_EQ(lane.push_snapshot(message, identity.data_crc32c, kT0), LaneQueue::Admission::kQueued);
  // The first window arrives.
  lane.take_batch();
  for (const QueuedMessage& item : lane.writing()) {
    SnapshotChunk chunk = through_the_wire(item);
    carried += chunk.data.size();
    EXPECT_FALSE(receiver.add(std::move(chunk), kT0, &problem));
  }
  BatchPlan plan(lane.limits());
  for (std::size_t i = 0; i < lane.writing().size(); ++i) plan.add(kSnapshotChunkBytes + 4096);
  lane.settle_batch(plan);
  lane.write_sent(kT0);
  // The second window's first chunk is lost (its stream broke and it expired); the rest of the
  // window left on another stream and arrives after the gap.
  lane.take_batch();
  std::vector<SnapshotChunk> second;
  for (const QueuedMessage& item : lane.writing()) second.push_back(through_the_wire(item));
  lane.write_failed();
  lane.expire(Clock::now() + 1h);
  ASSERT_EQ(lane.snapshot_progress()->state, SnapshotSendProgress::State::kAbandoned);
  for (std::size_t i = 1; i < second.size(); ++i) {
    carried += second[i].data.size();
    EXPECT_FALSE(receiver.add(second[i], kT0, &problem));
    EXPECT_NE(problem.find("the partial is kept"), std::string::npos) << problem;
  }
  ASSERT_EQ(receiver.partial_count(), 1u);
  // Its next answer carries the receipt; the leader's retry of the same data resumes there.
  sender_board.record(2, receiver.receipt());
  ASSERT_TRUE(sender_board.from_peer(2).has_value());
  EXPECT_EQ(sender_board.from_peer(2)->received_bytes, kSnapshotWindowBytes);
  ASSERT_EQ(lane.push_snapshot(message, identity.data_crc32c, kT0, sender_board.from_peer(2)),
            LaneQueue::Admission::kQueued);
  std::optional<raft::Message> whole;
  for (SnapshotChunk& chunk : drain(lane)) {
    carried += chunk.data.size();
    EXPECT_FALSE(whole.has_value());
    whole = receiver.add(std::move(chunk), kT0, &problem);
  }
  ASSERT_TRUE(whole.has_value()) << problem;
  EXPECT_EQ(*whole, message);
  EXPECT_EQ(lane.counters().snapshots_resumed, 1u);
  EXPECT_EQ(lane.counters().snapshot_bytes_skipped, kSnapshotWindowBytes);
  // Every byte once, plus the chunks that arrived after the gap: below 1.5 times the data.
  EXPECT_LT(carried, identity.total_bytes * 3 / 2);
  EXPECT_EQ(carried, identity.total_bytes + data_bytes(second) - second[0].data.size());
}

// A new leader whose data is byte-identical (the same point, the same encoding) continues the
// deposed leader's partial at the receipt's offset; the whole message carries the new leader's
// header. One with other data replaces it (Reassembly.ANewLeadersSnapshotReplacesThePartialOfTheOldOne).
TEST(SnapshotResume, ANewLeaderWithTheSameDataContinuesTheOldLeadersPartial) {
  const raft::Message old_leader =
      snapshot_message(1, 4, 900, snapshot_data(4 * kSnapshotChunkBytes + 3, 15));
  raft::Message new_leader = old_leader;
  new_leader.from = 3;
  new_leader.term = 5;  // the snapshot's own term stays 4
  new_leader.commit = 950;
  const std::vector<SnapshotChunk> old_chunks = chunks_of(old_leader);
  const std::vector<SnapshotChunk> new_chunks = chunks_of(new_leader);
  SnapshotReassembler receiver;
  std::string problem;
  EXPECT_FALSE(receiver.add(old_chunks[0], kT0, &problem));
  EXPECT_FALSE(receiver.add(old_chunks[1], kT0, &problem));
  ASSERT_TRUE(receiver.receipt().has_value());
  EXPECT_EQ(receiver.receipt()->received_bytes, 2 * kSnapshotChunkBytes);
  EXPECT_FALSE(receiver.add(new_chunks[2], kT0, &problem));
  EXPECT_EQ(problem, "");
  EXPECT_EQ(receiver.status().counters.partials_continued, 1u);
  EXPECT_EQ(receiver.status().counters.partials_replaced, 0u);
  // The deposed leader's chunks are stale now.
  EXPECT_FALSE(receiver.add(old_chunks[2], kT0, &problem));
  EXPECT_NE(problem.find("stale"), std::string::npos) << problem;
  std::optional<raft::Message> whole;
  for (std::size_t i = 3; i < new_chunks.size(); ++i) {
    whole = receiver.add(new_chunks[i], kT0, &problem);
    EXPECT_EQ(problem, "");
  }
  ASSERT_TRUE(whole.has_value());
  EXPECT_EQ(*whole, new_leader);
}

// Chunks that overlap what the partial holds (a resume from an older receipt) add only their new
// bytes; a chunk of the same sender at an older term is refused without touching the partial.
TEST(SnapshotResume, OverlappingAndOlderTermChunksAreHandledWithoutLosingThePartial) {
  const raft::Message message =
      snapshot_message(1, 4, 900, snapshot_data(3 * kSnapshotChunkBytes, 16));
  const std::string data(message.snapshot->data.view());
  const std::uint32_t crc = util::crc32c::value(data);
  const auto chunk_at = [&](std::uint64_t offset, std::size_t length, raft::Term term) {
    SnapshotChunk chunk;
    chunk.message = message;
    chunk.message.term = term;
    chunk.message.snapshot->data = raft::Payload();
    chunk.place = SnapshotChunkPlace{offset, data.size(), crc};
    chunk.data = data.substr(offset, length);
    return chunk;
  };
  SnapshotReassembler receiver;
  std::string problem;
  EXPECT_FALSE(receiver.add(chunk_at(0, kSnapshotChunkBytes, 5), kT0, &problem));
  EXPECT_FALSE(
      receiver.add(chunk_at(kSnapshotChunkBytes / 2, kSnapshotChunkBytes, 5), kT0, &problem));
  EXPECT_EQ(receiver.receipt()->received_bytes, kSnapshotChunkBytes * 3 / 2);
  EXPECT_FALSE(receiver.add(chunk_at(0, 100, 5), kT0, &problem));  // wholly held
  EXPECT_EQ(receiver.status().counters.chunks_duplicate, 1u);
  EXPECT_FALSE(receiver.add(chunk_at(kSnapshotChunkBytes * 3 / 2, 10, 4), kT0, &problem));
  EXPECT_NE(problem.find("older than its partial's term"), std::string::npos) << problem;
  EXPECT_EQ(receiver.receipt()->received_bytes, kSnapshotChunkBytes * 3 / 2);
  const std::optional<raft::Message> whole =
      receiver.add(chunk_at(kSnapshotChunkBytes, 2 * kSnapshotChunkBytes, 5), kT0, &problem);
  ASSERT_TRUE(whole.has_value()) << problem;
  EXPECT_EQ(whole->snapshot->data, data);
  EXPECT_EQ(whole->term, 5u);
}

// Review F2: a lane that does not see a chunk's loss (its write completed, then the stream broke)
// sends the rest of the transfer, all refused as a gap; on a slow link that takes longer than the
// idle timeout. The partial must still be there for the retry that follows, so the retry resumes.
TEST(SnapshotResume, GapChunksKeepThePartialAliveOnASlowLink) {
  const raft::Message message =
      snapshot_message(1, 4, 900, snapshot_data(8 * kSnapshotChunkBytes, 18));
  const std::vector<SnapshotChunk> chunks = chunks_of(message);
  SnapshotReassembler receiver;
  std::string problem;
  EXPECT_FALSE(receiver.add(chunks[0], kT0, &problem));
  EXPECT_FALSE(receiver.add(chunks[1], kT0, &problem));
  // Chunk 2 is lost; the rest arrives 20 s apart (a slow link), each refused as a gap.
  Clock::time_point at = kT0;
  for (std::size_t i = 3; i < chunks.size(); ++i) {
    at += 20s;
    EXPECT_FALSE(receiver.add(chunks[i], at, &problem));
    EXPECT_NE(problem.find("the partial is kept"), std::string::npos) << problem;
  }
  ASSERT_GT(at - kT0, 3 * kSnapshotPartialIdleTimeout);
  // The leader's retry, 5 s after its last chunk, resumes from the receipt.
  at += 5s;
  receiver.expire(at);
  ASSERT_TRUE(receiver.receipt().has_value()) << "the partial idled out while its sender sent";
  EXPECT_EQ(receiver.receipt()->received_bytes, 2 * kSnapshotChunkBytes);
  std::optional<raft::Message> whole;
  for (std::size_t i = 2; i < chunks.size(); ++i) whole = receiver.add(chunks[i], at, &problem);
  ASSERT_TRUE(whole.has_value()) << problem;
  EXPECT_EQ(*whole, message);
  EXPECT_EQ(receiver.status().counters.partials_expired, 0u);
}

}  // namespace
}  // namespace raftlog::server

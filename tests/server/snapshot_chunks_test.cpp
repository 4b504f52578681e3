// Snapshots sent in chunks (server/snapshot_chunks.h) without gRPC streams: the sender's lane makes
// the chunks within its window, the codec carries them (and refuses malformed ones), and the receiver
// reassembles them strictly: forged, stale and out-of-order chunks, CRC mismatches, interleaved
// senders, a leader change mid-transfer, idle partials.
#include "server/snapshot_chunks.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "raftlog/peer/v1/peer.pb.h"
#include "server/message_codec.h"
#include "server/peer_queue.h"
#include "snapshot_chunk_support.h"
#include "util/crc32c.h"
#include "util/prng.h"

namespace raftlog::server {
namespace {

namespace pb = raftlog::peer::v1;
using namespace std::chrono_literals;
using namespace snapshot_testing;  // snapshot_chunk_support.h

TEST(SnapshotChunks, ALargeSnapshotTravelsInBoundedChunksAndIsReassembledWhole) {
  const std::size_t size = 5 * kSnapshotChunkBytes + 12345;
  const raft::Message message = snapshot_message(1, 4, 900, snapshot_data(size, 1));
  std::vector<SnapshotChunk> chunks = chunks_of(message);
  ASSERT_EQ(chunks.size(), 6u);
  std::uint64_t offset = 0;
  for (const SnapshotChunk& chunk : chunks) {
    EXPECT_EQ(chunk.place.offset, offset);
    EXPECT_EQ(chunk.place.total_bytes, size);
    EXPECT_LE(chunk.data.size(), kSnapshotChunkBytes);
    offset += chunk.data.size();
  }
  SnapshotReassembler reassembler;
  std::string problem;
  for (std::size_t i = 0; i + 1 < chunks.size(); ++i) {
    EXPECT_FALSE(reassembler.add(std::move(chunks[i]), kT0, &problem).has_value());
    EXPECT_EQ(problem, "");
    ASSERT_EQ(reassembler.status().partials.size(), 1u);
  }
  const SnapshotReceiveProgress progress = reassembler.status().partials[0];
  EXPECT_EQ(progress.index, 900u);
  EXPECT_EQ(progress.received_bytes, 5 * kSnapshotChunkBytes);
  EXPECT_EQ(progress.total_bytes, size);
  std::optional<raft::Message> whole = reassembler.add(std::move(chunks.back()), kT0, &problem);
  ASSERT_TRUE(whole.has_value()) << problem;
  EXPECT_EQ(*whole, message);  // every field, the data byte for byte
  EXPECT_EQ(reassembler.partial_count(), 0u);
  EXPECT_EQ(reassembler.status().counters.snapshots_delivered, 1u);
  ASSERT_TRUE(reassembler.status().last_delivered.has_value());
  EXPECT_EQ(reassembler.status().last_delivered->index, 900u);
}

TEST(SnapshotChunks, TheLaneHoldsAWindowOfChunksAndMessagesQueuedMeanwhileGoFirst) {
  LaneQueue lane(append_lane_limits());
  const raft::Message message =
      snapshot_message(1, 4, 900, snapshot_data(20 * kSnapshotChunkBytes, 2));
  ASSERT_EQ(lane.push_snapshot(message, 0, kT0), LaneQueue::Admission::kQueued);
  lane.take_batch();
  EXPECT_EQ(lane.writing().size(), kSnapshotWindowBytes / kSnapshotChunkBytes);
  EXPECT_LE(lane.held_bytes(), kSnapshotWindowBytes + 4 * (raft::kMaxConfigBytes + 64));
  lane.write_unconfirmed();  // the window is full until the peer accepts the stream
  EXPECT_FALSE(lane.has_queued());
  raft::Message append;
  append.type = raft::MessageType::kAppend;
  append.from = 1;
  append.to = 2;
  append.context = 77;
  ASSERT_EQ(lane.push(append, kT0), LaneQueue::Admission::kQueued);
  lane.unconfirmed_sent(kT0);
  lane.take_batch();
  ASSERT_FALSE(lane.writing().empty());
  EXPECT_FALSE(lane.writing()[0].chunk.has_value());  // the append first
  EXPECT_EQ(lane.writing()[0].message.context, 77u);
  EXPECT_EQ(lane.writing().size(), 1 + kSnapshotWindowBytes / kSnapshotChunkBytes);
  EXPECT_EQ(lane.writing()[1].chunk->place.offset, kSnapshotWindowBytes);
}

TEST(SnapshotChunks, ADroppedChunkAbandonsTheTransferAndANewerSnapshotReplacesIt) {
  LaneQueueLimits limits = append_lane_limits();
  LaneQueue lane(limits);
  ASSERT_EQ(lane.push_snapshot(snapshot_message(1, 4, 900, snapshot_data(8 << 20, 3)), 0, kT0),
            LaneQueue::Admission::kQueued);
  lane.take_batch();
  lane.write_failed();  // back to the queue, stamped when they were made (now)
  lane.expire(Clock::now() + 1h);
  ASSERT_TRUE(lane.snapshot_progress().has_value());
  EXPECT_EQ(lane.snapshot_progress()->state, SnapshotSendProgress::State::kAbandoned);
  EXPECT_FALSE(lane.has_queued());  // no further chunk of a transfer with a gap
  EXPECT_EQ(lane.held_bytes(), 0u);
  EXPECT_EQ(lane.counters().snapshots_abandoned, 1u);

  ASSERT_EQ(lane.push_snapshot(snapshot_message(1, 4, 950, snapshot_data(3 << 20, 4)), 0, kT0),
            LaneQueue::Admission::kQueued);
  lane.take_batch();
  ASSERT_EQ(lane.push_snapshot(snapshot_message(1, 5, 990, snapshot_data(3 << 20, 5)), 0, kT0),
            LaneQueue::Admission::kQueued);
  EXPECT_EQ(lane.counters().snapshots_abandoned, 2u);
  EXPECT_EQ(lane.snapshot_progress()->index, 990u);
  lane.write_sent(kT0);  // the old transfer's chunks leave without counting for the new one
  EXPECT_EQ(lane.snapshot_progress()->sent_bytes, 0u);
  lane.take_batch();
  EXPECT_EQ(lane.writing().front().chunk->place.offset, 0u);
  EXPECT_EQ(lane.writing().front().message.snapshot->index, 990u);
}

TEST(SnapshotChunks, ASmallSnapshotGoesWholeAndIsTrackedLikeOneChunk) {
  LaneQueue lane(append_lane_limits());
  ASSERT_EQ(lane.push(snapshot_message(1, 4, 900, "small"), kT0), LaneQueue::Admission::kQueued);
  ASSERT_TRUE(lane.snapshot_progress().has_value());
  EXPECT_EQ(lane.snapshot_progress()->state, SnapshotSendProgress::State::kSending);
  EXPECT_EQ(lane.snapshot_progress()->total_bytes, 5u);
  lane.take_batch();
  ASSERT_EQ(lane.writing().size(), 1u);
  ASSERT_TRUE(lane.writing()[0].chunk.has_value());
  EXPECT_TRUE(lane.writing()[0].chunk->whole);
  EXPECT_EQ(lane.writing()[0].message.snapshot->data, "small");  // the message keeps its data
  lane.write_sent(kT0);
  EXPECT_EQ(lane.snapshot_progress()->state, SnapshotSendProgress::State::kSent);
  EXPECT_EQ(lane.snapshot_progress()->sent_bytes, 5u);
  EXPECT_EQ(lane.counters().snapshots_sent, 1u);
}

TEST(SnapshotChunks, ASnapshotAboveTheBoundIsNotSent) {
  LaneQueue lane(append_lane_limits());
  raft::Message message = snapshot_message(1, 4, 900, std::string(kMaxSnapshotBytes + 1, 'x'));
  EXPECT_EQ(lane.push_snapshot(std::move(message), 0, kT0), LaneQueue::Admission::kOversize);
  EXPECT_FALSE(lane.has_queued());
  EXPECT_EQ(lane.counters().dropped_oversize, 1u);
}

class MalformedChunk : public ::testing::Test {
 protected:
  void SetUp() override {
    const raft::Message message = snapshot_message(1, 4, 900, snapshot_data(3 << 20, 6));
    encode_snapshot_chunk(message, SnapshotChunkPlace{1 << 20, 3 << 20, 42}, 1 << 20, "c", &wire_);
  }
  void expect_rejected(const std::string& fragment) {
    SnapshotChunk chunk;
    pb::RaftMessage copy = wire_;
    const std::string problem = decode_snapshot_chunk(std::move(copy), MessageLimits(), &chunk);
    EXPECT_NE(problem.find(fragment), std::string::npos) << "problem: " << problem;
  }
  pb::RaftMessage wire_;
};

TEST_F(MalformedChunk, ValidBaselineIsAccepted) {
  SnapshotChunk chunk;
  ASSERT_EQ(decode_snapshot_chunk(std::move(wire_), MessageLimits(), &chunk), "");
  EXPECT_EQ(chunk.place, (SnapshotChunkPlace{1 << 20, 3 << 20, 42}));
  EXPECT_EQ(chunk.data.size(), 1u << 20);
  EXPECT_TRUE(chunk.message.snapshot->data.empty());
}

TEST_F(MalformedChunk, AChunkIsNeverTakenForAWholeSnapshot) {
  raft::Message decoded;
  EXPECT_NE(decode_message(wire_, MessageLimits(), &decoded), "");
}

TEST_F(MalformedChunk, TotalAboveTheBoundRejected) {
  wire_.mutable_snapshot()->set_total_bytes(kMaxSnapshotBytes + 1);
  expect_rejected("exceeds the limit");
}

TEST_F(MalformedChunk, DataOutsideTheTotalRejected) {
  wire_.mutable_snapshot()->set_chunk_offset(3 << 20);
  expect_rejected("outside its total");
  wire_.mutable_snapshot()->set_chunk_offset((2 << 20) + 1);
  expect_rejected("outside its total");
  wire_.mutable_snapshot()->set_chunk_offset(std::numeric_limits<std::uint64_t>::max());
  expect_rejected("outside its total");
}

TEST_F(MalformedChunk, EmptyDataRejected) {
  wire_.mutable_snapshot()->clear_data();
  expect_rejected("carries no data");
}

TEST_F(MalformedChunk, DataBeyondTheMessageBoundRejected) {
  wire_.mutable_snapshot()->set_total_bytes(10u << 20);
  wire_.mutable_snapshot()->set_chunk_offset(0);
  wire_.mutable_snapshot()->set_data(std::string(9u << 20, 'd'));
  expect_rejected("exceeds the limit");
}

TEST_F(MalformedChunk, TheSnapshotChecksApplyToEveryChunk) {
  wire_.mutable_snapshot()->set_term(5);  // above the message's term 4
  expect_rejected("outside 1..4");
}

TEST_F(MalformedChunk, AWholeSnapshotWithAChunkOffsetOrChecksumRejected) {
  raft::Message message = snapshot_message(1, 4, 900, "small");
  pb::RaftMessage whole;
  encode_message(message, "c", &whole);
  whole.mutable_snapshot()->set_data_crc32c(7);
  raft::Message decoded;
  EXPECT_NE(decode_message(whole, MessageLimits(), &decoded).find("chunk offset or checksum"),
            std::string::npos);
}

// The receiver's rules, on chunks of two snapshots: A (node 1, term 4) and B (node 3, term 5).
class Reassembly : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = snapshot_message(1, 4, 900, snapshot_data(3 * kSnapshotChunkBytes + 7, 7));
    b_ = snapshot_message(3, 5, 950, snapshot_data(2 * kSnapshotChunkBytes + 9, 8));
    a_chunks_ = chunks_of(a_);
    b_chunks_ = chunks_of(b_);
  }
  std::optional<raft::Message> add(const SnapshotChunk& chunk, Clock::time_point at = kT0) {
    return reassembler_.add(chunk, at, &problem_);
  }

  raft::Message a_, b_;
  std::vector<SnapshotChunk> a_chunks_, b_chunks_;
  SnapshotReassembler reassembler_;
  std::string problem_;
};

TEST_F(Reassembly, AGapIsRefusedAndCountedButThePartialStaysForAResume) {
  EXPECT_FALSE(add(a_chunks_[0]));
  EXPECT_FALSE(add(a_chunks_[2]));  // chunk 1 lost
  EXPECT_NE(problem_.find("the partial is kept"), std::string::npos) << problem_;
  EXPECT_EQ(reassembler_.partial_count(), 1u);
  EXPECT_EQ(reassembler_.status().counters.chunks_refused, 1u);
  EXPECT_FALSE(add(a_chunks_[3]));  // still past its end
  EXPECT_EQ(reassembler_.status().counters.chunks_refused, 2u);
  ASSERT_TRUE(reassembler_.receipt().has_value());
  EXPECT_EQ(reassembler_.receipt()->received_bytes, kSnapshotChunkBytes);
  // The sender resumes where the receipt says.
  for (std::size_t i = 1; i + 1 < a_chunks_.size(); ++i) EXPECT_FALSE(add(a_chunks_[i]));
  EXPECT_EQ(add(a_chunks_.back()), a_);
  EXPECT_FALSE(reassembler_.receipt().has_value());
}

TEST_F(Reassembly, AChunkOfAnotherSnapshotOrAForgedHeaderDropsThePartial) {
  SnapshotChunk forged = a_chunks_[1];
  forged.message.snapshot->index = 901;
  EXPECT_FALSE(add(a_chunks_[0]));
  EXPECT_FALSE(add(forged));
  EXPECT_NE(problem_.find("snapshot 901"), std::string::npos) << problem_;
  EXPECT_EQ(reassembler_.partial_count(), 0u);

  forged = a_chunks_[1];
  forged.place.total_bytes += 1;
  EXPECT_FALSE(add(a_chunks_[0]));
  EXPECT_FALSE(add(forged));
  EXPECT_EQ(reassembler_.partial_count(), 0u);

  forged = a_chunks_[1];
  forged.message.snapshot->conf.voters = {1, 2};
  EXPECT_FALSE(add(a_chunks_[0]));
  EXPECT_FALSE(add(forged));
  EXPECT_EQ(reassembler_.partial_count(), 0u);
  EXPECT_EQ(reassembler_.status().counters.chunks_refused, 3u);
  EXPECT_EQ(reassembler_.status().counters.snapshots_delivered, 0u);
}

TEST_F(Reassembly, CorruptDataIsCaughtByTheChecksumAndNothingIsDelivered) {
  SnapshotChunk corrupt = a_chunks_[2];
  corrupt.data[corrupt.data.size() / 2] ^= 0x01;
  for (std::size_t i = 0; i < a_chunks_.size(); ++i) {
    EXPECT_FALSE(add(i == 2 ? corrupt : a_chunks_[i]));
  }
  EXPECT_NE(problem_.find("CRC-32C"), std::string::npos) << problem_;
  EXPECT_EQ(reassembler_.status().counters.checksum_mismatches, 1u);
  EXPECT_EQ(reassembler_.partial_count(), 0u);
}

TEST_F(Reassembly, InterleavedSendersOfOneTermAreReassembledApart) {
  // Two senders at the same term cannot both be leaders, but the reassembler keeps them apart
  // all the same: one partial per peer.
  raft::Message c = snapshot_message(3, 4, 905, snapshot_data(2 * kSnapshotChunkBytes + 1, 9));
  std::vector<SnapshotChunk> c_chunks = chunks_of(c);
  std::vector<raft::Message> delivered;
  for (std::size_t i = 0; i < std::max(a_chunks_.size(), c_chunks.size()); ++i) {
    if (i < a_chunks_.size()) {
      if (auto whole = add(a_chunks_[i])) delivered.push_back(*whole);
    }
    if (i < c_chunks.size()) {
      if (auto whole = add(c_chunks[i])) delivered.push_back(*whole);
    }
  }
  ASSERT_EQ(delivered.size(), 2u);
  EXPECT_EQ(delivered[0], c);
  EXPECT_EQ(delivered[1], a_);
  EXPECT_EQ(reassembler_.status().counters.chunks_refused, 0u);
}

TEST_F(Reassembly, ANewLeadersSnapshotReplacesThePartialOfTheOldOne) {
  EXPECT_FALSE(add(a_chunks_[0]));
  EXPECT_FALSE(add(a_chunks_[1]));
  EXPECT_FALSE(add(b_chunks_[0]));  // node 3 leads at term 5
  ASSERT_EQ(reassembler_.partial_count(), 1u);
  EXPECT_EQ(reassembler_.status().partials[0].from, 3u);
  EXPECT_EQ(reassembler_.status().counters.partials_replaced, 1u);
  EXPECT_FALSE(add(a_chunks_[2]));  // the deposed leader's chunk is stale
  EXPECT_NE(problem_.find("stale"), std::string::npos) << problem_;
  EXPECT_FALSE(add(a_chunks_[0]));  // and so is a new attempt of it
  EXPECT_EQ(reassembler_.partial_count(), 1u);
  EXPECT_FALSE(add(b_chunks_[1]));
  EXPECT_EQ(add(b_chunks_[2]), b_);
}

// Review drills4 L4: a deposed leader's whole snapshot arriving after the node heard a newer
// leader, with no partial of the new leader here (it sent its snapshot whole, or none), was
// reassembled and counted as received. Every chunk of it is refused now, and counted as stale.
TEST_F(Reassembly, ADeposedLeadersChunksAreRefusedOnceANewerLeaderWasHeardEvenWithoutItsPartial) {
  reassembler_.note_leader_term(5);  // node 3's heartbeat at term 5
  for (const SnapshotChunk& chunk : a_chunks_) {
    EXPECT_FALSE(add(chunk));
    EXPECT_NE(problem_.find("stale"), std::string::npos) << problem_;
  }
  EXPECT_EQ(reassembler_.partial_count(), 0u);
  EXPECT_EQ(reassembler_.status().counters.chunks_refused, a_chunks_.size());
  EXPECT_EQ(reassembler_.status().counters.snapshots_delivered, 0u);
  reassembler_.note_leader_term(4);  // a lower term heard later changes nothing
  EXPECT_FALSE(add(a_chunks_[0]));
  EXPECT_EQ(reassembler_.partial_count(), 0u);
  // The leader of the term heard is taken.
  EXPECT_FALSE(add(b_chunks_[0]));
  EXPECT_FALSE(add(b_chunks_[1]));
  EXPECT_EQ(add(b_chunks_[2]), b_);
}

// A sender without a receipt (an older build, or one that never heard from this node) starts again
// at 0: with the same data, the bytes held are skipped, not received again.
TEST_F(Reassembly, ARestartFromOffsetZeroWithTheSameDataKeepsThePartial) {
  EXPECT_FALSE(add(a_chunks_[0]));
  EXPECT_FALSE(add(a_chunks_[1]));
  for (std::size_t i = 0; i + 1 < a_chunks_.size(); ++i) EXPECT_FALSE(add(a_chunks_[i]));
  EXPECT_EQ(reassembler_.status().counters.partials_replaced, 0u);
  EXPECT_EQ(reassembler_.status().counters.chunks_duplicate, 2u);
  EXPECT_EQ(add(a_chunks_.back()), a_);
}

TEST_F(Reassembly, ARestartFromOffsetZeroWithOtherDataReplacesThePeersPartial) {
  EXPECT_FALSE(add(a_chunks_[0]));
  EXPECT_FALSE(add(a_chunks_[1]));
  raft::Message again = snapshot_message(1, 4, 900, snapshot_data(3 * kSnapshotChunkBytes + 7, 70));
  std::vector<SnapshotChunk> again_chunks = chunks_of(again);
  for (std::size_t i = 0; i + 1 < again_chunks.size(); ++i) EXPECT_FALSE(add(again_chunks[i]));
  EXPECT_EQ(reassembler_.status().counters.partials_replaced, 1u);
  EXPECT_EQ(add(again_chunks.back()), again);
}

TEST_F(Reassembly, AnIdlePartialExpires) {
  EXPECT_FALSE(add(a_chunks_[0]));
  reassembler_.expire(kT0 + kSnapshotPartialIdleTimeout - 1s);
  EXPECT_EQ(reassembler_.partial_count(), 1u);
  EXPECT_FALSE(add(a_chunks_[1], kT0 + kSnapshotPartialIdleTimeout + 1s));
  EXPECT_EQ(reassembler_.partial_count(), 0u);
  EXPECT_EQ(reassembler_.status().counters.partials_expired, 1u);
  EXPECT_EQ(reassembler_.status().counters.chunks_refused, 1u);
}

// Review S4: a node reassembles no more than its replica decodes (the node's bound, passed in), so a
// peer cannot make it hold up to kMaxSnapshotBytes of data it would refuse at the end anyway. A chunk
// announcing more is refused before any byte is kept, and it drops that peer's partial.
TEST(SnapshotChunks, AChunkAnnouncingMoreThanTheNodeAcceptsIsRefused) {
  const std::uint64_t bound = 2 * kSnapshotChunkBytes;
  SnapshotReassembler reassembler(bound);
  std::string problem;
  const raft::Message small = snapshot_message(1, 4, 900, snapshot_data(bound, 7));
  std::vector<SnapshotChunk> small_chunks = chunks_of(small);
  const raft::Message large = snapshot_message(1, 5, 950, snapshot_data(bound + 1, 8));
  std::vector<SnapshotChunk> large_chunks = chunks_of(large);
  ASSERT_EQ(large_chunks[0].place.total_bytes, bound + 1);
  // A partial within the bound, then the same peer's chunk announcing more: both dropped.
  EXPECT_FALSE(reassembler.add(small_chunks[0], kT0, &problem));
  EXPECT_EQ(reassembler.partial_count(), 1u);
  EXPECT_FALSE(reassembler.add(large_chunks[0], kT0, &problem));
  EXPECT_NE(problem.find("more than the " + std::to_string(bound)), std::string::npos) << problem;
  EXPECT_EQ(reassembler.partial_count(), 0u);
  EXPECT_EQ(reassembler.status().counters.chunks_refused, 1u);
  for (SnapshotChunk& chunk : large_chunks) {
    EXPECT_FALSE(reassembler.add(std::move(chunk), kT0, &problem));
  }
  EXPECT_EQ(reassembler.partial_count(), 0u);
  EXPECT_EQ(reassembler.status().counters.snapshots_delivered, 0u);
  // A snapshot of exactly the bound is reassembled.
  for (std::size_t i = 0; i + 1 < small_chunks.size(); ++i) {
    EXPECT_FALSE(reassembler.add(small_chunks[i], kT0, &problem));
  }
  EXPECT_EQ(reassembler.add(small_chunks.back(), kT0, &problem), small) << problem;
  // The default bound is the transport's, and a larger one passed in is capped at it.
  SnapshotReassembler capped(kMaxSnapshotBytes + 1);
  SnapshotChunk beyond = small_chunks[0];
  beyond.place.total_bytes = kMaxSnapshotBytes + 1;
  EXPECT_FALSE(capped.add(std::move(beyond), kT0, &problem));
  EXPECT_NE(problem.find("more than the " + std::to_string(kMaxSnapshotBytes)), std::string::npos)
      << problem;
}

}  // namespace
}  // namespace raftlog::server

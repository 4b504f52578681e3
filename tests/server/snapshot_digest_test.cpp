// The data digest, the part of a snapshot's identity that depends on every byte
// (replica::snapshot_data_digest; docs/design.md, "Snapshot transfer", *The data's digest*): what
// it is, how it travels (chunk, receipt, splice point; each checked as everything from the
// network), how a receiver checks it, and what a node from before digests gets (no resume by
// offset and no continuation across encodings).
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "raftlog/peer/v1/peer.pb.h"
#include "replica/snapshot_frames.h"
#include "server/message_codec.h"
#include "server/peer_queue.h"
#include "server/snapshot_chunks.h"
#include "snapshot_chunk_support.h"
#include "snapshot_splice_support.h"
#include "util/crc32c.h"

namespace raftlog::server {
namespace {

using namespace snapshot_testing;  // snapshot_chunk_support.h, snapshot_splice_support.h

// Chunks as a node from before digests sends them: none names a digest (the lane of this build
// always does, so it is taken off on the way).
std::vector<SnapshotChunk> without_digest(std::vector<SnapshotChunk> chunks) {
  for (SnapshotChunk& chunk : chunks) {
    chunk.place.data_digest.reset();
    if (chunk.splice) chunk.splice->kept_digest.reset();
  }
  return chunks;
}

TEST(SnapshotDigest, FramedDataOfOneLayoutDiffersInItsDigestAndASpliceExtendsTheKeptOne) {
  const std::string a = leader_encoding(2, 3, 0);
  const std::string b = leader_encoding(3, 3, 0);  // other clients, the same lengths
  const std::uint32_t crc = util::crc32c::value(a);
  ASSERT_EQ(crc, util::crc32c::value(b));
  EXPECT_NE(replica::snapshot_data_digest(a, crc), replica::snapshot_data_digest(b, crc));
  // The same clients with other append digests and another trailer (every frame valid): the whole
  // CRC stays, the digest moves.
  const std::string c = leader_encoding(2, 3, 7);
  ASSERT_EQ(c.size(), a.size());
  EXPECT_EQ(util::crc32c::value(c), crc);
  EXPECT_NE(replica::snapshot_data_digest(c, crc), replica::snapshot_data_digest(a, crc));
  // Data of versions 1..3 (not framed): the whole CRC, which covers the data's own CRC at its
  // start and does not cancel.
  const std::string plain = snapshot_data(3 * kSnapshotChunkBytes, 5);
  EXPECT_EQ(replica::snapshot_data_digest(plain, 77), 77U);
  // A partial's splice point names the digest of its kept frames, and a continuation cut there
  // extends it to exactly the digest of the spliced data.
  replica::FramedFrameWalk walk;
  walk.advance(std::string_view(a).substr(0, 2 * kSnapshotChunkBytes));
  const std::optional<replica::FramedSplicePoint> point = walk.splice_point();
  ASSERT_TRUE(point && point->kept_digest);
  EXPECT_EQ(point->kept_digest,
            replica::extend_frames_digest(0, std::string_view(a).substr(8, point->kept_bytes - 8)));
  const raft::Message message = at_point(3, 3, leader_encoding(3, 4, 99));
  const SnapshotContinuation continuation =
      make_snapshot_continuation(message.snapshot->data, *point);
  ASSERT_EQ(continuation.outcome, replica::FramedContinuation::Outcome::kMade);
  const std::string spliced = a.substr(0, point->kept_bytes) + continuation.bytes.str();
  EXPECT_EQ(continuation.spliced_digest,
            replica::snapshot_data_digest(spliced, util::crc32c::value(spliced)));
  // A point that names no digest (a follower from before digests) gets a continuation without one.
  replica::FramedSplicePoint old_point = *point;
  old_point.kept_digest.reset();
  EXPECT_FALSE(make_snapshot_continuation(message.snapshot->data, old_point).spliced_digest);
}

TEST(SnapshotDigest, TheCodecCarriesItOnChunksReceiptsAndSplicePointsAndRefusesAHalfOne) {
  const std::vector<SnapshotChunk> chunks = chunks_of(at_point(1, 2, leader_encoding(2, 3, 0)));
  ASSERT_FALSE(chunks.empty());
  const std::string a = leader_encoding(2, 3, 0);
  EXPECT_EQ(chunks[0].place.data_digest,
            replica::snapshot_data_digest(a, util::crc32c::value(a)));
  SnapshotReassembler follower;
  std::string problem;
  EXPECT_FALSE(follower.add(chunks[0], kT0, &problem).has_value());
  EXPECT_FALSE(follower.add(chunks[1], kT0, &problem).has_value());
  const std::optional<SnapshotReceipt> receipt = follower.receipt();
  ASSERT_TRUE(receipt && receipt->splice && receipt->splice->kept_digest);
  EXPECT_EQ(receipt->snapshot.data_digest, chunks[0].place.data_digest);
  pb::RaftMessage wire;
  encode_snapshot_receipt(*receipt, &wire);
  pb::RaftMessage parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire.SerializeAsString()));
  EXPECT_EQ(decode_snapshot_receipt(parsed, &problem), receipt) << problem;
  // A splice point's digest without the data's: not one node's receipt, ignored.
  pb::RaftMessage half = parsed;
  half.mutable_snapshot_receipt()->clear_data_digest();
  EXPECT_FALSE(decode_snapshot_receipt(half, &problem).has_value());
  EXPECT_NE(problem.find("digest"), std::string::npos) << problem;
  // Neither: a receipt from before digests, taken as it is (the sender decides: kDigest).
  half.mutable_snapshot_receipt()->mutable_splice()->clear_kept_digest();
  const std::optional<SnapshotReceipt> old = decode_snapshot_receipt(half, &problem);
  ASSERT_TRUE(old.has_value()) << problem;
  EXPECT_FALSE(old->snapshot.data_digest);
  EXPECT_FALSE(old->splice->kept_digest);

  // A continuation chunk whose point names the kept digest but which names no data digest.
  NewLeaderSend send(leader_encoding(3, 4, 99), receipt);
  ASSERT_TRUE(send.chunks.front().splice.has_value());
  const SnapshotChunk& first = send.chunks.front();
  ASSERT_TRUE(first.place.data_digest && first.splice->kept_digest);
  pb::RaftMessage chunk_wire;
  encode_snapshot_chunk(at_point(3, 3, std::string(16, 'x')), first.place, 16, "c", &chunk_wire,
                        first.splice);
  EXPECT_EQ(chunk_wire.snapshot().data_digest(), *first.place.data_digest);
  EXPECT_EQ(chunk_wire.snapshot().splice().kept_digest(), *first.splice->kept_digest);
  SnapshotChunk decoded;
  EXPECT_EQ(decode_snapshot_chunk(pb::RaftMessage(chunk_wire), MessageLimits(), &decoded), "");
  EXPECT_EQ(decoded.place, first.place);
  EXPECT_EQ(decoded.splice, first.splice);
  chunk_wire.mutable_snapshot()->clear_data_digest();
  const std::string refused =
      decode_snapshot_chunk(pb::RaftMessage(chunk_wire), MessageLimits(), &decoded);
  EXPECT_NE(refused.find("digest"), std::string::npos) << refused;
  // A whole snapshot names none.
  pb::RaftMessage whole;
  encode_message(snapshot_message(1, 2, 900, "small"), "c", &whole);
  raft::Message out;
  EXPECT_EQ(decode_message(whole, MessageLimits(), &out), "");
  whole.mutable_snapshot()->set_data_digest(1);
  EXPECT_NE(decode_message(whole, MessageLimits(), &out).find("digest"), std::string::npos);
}

TEST(SnapshotDigest, AReassembledDataThatDoesNotMatchItsDigestIsDropped) {
  std::vector<SnapshotChunk> chunks = chunks_of(at_point(1, 2, leader_encoding(2, 3, 0)));
  for (SnapshotChunk& chunk : chunks) chunk.place.data_digest = *chunk.place.data_digest + 1;
  SnapshotReassembler follower;
  std::string problem;
  std::optional<raft::Message> whole;
  for (const SnapshotChunk& chunk : chunks) whole = follower.add(chunk, kT0, &problem);
  EXPECT_FALSE(whole.has_value());
  EXPECT_NE(problem.find("digest"), std::string::npos) << problem;
  EXPECT_EQ(follower.status().counters.checksum_mismatches, 1U);
  EXPECT_EQ(follower.status().counters.snapshots_delivered, 0U);
}

// Mixed versions, the leader of this build: a receipt without a digest (a follower from before
// digests) is neither resumed by offset nor continued, even when every other field names this very
// data; the transfer starts at 0, counted under "digest".
TEST(SnapshotDigest, AFollowerFromBeforeDigestsIsNeitherResumedNorContinued) {
  const std::string data = leader_encoding(2, 3, 0);
  FollowerWithPartial follower;  // holds the first two chunks of `data`
  std::optional<SnapshotReceipt> receipt = follower.reassembler.receipt();
  ASSERT_TRUE(receipt && receipt->splice);
  receipt->snapshot.data_digest.reset();
  receipt->splice->kept_digest.reset();
  {
    LaneQueue lane{append_lane_limits()};
    ASSERT_EQ(lane.push_snapshot(at_point(1, 2, data), util::crc32c::value(data), kT0, receipt),
              LaneQueue::Admission::kQueued);
    const std::vector<SnapshotChunk> chunks = drain(lane);
    ASSERT_FALSE(chunks.empty());
    EXPECT_EQ(chunks.front().place.offset, 0U);
    EXPECT_EQ(lane.counters().snapshot_resume_missed[ResumeMiss::kDigest], 1U);
    EXPECT_EQ(lane.counters().snapshots_resumed, 0U);
  }
  // Another leader's data at the point: no continuation for a point without a digest.
  NewLeaderSend other(leader_encoding(3, 4, 99), receipt);
  EXPECT_EQ(other.chunks.front().place.offset, 0U);
  EXPECT_FALSE(other.chunks.front().splice.has_value());
  EXPECT_EQ(other.lane.counters().snapshots_continued, 0U);
  EXPECT_EQ(other.lane.counters().snapshot_resume_missed[ResumeMiss::kDigest], 1U);
  // A receipt that names the data's digest but a point without one (forged or broken): the data
  // differs, and no continuation is cut without the kept digest.
  std::optional<SnapshotReceipt> half = follower.reassembler.receipt();
  half->splice->kept_digest.reset();
  NewLeaderSend forged(leader_encoding(3, 4, 99), half);
  EXPECT_EQ(forged.chunks.front().place.offset, 0U);
  EXPECT_EQ(forged.lane.counters().snapshot_resume_missed[ResumeMiss::kDigest], 1U);
}

// Mixed versions, the follower of this build: chunks without a digest (a leader from before
// digests) continue only a partial without one, of their own sender; another sender's such chunks
// of the same index, term, total and CRC may be another encoding of the layout and start again.
// And a continuation whose point names no kept digest is refused.
TEST(SnapshotDigest, ChunksWithoutADigestContinueOnlyTheirOwnSendersPartial) {
  const std::string a = leader_encoding(2, 3, 0);
  const std::vector<SnapshotChunk> old_a = without_digest(chunks_of(at_point(1, 2, a)));
  ASSERT_GE(old_a.size(), 3U);
  SnapshotReassembler follower;
  std::string problem;
  EXPECT_FALSE(follower.add(old_a[0], kT0, &problem).has_value()) << problem;
  EXPECT_FALSE(follower.add(old_a[1], kT0, &problem).has_value()) << problem;
  ASSERT_TRUE(follower.receipt().has_value());
  EXPECT_FALSE(follower.receipt()->snapshot.data_digest) << "it names none it was not given";
  ASSERT_TRUE(follower.receipt()->splice.has_value());
  EXPECT_FALSE(follower.receipt()->splice->kept_digest) << "nor its kept frames': both or none";
  {
    pb::RaftMessage wire;
    encode_snapshot_receipt(*follower.receipt(), &wire);
    EXPECT_TRUE(decode_snapshot_receipt(wire, &problem).has_value()) << problem;
  }
  // The same sender resumes its own transfer.
  EXPECT_FALSE(follower.add(old_a[2], kT0, &problem).has_value()) << problem;
  EXPECT_EQ(follower.receipt()->received_bytes, 3 * kSnapshotChunkBytes);
  // This build's chunks of the same data (with a digest) do not continue it: they start anew.
  const std::vector<SnapshotChunk> new_a = chunks_of(at_point(1, 2, a));
  EXPECT_FALSE(follower.add(new_a[0], kT0, &problem).has_value()) << problem;
  EXPECT_EQ(follower.receipt()->received_bytes, kSnapshotChunkBytes);
  EXPECT_EQ(follower.status().counters.partials_replaced, 1U);
  // Another old sender at a higher term, the same fields: not moved to it (no digest), dropped.
  SnapshotReassembler second;
  EXPECT_FALSE(second.add(old_a[0], kT0, &problem).has_value());
  EXPECT_FALSE(second.add(old_a[1], kT0, &problem).has_value());
  std::vector<SnapshotChunk> other =
      without_digest(chunks_of(at_point(3, 3, leader_encoding(3, 3, 0))));
  EXPECT_FALSE(second.add(other[2], kT0, &problem).has_value());
  EXPECT_EQ(second.status().counters.partials_continued, 0U);
  EXPECT_FALSE(second.receipt().has_value()) << "its offset 2 MiB lies past nothing held";
  // A continuation from an old leader (its point without a kept digest) is refused.
  FollowerWithPartial fresh;
  const std::optional<SnapshotReceipt> receipt = fresh.reassembler.receipt();
  NewLeaderSend send(leader_encoding(3, 4, 99), receipt);
  ASSERT_TRUE(send.chunks.front().splice.has_value());
  const std::vector<SnapshotChunk> old_continuation = without_digest(send.chunks);
  EXPECT_FALSE(fresh.reassembler.add(old_continuation[0], kT0, &fresh.problem).has_value());
  EXPECT_NE(fresh.problem.find("digest"), std::string::npos) << fresh.problem;
  EXPECT_EQ(fresh.reassembler.status().counters.splices_refused, 1U);
}

// Review resume5 M1: a leader from before digests (no digest on its chunks) that encodes the same
// point again with the same lengths (it leads again in a later term, or restarts its transfer at
// 0) must not have the follower of this build complete its first encoding's bytes with the
// second's. A later term's chunk without a digest starts a new transfer; bytes that overlap what
// is held must be the held bytes. Left (docs/design.md): the same term's resume by offset with
// another encoding, which only the leader's digest tells.
TEST(SnapshotDigest, AnOldLeadersOtherEncodingOfTheLayoutDoesNotContinueItsPartial) {
  const std::string a = leader_encoding(2, 3, 0);
  const std::string b = leader_encoding(3, 3, 0);  // the same lengths, other clients
  replica::FramedFrameWalk walk;
  walk.advance(std::string_view(a).substr(0, 2 * kSnapshotChunkBytes));
  ASSERT_TRUE(walk.splice_point().has_value());
  const std::uint64_t boundary = walk.splice_point()->kept_bytes;
  struct Case {
    const char* name;
    raft::Term term;      // of node 1's second transfer (the first is at term 2)
    std::uint64_t from;   // the offset it starts at
  };
  for (const Case& c : {Case{"a later term from the partial's end", 3, boundary},
                        Case{"a later term from 0", 3, 0}, Case{"the same term from 0", 2, 0}}) {
    SCOPED_TRACE(c.name);
    SnapshotReassembler follower;
    std::string problem;
    std::vector<SnapshotChunk> sent = without_digest(chunks_of(at_point(1, 2, a)));
    EXPECT_FALSE(follower.add(sent[0], kT0, &problem).has_value()) << problem;
    sent[1].data.resize(static_cast<std::size_t>(boundary - kSnapshotChunkBytes));
    EXPECT_FALSE(follower.add(sent[1], kT0, &problem).has_value()) << problem;
    ASSERT_EQ(follower.receipt()->received_bytes, boundary);
    std::vector<SnapshotChunk> again = without_digest(chunks_of(at_point(1, c.term, b)));
    if (c.from != 0) {
      // As the old lane resumes at the receipt: the first chunk starts at the boundary.
      again[1].data.erase(0, static_cast<std::size_t>(boundary - kSnapshotChunkBytes));
      again[1].place.offset = boundary;
      again.erase(again.begin());
    }
    std::optional<raft::Message> whole;
    for (const SnapshotChunk& chunk : again) whole = follower.add(chunk, kT0, &problem);
    if (whole) {
      EXPECT_TRUE(whole->snapshot->data.view() == std::string_view(b))
          << "a's bytes through " << boundary << " completed with b's";
    } else {
      EXPECT_FALSE(follower.receipt().has_value()) << "refused, the partial dropped";
    }
    EXPECT_EQ(follower.status().counters.snapshots_delivered, whole ? 1U : 0U);
  }
}

// Review resume5 L5: the same sender's chunk of another digest at the partial's own offset (a
// stale or buggy resume) is refused and the partial dropped: nothing is delivered.
TEST(SnapshotDigest, AnotherDigestAtThePartialsOffsetIsRefusedAndThePartialDropped) {
  SnapshotReassembler follower;
  std::string problem;
  const std::vector<SnapshotChunk> a = chunks_of(at_point(1, 2, leader_encoding(2, 3, 0)));
  const std::vector<SnapshotChunk> b = chunks_of(at_point(1, 2, leader_encoding(3, 3, 0)));
  ASSERT_EQ(a[2].place.offset, b[2].place.offset);
  EXPECT_FALSE(follower.add(a[0], kT0, &problem).has_value());
  EXPECT_FALSE(follower.add(a[1], kT0, &problem).has_value());
  EXPECT_FALSE(follower.add(b[2], kT0, &problem).has_value());
  EXPECT_NE(problem.find("digest"), std::string::npos) << problem;
  EXPECT_FALSE(follower.receipt().has_value());
  EXPECT_EQ(follower.status().counters.chunks_refused, 1U);
  EXPECT_EQ(follower.status().counters.snapshots_delivered, 0U);
}

// A continuation cut for a receipt of one encoding meets a partial that holds another encoding of
// the same layout (the partial changed between the receipt and the continuation): the CRC of the
// kept bytes matches, the kept frames' digest does not, and nothing is spliced.
TEST(SnapshotDigest, AContinuationCutForAnotherEncodingOfTheLayoutIsNotSpliced) {
  FollowerWithPartial follower;  // holds a = leader_encoding(2, 3, 0)
  const std::string b = leader_encoding(3, 3, 0);
  replica::FramedFrameWalk walk;
  walk.advance(std::string_view(b).substr(0, 2 * kSnapshotChunkBytes));
  const std::optional<replica::FramedSplicePoint> b_point = walk.splice_point();
  const std::optional<SnapshotReceipt> held = follower.reassembler.receipt();
  ASSERT_TRUE(b_point && held && held->splice);
  ASSERT_EQ(b_point->kept_bytes, held->splice->kept_bytes);
  ASSERT_EQ(b_point->kept_crc32c, held->splice->kept_crc32c) << "the CRC does not tell them apart";
  ASSERT_NE(b_point->kept_digest, held->splice->kept_digest);
  // b's last kept client differs from a's: name a's, as a forger that knows it would.
  replica::FramedSplicePoint forged = *b_point;
  forged.last_client_id = held->splice->last_client_id;
  EXPECT_NE(replica::check_splice_point(
                std::string_view(follower.old_data).substr(0, 2 * kSnapshotChunkBytes), forged)
                .find("another encoding"),
            std::string::npos);
  forged.kept_digest.reset();
  EXPECT_NE(replica::check_splice_point(
                std::string_view(follower.old_data).substr(0, 2 * kSnapshotChunkBytes), forged)
                .find("digest"),
            std::string::npos);
}

}  // namespace
}  // namespace raftlog::server

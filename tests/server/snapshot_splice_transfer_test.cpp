// A new leader continues a follower's framed partial over the transfer (snapshot_chunks.h, the
// continuation rule; peer_queue.h push_snapshot with a SnapshotContinuation), without gRPC
// streams: the follower's receipt names its splice point, the new leader's lane sends only its
// data after it, the follower splices and completes a snapshot that decodes to the old leader's
// clients through X and the new leader's after; every continuation that does not match the partial
// is refused (the partial dropped, so the next attempt starts at 0) and every miss is counted.
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

TEST(SnapshotSpliceTransfer, TheReceiptNamesTheLastCompleteBlockAndTravelsChecked) {
  FollowerWithPartial follower;
  const std::optional<SnapshotReceipt> receipt = follower.reassembler.receipt();
  ASSERT_TRUE(receipt.has_value());
  ASSERT_TRUE(receipt->splice.has_value());
  replica::FramedFrameWalk walk;
  walk.advance(std::string_view(follower.old_data).substr(0, 2 * kSnapshotChunkBytes));
  EXPECT_EQ(receipt->splice, walk.splice_point());
  EXPECT_GT(receipt->splice->last_client_id, 0U);
  EXPECT_LE(receipt->splice->kept_bytes, 2 * kSnapshotChunkBytes);
  EXPECT_GT(receipt->splice->kept_bytes, 2 * kSnapshotChunkBytes - replica::kSnapshotBlockBytes - 64);

  pb::RaftMessage wire;
  encode_snapshot_receipt(*receipt, &wire);
  pb::RaftMessage parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire.SerializeAsString()));
  std::string problem;
  EXPECT_EQ(decode_snapshot_receipt(parsed, &problem), receipt);
  // A splice point past the bytes the receipt acknowledges, or at 0, is not trusted.
  for (const std::uint64_t kept : {std::uint64_t{0}, receipt->received_bytes + 1}) {
    pb::RaftMessage copy = parsed;
    copy.mutable_snapshot_receipt()->mutable_splice()->set_kept_bytes(kept);
    EXPECT_FALSE(decode_snapshot_receipt(copy, &problem).has_value()) << kept;
    EXPECT_NE(problem.find("splice point"), std::string::npos) << problem;
  }
  // Data of versions 1..3 names no splice point.
  SnapshotReassembler plain;
  const std::vector<SnapshotChunk> chunks =
      chunks_of(snapshot_message(1, 2, 900, snapshot_data(3 * kSnapshotChunkBytes, 5)));
  EXPECT_FALSE(plain.add(chunks[0], kT0, &problem).has_value());
  ASSERT_TRUE(plain.receipt().has_value());
  EXPECT_FALSE(plain.receipt()->splice.has_value());
}

TEST(SnapshotSpliceTransfer, ANewLeaderSendsOnlyItsDataAfterThePointAndTheFollowerInstallsIt) {
  FollowerWithPartial follower;
  const std::optional<SnapshotReceipt> receipt = follower.reassembler.receipt();
  ASSERT_TRUE(receipt && receipt->splice);
  const replica::FramedSplicePoint point = *receipt->splice;
  // The new leader's data differs (other clients, digests, trailer): no byte-identical resume.
  const std::string new_data = leader_encoding(3, 4, 99);
  NewLeaderSend send(new_data, receipt);
  ASSERT_FALSE(send.chunks.empty());
  EXPECT_EQ(send.chunks.front().place.offset, point.kept_bytes);
  EXPECT_EQ(send.chunks.front().splice, point);
  const LaneQueueCounters& counters = send.lane.counters();
  EXPECT_EQ(counters.snapshots_continued, 1U);
  EXPECT_EQ(counters.snapshot_resume_saved_bytes, point.kept_bytes);
  EXPECT_EQ(counters.snapshots_resumed, 0U);
  for (std::uint64_t missed : counters.snapshot_resume_missed.by_reason) EXPECT_EQ(missed, 0U);
  std::uint64_t sent = 0;
  for (const SnapshotChunk& chunk : send.chunks) sent += chunk.data.size();
  EXPECT_EQ(sent, send.chunks.front().place.total_bytes - point.kept_bytes);
  // Its clients above X and its trailer only: not its 1,300 clients below X (1.5 MB).
  EXPECT_LT(sent + 1'000'000, new_data.size());

  std::optional<raft::Message> whole;
  for (std::size_t i = 0; i < send.chunks.size(); ++i) {
    whole = follower.reassembler.add(send.chunks[i], kT0, &follower.problem);
    EXPECT_EQ(follower.problem, "") << i;
    if (i == 0) {
      // The partial took the continuation's identity: its receipt names it, for a resume.
      ASSERT_TRUE(follower.reassembler.receipt().has_value());
      EXPECT_EQ(follower.reassembler.receipt()->snapshot.total_bytes,
                send.chunks[0].place.total_bytes);
    }
  }
  ASSERT_TRUE(whole.has_value()) << "the last chunk completes the spliced data";
  const SnapshotReceiveCounters& received = follower.reassembler.status().counters;
  EXPECT_EQ(received.partials_spliced, 1U);
  EXPECT_EQ(received.splice_kept_bytes, point.kept_bytes);
  EXPECT_EQ(received.checksum_mismatches, 0U);
  EXPECT_EQ(whole->from, 3U);
  const std::string_view data = whole->snapshot->data.view();
  EXPECT_EQ(data.substr(0, point.kept_bytes),
            std::string_view(follower.old_data).substr(0, point.kept_bytes));
  store::Result<replica::SnapshotData> decoded = replica::decode_snapshot_data(data);
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  // Old leader's clients 2, 5, 8, ... through X; the new leader's 3, 7, 11, ... after it.
  std::uint64_t previous = 0;
  for (const replica::DedupTable::ClientState& client : decoded->dedup_clients) {
    EXPECT_GT(client.client_id, previous);
    previous = client.client_id;
    if (client.client_id <= point.last_client_id) {
      EXPECT_EQ((client.client_id - 2) % 3, 0U) << client.client_id;
    } else {
      EXPECT_EQ(client.client_id % 4, 3U) << client.client_id;
      EXPECT_EQ(client.appends.front().digest,
                static_cast<std::uint32_t>((client.client_id - 3) / 4) ^ 99U)
          << "the new leader's record of " << client.client_id;
    }
  }
  EXPECT_EQ(decoded->section, "leader 99");
  EXPECT_EQ(decoded->dedup_view_start, 199U);
  EXPECT_EQ(decoded->spliced_view_starts, std::vector<std::uint64_t>{100});
}

// Review M1: a deposed leader that is still alive keeps sending the chunks it had queued after
// the follower heard the new leader. They are refused as stale, but the partial stays for the new
// leader to continue.
TEST(SnapshotSpliceTransfer, ADeposedLeadersLateChunkKeepsThePartialTheNewLeaderContinues) {
  FollowerWithPartial follower;
  const std::optional<SnapshotReceipt> receipt = follower.reassembler.receipt();
  ASSERT_TRUE(receipt && receipt->splice);
  follower.reassembler.note_leader_term(3);  // the new leader's heartbeat
  const std::vector<SnapshotChunk> old_chunks = chunks_of(at_point(1, 2, follower.old_data));
  EXPECT_FALSE(follower.reassembler.add(old_chunks[2], kT0, &follower.problem).has_value());
  EXPECT_NE(follower.problem.find("stale"), std::string::npos) << follower.problem;
  EXPECT_EQ(follower.reassembler.receipt(), receipt) << "the partial is kept";
  NewLeaderSend send(leader_encoding(3, 4, 99), receipt);
  std::optional<raft::Message> whole;
  for (const SnapshotChunk& chunk : send.chunks) {
    whole = follower.reassembler.add(chunk, kT0, &follower.problem);
  }
  ASSERT_TRUE(whole.has_value()) << follower.problem;
  EXPECT_EQ(follower.reassembler.status().counters.partials_spliced, 1U);
  EXPECT_TRUE(replica::decode_snapshot_data(whole->snapshot->data.view()).ok());
}

// Review M6: a follower restarted from its SNAPSHOT.partial (restore) names the splice point of the
// bytes it restored, and a new leader's continuation splices onto the restored partial.
TEST(SnapshotSpliceTransfer, ARestoredPartialNamesItsSplicePointAndIsContinued) {
  FollowerWithPartial follower;
  const std::optional<SnapshotReassembler::PartialView> view = follower.reassembler.partial_from(1);
  ASSERT_TRUE(view.has_value());
  SnapshotReassembler restarted;
  ASSERT_EQ(restarted.restore(*view->header, view->place, std::string(view->data), kT0), "");
  const std::optional<SnapshotReceipt> receipt = restarted.receipt();
  ASSERT_TRUE(receipt.has_value());
  EXPECT_EQ(receipt->splice, follower.reassembler.receipt()->splice);
  ASSERT_TRUE(receipt->splice.has_value());
  NewLeaderSend send(leader_encoding(3, 4, 99), receipt);
  std::optional<raft::Message> whole;
  std::string problem;
  for (const SnapshotChunk& chunk : send.chunks) whole = restarted.add(chunk, kT0, &problem);
  ASSERT_TRUE(whole.has_value()) << problem;
  EXPECT_EQ(restarted.status().counters.partials_spliced, 1U);
  EXPECT_TRUE(replica::decode_snapshot_data(whole->snapshot->data.view()).ok());
}

// Review M5: once the follower spliced a continuation, a transfer of it that breaks (a closed
// stream, an expired chunk, the follower's restart) resumes at the follower's receipt, as any
// transfer does: not a new continuation from its latest complete block, which would resend part
// of a block and count the kept bytes as saved a second time.
TEST(SnapshotSpliceTransfer, ABrokenContinuedTransferResumesByOffsetAndIsNotContinuedAgain) {
  ContinuationSetUp set_up;
  ASSERT_TRUE(set_up.first.has_value()) << "the receipt names a splice point";
  auto& [follower, receipt, message, data, cut] = set_up;
  const SnapshotContinuation& first = *cut;
  // One chunk a write: the first is written, the stream breaks under the second, which then
  // expires (the transfer is abandoned).
  LaneQueueLimits one_a_write = append_lane_limits();
  one_a_write.max_batch_messages = 1;
  LaneQueue lane{one_a_write};
  ASSERT_EQ(lane.push_snapshot(message, data.data_crc32c, kT0, receipt, &first),
            LaneQueue::Admission::kQueued);
  ASSERT_EQ(lane.take_batch().size(), 1U);
  const SnapshotChunk delivered = through_the_wire(lane.writing().front());
  lane.write_sent(kT0);
  ASSERT_EQ(lane.take_batch().size(), 1U);
  lane.write_failed();
  lane.expire(Clock::now() + one_a_write.max_age + 1s);
  ASSERT_EQ(lane.snapshot_progress()->state, SnapshotSendProgress::State::kAbandoned);
  EXPECT_FALSE(follower.reassembler.add(delivered, kT0, &follower.problem).has_value());
  EXPECT_EQ(follower.problem, "");
  const std::optional<SnapshotReceipt> spliced = follower.reassembler.receipt();
  ASSERT_TRUE(spliced && spliced->splice);
  EXPECT_EQ(spliced->snapshot, first.spliced_identity(kPoint, 2));
  const std::uint64_t held = spliced->received_bytes;
  ASSERT_GT(held, receipt->splice->kept_bytes);
  const LaneQueueCounters before = lane.counters();
  EXPECT_EQ(before.snapshots_continued, 1U);

  // The retry: the transport finds the continuation the lane keeps for that receipt (no new cut)
  // and the lane resumes it at the receipt's offset.
  const std::optional<SnapshotContinuation> kept = lane.kept_continuation(data, *spliced);
  ASSERT_TRUE(kept.has_value()) << "the lane keeps the continuation its peer spliced";
  EXPECT_TRUE(kept->bytes.shares_bytes_with(first.bytes)) << "shared, not copied";
  ASSERT_EQ(lane.push_snapshot(message, data.data_crc32c, kT0 + 6s, spliced, &*kept),
            LaneQueue::Admission::kQueued);
  const std::vector<SnapshotChunk> rest = drain(lane);
  ASSERT_FALSE(rest.empty());
  EXPECT_EQ(rest.front().place.offset, held) << "resumed at the receipt, not at a block's end";
  const LaneQueueCounters& after = lane.counters();
  EXPECT_EQ(after.snapshots_continued, 1U) << "not continued again";
  EXPECT_EQ(after.snapshot_resume_saved_bytes, before.snapshot_resume_saved_bytes);
  EXPECT_EQ(after.snapshots_resumed, 1U);
  EXPECT_EQ(after.snapshot_bytes_skipped, held);
  for (std::uint64_t missed : after.snapshot_resume_missed.by_reason) EXPECT_EQ(missed, 0U);
  std::optional<raft::Message> whole;
  for (const SnapshotChunk& chunk : rest) {
    whole = follower.reassembler.add(chunk, kT0, &follower.problem);
  }
  ASSERT_TRUE(whole.has_value()) << follower.problem;
  EXPECT_EQ(follower.reassembler.status().counters.partials_spliced, 1U);
  EXPECT_EQ(follower.reassembler.status().counters.chunks_duplicate, 0U) << "nothing resent";
  EXPECT_TRUE(replica::decode_snapshot_data(whole->snapshot->data.view()).ok());
  // Every byte went out: the lane keeps nothing more.
  EXPECT_FALSE(lane.kept_continuation(data, *spliced).has_value());
}

// The continuation a lane keeps is bounded in time and count: it goes after kept_continuation_idle
// without a chunk made of it (the follower's partial has idled out by then), and at the next
// snapshot the lane neither continues nor resumes with it.
TEST(SnapshotSpliceTransfer, TheKeptContinuationGoesWhenIdleOrReplaced) {
  ContinuationSetUp set_up;
  ASSERT_TRUE(set_up.first.has_value()) << "the receipt names a splice point";
  const auto& [follower, receipt, message, data, cut] = set_up;
  const SnapshotContinuation& first = *cut;
  // The follower spliced the continuation's first chunk; the rest was lost.
  const SnapshotReceipt spliced{first.spliced_identity(kPoint, 2),
                                receipt->splice->kept_bytes + kSnapshotChunkBytes};
  const auto broken_transfer = [&](LaneQueue& lane) {
    ASSERT_EQ(lane.push_snapshot(message, data.data_crc32c, kT0, receipt, &first),
              LaneQueue::Admission::kQueued);
    ASSERT_EQ(lane.take_batch().size(), 1U);
    lane.write_sent(kT0);
    ASSERT_EQ(lane.take_batch().size(), 1U);
    lane.write_failed();
    lane.expire(Clock::now() + lane.limits().max_age + 1s);
    ASSERT_EQ(lane.snapshot_progress()->state, SnapshotSendProgress::State::kAbandoned);
  };
  LaneQueueLimits one_a_write = append_lane_limits();
  one_a_write.max_batch_messages = 1;
  LaneQueue idle(one_a_write);
  ASSERT_NO_FATAL_FAILURE(broken_transfer(idle));
  EXPECT_TRUE(idle.kept_continuation(data, spliced).has_value());
  idle.expire(Clock::now() + one_a_write.kept_continuation_idle + 1s);
  EXPECT_FALSE(idle.kept_continuation(data, spliced).has_value()) << "idle: dropped";

  LaneQueue replaced(one_a_write);
  ASSERT_NO_FATAL_FAILURE(broken_transfer(replaced));
  const raft::Message other = snapshot_message(3, 3, kPoint + 1, snapshot_data(3 << 20, 4));
  ASSERT_EQ(replaced.push_snapshot(other, util::crc32c::value(other.snapshot->data.view()), kT0),
            LaneQueue::Admission::kQueued);
  EXPECT_FALSE(replaced.kept_continuation(data, spliced).has_value()) << "replaced: dropped";
  // And only for the data it was cut from: another encoding of the point gets a new cut.
  LaneQueue reencoded(one_a_write);
  ASSERT_NO_FATAL_FAILURE(broken_transfer(reencoded));
  SnapshotIdentity other_encoding = data;
  other_encoding.data_crc32c ^= 1;
  EXPECT_FALSE(reencoded.kept_continuation(other_encoding, spliced).has_value());
  EXPECT_TRUE(reencoded.kept_continuation(data, spliced).has_value());
}

// Without the kept continuation (sent to its end, or idle), a continuation cut anew from the
// follower's latest complete block is the same spliced data (this node's blocks after it copied
// as they are), so it resumes by offset too; and a receipt of it claiming more than the lane made
// is not trusted (beyond_sent).
TEST(SnapshotSpliceTransfer, ANewCutOfTheSplicedDataResumesByOffsetWithinWhatTheLaneMade) {
  FollowerWithPartial follower;
  const std::optional<SnapshotReceipt> receipt = follower.reassembler.receipt();
  ASSERT_TRUE(receipt && receipt->splice);
  const std::string new_data = leader_encoding(3, 4, 99);
  NewLeaderSend send(new_data, receipt);
  ASSERT_GE(send.chunks.size(), 2U);
  EXPECT_FALSE(follower.reassembler.add(send.chunks[0], kT0, &follower.problem).has_value());
  const std::optional<SnapshotReceipt> spliced = follower.reassembler.receipt();
  ASSERT_TRUE(spliced && spliced->splice);
  EXPECT_GT(spliced->splice->kept_bytes, receipt->splice->kept_bytes)
      << "the follower's latest complete block lies in the continuation";

  const raft::Message message = at_point(3, 3, new_data);
  const std::uint32_t crc = util::crc32c::value(new_data);
  const SnapshotContinuation again =
      make_snapshot_continuation(message.snapshot->data, *spliced->splice);
  EXPECT_EQ(again.spliced_identity(kPoint, 2), spliced->snapshot);
  ASSERT_EQ(send.lane.push_snapshot(message, crc, kT0, spliced, &again),
            LaneQueue::Admission::kQueued);
  const std::vector<SnapshotChunk> rest = drain(send.lane);
  ASSERT_FALSE(rest.empty());
  EXPECT_EQ(rest.front().place.offset, spliced->received_bytes);
  EXPECT_EQ(send.lane.counters().snapshots_continued, 1U);
  EXPECT_EQ(send.lane.counters().snapshots_resumed, 1U);
  std::optional<raft::Message> whole;
  for (const SnapshotChunk& chunk : rest) {
    whole = follower.reassembler.add(chunk, kT0, &follower.problem);
  }
  ASSERT_TRUE(whole.has_value()) << follower.problem;

  // A lane that made only the continuation's first chunk (one chunk a write) when it is pushed
  // again: a receipt of the spliced data past that chunk names bytes it never sent.
  LaneQueueLimits one_a_write = append_lane_limits();
  one_a_write.max_batch_messages = 1;
  LaneQueue lane(one_a_write);
  const SnapshotContinuation first =
      make_snapshot_continuation(message.snapshot->data, *receipt->splice);
  ASSERT_EQ(lane.push_snapshot(message, crc, kT0, receipt, &first),
            LaneQueue::Admission::kQueued);
  ASSERT_EQ(lane.take_batch().size(), 1U);
  lane.write_sent(kT0);
  SnapshotReceipt beyond{first.spliced_identity(kPoint, 2),
                         receipt->splice->kept_bytes + kSnapshotChunkBytes + 1, spliced->splice};
  ASSERT_LT(beyond.received_bytes, beyond.snapshot.total_bytes);
  const std::optional<SnapshotContinuation> kept = lane.kept_continuation(
      SnapshotIdentity{kPoint, 2, new_data.size(), crc, replica::snapshot_data_digest(new_data, crc)},
      beyond);
  ASSERT_TRUE(kept.has_value());
  ASSERT_EQ(lane.push_snapshot(message, crc, kT0, beyond, &*kept), LaneQueue::Admission::kQueued);
  EXPECT_EQ(lane.counters().snapshot_resume_missed[ResumeMiss::kBeyondSent], 1U);
  EXPECT_EQ(lane.counters().snapshots_resumed, 0U);
  const std::vector<SnapshotChunk> from_zero = drain(lane);
  ASSERT_FALSE(from_zero.empty());
  EXPECT_EQ(from_zero.front().place.offset, 0U);
  EXPECT_FALSE(from_zero.front().splice.has_value()) << "its whole data, from 0";
}

// Review resume3 L2 asked for the case where the new leader still holds an older partial of its
// own at the follower beside the old leader's, which its continuation was cut for. The term rules
// never let the two stand together: the old leader's first chunk of its higher term drops the new
// leader's older partial, and a chunk below another sender's partial's term is refused, so after
// any accepted chunk every other sender's partial is of that chunk's term, which Raft gives one
// leader. The continuation always meets the old leader's partial alone.
TEST(SnapshotSpliceTransfer, TheNewLeadersOlderPartialNeverStandsBesideTheOldLeadersOne) {
  SnapshotReassembler reassembler;
  std::string problem;
  // Node 3 led at term 3 and sent the first chunk of its data at the point (another size than node
  // 1's: not taken for the same data).
  const std::vector<SnapshotChunk> older = chunks_of(at_point(3, 3, leader_encoding(3, 4, 10)));
  EXPECT_FALSE(reassembler.add(older[0], kT0, &problem).has_value());
  EXPECT_EQ(reassembler.partial_count(), 1U);
  // Node 1 leads at term 4: its first chunk drops node 3's partial.
  const std::vector<SnapshotChunk> old_leader = chunks_of(at_point(1, 4, leader_encoding(2, 3, 0)));
  EXPECT_FALSE(reassembler.add(old_leader[0], kT0, &problem).has_value());
  EXPECT_FALSE(reassembler.add(old_leader[1], kT0, &problem).has_value());
  EXPECT_EQ(reassembler.partial_count(), 1U);
  EXPECT_FALSE(reassembler.partial_from(3).has_value());
  EXPECT_EQ(reassembler.status().counters.partials_replaced, 1U);
  // A late chunk of node 3's term 3 is refused and starts nothing.
  EXPECT_FALSE(reassembler.add(older[1], kT0, &problem).has_value());
  EXPECT_NE(problem.find("stale"), std::string::npos) << problem;
  EXPECT_EQ(reassembler.partial_count(), 1U);
  // Node 3 leads again at term 5 and continues node 1's partial from the receipt.
  const std::optional<SnapshotReceipt> receipt = reassembler.receipt();
  ASSERT_TRUE(receipt && receipt->splice);
  const raft::Message message = at_point(3, 5, leader_encoding(3, 4, 99));
  const SnapshotContinuation continuation =
      make_snapshot_continuation(message.snapshot->data, *receipt->splice);
  LaneQueue lane{append_lane_limits()};
  ASSERT_EQ(lane.push_snapshot(message, util::crc32c::value(message.snapshot->data.view()), kT0,
                               receipt, &continuation),
            LaneQueue::Admission::kQueued);
  std::optional<raft::Message> whole;
  for (const SnapshotChunk& chunk : drain(lane)) whole = reassembler.add(chunk, kT0, &problem);
  ASSERT_TRUE(whole.has_value()) << problem;
  EXPECT_EQ(reassembler.status().counters.partials_spliced, 1U);
  EXPECT_EQ(reassembler.status().counters.splices_refused, 0U);
}

// Found while writing the tests above: the whole-data CRC-32C of framed data does not depend on the
// contents of its valid frames, only on its head and its frames' lengths. Each frame ends with its
// own CRC-32C, seeded with the head's, and CRC-32C is linear, so a frame that matches its CRC
// cancels out of the running CRC over the whole data. Two encodings with the same head and the
// same layout (the same clients with as many appends each) therefore share their identity (index,
// term, total, CRC): a lane resumes, and a receiver continues, one with the other's bytes. A mix
// cut inside a frame fails that frame and so the whole-data check (and the decoder); a mix cut at
// a frame boundary passes both, and is a splice of the two tables at a block's end, which the
// merge property (SnapshotSplice.*) makes as good as either.
TEST(SnapshotSpliceTransfer, FramedDataOfOneLayoutSharesItsWholeCrcAndOnlyAFrameBoundaryMixPasses) {
  const std::string a = leader_encoding(2, 3, 0);
  const std::string b = leader_encoding(2, 3, 7);  // other digests and trailer, the same lengths
  ASSERT_EQ(a.size(), b.size());
  ASSERT_NE(a, b);
  EXPECT_EQ(util::crc32c::value(a), util::crc32c::value(b));
  const std::size_t cut = kSnapshotChunkBytes + 1000;  // inside a block
  ASSERT_NE(a.substr(cut - 64, 128), b.substr(cut - 64, 128));
  const std::string inside = a.substr(0, cut) + b.substr(cut);
  EXPECT_NE(util::crc32c::value(inside), util::crc32c::value(a)) << "a cut inside a frame";
  EXPECT_FALSE(replica::decode_snapshot_data(inside).ok());
  replica::FramedFrameWalk walk;
  walk.advance(std::string_view(a).substr(0, cut));
  ASSERT_TRUE(walk.splice_point().has_value());
  const std::size_t boundary = walk.splice_point()->kept_bytes;
  const std::string at_boundary = a.substr(0, boundary) + b.substr(boundary);
  EXPECT_EQ(util::crc32c::value(at_boundary), util::crc32c::value(a)) << "a cut at a block's end";
  store::Result<replica::SnapshotData> decoded = replica::decode_snapshot_data(at_boundary);
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_EQ(decoded->section, "leader 7");
}

// What the test above found, end to end: two leaders' encodings of one point with other client
// sets of the same byte lengths (ids 2, 5, 8, ... and 3, 6, 9, ...: every record as long) share
// index, term, total and whole-data CRC. A follower holds the first's bytes through a block's end;
// the second's rest appended there would decode, with the first's clients through X and the
// second's after it: client 3, 6, ... through X (the second's) and X+3, ... (the first's) in
// neither part, forgotten, so their acknowledged appends retried would be appended again. The
// data's digest (the CRC-32C of its frames' CRCs, on every chunk and receipt) tells the two apart:
// neither the new leader's lane resumes the partial by offset, nor does the follower continue it
// with the other encoding's chunks, whether they start at its offset or at 0.
TEST(SnapshotSpliceTransfer, AnotherEncodingOfOneLayoutNeverContinuesAPartialAndForgetsClients) {
  const std::string a = leader_encoding(2, 3, 0);
  const std::string b = leader_encoding(3, 3, 0);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_EQ(util::crc32c::value(a), util::crc32c::value(b)) << "one identity without a digest";
  replica::FramedFrameWalk walk;
  walk.advance(std::string_view(a).substr(0, 2 * kSnapshotChunkBytes));
  ASSERT_TRUE(walk.splice_point().has_value());
  const std::uint64_t boundary = walk.splice_point()->kept_bytes;  // a block's end in a's bytes
  ASSERT_GT(boundary, kSnapshotChunkBytes);
  for (const bool lane_resumes : {true, false}) {
    SCOPED_TRACE(lane_resumes ? "the new leader's lane resumes from the receipt"
                              : "the new leader sends from 0 (no receipt)");
    // The old leader (node 1, term 2) sent a's first chunk and the part of its second through
    // the boundary (the rest of that chunk lost with its stream).
    SnapshotReassembler follower;
    std::string problem;
    std::vector<SnapshotChunk> sent = chunks_of(at_point(1, 2, a));
    ASSERT_GE(sent.size(), 2U);
    EXPECT_FALSE(follower.add(sent[0], kT0, &problem).has_value()) << problem;
    sent[1].data.resize(static_cast<std::size_t>(boundary - kSnapshotChunkBytes));
    EXPECT_FALSE(follower.add(sent[1], kT0, &problem).has_value()) << problem;
    const std::optional<SnapshotReceipt> receipt = follower.receipt();
    ASSERT_TRUE(receipt.has_value());
    ASSERT_EQ(receipt->received_bytes, boundary);
    // The new leader (node 3, term 3) sends b, with no continuation (the lane would resume).
    LaneQueue lane{append_lane_limits()};
    ASSERT_EQ(lane.push_snapshot(at_point(3, 3, b), util::crc32c::value(b), kT0,
                                 lane_resumes ? receipt : std::nullopt),
              LaneQueue::Admission::kQueued);
    std::optional<raft::Message> whole;
    for (const SnapshotChunk& chunk : drain(lane)) whole = follower.add(chunk, kT0, &problem);
    ASSERT_TRUE(whole.has_value()) << problem;
    EXPECT_EQ(lane.counters().snapshots_resumed, 0U) << "a's partial is not b's";
    EXPECT_EQ(follower.status().counters.partials_continued, 0U);
    EXPECT_EQ(follower.status().counters.chunks_duplicate, 0U);
    const std::string_view got = whole->snapshot->data.view();
    EXPECT_TRUE(got == std::string_view(b)) << "a's bytes through " << boundary << " kept";
    store::Result<replica::SnapshotData> decoded = replica::decode_snapshot_data(got);
    ASSERT_TRUE(decoded.ok()) << decoded.status().message();
    // b's clients exactly: none forgotten, none of a's.
    std::vector<std::uint64_t> ids, expected;
    for (const replica::DedupTable::ClientState& client : decoded->dedup_clients) {
      ids.push_back(client.client_id);
    }
    for (std::uint64_t c = 0; c < 3000; ++c) expected.push_back(3 + 3 * c);
    EXPECT_TRUE(ids == expected) << ids.size() << " clients, the first " << ids.front();
  }
}

TEST(SnapshotSpliceTransfer, AContinuationThatDoesNotMatchThePartialIsRefusedAndThePartialDropped) {
  const std::string new_data = leader_encoding(3, 4, 99);
  struct Case {
    const char* name;
    std::function<void(replica::FramedSplicePoint&)> forge;
    const char* reason;
  };
  const std::vector<Case> cases = {
      {"other head CRC", [](auto& p) { p.head_crc32c ^= 0x10; }, "another head"},
      {"X not at a block end", [](auto& p) { p.kept_bytes -= 7; }, "no head or client block"},
      {"offset beyond what is held",
       [](auto& p) { p.kept_bytes = 2 * kSnapshotChunkBytes + 1; }, "the partial holds"},
      {"forged X", [](auto& p) { p.last_client_id += 3; }, "ends at client"},
      {"other kept bytes", [](auto& p) { p.kept_crc32c ^= 1; }, "differ"},
  };
  for (const Case& c : cases) {
    FollowerWithPartial follower;
    std::optional<SnapshotReceipt> receipt = follower.reassembler.receipt();
    ASSERT_TRUE(receipt && receipt->splice);
    c.forge(*receipt->splice);  // the leader believes a receipt the follower never sent
    receipt->received_bytes = std::max(receipt->received_bytes, receipt->splice->kept_bytes);
    NewLeaderSend send(new_data, receipt);
    ASSERT_FALSE(send.chunks.empty()) << c.name;
    if (std::string(c.name) == "other head CRC") {
      // The leader sees the head differ itself: it starts at 0, counted.
      EXPECT_EQ(send.chunks.front().place.offset, 0U);
      EXPECT_EQ(send.lane.counters().snapshot_resume_missed[ResumeMiss::kHead], 1U);
      // Forced through anyway, as a forged chunk would be: the follower refuses it.
      SnapshotChunk forged = send.chunks[1];
      forged.place.offset = receipt->splice->kept_bytes;
      forged.splice = receipt->splice;
      EXPECT_FALSE(follower.reassembler.add(forged, kT0, &follower.problem).has_value());
    } else {
      EXPECT_EQ(send.chunks.front().splice, receipt->splice) << c.name;
      EXPECT_FALSE(follower.reassembler.add(send.chunks[0], kT0, &follower.problem).has_value());
    }
    EXPECT_NE(follower.problem.find(c.reason), std::string::npos)
        << c.name << ": " << follower.problem;
    EXPECT_EQ(follower.reassembler.status().counters.splices_refused, 1U) << c.name;
    EXPECT_EQ(follower.reassembler.status().counters.partials_spliced, 0U) << c.name;
    EXPECT_FALSE(follower.reassembler.receipt().has_value())
        << c.name << ": the partial is dropped, so the next attempt starts at 0";
  }
  // A chunk of the continuation that is not its first (the first was lost) splices nothing.
  FollowerWithPartial follower;
  const std::optional<SnapshotReceipt> receipt = follower.reassembler.receipt();
  NewLeaderSend send(new_data, receipt);
  ASSERT_GE(send.chunks.size(), 2U);
  EXPECT_FALSE(follower.reassembler.add(send.chunks[1], kT0, &follower.problem).has_value());
  EXPECT_NE(follower.problem.find("does not start at the point"), std::string::npos)
      << follower.problem;
  // Review L1: the partial stays (its bytes through the point are good), its receipt the same.
  EXPECT_EQ(follower.reassembler.receipt(), receipt);
  EXPECT_EQ(follower.reassembler.status().counters.splices_refused, 0U);
  // The continuation's first chunk, when it comes again, still splices.
  std::optional<raft::Message> whole;
  for (const SnapshotChunk& chunk : send.chunks) {
    whole = follower.reassembler.add(chunk, kT0, &follower.problem);
  }
  EXPECT_TRUE(whole.has_value()) << follower.problem;
}

TEST(SnapshotSpliceTransfer, ACorruptContinuationByteFailsTheWholeDataCheck) {
  FollowerWithPartial follower;
  const std::optional<SnapshotReceipt> receipt = follower.reassembler.receipt();
  NewLeaderSend send(leader_encoding(3, 4, 99), receipt);
  ASSERT_GE(send.chunks.size(), 2U);
  send.chunks[1].data[1000] ^= 0x04;
  std::optional<raft::Message> whole;
  for (const SnapshotChunk& chunk : send.chunks) {
    whole = follower.reassembler.add(chunk, kT0, &follower.problem);
  }
  EXPECT_FALSE(whole.has_value());
  EXPECT_EQ(follower.reassembler.status().counters.checksum_mismatches, 1U);
  EXPECT_EQ(follower.reassembler.status().counters.snapshots_delivered, 0U);
}

TEST(SnapshotSpliceTransfer, EveryContinuationTheLeaderCannotUseIsAMissWithItsReason) {
  FollowerWithPartial follower;
  const std::optional<SnapshotReceipt> receipt = follower.reassembler.receipt();
  ASSERT_TRUE(receipt && receipt->splice);
  // Another head: the nodes' topic tables differ at the point.
  NewLeaderSend other_head(leader_encoding(3, 4, 99, "zeta"), receipt);
  EXPECT_EQ(other_head.lane.counters().snapshot_resume_missed[ResumeMiss::kHead], 1U);
  EXPECT_EQ(other_head.chunks.front().place.offset, 0U);
  EXPECT_FALSE(other_head.chunks.front().splice.has_value());
  // No continuation made for the point (the transport made none, or for another point).
  NewLeaderSend none(leader_encoding(3, 4, 99), receipt, /*with_continuation=*/false);
  EXPECT_EQ(none.lane.counters().snapshot_resume_missed[ResumeMiss::kContinuation], 1U);
  EXPECT_EQ(none.chunks.front().place.offset, 0U);
  // Data of versions 1..3 (sent to an older peer) cannot be cut.
  NewLeaderSend plain(snapshot_data(3 * kSnapshotChunkBytes, 8), receipt);
  EXPECT_EQ(plain.lane.counters().snapshot_resume_missed[ResumeMiss::kContinuation], 1U);
  // A spliced total past what a follower decodes (64 MiB; review M3): not sent, counted.
  {
    LaneQueue lane{append_lane_limits()};
    const std::string data = leader_encoding(3, 4, 99);
    SnapshotContinuation huge{*receipt->splice, replica::FramedContinuation::Outcome::kMade,
                              raft::Payload(std::string(replica::kMaxFramedSnapshotBytes, 'x')),
                              0};
    EXPECT_EQ(lane.push_snapshot(at_point(3, 3, data), util::crc32c::value(data), kT0, receipt,
                                 &huge),
              LaneQueue::Admission::kQueued);
    EXPECT_EQ(lane.counters().snapshot_resume_missed[ResumeMiss::kContinuation], 1U);
    EXPECT_EQ(lane.counters().snapshots_continued, 0U);
  }
  // A receipt without a splice point (its partial not framed, or its head incomplete): bytes.
  std::optional<SnapshotReceipt> unframed = receipt;
  unframed->splice.reset();
  NewLeaderSend bytes(leader_encoding(3, 4, 99), unframed);
  EXPECT_EQ(bytes.lane.counters().snapshot_resume_missed[ResumeMiss::kBytes], 1U);
  EXPECT_EQ(bytes.lane.counters().snapshots_continued, 0U);
  // The same leader's byte-identical data resumes at the offset, as before.
  NewLeaderSend same(follower.old_data, receipt);
  EXPECT_EQ(same.lane.counters().snapshots_resumed, 1U);
  EXPECT_EQ(same.lane.counters().snapshots_continued, 0U);
  EXPECT_EQ(same.chunks.front().place.offset, receipt->received_bytes);
}

}  // namespace
}  // namespace raftlog::server

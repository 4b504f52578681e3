// A follower restarted after it spliced a new leader's continuation (review resume3 M6, the
// restart half; docs/storage-format.md, "SNAPSHOT.partial"): the file that keeps its partial is
// started again at the splice (the kept bytes of the old leader and the continuation rewritten
// under a header naming the spliced data), a restart restores exactly that, the restored partial's
// receipt names the spliced data and a splice point past the old one, and the new leader finishes
// the transfer from there to data that decodes.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "node/temp_dir.h"
#include "replica/snapshot_frames.h"
#include "server/peer_queue.h"
#include "server/snapshot_chunks.h"
#include "server/snapshot_partial_file.h"
#include "snapshot_chunk_support.h"
#include "snapshot_splice_support.h"
#include "util/crc32c.h"

namespace raftlog::server {
namespace {

using namespace snapshot_testing;  // snapshot_chunk_support.h, snapshot_splice_support.h

constexpr raft::NodeId kFollower = 2;  // snapshot_message() sends to node 2
constexpr raft::NodeId kNewLeader = 3;

SnapshotPartialExpectations follower_expectations() {
  return SnapshotPartialExpectations{"c", kFollower, std::uint64_t{64} << 20};
}

// Gives `chunk` to the follower's reassembler and lets its file follow, as the transport does.
std::optional<raft::Message> receive(SnapshotReassembler& reassembler, SnapshotPartialFile& file,
                                     const SnapshotChunk& chunk) {
  std::string problem;
  std::optional<raft::Message> whole = reassembler.add(chunk, kT0, &problem);
  EXPECT_EQ(problem, "");
  EXPECT_EQ(file.follow(reassembler, chunk.message.from), "");
  return whole;
}

TEST(SnapshotSpliceRestart, AFollowerRestartedAfterASpliceRestoresTheSplicedDataAndFinishesIt) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/" + std::string(kSnapshotPartialFileName);
  // The old leader (node 1, term 2) sent one chunk: the continuation is then three chunks long.
  const std::string old_data = leader_encoding(2, 3, 0);
  const std::string new_data = leader_encoding(3, 4, 99);
  SnapshotReassembler reassembler;
  SnapshotPartialFile file(path, follower_expectations());
  const std::vector<SnapshotChunk> old_chunks = chunks_of(at_point(1, 2, old_data));
  EXPECT_FALSE(receive(reassembler, file, old_chunks[0]).has_value());
  const std::optional<SnapshotReceipt> receipt = reassembler.receipt();
  ASSERT_TRUE(receipt && receipt->splice);
  const replica::FramedSplicePoint point = *receipt->splice;

  // The new leader continues it; the follower splices and takes one more chunk, then dies.
  NewLeaderSend send(new_data, receipt);
  ASSERT_GE(send.chunks.size(), 3U);
  EXPECT_EQ(send.chunks[0].splice, point);
  EXPECT_FALSE(receive(reassembler, file, send.chunks[0]).has_value());
  EXPECT_FALSE(receive(reassembler, file, send.chunks[1]).has_value());
  ASSERT_EQ(reassembler.status().counters.partials_spliced, 1U);
  const std::optional<SnapshotReceipt> before_restart = reassembler.receipt();
  ASSERT_TRUE(before_restart.has_value());
  EXPECT_TRUE(file.holds_file());

  // What the spliced data is: the old leader's bytes through the point, then the continuation.
  const SnapshotContinuation continuation =
      make_snapshot_continuation(raft::Payload(new_data), point);
  const std::string spliced_data = old_data.substr(0, point.kept_bytes) + continuation.bytes.str();
  const SnapshotIdentity spliced = continuation.spliced_identity(kPoint, 2);
  EXPECT_EQ(spliced.data_crc32c, util::crc32c::value(spliced_data));

  // The restart: a new reassembler restores the partial from the file alone.
  SnapshotReassembler restarted;
  SnapshotPartialFile reopened(path, follower_expectations());
  EXPECT_NE(reopened.load(restarted, 0, kT0), "");  // the line saying what it restored
  const std::optional<SnapshotReassembler::PartialView> restored =
      restarted.partial_from(kNewLeader);
  ASSERT_TRUE(restored.has_value()) << "the file names the new leader as the sender";
  EXPECT_EQ(restored->place.total_bytes, spliced.total_bytes) << "the spliced data's identity";
  EXPECT_EQ(restored->place.data_crc32c, spliced.data_crc32c);
  EXPECT_EQ(restored->header->term, 3U);
  const std::uint64_t held =
      point.kept_bytes + send.chunks[0].data.size() + send.chunks[1].data.size();
  ASSERT_EQ(restored->data.size(), held);
  EXPECT_TRUE(restored->data == std::string_view(spliced_data).substr(0, held))
      << "the old leader's kept bytes, then the continuation";
  const std::optional<SnapshotReceipt> after_restart = restarted.receipt();
  ASSERT_TRUE(after_restart && after_restart->splice);
  EXPECT_EQ(after_restart->snapshot, spliced);
  EXPECT_EQ(after_restart->received_bytes, held);
  EXPECT_EQ(after_restart, before_restart) << "the same receipt as before the restart";
  EXPECT_GT(after_restart->splice->kept_bytes, point.kept_bytes)
      << "a splice point inside the continuation, past the old one";

  // The new leader's next attempt: the continuation cut again from the restored partial's point is
  // the same spliced data, resumed at the receipt's offset; the follower completes and decodes it.
  const raft::Message message = at_point(kNewLeader, 3, new_data);
  const SnapshotContinuation again =
      make_snapshot_continuation(message.snapshot->data, *after_restart->splice);
  ASSERT_EQ(
      send.lane.push_snapshot(message, util::crc32c::value(new_data), kT0, after_restart, &again),
      LaneQueue::Admission::kQueued);
  const std::vector<SnapshotChunk> rest = drain(send.lane);
  ASSERT_FALSE(rest.empty());
  EXPECT_EQ(rest.front().place.offset, held);
  EXPECT_EQ(send.lane.counters().snapshots_continued, 1U);
  std::optional<raft::Message> whole;
  for (const SnapshotChunk& chunk : rest) whole = receive(restarted, reopened, chunk);
  ASSERT_TRUE(whole.has_value());
  EXPECT_FALSE(reopened.holds_file()) << "a completed partial's file is removed";
  EXPECT_TRUE(whole->snapshot->data == spliced_data);
  store::Result<replica::SnapshotData> decoded =
      replica::decode_snapshot_data(whole->snapshot->data.view());
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_EQ(decoded->section, "leader 99");
  EXPECT_EQ(decoded->spliced_view_starts, std::vector<std::uint64_t>{100});
}

}  // namespace
}  // namespace raftlog::server

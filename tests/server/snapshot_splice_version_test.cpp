// Framed versions 4 and 6 across a leader change (docs/storage-format.md, "Version 6"): a new leader
// whose data for the follower is of the other version than the follower's partial (the follower
// was upgraded mid-transfer, or the leaders differ in version) never continues that partial with
// its bytes: its head differs (the version is in the head's CRC), the miss is counted as a head
// miss, the transfer starts at offset 0 and the follower ends with the new leader's data whole. A
// version-6 partial is continued by a version-6 leader as version 4's is. Over the lane and the
// follower's reassembler, without gRPC streams.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "node/temp_dir.h"
#include "replica/snapshot_data.h"
#include "replica/snapshot_frames.h"
#include "server/peer_queue.h"
#include "server/snapshot_chunks.h"
#include "server/snapshot_partial_file.h"
#include "snapshot_chunk_support.h"
#include "snapshot_splice_support.h"

namespace raftlog::server {
namespace {

using namespace snapshot_testing;  // snapshot_chunk_support.h, snapshot_splice_support.h

constexpr std::uint32_t kV4 = replica::kFramedSnapshotVersion;
constexpr std::uint32_t kV6 = replica::kFramedSnapshotVersionWithStamp;

// The follower (its partial of `from` version) is sent the new leader's data of `to` version: it
// completes exactly that data, from byte 0, never a mix. Returns the data it completed, decoded.
std::optional<replica::SnapshotData> sent_across_versions(std::uint32_t from, std::uint32_t to) {
  FollowerWithPartial follower(2, from);
  const std::optional<SnapshotReceipt> receipt = follower.reassembler.receipt();
  EXPECT_TRUE(receipt && receipt->splice) << "a partial of version " << from << " names a point";
  if (!receipt || !receipt->splice) return std::nullopt;
  const std::string new_data = leader_encoding(3, 4, 99, "", to);
  NewLeaderSend send(new_data, receipt);
  const LaneQueueCounters& counters = send.lane.counters();
  EXPECT_EQ(counters.snapshot_resume_missed[ResumeMiss::kHead], 1U);
  EXPECT_EQ(counters.snapshots_continued, 0U);
  EXPECT_EQ(counters.snapshots_resumed, 0U);
  EXPECT_FALSE(send.chunks.empty());
  if (send.chunks.empty()) return std::nullopt;
  EXPECT_EQ(send.chunks.front().place.offset, 0U);
  EXPECT_FALSE(send.chunks.front().splice.has_value());
  std::optional<raft::Message> whole;
  for (const SnapshotChunk& chunk : send.chunks) {
    whole = follower.reassembler.add(chunk, kT0, &follower.problem);
    EXPECT_EQ(follower.problem, "");
  }
  EXPECT_EQ(follower.reassembler.status().counters.partials_spliced, 0U);
  EXPECT_TRUE(whole.has_value());
  if (!whole) return std::nullopt;
  EXPECT_EQ(whole->snapshot->data.view(), new_data) << "the new leader's data, byte for byte";
  auto decoded = replica::decode_snapshot_data(whole->snapshot->data.view());
  EXPECT_TRUE(decoded.ok()) << decoded.status().message();
  if (!decoded.ok()) return std::nullopt;
  return std::move(*decoded);
}

TEST(SnapshotSpliceVersion, APartialOfOneFramedVersionIsNeverContinuedWithTheOthersBytes) {
  {
    SCOPED_TRACE("a version-4 partial, a version-6 leader");
    const auto data = sent_across_versions(kV4, kV6);
    ASSERT_TRUE(data.has_value());
    EXPECT_TRUE(data->stamp_at_index);
    EXPECT_EQ(data->stamp_max_ms, 1'699'999'999'000U);
  }
  {
    SCOPED_TRACE("a version-6 partial, a version-4 leader");
    const auto data = sent_across_versions(kV6, kV4);
    ASSERT_TRUE(data.has_value());
    EXPECT_FALSE(data->stamp_at_index);
  }
}

// Failed before this change: the follower's walk took a version-6 partial for no framed data, so
// its receipt named no splice point and the new leader sent everything from 0.
TEST(SnapshotSpliceVersion, AVersion6PartialIsContinuedByAVersion6Leader) {
  FollowerWithPartial follower(2, kV6);
  const std::optional<SnapshotReceipt> receipt = follower.reassembler.receipt();
  ASSERT_TRUE(receipt && receipt->splice);
  const replica::FramedSplicePoint point = *receipt->splice;
  NewLeaderSend send(leader_encoding(3, 4, 99, "", kV6), receipt);
  ASSERT_FALSE(send.chunks.empty());
  EXPECT_EQ(send.lane.counters().snapshots_continued, 1U);
  EXPECT_EQ(send.chunks.front().place.offset, point.kept_bytes);
  std::optional<raft::Message> whole;
  for (const SnapshotChunk& chunk : send.chunks) {
    whole = follower.reassembler.add(chunk, kT0, &follower.problem);
    EXPECT_EQ(follower.problem, "");
  }
  ASSERT_TRUE(whole.has_value());
  EXPECT_EQ(follower.reassembler.status().counters.partials_spliced, 1U);
  auto decoded = replica::decode_snapshot_data(whole->snapshot->data.view());
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_TRUE(decoded->stamp_at_index);
  EXPECT_EQ(decoded->stamp_max_ms, 1'699'999'999'000U);
  EXPECT_EQ(decoded->spliced_view_starts, std::vector<std::uint64_t>{100});
}

// The brief's case through the follower's restart (review of stamp5, L2): the partial comes back
// from SNAPSHOT.partial, its receipt names its splice point, and a leader of the other version
// still sends from byte 0 (a head miss) while one of the same version 6 continues it.
struct RestartedFollower {
  testing::TempDir dir;
  std::string path = dir.path() + "/" + std::string(kSnapshotPartialFileName);
  SnapshotPartialExpectations expect{"c", 2, std::uint64_t{64} << 20};
  SnapshotReassembler reassembler;
  std::optional<SnapshotPartialFile> file;

  // The old leader (node 1, term 2) sent one chunk of its data of `version`; then the restart.
  explicit RestartedFollower(std::uint32_t version) {
    SnapshotReassembler before;
    SnapshotPartialFile written(path, expect);
    const std::vector<SnapshotChunk> old_chunks =
        chunks_of(at_point(1, 2, leader_encoding(2, 3, 0, "", version)));
    std::string problem;
    EXPECT_FALSE(before.add(old_chunks[0], kT0, &problem).has_value());
    EXPECT_EQ(written.follow(before, 1), "");
    file.emplace(path, expect);
    EXPECT_NE(file->load(reassembler, 0, kT0), "") << "the partial restored";
  }
  std::optional<raft::Message> receive(const std::vector<SnapshotChunk>& chunks) {
    std::optional<raft::Message> whole;
    for (const SnapshotChunk& chunk : chunks) {
      std::string problem;
      whole = reassembler.add(chunk, kT0, &problem);
      EXPECT_EQ(problem, "");
      EXPECT_EQ(file->follow(reassembler, chunk.message.from), "");
    }
    return whole;
  }
};

TEST(SnapshotSpliceVersion, AfterTheFollowersRestartTheVersionsStillNeverMix) {
  for (const auto& [from, to] : {std::pair{kV4, kV6}, std::pair{kV6, kV4}}) {
    SCOPED_TRACE("a restored version-" + std::to_string(from) + " partial, a version-" +
                 std::to_string(to) + " leader");
    RestartedFollower follower(from);
    const std::optional<SnapshotReceipt> receipt = follower.reassembler.receipt();
    ASSERT_TRUE(receipt && receipt->splice);
    const std::string new_data = leader_encoding(3, 4, 99, "", to);
    NewLeaderSend send(new_data, receipt);
    EXPECT_EQ(send.lane.counters().snapshot_resume_missed[ResumeMiss::kHead], 1U);
    ASSERT_FALSE(send.chunks.empty());
    EXPECT_EQ(send.chunks.front().place.offset, 0U);
    const std::optional<raft::Message> whole = follower.receive(send.chunks);
    ASSERT_TRUE(whole.has_value());
    EXPECT_EQ(whole->snapshot->data.view(), new_data);
    EXPECT_FALSE(follower.file->holds_file()) << "a completed partial's file is removed";
  }
  RestartedFollower follower(kV6);
  const std::optional<SnapshotReceipt> receipt = follower.reassembler.receipt();
  ASSERT_TRUE(receipt && receipt->splice);
  NewLeaderSend send(leader_encoding(3, 4, 99, "", kV6), receipt);
  EXPECT_EQ(send.lane.counters().snapshots_continued, 1U);
  const std::optional<raft::Message> whole = follower.receive(send.chunks);
  ASSERT_TRUE(whole.has_value());
  auto decoded = replica::decode_snapshot_data(whole->snapshot->data.view());
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_TRUE(decoded->stamp_at_index);
  EXPECT_EQ(decoded->spliced_view_starts, std::vector<std::uint64_t>{100});
}

}  // namespace
}  // namespace raftlog::server

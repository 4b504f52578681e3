// A new leader continues a follower's framed partial (src/replica/snapshot_frame_walk.h): the
// follower's splice point (the walk of the bytes it holds), the check before it splices, and the
// leader's continuation (its clients above the point's last client, re-blocked, then its
// trailer). The spliced data must decode as any snapshot does, to exactly the old leader's clients
// through X and the new leader's after it; every wrong point is refused with a reason.
#include "replica/snapshot_frame_walk.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "replica/snapshot_frames.h"
#include "util/crc32c.h"

namespace raftlog::replica {
namespace {

// An installed snapshot's data at one point as a leader encodes it: the same head for every
// leader (index, term, configuration, topics), its own dedup clients `ids` (each with `appends`
// appends whose digests depend on `salt`), view start and trailer.
SnapshotData leader_data(const std::vector<std::uint64_t>& ids, std::uint32_t salt,
                         std::uint64_t view_start, std::size_t appends = 12) {
  SnapshotData data;
  data.index = 90'000;
  data.term = 5;
  data.conf.voters = {1, 2, 3};
  data.conf.addresses = {{1, "127.0.0.1:7001"}, {2, "127.0.0.1:7002"}, {3, "127.0.0.1:7003"}};
  data.topics = {{"audit", 3}, {"orders", 120}};
  data.timestamp_floor_ms = 1'800'000'000'000 + salt;
  data.section = "groups of leader " + std::to_string(salt);
  data.dedup_view_start = view_start;
  for (std::uint64_t id : ids) {
    DedupTable::ClientState client{id, 1, {}};
    for (std::size_t a = 0; a < appends; ++a) {
      const std::uint64_t first = 1 + (id * appends + a) % 80'000;
      client.appends.push_back(
          {a + 1, {first, first, 1 + a % 5}, static_cast<std::uint32_t>(id * 7 + a) ^ salt});
    }
    data.dedup_clients.push_back(std::move(client));
  }
  return data;
}

std::vector<std::uint64_t> ids_from(std::uint64_t first, std::uint64_t step, std::size_t count) {
  std::vector<std::uint64_t> ids;
  for (std::size_t i = 0; i < count; ++i) ids.push_back(first + i * step);
  return ids;
}

// Leader A (the old one) and leader B (the new one) at the same point: B's clients differ (some A
// lacks, some A has that B evicted), and so do their digests, trailers and block boundaries.
struct TwoLeaders {
  FramedSnapshotData a = encode_framed_snapshot_data(leader_data(ids_from(2, 3, 400), 0, 10), 2000);
  FramedSnapshotData b = encode_framed_snapshot_data(leader_data(ids_from(3, 2, 700), 77, 30), 3100);
};

std::vector<std::uint64_t> client_ids(const SnapshotData& data) {
  std::vector<std::uint64_t> ids;
  for (const DedupTable::ClientState& client : data.dedup_clients) ids.push_back(client.client_id);
  return ids;
}

// The walk's point after feeding `bytes` in pieces of `step` bytes.
std::optional<FramedSplicePoint> walked(std::string_view bytes, std::size_t step) {
  FramedFrameWalk walk;
  for (std::size_t at = step; at < bytes.size() + step; at += step) {
    walk.advance(bytes.substr(0, std::min(at, bytes.size())));
  }
  return walk.splice_point();
}

TEST(SnapshotContinuation, TheWalkNamesTheLastCompleteBlockOfEveryPrefix) {
  const TwoLeaders leaders;
  const SnapshotFrames& frames = leaders.a.frames;
  ASSERT_GE(frames.blocks.size(), 5U);
  const std::string& bytes = leaders.a.bytes;
  for (std::size_t cut = 0; cut < bytes.size(); cut += 997) {
    const std::string_view prefix = std::string_view(bytes).substr(0, cut);
    const std::optional<FramedSplicePoint> point = walked(prefix, 1500);
    EXPECT_EQ(point, walked(prefix, prefix.size() + 1)) << "in pieces as in one: cut " << cut;
    if (cut < frames.head_end) {
      EXPECT_FALSE(point.has_value()) << cut;
      continue;
    }
    ASSERT_TRUE(point.has_value()) << cut;
    std::uint64_t kept = frames.head_end;
    std::uint64_t last = 0;
    for (const SnapshotFrames::Block& block : frames.blocks) {
      if (block.end <= cut) {
        kept = block.end;
        last = block.last_client;
      }
    }
    EXPECT_EQ(point->kept_bytes, kept) << cut;
    EXPECT_EQ(point->last_client_id, last) << cut;
    EXPECT_EQ(point->head_crc32c, frames.head_crc32c);
    EXPECT_EQ(point->kept_crc32c, util::crc32c::value(bytes.data(), kept));
    EXPECT_EQ(check_splice_point(prefix, *point), "") << cut;
  }
  // The whole data is no partial; bytes of another format name nothing.
  EXPECT_FALSE(walked(bytes, 4096).has_value());
  EXPECT_FALSE(walked(std::string(5000, 'x'), 1000).has_value());
}

TEST(SnapshotContinuation, AnotherLeadersContinuationSplicesIntoDataThatDecodesToBothParts) {
  const TwoLeaders leaders;
  const SnapshotData a = leader_data(ids_from(2, 3, 400), 0, 10);
  const SnapshotData b = leader_data(ids_from(3, 2, 700), 77, 30);
  const std::string& old_bytes = leaders.a.bytes;
  // Every block end of A as the follower's cut, the head's end too: X falls inside one of B's
  // blocks (re-blocked), on a boundary, or above all of B's clients.
  std::vector<std::uint64_t> cuts = {leaders.a.frames.head_end + 3};
  for (const SnapshotFrames::Block& block : leaders.a.frames.blocks) cuts.push_back(block.end + 11);
  int reblocked = 0;
  for (std::uint64_t cut : cuts) {
    const std::string_view partial = std::string_view(old_bytes).substr(0, cut);
    const std::optional<FramedSplicePoint> point = walked(partial, partial.size());
    ASSERT_TRUE(point.has_value());
    const FramedContinuation continuation = make_framed_continuation(leaders.b.bytes, *point);
    ASSERT_EQ(continuation.outcome, FramedContinuation::Outcome::kMade);
    const std::string spliced = std::string(partial.substr(0, point->kept_bytes)) + continuation.bytes;
    store::Result<SnapshotData> decoded = decode_snapshot_data(spliced);
    ASSERT_TRUE(decoded.ok()) << decoded.status().message() << " at X " << point->last_client_id;
    std::vector<std::uint64_t> expected;
    for (std::uint64_t id : client_ids(a)) {
      if (id <= point->last_client_id) expected.push_back(id);
    }
    for (std::uint64_t id : client_ids(b)) {
      if (id > point->last_client_id) expected.push_back(id);
    }
    EXPECT_EQ(client_ids(*decoded), expected);
    // Each client as its own leader recorded it: A's through X, B's after.
    for (const DedupTable::ClientState& client : decoded->dedup_clients) {
      const SnapshotData& from = client.client_id <= point->last_client_id ? a : b;
      const auto it = std::find_if(from.dedup_clients.begin(), from.dedup_clients.end(),
                                   [&](const auto& c) { return c.client_id == client.client_id; });
      ASSERT_NE(it, from.dedup_clients.end());
      EXPECT_EQ(client.appends.size(), it->appends.size());
      EXPECT_EQ(client.appends.back().digest, it->appends.back().digest) << client.client_id;
    }
    // B's trailer; A's view start kept when any of A's clients are.
    EXPECT_EQ(decoded->timestamp_floor_ms, b.timestamp_floor_ms);
    EXPECT_EQ(decoded->section, b.section);
    EXPECT_EQ(decoded->dedup_view_start, 30U);
    EXPECT_EQ(decoded->spliced_view_starts,
              point->last_client_id >= 2 ? std::vector<std::uint64_t>{10}
                                         : std::vector<std::uint64_t>{});
    // The continuation is shorter than B's whole data by about the kept part.
    EXPECT_LT(continuation.bytes.size(), leaders.b.bytes.size());
    for (const SnapshotFrames::Block& block : leaders.b.frames.blocks) {
      if (block.first_client <= point->last_client_id && block.last_client > point->last_client_id) {
        ++reblocked;  // X falls inside this block of B's: its clients above X were re-blocked
      }
    }
  }
  EXPECT_GE(reblocked, 3) << "the cut falls inside B's blocks for most points";
}

TEST(SnapshotContinuation, ALeaderWithAnotherHeadOrAnotherFormatMakesNoContinuation) {
  const TwoLeaders leaders;
  const std::optional<FramedSplicePoint> point =
      walked(std::string_view(leaders.a.bytes).substr(0, leaders.a.frames.blocks[2].end), 4096);
  ASSERT_TRUE(point.has_value());
  SnapshotData other_topics = leader_data(ids_from(3, 2, 700), 77, 30);
  other_topics.topics.push_back({"zeta", 9});
  EXPECT_EQ(make_framed_continuation(encode_framed_snapshot_data(other_topics).bytes, *point).outcome,
            FramedContinuation::Outcome::kOtherHead);
  EXPECT_EQ(make_framed_continuation(encode_snapshot_data(leader_data({5}, 1, 1)), *point).outcome,
            FramedContinuation::Outcome::kNotFramed);
  // A truncated or damaged encoding of its own is not cut either.
  std::string damaged = leaders.b.bytes;
  damaged[damaged.size() / 2] ^= 0x40;
  EXPECT_EQ(make_framed_continuation(damaged, *point).outcome,
            FramedContinuation::Outcome::kNotFramed);
  EXPECT_EQ(make_framed_continuation(std::string_view(leaders.b.bytes).substr(0, 9000), *point).outcome,
            FramedContinuation::Outcome::kNotFramed);
}

TEST(SnapshotContinuation, EveryWrongPointIsRefusedWithAReason) {
  const TwoLeaders leaders;
  const std::string& bytes = leaders.a.bytes;
  const SnapshotFrames::Block& block = leaders.a.frames.blocks[3];
  const std::string partial = bytes.substr(0, leaders.a.frames.blocks[4].end + 100);
  const FramedSplicePoint good{
      leaders.a.frames.head_crc32c, block.end, block.last_client,
      util::crc32c::value(bytes.data(), block.end),
      extend_frames_digest(0, std::string_view(bytes).substr(8, block.end - 8))};
  EXPECT_EQ(check_splice_point(partial, good), "");
  const auto refused = [&](FramedSplicePoint point, std::string_view fragment,
                           std::string_view held) {
    const std::string why = check_splice_point(held, point);
    EXPECT_NE(why.find(fragment), std::string::npos) << "[" << why << "] wanted " << fragment;
  };
  FramedSplicePoint other_head = good;
  other_head.head_crc32c ^= 1;
  refused(other_head, "another head", partial);
  FramedSplicePoint mid_block = good;
  mid_block.kept_bytes -= 1;
  refused(mid_block, "no head or client block", partial);
  mid_block.kept_bytes = block.begin + 40;
  refused(mid_block, "no head or client block", partial);
  FramedSplicePoint beyond = good;
  beyond.kept_bytes = partial.size() + 1;
  refused(beyond, "the partial holds", partial);
  FramedSplicePoint forged_x = good;
  forged_x.last_client_id += 3;  // the next client's id: a point that would drop it
  refused(forged_x, "ends at client", partial);
  forged_x.last_client_id = 0;
  refused(forged_x, "ends at client", partial);
  FramedSplicePoint other_bytes = good;
  other_bytes.kept_crc32c ^= 1;
  refused(other_bytes, "differ", partial);
  // The kept frames' digest (another encoding of the same layout), or none (an older sender).
  FramedSplicePoint other_digest = good;
  *other_digest.kept_digest ^= 1;
  refused(other_digest, "another encoding", partial);
  FramedSplicePoint no_digest = good;
  no_digest.kept_digest.reset();
  refused(no_digest, "names no digest", partial);
  // A damaged byte of the kept part: its frame fails its CRC.
  std::string damaged = partial;
  damaged[leaders.a.frames.blocks[1].begin + 50] ^= 0x01;
  refused(good, "not a framed snapshot", damaged);
}

TEST(SnapshotContinuation, ACorruptContinuationByteIsRefusedByTheDecoder) {
  const TwoLeaders leaders;
  const std::uint64_t cut = leaders.a.frames.blocks[5].end + 17;
  const std::optional<FramedSplicePoint> point =
      walked(std::string_view(leaders.a.bytes).substr(0, cut), 8192);
  ASSERT_TRUE(point.has_value());
  const FramedContinuation continuation = make_framed_continuation(leaders.b.bytes, *point);
  ASSERT_EQ(continuation.outcome, FramedContinuation::Outcome::kMade);
  const std::string kept = leaders.a.bytes.substr(0, point->kept_bytes);
  ASSERT_TRUE(decode_snapshot_data(kept + continuation.bytes).ok());
  for (std::size_t at = 0; at < continuation.bytes.size(); at += 389) {
    std::string bad = continuation.bytes;
    bad[at] ^= 0x20;
    EXPECT_FALSE(decode_snapshot_data(kept + bad).ok()) << "a flipped byte at " << at;
  }
  // A continuation cut for an earlier point overlaps the kept clients: the ascending-id rule.
  const std::optional<FramedSplicePoint> earlier = walked(
      std::string_view(leaders.a.bytes).substr(0, leaders.a.frames.blocks[1].end), 8192);
  ASSERT_TRUE(earlier.has_value());
  const FramedContinuation overlapping = make_framed_continuation(leaders.b.bytes, *earlier);
  EXPECT_FALSE(decode_snapshot_data(kept + overlapping.bytes).ok());
}

// Review H1 of the format: a spliced table can hold more clients than the receiver's bound (one
// leader's clients through X, another's after). The install keeps them all; each new client then
// evicts one of the excess beside the one it takes the room of, instead of the first new client
// evicting the whole excess at once.
TEST(SnapshotContinuation, ATableInstalledAboveItsBoundComesBackOneClientPerNewClient) {
  const std::vector<std::string> one{"x"};
  const std::uint32_t digest = append_digest(one);
  std::vector<DedupTable::ClientState> clients;
  for (std::uint64_t id = 1; id <= 8; ++id) {
    clients.push_back({id, 0, {{1, {10 * id, 10 * id, 1}, digest}}});  // 1 is the least recent
  }
  DedupTable table(3, 8);
  table.replace(100, 1, clients);
  ASSERT_EQ(table.clients(), 8U);
  DedupTable::Range range;
  table.record_append(200, 1, {100, 100, 2}, digest);
  EXPECT_EQ(table.clients(), 7U) << "one of the excess went, not all five";
  EXPECT_EQ(table.find(1, 1, one, &range), DedupTable::Lookup::kUnknown);
  EXPECT_EQ(table.find(2, 1, one, &range), DedupTable::Lookup::kUnknown);
  for (std::uint64_t id = 3; id <= 8; ++id) {
    EXPECT_EQ(table.find(id, 1, one, &range), DedupTable::Lookup::kFound) << id;
  }
  std::size_t expected = 7;
  for (std::uint64_t id = 201; id <= 206; ++id) {
    table.record_append(id, 1, {id - 100, id - 100, 2}, digest);
    expected = std::max<std::size_t>(expected - 1, 3);
    EXPECT_EQ(table.clients(), expected) << "after client " << id;
  }
}

}  // namespace
}  // namespace raftlog::replica

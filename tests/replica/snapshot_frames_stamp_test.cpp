// Snapshot data version 6 (src/replica/snapshot_frames.h): version 4 whose head carries the running
// max stamp as of the point, or says it is not known. It comes from the network and the disk: a
// damaged or forged head is refused with a reason. Its frames after the head are version 4's, so a
// follower's partial of version 6 is walked, named in receipts and continued by another leader of
// version 6 as version 4's is; a partial of one version is never continued with bytes of the other.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "replica/snapshot_data.h"
#include "replica/snapshot_encoding.h"
#include "replica/snapshot_frame_walk.h"
#include "replica/snapshot_frames.h"
#include "store/byte_io.h"
#include "store/endian.h"
#include "util/crc32c.h"

namespace raftlog::replica {
namespace {

constexpr std::uint32_t kV4 = kFramedSnapshotVersion;
constexpr std::uint32_t kV6 = kFramedSnapshotVersionWithStamp;

// An installed snapshot's data at one point as leader `salt` gathers it (its own dedup clients,
// floor and section; the head's fields, and the stamp, are the point's).
SnapshotData leader_data(std::uint32_t salt, std::size_t clients = 400) {
  SnapshotData data;
  data.index = 90'000;
  data.term = 5;
  data.conf.voters = {1, 2, 3};
  data.conf.addresses = {{1, "127.0.0.1:7001"}, {2, "127.0.0.1:7002"}, {3, "127.0.0.1:7003"}};
  data.topics = {{"audit", 3}, {"orders", 120}};
  data.stamp_at_index = true;
  data.stamp_max_ms = 1'799'999'999'321;
  data.timestamp_floor_ms = 1'800'000'000'000 + salt;
  data.section = "groups of leader " + std::to_string(salt);
  data.dedup_view_start = 10 + salt;
  for (std::uint64_t c = 0; c < clients; ++c) {
    const std::uint64_t id = 2 + c * (2 + salt % 2);
    DedupTable::ClientState client{id, 1, {}};
    for (std::uint64_t a = 0; a < 12; ++a) {
      const std::uint64_t first = 1 + (id * 12 + a) % 80'000;
      client.appends.push_back(
          {a + 1, {first, first, 1 + a % 5}, static_cast<std::uint32_t>(id * 7 + a) ^ salt});
    }
    data.dedup_clients.push_back(std::move(client));
  }
  return data;
}

FramedSnapshotData encode(const SnapshotData& data, std::uint32_t version,
                          std::size_t block_bytes = 3000) {
  return encode_framed_snapshot_data(data, block_bytes, version);
}

// The head of `bytes` with its body changed by `edit` and its CRC recomputed (over every byte from
// the magic, as the format says), and every later frame resealed under the new head's CRC: only
// the head's own checks can refuse it.
std::string forged_head(const std::string& bytes, const std::function<void(std::string&)>& edit) {
  const std::uint32_t length = store::get_u32(bytes.data() + 9);
  std::string body = bytes.substr(13, length);
  edit(body);
  std::string out = bytes.substr(0, 9);
  store::append_u32(&out, static_cast<std::uint32_t>(body.size()));
  out += body;
  const std::uint32_t head_crc = util::crc32c::value(out.data(), out.size());
  store::append_u32(&out, head_crc);
  for (std::size_t at = 13 + length + 4; at < bytes.size();) {
    const std::uint32_t frame_length = store::get_u32(bytes.data() + at + 1);
    std::string frame = bytes.substr(at, 5 + frame_length);
    store::append_u32(&frame, util::crc32c::extend(head_crc, frame.data(), frame.size()));
    out += frame;
    at += 5 + frame_length + 4;
  }
  return out;
}

TEST(SnapshotFramesStamp, Version6CarriesTheStampOrSaysItIsNotKnown) {
  const SnapshotData data = leader_data(0);
  const FramedSnapshotData framed = encode(data, kV6);
  EXPECT_EQ(store::get_u32(framed.bytes.data() + 4), kV6);
  std::size_t client_bytes = 0;
  for (const auto& client : data.dedup_clients) client_bytes += encoded_client_size(client);
  // The sender's budget functions, for blocks of the production size.
  const std::size_t whole = encode(data, kV6, kSnapshotBlockBytes).bytes.size();
  EXPECT_GE(whole, framed_size_without_dedup(data, kV6) + client_bytes);
  EXPECT_LE(whole, framed_size_without_dedup(data, kV6) + framed_clients_size_bound(client_bytes));
  EXPECT_EQ(framed_size_without_dedup(data, kV6), framed_size_without_dedup(data, kV4) + 9);
  auto decoded = decode_snapshot_data(framed.bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_TRUE(decoded->stamp_at_index);
  EXPECT_EQ(decoded->stamp_max_ms, data.stamp_max_ms);
  SnapshotData expected = data;
  std::sort(expected.dedup_clients.begin(), expected.dedup_clients.end(),
            [](const auto& a, const auto& b) { return a.client_id < b.client_id; });
  EXPECT_EQ(*decoded, expected);

  // Not known: the flag clear and 0, whatever the data held.
  SnapshotData unknown = data;
  unknown.stamp_at_index = false;
  auto not_known = decode_snapshot_data(encode(unknown, kV6).bytes);
  ASSERT_TRUE(not_known.ok()) << not_known.status().to_string();
  EXPECT_FALSE(not_known->stamp_at_index);
  EXPECT_EQ(not_known->stamp_max_ms, 0u);
  SnapshotData zero = unknown;
  zero.stamp_max_ms = 0;
  EXPECT_EQ(encode(unknown, kV6).bytes, encode(zero, kV6).bytes) << "one encoding per content";

  // Version 4 leaves it out: decoded as not known; its head is another head.
  auto v4 = decode_snapshot_data(encode(data, kV4).bytes);
  ASSERT_TRUE(v4.ok()) << v4.status().to_string();
  EXPECT_FALSE(v4->stamp_at_index);
  EXPECT_EQ(v4->stamp_max_ms, 0u);
  EXPECT_NE(encode(data, kV4).frames.head_crc32c, framed.frames.head_crc32c);
  // The kept encoding tells the formats apart (SnapshotEncoding).
  EXPECT_EQ(SnapshotEncoding::encode(data, SnapshotDataFormat::kFramedWithStamp).bytes.view(),
            encode_framed_snapshot_data(data, kSnapshotBlockBytes, kV6).bytes);
  EXPECT_EQ(SnapshotEncoding::encode(data, SnapshotDataFormat::kFramed).bytes.view(),
            encode_framed_snapshot_data(data).bytes);
}

// Review of stamp5, M2: an older binary decodes only version 4 as main wrote it, so version 4 must
// stay byte for byte. The golden size and CRC-32C were computed by main's encoder (commit 5f47df7,
// src/replica/snapshot_frames.cpp compiled alone) for this very data, with 200-byte blocks; the
// stamp the data holds is left out of version 4.
TEST(SnapshotFramesStamp, Version4IsByteForByteWhatTheEncoderBeforeVersion6Wrote) {
  SnapshotData data;
  data.index = 4242;
  data.term = 3;
  data.conf.voters = {1, 2, 3};
  data.conf.addresses = {{1, "127.0.0.1:7001"}, {2, "127.0.0.1:7002"}, {3, "127.0.0.1:7003"}};
  data.retired_ids = {9};
  data.timestamp_floor_ms = 1'800'000'000'000;
  data.topics = {{"audit", 3}, {"orders", 120}};
  data.section = "groups";
  data.dedup_view_start = 12;
  data.stamp_at_index = true;
  data.stamp_max_ms = 1'799'999'999'321;
  for (std::uint64_t id = 5; id <= 40; id += 5) {
    DedupTable::ClientState client{id, 2, {}};
    for (std::uint64_t a = 0; a < 3; ++a) {
      client.appends.push_back(
          {a + 2, {id * 10 + a, id * 10 + a, 2}, static_cast<std::uint32_t>(id * 7 + a)});
    }
    data.dedup_clients.push_back(client);
  }
  const std::string v4 = encode(data, kV4, 200).bytes;
  EXPECT_EQ(v4.size(), 1550u);
  EXPECT_EQ(util::crc32c::value(v4.data(), v4.size()), 0xaaa07283u);
  // Version 6: the same frames but for the head's 9 more bytes.
  EXPECT_EQ(encode(data, kV6, 200).bytes.size(), 1559u);
}

// Two leaders that know the stamp at the point encode the same head (their clients, floor and
// section differ); a different stamp, or one leader not knowing it, is another head.
TEST(SnapshotFramesStamp, TheStampIsPartOfTheHeadEveryLeaderEncodesAlike) {
  const SnapshotData a = leader_data(0);
  const SnapshotData b = leader_data(77, 700);
  EXPECT_EQ(encode(a, kV6).frames.head_crc32c, encode(b, kV6).frames.head_crc32c);
  SnapshotData other_stamp = b;
  other_stamp.stamp_max_ms += 1;
  EXPECT_NE(encode(a, kV6).frames.head_crc32c, encode(other_stamp, kV6).frames.head_crc32c);
  SnapshotData not_known = b;
  not_known.stamp_at_index = false;
  EXPECT_NE(encode(a, kV6).frames.head_crc32c, encode(not_known, kV6).frames.head_crc32c);
}

TEST(SnapshotFramesStamp, ADamagedOrForgedHeadIsRefused) {
  const std::string bytes = encode(leader_data(0), kV6).bytes;
  const std::uint32_t head_length = store::get_u32(bytes.data() + 9);
  const auto refused = [](const std::string& data, const std::string& what) {
    auto decoded = decode_snapshot_data(data);
    ASSERT_FALSE(decoded.ok()) << what;
    EXPECT_EQ(decoded.status().code(), store::StatusCode::kCorruption) << what;
    EXPECT_FALSE(decoded.status().message().empty()) << what;
    EXPECT_FALSE(scan_framed_snapshot_prefix(data).ok()) << what;
  };
  // The forging itself keeps a valid data valid (the test's resealing is right).
  ASSERT_TRUE(decode_snapshot_data(forged_head(bytes, [](std::string&) {})).ok());
  // Every byte of the flags and the stamp, damaged: the head's CRC.
  for (std::size_t at = 13 + head_length - 9; at < 13 + head_length; ++at) {
    std::string damaged = bytes;
    damaged[at] = static_cast<char>(damaged[at] ^ 0x10);
    refused(damaged, "a damaged byte at " + std::to_string(at));
  }
  // Forged, every CRC right: an unknown flag, a stamp said not known but not 0, no stamp, bytes
  // after it.
  refused(forged_head(bytes, [](std::string& body) { body[body.size() - 9] |= 2; }),
          "an unknown head flag");
  refused(forged_head(bytes, [](std::string& body) { body[body.size() - 9] = 0; }),
          "a stamp said not known but not 0");
  refused(forged_head(bytes, [](std::string& body) { body.resize(body.size() - 9); }),
          "a version-6 head without its stamp");
  refused(forged_head(bytes, [](std::string& body) { body.resize(body.size() - 4); }),
          "a truncated stamp");
  refused(forged_head(bytes, [](std::string& body) { body += "x"; }), "bytes after the stamp");
  // A version-4 head under version 6, and a version-6 head under version 4 (the version byte
  // changed, every CRC resealed): each reads the other's head as its own and is refused.
  std::string as_v6 = encode(leader_data(0), kV4).bytes;
  store::put_u32(as_v6.data() + 4, kV6);
  refused(forged_head(as_v6, [](std::string&) {}), "a version-4 head labelled 6");
  std::string as_v4 = bytes;
  store::put_u32(as_v4.data() + 4, kV4);
  refused(forged_head(as_v4, [](std::string&) {}), "a version-6 head labelled 4");
  // Framed versions other than 4 and 6 are unknown.
  for (const std::uint32_t version : {1u, 3u, 5u, 7u}) {
    std::string other = bytes;
    store::put_u32(other.data() + 4, version);
    refused(forged_head(other, [](std::string&) {}), "framed version " + std::to_string(version));
  }
}

// The walk's splice point of `bytes` cut after its block `block` (its end).
std::optional<FramedSplicePoint> point_after_block(const FramedSnapshotData& framed,
                                                   std::size_t block) {
  FramedFrameWalk walk;
  walk.advance(std::string_view(framed.bytes).substr(0, framed.frames.blocks[block].end + 100));
  return walk.splice_point();
}

TEST(SnapshotFramesStamp, AVersion6PartialIsContinuedByAnotherVersion6Leader) {
  const FramedSnapshotData a = encode(leader_data(0), kV6);
  const FramedSnapshotData b = encode(leader_data(77, 700), kV6, 3100);
  ASSERT_GE(a.frames.blocks.size(), 4u);
  const std::optional<FramedSplicePoint> point = point_after_block(a, 2);
  ASSERT_TRUE(point.has_value()) << "a version-6 partial names a splice point";
  EXPECT_EQ(point->kept_bytes, a.frames.blocks[2].end);
  EXPECT_EQ(check_splice_point(a.bytes, *point), "");
  const FramedContinuation continuation = make_framed_continuation(b.bytes, *point);
  ASSERT_EQ(continuation.outcome, FramedContinuation::Outcome::kMade);
  const std::string spliced = a.bytes.substr(0, point->kept_bytes) + continuation.bytes;
  auto decoded = decode_snapshot_data(spliced);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_TRUE(decoded->stamp_at_index);
  EXPECT_EQ(decoded->stamp_max_ms, leader_data(0).stamp_max_ms);
  // The digest is the frames' (as version 4's), extended by the continuation's frames.
  const std::uint32_t whole_crc = util::crc32c::value(a.bytes.data(), a.bytes.size());
  EXPECT_NE(snapshot_data_digest(a.bytes, whole_crc), whole_crc);
  EXPECT_EQ(extend_frames_digest(*point->kept_digest, continuation.bytes),
            snapshot_data_digest(spliced, util::crc32c::value(spliced.data(), spliced.size())));
}

// Failed before this change in its version-6 half: make_framed_continuation took a version-6
// encoding for "not framed" and the walk named no splice point for a version-6 partial.
TEST(SnapshotFramesStamp, APartialOfOneVersionIsNeverContinuedWithBytesOfTheOther) {
  const SnapshotData data = leader_data(0);
  const FramedSnapshotData v4 = encode(data, kV4);
  const FramedSnapshotData v6 = encode(leader_data(77, 700), kV6, 3100);
  // A version-4 partial (an older leader's), a version-6 leader: another head, no continuation.
  const std::optional<FramedSplicePoint> from_v4 = point_after_block(v4, 1);
  ASSERT_TRUE(from_v4.has_value());
  EXPECT_EQ(make_framed_continuation(v6.bytes, *from_v4).outcome,
            FramedContinuation::Outcome::kOtherHead);
  // A version-6 partial, a leader that encodes version 4 for this peer: the same.
  const std::optional<FramedSplicePoint> from_v6 = point_after_block(v6, 1);
  ASSERT_TRUE(from_v6.has_value());
  EXPECT_EQ(make_framed_continuation(v4.bytes, *from_v6).outcome,
            FramedContinuation::Outcome::kOtherHead);
  // Even the same data in both versions (the same clients, the same blocks): the heads differ.
  const FramedSnapshotData same_v6 = encode(data, kV6);
  EXPECT_EQ(make_framed_continuation(same_v6.bytes, *from_v4).outcome,
            FramedContinuation::Outcome::kOtherHead);
  // A point of one version does not check against a partial of the other.
  const std::optional<FramedSplicePoint> same_v6_point = point_after_block(same_v6, 1);
  ASSERT_TRUE(same_v6_point.has_value());
  EXPECT_NE(check_splice_point(v4.bytes, *same_v6_point), "");
  EXPECT_NE(check_splice_point(same_v6.bytes, *from_v4), "");
  // And version 6's own continuation appended to a version-4 partial (a forged receipt naming the
  // version-4 partial's point with the version-6 head's CRC) does not decode: its blocks' CRCs are
  // seeded with the version-6 head's.
  FramedSplicePoint forged = *from_v4;
  forged.head_crc32c = same_v6.frames.head_crc32c;
  const FramedContinuation mixed = make_framed_continuation(same_v6.bytes, forged);
  ASSERT_EQ(mixed.outcome, FramedContinuation::Outcome::kMade);
  EXPECT_FALSE(decode_snapshot_data(v4.bytes.substr(0, from_v4->kept_bytes) + mixed.bytes).ok());
}

}  // namespace
}  // namespace raftlog::replica

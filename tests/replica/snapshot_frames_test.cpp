// Snapshot data version 4 (src/replica/snapshot_frames.h): the framed encoding a transfer resumes
// by client id from. It comes from the network and the disk, so every frame is checked and any
// malformed input is refused with a reason, never an assert; a prefix cut anywhere tells how far it
// is usable; and a follower's spliced data (one leader's blocks, another's later clients and
// trailer) decodes to exactly those two parts.
#include "replica/snapshot_frames.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "replica/snapshot_encoding.h"
#include "store/byte_io.h"
#include "store/endian.h"
#include "util/crc32c.h"

namespace raftlog::replica {
namespace {

// An installed snapshot's data with `clients` dedup clients (ids 3, 6, 9, ... in a shuffled
// order, as an LRU would list them), each with `appends` remembered appends: large enough for
// several blocks.
SnapshotData sample(std::size_t clients = 1500, std::size_t appends = 20,
                    std::uint64_t view_start = 12, std::uint32_t digest_salt = 0) {
  SnapshotData data;
  data.index = 500'000;
  data.term = 7;
  data.conf.voters = {1, 2, 3};
  data.conf.learners = {4};
  data.conf.addresses = {
      {1, "127.0.0.1:7001"}, {2, "127.0.0.1:7002"}, {3, "127.0.0.1:7003"}, {4, "127.0.0.1:7004"}};
  data.retired_ids = {9, 11};
  data.timestamp_floor_ms = 1'800'000'000'000;
  data.topics = {{"audit", 3}, {"orders", 120}, {"z9", 1}};
  data.section = std::string("group table bytes\0with a zero", 29);
  data.dedup_view_start = view_start;
  std::mt19937_64 random(clients);
  for (std::size_t c = 0; c < clients; ++c) {
    DedupTable::ClientState client{3 * (c + 1), 2, {}};
    for (std::size_t a = 0; a < appends; ++a) {
      const std::uint64_t first = 1 + (c * appends + a) * 2;
      client.appends.push_back({a + 2, {first, first + 1, 1 + a % 7},
                                static_cast<std::uint32_t>(c * 31 + a) ^ digest_salt});
    }
    data.dedup_clients.push_back(std::move(client));
  }
  std::shuffle(data.dedup_clients.begin(), data.dedup_clients.end(), random);
  return data;
}

std::vector<DedupTable::ClientState> by_id(std::vector<DedupTable::ClientState> clients) {
  std::sort(clients.begin(), clients.end(),
            [](const auto& a, const auto& b) { return a.client_id < b.client_id; });
  return clients;
}

// The frame starting at `at` with its body changed by `edit` and its CRC recomputed (seeded as
// the format says), so that the decoder's structural checks, not a checksum, must refuse it.
std::string resealed_frame(std::string bytes, std::size_t at, std::uint32_t head_crc,
                           const std::function<void(std::string&)>& edit) {
  const std::uint32_t length = store::get_u32(bytes.data() + at + 1);
  std::string body = bytes.substr(at + 5, length);
  edit(body);
  std::string frame;
  frame.push_back(bytes[at]);
  store::append_u32(&frame, static_cast<std::uint32_t>(body.size()));
  frame += body;
  store::append_u32(&frame, util::crc32c::extend(head_crc, frame.data(), frame.size()));
  return bytes.substr(0, at) + frame + bytes.substr(at + 5 + length + 4);
}

TEST(SnapshotFrames, RoundTripsEveryFieldWithClientsInAscendingIdAcrossBlocks) {
  const SnapshotData data = sample();
  const FramedSnapshotData framed = encode_framed_snapshot_data(data);
  const SnapshotFrames& frames = framed.frames;
  ASSERT_GE(frames.blocks.size(), 3U) << "the sample spans several blocks";
  std::size_t client_bytes = 0;
  for (const auto& client : data.dedup_clients) client_bytes += encoded_client_size(client);
  EXPECT_LE(framed.bytes.size(),
            framed_size_without_dedup(data) + framed_clients_size_bound(client_bytes));
  EXPECT_GE(framed.bytes.size(), framed_size_without_dedup(data) + client_bytes);

  auto decoded = decode_snapshot_data(framed.bytes);  // the version dispatch
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  SnapshotData expected = data;
  expected.dedup_clients = by_id(data.dedup_clients);
  EXPECT_EQ(*decoded, expected);
  EXPECT_TRUE(decoded->spliced_view_starts.empty());

  // The block index: contiguous frames, ascending ids, each within its bound.
  std::uint64_t at = frames.head_end;
  std::uint64_t last_id = 0;
  for (const SnapshotFrames::Block& block : frames.blocks) {
    EXPECT_EQ(block.begin, at);
    EXPECT_GT(block.first_client, last_id);
    EXPECT_LE(block.first_client, block.last_client);
    EXPECT_LE(block.end - block.begin, 1 + 4 + kMaxSnapshotBlockBodyBytes + 4);
    last_id = block.last_client;
    at = block.end;
  }
  EXPECT_EQ(frames.trailer_begin, at);
  EXPECT_EQ(frames.trailer_end, framed.bytes.size());
  EXPECT_EQ(last_id, expected.dedup_clients.back().client_id);

  // The whole scan agrees with the encoder's index.
  auto scanned = scan_framed_snapshot_prefix(framed.bytes);
  ASSERT_TRUE(scanned.ok()) << scanned.status().to_string();
  EXPECT_TRUE(scanned->complete);
  EXPECT_EQ(scanned->frames, frames);

  // No clients at all: head and trailer only.
  SnapshotData empty = sample(0);
  auto decoded_empty = decode_snapshot_data(encode_framed_snapshot_data(empty).bytes);
  ASSERT_TRUE(decoded_empty.ok()) << decoded_empty.status().to_string();
  EXPECT_EQ(*decoded_empty, empty);
}

TEST(SnapshotFrames, TheHeadIsTheSameForEveryEncoderAtThePoint) {
  // Two leaders at the same point: other clients, view start, floor, section, retired ids.
  SnapshotData a = sample(300, 20, 12);
  SnapshotData b = sample(500, 9, 40, 0x5A5A);
  b.timestamp_floor_ms += 1234;
  b.section = "another group table";
  b.retired_ids = {9};
  EXPECT_EQ(encode_framed_snapshot_data(a).frames.head_crc32c,
            encode_framed_snapshot_data(b).frames.head_crc32c);
  b.topics[1].next_offset += 1;
  EXPECT_NE(encode_framed_snapshot_data(a).frames.head_crc32c,
            encode_framed_snapshot_data(b).frames.head_crc32c);
}

TEST(SnapshotFrames, EveryPrefixIsCompleteThroughTheLastWholeBlock) {
  const SnapshotData data = sample(600, 40);
  const FramedSnapshotData framed = encode_framed_snapshot_data(data);
  const SnapshotFrames& frames = framed.frames;
  ASSERT_GE(frames.blocks.size(), 3U);
  // What a cut at `size` must report: the last block that ends at or before it.
  const auto expect_prefix = [&](std::size_t size) {
    auto prefix = scan_framed_snapshot_prefix(std::string_view(framed.bytes).substr(0, size));
    ASSERT_TRUE(prefix.ok()) << size << ": " << prefix.status().to_string();
    const bool head = size >= frames.head_end;
    EXPECT_EQ(prefix->head_complete, head) << size;
    std::uint64_t blocks_end = head ? frames.head_end : 0;
    std::uint64_t last_id = 0;
    for (const SnapshotFrames::Block& block : frames.blocks) {
      if (block.end > size) break;
      blocks_end = block.end;
      last_id = block.last_client;
    }
    EXPECT_EQ(prefix->blocks_end, blocks_end) << size;
    EXPECT_EQ(prefix->last_client_id, last_id) << size;
    EXPECT_EQ(prefix->complete, size == framed.bytes.size()) << size;
    if (size < framed.bytes.size()) {
      EXPECT_FALSE(decode_snapshot_data(framed.bytes.substr(0, size)).ok()) << size;
    }
  };
  // Every boundary, a byte either side of it, and a stride through the rest.
  std::vector<std::size_t> cuts{0, 3, 8, 9, frames.head_end - 1, frames.head_end};
  for (const SnapshotFrames::Block& block : frames.blocks) {
    cuts.insert(cuts.end(), {block.begin + 1, block.end - 1, block.end, block.end + 1});
  }
  cuts.insert(cuts.end(), {frames.trailer_end - 1, frames.trailer_end});
  for (std::size_t size = 0; size < framed.bytes.size(); size += 4093) cuts.push_back(size);
  for (std::size_t size : cuts) expect_prefix(size);
}

TEST(SnapshotFrames, ACorruptByteInAnyFrameIsRefusedWithAReason) {
  const FramedSnapshotData framed = encode_framed_snapshot_data(sample(400, 30));
  const SnapshotFrames& frames = framed.frames;
  std::vector<std::pair<std::string, std::size_t>> places{
      {"magic", 1}, {"version", 5}, {"head kind", 8}, {"head length", 10},
      {"head body", 30}, {"head CRC", frames.head_end - 2},
      {"trailer body", frames.trailer_begin + 9}, {"trailer CRC", frames.trailer_end - 1}};
  for (std::size_t i = 0; i < frames.blocks.size(); ++i) {
    const SnapshotFrames::Block& block = frames.blocks[i];
    places.push_back({"block " + std::to_string(i) + " body", (block.begin + block.end) / 2});
    places.push_back({"block " + std::to_string(i) + " CRC", block.end - 3});
  }
  for (const auto& [what, at] : places) {
    std::string bytes = framed.bytes;
    bytes[at] = static_cast<char>(bytes[at] ^ 0x40);
    auto decoded = decode_snapshot_data(bytes);
    ASSERT_FALSE(decoded.ok()) << what;
    EXPECT_EQ(decoded.status().code(), store::StatusCode::kCorruption) << what;
    EXPECT_FALSE(decoded.status().message().empty()) << what;
    // A partial holding the frame is refused too (it is dropped, not resumed).
    EXPECT_FALSE(scan_framed_snapshot_prefix(bytes).ok()) << what;
  }
  // A flipped bit throughout the data: refused (no assert, no crash).
  for (std::size_t i = 0; i < framed.bytes.size(); i += 211) {
    std::string flipped = framed.bytes;
    flipped[i] = static_cast<char>(flipped[i] ^ 1);
    EXPECT_FALSE(decode_snapshot_data(flipped).ok()) << i;
  }
}

TEST(SnapshotFrames, FramesOutOfOrderOrBreakingARuleAreRefusedEvenWhenResealed) {
  const FramedSnapshotData framed = encode_framed_snapshot_data(sample(500, 30));
  const SnapshotFrames& f = framed.frames;
  const std::string& bytes = framed.bytes;
  ASSERT_GE(f.blocks.size(), 2U);
  const auto block = [&](std::size_t i) {
    return bytes.substr(f.blocks[i].begin, f.blocks[i].end - f.blocks[i].begin);
  };
  const std::string head = bytes.substr(0, f.head_end);
  const std::string trailer = bytes.substr(f.trailer_begin);
  std::string between;
  for (std::size_t i = 0; i < f.blocks.size(); ++i) between += block(i);
  const auto refused = [](const std::string& data, const std::string& what) {
    auto decoded = decode_snapshot_data(data);
    ASSERT_FALSE(decoded.ok()) << what;
    EXPECT_EQ(decoded.status().code(), store::StatusCode::kCorruption) << what;
  };
  // Blocks swapped, repeated or a trailer missing or doubled: every CRC is right.
  refused(head + block(1) + block(0) + trailer, "blocks swapped");
  refused(head + block(0) + block(0) + trailer, "a block twice");
  refused(head + between, "no trailer");
  refused(head + between + trailer + trailer, "two trailers");
  refused(head + trailer + between + trailer, "a block after the trailer");
  refused(head + head.substr(8) + between + trailer, "two heads");
  refused(bytes.substr(0, 8) + between + trailer, "no head");
  // A block of another snapshot's head (its CRC is seeded with that head's).
  SnapshotData other = sample(500, 30);
  other.term = 6;
  const FramedSnapshotData foreign = encode_framed_snapshot_data(other);
  // (Our own first block alone in its place decodes: a subset of the clients is valid data.)
  ASSERT_TRUE(decode_snapshot_data(head + block(0) + trailer).ok());
  refused(head + foreign.bytes.substr(foreign.frames.blocks[0].begin,
                              foreign.frames.blocks[0].end - foreign.frames.blocks[0].begin) +
              trailer,
          "a block of another head");
  // Resealed bodies that break a rule.
  const std::uint32_t crc = f.head_crc32c;
  const std::size_t b0 = f.blocks[0].begin;
  refused(resealed_frame(bytes, b0, crc, [](std::string& body) { store::put_u64(body.data(), 1); }),
          "a first id that is not its first client's");
  refused(resealed_frame(bytes, b0, crc,
                         [](std::string& body) { store::put_u64(body.data() + 8, 1); }),
          "a last id that is not its last client's");
  refused(resealed_frame(bytes, b0, crc,
                         [&](std::string& body) { store::put_u64(body.data() + 16, 500'002); }),
          "a view start past the index");
  refused(resealed_frame(bytes, b0, crc,
                         [](std::string& body) { store::put_u32(body.data() + 24, 0); }),
          "an empty block");
  refused(resealed_frame(bytes, b0, crc, [](std::string& body) { body += "x"; }),
          "bytes after a block's clients");
  refused(resealed_frame(bytes, f.trailer_begin, crc, [](std::string& body) { body += "x"; }),
          "bytes after the trailer's fields");
  refused(resealed_frame(bytes, f.trailer_begin, crc,
                         [](std::string& body) { store::put_u64(body.data() + body.size() - 8, 500'002); }),
          "a trailer view start past the index");
  refused(bytes + "x", "bytes after the trailer");
  // A block announcing more than the bound: refused from its header, even in a prefix.
  std::string huge = bytes.substr(0, b0 + 5);
  store::put_u32(huge.data() + b0 + 1, static_cast<std::uint32_t>(kMaxSnapshotBlockBodyBytes + 1));
  EXPECT_FALSE(scan_framed_snapshot_prefix(huge).ok());
  std::string unknown = bytes;
  unknown[b0] = 9;
  refused(unknown, "a frame of unknown kind");
  // Random bytes after a valid magic and version: refused or decoded, never a crash.
  std::mt19937_64 random(7);
  for (int round = 0; round < 2000; ++round) {
    std::string fuzz = bytes.substr(0, 8 + random() % 64);
    for (int i = 0; i < 32; ++i) fuzz.push_back(static_cast<char>(random()));
    (void)decode_snapshot_data(fuzz);
    (void)scan_framed_snapshot_prefix(fuzz);
  }
}

TEST(SnapshotFrames, ASplicedDataHoldsOneLeadersClientsThroughXAndTheOthersAfterIt) {
  // Leader A's encoding, cut after its second block (the follower's partial through X), then
  // leader B's clients above X with B's trailer: what a continuation appends.
  const SnapshotData a = sample(1200, 20, 12);
  SnapshotData b = sample(1600, 11, 40, 0x5A5A);
  b.section = "B's group table";
  b.timestamp_floor_ms += 99;
  const FramedSnapshotData framed_a = encode_framed_snapshot_data(a);
  ASSERT_GE(framed_a.frames.blocks.size(), 3U);
  const SnapshotFrames::Block& cut = framed_a.frames.blocks[1];
  const std::uint64_t x = cut.last_client;
  SnapshotData b_above = b;
  std::erase_if(b_above.dedup_clients, [&](const auto& client) { return client.client_id <= x; });
  const FramedSnapshotData framed_b = encode_framed_snapshot_data(b_above);
  ASSERT_EQ(framed_b.frames.head_crc32c, framed_a.frames.head_crc32c);
  const std::string spliced =
      framed_a.bytes.substr(0, cut.end) + framed_b.bytes.substr(framed_b.frames.head_end);

  auto decoded = decode_snapshot_data(spliced);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  std::vector<DedupTable::ClientState> expected;
  for (const auto& client : by_id(a.dedup_clients)) {
    if (client.client_id <= x) expected.push_back(client);
  }
  for (const auto& client : by_id(b_above.dedup_clients)) expected.push_back(client);
  EXPECT_EQ(decoded->dedup_clients, expected);
  EXPECT_EQ(decoded->section, b.section);
  EXPECT_EQ(decoded->timestamp_floor_ms, b.timestamp_floor_ms);
  EXPECT_EQ(decoded->dedup_view_start, 40U);
  EXPECT_EQ(decoded->spliced_view_starts, std::vector<std::uint64_t>{12});
  EXPECT_EQ(decoded->topics, a.topics);

  // B's clients overlapping X (a continuation that resent the block holding X): refused.
  SnapshotData b_overlap = b;
  std::erase_if(b_overlap.dedup_clients, [&](const auto& client) { return client.client_id < x; });
  const FramedSnapshotData framed_overlap = encode_framed_snapshot_data(b_overlap);
  EXPECT_FALSE(decode_snapshot_data(framed_a.bytes.substr(0, cut.end) +
                                    framed_overlap.bytes.substr(framed_overlap.frames.head_end))
                   .ok());
}

TEST(SnapshotFrames, OlderVersionsStillDecodeAndAreStillWrittenForOlderPeers) {
  SnapshotData data = sample(50, 4);
  data.origin = SnapshotOrigin::kInstalled;
  // A peer without version 4 gets version 3 (retired ids) in its whole-data CRC layout.
  const SnapshotEncoding::Encoded plain = SnapshotEncoding::encode(data, SnapshotDataFormat::kPlain);
  EXPECT_EQ(store::get_u32(plain.bytes.view().data() + 8), 3U);
  EXPECT_EQ(plain.frames, nullptr);
  EXPECT_EQ(plain.crc32c, util::crc32c::value(plain.bytes.view()));
  auto decoded = decode_snapshot_data(plain.bytes.view());
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(decoded->dedup_clients, data.dedup_clients) << "versions 1..3 keep the sender's order";
  const SnapshotEncoding::Encoded framed =
      SnapshotEncoding::encode(data, SnapshotDataFormat::kFramed);
  ASSERT_NE(framed.frames, nullptr);
  EXPECT_EQ(store::get_u32(framed.bytes.view().data()), kFramedSnapshotMagic);
  EXPECT_EQ(framed.crc32c, util::crc32c::value(framed.bytes.view()));
  auto decoded_framed = decode_snapshot_data(framed.bytes.view());
  ASSERT_TRUE(decoded_framed.ok()) << decoded_framed.status().to_string();
  SnapshotData without_order = *decoded;
  without_order.dedup_clients = by_id(without_order.dedup_clients);
  EXPECT_EQ(*decoded_framed, without_order) << "the same content in either version";
  // The two formats are two keys: one encoding never stands for the other.
  SnapshotEncoding encoding;
  const auto t0 = SnapshotEncoding::Clock::time_point{} + std::chrono::hours(1);
  const auto first = encoding.get(data, t0, SnapshotDataFormat::kPlain);
  const auto second = encoding.get(data, t0, SnapshotDataFormat::kFramed);
  EXPECT_FALSE(second.bytes.shares_bytes_with(first.bytes));
  EXPECT_NE(second.frames, nullptr);
  EXPECT_EQ(encoding.counters().encodes, 2U);
}

TEST(SnapshotFrames, TheReceiverOrdersClientsByTheirNewestRangeAndKeepsEverySendersViewStart) {
  // Client 5's newest range ends last, then 9, then 7; the table holds two: 7 is evicted, whatever
  // order the data lists them in.
  const std::vector<std::string> one{"x"};
  const std::uint32_t digest = append_digest(one);
  const std::vector<DedupTable::ClientState> clients{
      {7, 0, {{1, {10, 10, 1}, digest}}},
      {9, 0, {{1, {20, 20, 1}, digest}, {2, {21, 21, 1}, digest}}},
      {5, 0, {{1, {30, 30, 1}, digest}}},
  };
  for (bool reversed : {false, true}) {
    std::vector<DedupTable::ClientState> listed = clients;
    if (reversed) std::reverse(listed.begin(), listed.end());
    DedupTable table(2, 8);
    // Review H1: the whole snapshot is taken, above the bound (a continued transfer's union of two
    // leaders' clients): none of its clients is forgotten at the install.
    table.replace(41, 1, listed);
    EXPECT_EQ(table.clients(), 3U);
    DedupTable::Range range;
    EXPECT_EQ(table.find(7, 1, one, &range), DedupTable::Lookup::kFound);
    // The next new client brings it back to its bound, evicting the least recent by newest range
    // (7; the lookup above touched it, so here the order is by lookups and records).
    table.record_append(11, 1, {41, 41, 1}, digest);
    EXPECT_EQ(table.clients(), 2U);
    EXPECT_EQ(table.find(11, 1, one, &range), DedupTable::Lookup::kFound);
    EXPECT_EQ(table.find(7, 1, one, &range), DedupTable::Lookup::kFound) << "touched last";
    EXPECT_EQ(table.find(5, 1, one, &range), DedupTable::Lookup::kUnknown);
    EXPECT_EQ(table.find(9, 2, one, &range), DedupTable::Lookup::kUnknown);
    // Without the lookup, the order is by newest range: 7 goes first.
    DedupTable untouched(3, 8);
    untouched.replace(41, 1, listed);
    untouched.record_append(11, 1, {41, 41, 1}, digest);
    EXPECT_EQ(untouched.find(7, 1, one, &range), DedupTable::Lookup::kUnknown) << "the least recent";
    EXPECT_EQ(untouched.find(9, 2, one, &range), DedupTable::Lookup::kFound);
  }
  // Two senders' view starts (20 from the trailer's, 30 from a spliced block's): a range starting
  // at either may be a tail, so another payload is kTooOld there, never kReused.
  const std::vector<std::string> other{"y"};
  DedupTable table(8, 8);
  table.replace(41, 20, clients, {30});
  DedupTable::Range range;
  EXPECT_EQ(table.find(9, 1, other, &range), DedupTable::Lookup::kTooOld);
  EXPECT_EQ(table.find(5, 1, other, &range), DedupTable::Lookup::kTooOld);
  EXPECT_EQ(table.find(7, 1, other, &range), DedupTable::Lookup::kReused);
  // A truncation at or below a view start forgets it: entries from there on are seen whole.
  table.truncate_from(25);
  EXPECT_EQ(table.find(9, 1, other, &range), DedupTable::Lookup::kTooOld);
}

}  // namespace
}  // namespace raftlog::replica

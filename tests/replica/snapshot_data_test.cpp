// Snapshot data (src/replica/snapshot_data.h): what a leader's replica sends in place of trimmed
// entries. It comes from the network (and back from the disk), so decoding must refuse every
// malformed input without trusting any field; and the dedup table's export and replace must keep
// exactly the appends a retry can still be answered from.
#include "replica/snapshot_data.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "store/endian.h"
#include "util/crc32c.h"

namespace raftlog::replica {
namespace {

SnapshotData sample() {
  SnapshotData data;
  data.index = 500;
  data.term = 7;
  data.conf.voters = {1, 2, 3};
  data.conf.learners = {4};
  data.conf.addresses = {
      {1, "127.0.0.1:7001"}, {2, "127.0.0.1:7002"}, {3, "127.0.0.1:7003"}, {4, "127.0.0.1:7004"}};
  data.timestamp_floor_ms = 1'800'000'000'000;
  data.topics = {{"audit", 3}, {"orders", 120}, {"z9", 1}};
  data.section = std::string("group table bytes\0with a zero", 29);
  data.dedup_view_start = 12;
  data.origin = SnapshotOrigin::kTrim;
  data.dedup_clients = {
      {77,
       0,
       {{1,
         {
             100,
             102,
             6,
         },
         0xDEADBEEF},
        {2, {103, 103, 6}, 42}}},
      {5, 9, {{9, {480, 500, 7}, 1}}},
      {6, 4, {}},
  };
  return data;
}

// The bytes with the CRC recomputed: the decoder's own checks, not the checksum, must refuse them.
std::string resealed(std::string bytes) {
  store::put_u32(bytes.data() + 4, util::crc32c::value(bytes.data() + 8, bytes.size() - 8));
  return bytes;
}

TEST(SnapshotData, RoundTripsEveryField) {
  const SnapshotData data = sample();
  const std::string bytes = encode_snapshot_data(data);
  std::size_t expected = encoded_size_without_dedup(data);
  for (const auto& client : data.dedup_clients) expected += encoded_client_size(client);
  EXPECT_EQ(bytes.size(), expected);
  auto decoded = decode_snapshot_data(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(*decoded, data);
  SnapshotData empty;
  empty.index = 1;
  empty.term = 1;
  empty.conf.voters = {1};
  auto decoded_empty = decode_snapshot_data(encode_snapshot_data(empty));
  ASSERT_TRUE(decoded_empty.ok()) << decoded_empty.status().to_string();
  EXPECT_EQ(*decoded_empty, empty);
}

TEST(SnapshotData, EveryFlippedBitAndEveryTruncationIsRefused) {
  const std::string bytes = encode_snapshot_data(sample());
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    for (int bit = 0; bit < 8; bit += 3) {
      std::string flipped = bytes;
      flipped[i] = static_cast<char>(flipped[i] ^ (1 << bit));
      EXPECT_FALSE(decode_snapshot_data(flipped).ok()) << "byte " << i << " bit " << bit;
    }
  }
  for (std::size_t size = 0; size < bytes.size(); ++size) {
    EXPECT_FALSE(decode_snapshot_data(bytes.substr(0, size)).ok()) << size;
    // Resealed, the checksum passes: the structure itself must not.
    if (size >= 8) {
      EXPECT_FALSE(decode_snapshot_data(resealed(bytes.substr(0, size))).ok()) << size;
    }
  }
  EXPECT_FALSE(decode_snapshot_data(resealed(bytes + "x")).ok());
}

// Data whose checksum is right but whose content breaks a rule: each refused with its reason.
TEST(SnapshotData, ContentThatBreaksARuleIsRefusedEvenWithAValidChecksum) {
  auto refused = [](const SnapshotData& data, const std::string& what) {
    auto decoded = decode_snapshot_data(encode_snapshot_data(data));
    ASSERT_FALSE(decoded.ok()) << what;
    EXPECT_EQ(decoded.status().code(), store::StatusCode::kCorruption) << what;
  };
  SnapshotData d = sample();
  d.index = 0;
  refused(d, "index 0");
  d = sample();
  d.term = 0;
  refused(d, "term 0");
  d = sample();
  d.term = raft::kMaxTerm + 1;
  refused(d, "term above the limit");
  d = sample();
  d.index = (std::uint64_t{1} << 62) + 1;
  refused(d, "index above the limit");
  d = sample();
  d.index = ~std::uint64_t{0};
  refused(d, "an index whose successor wraps");
  d = sample();
  d.topics = {{"orders", 1}, {"audit", 1}};
  refused(d, "topics out of order");
  d = sample();
  d.topics = {{"orders", 1}, {"orders", 2}};
  refused(d, "a topic twice");
  d = sample();
  d.topics = {{"bad topic", 1}};
  refused(d, "an invalid topic name");
  d = sample();
  d.topics = {{"orders", 0}};
  refused(d, "next offset 0");
  d = sample();
  d.topics = {{"orders", TopicOffsets::kMaxNextOffset + 1}};
  refused(d, "next offset past the bound");
  d = sample();
  d.dedup_clients[0].client_id = 0;
  refused(d, "client 0");
  d = sample();
  d.dedup_clients[1].client_id = d.dedup_clients[0].client_id;
  refused(d, "a client twice");
  d = sample();
  d.dedup_clients[1].appends[0].range.first = d.index + 1;
  d.dedup_clients[1].appends[0].range.last = d.index + 1;
  refused(d, "an append starting past the snapshot");
  d = sample();
  d.dedup_clients[0].appends[0].range.first = 0;
  refused(d, "an append from index 0");
  d = sample();
  d.dedup_clients[0].appends[0].range.first = 103;
  refused(d, "an append whose first is past its last");
  d = sample();
  d.dedup_clients[1].appends[0].range.term = d.term + 1;
  refused(d, "an append of a later term");
  d = sample();
  d.dedup_clients[0].appends[0].range.term = 0;
  refused(d, "an append of term 0");
  d = sample();
  d.dedup_clients[1].appends[0].sequence = 8;  // forgotten_below is 9
  refused(d, "a forgotten sequence");
  d = sample();
  d.dedup_clients[0].appends[1].sequence = 1;
  refused(d, "a sequence twice");
  d = sample();
  d.dedup_clients[0].appends.resize(kMaxAppendsPerClient + 1, {1, {1, 1, 1}, 0});
  for (std::size_t i = 0; i < d.dedup_clients[0].appends.size(); ++i) {
    d.dedup_clients[0].appends[i].sequence = 1000 + i;
  }
  refused(d, "too many appends for one client");
  d = sample();
  d.dedup_view_start = d.index + 2;
  refused(d, "a view start past the snapshot");
  // A configuration that does not decode (a voter list with node 0 is invalid): patched in place.
  std::string bytes = encode_snapshot_data(sample());
  bytes[33 + 1] = 99;  // the configuration's first byte after its version: its voter count
  EXPECT_FALSE(decode_snapshot_data(resealed(bytes)).ok());
  std::string wrong_origin = encode_snapshot_data(sample());
  wrong_origin[28] = 3;
  EXPECT_FALSE(decode_snapshot_data(resealed(wrong_origin)).ok());
  std::string wrong_version = encode_snapshot_data(sample());
  store::put_u32(wrong_version.data() + 8, kSnapshotDataVersion + 1);
  EXPECT_FALSE(decode_snapshot_data(resealed(wrong_version)).ok());
  std::string wrong_magic = encode_snapshot_data(sample());
  wrong_magic[0] = 'X';
  EXPECT_FALSE(decode_snapshot_data(resealed(wrong_magic)).ok());
}

// The version says what a trim knew at its index: version 3 (flags) when it knows the configuration
// in force there, version 2 when it knows only its topic table, version 1 when neither; installed
// data is version 1 (which older nodes decode) unless it carries retired ids (version 3). A trim's
// data of version 1 or 2 means "the configuration at the index is not known".
TEST(SnapshotData, TheVersionSaysWhatATrimKnewAndInstalledDataCarriesRetiredIds) {
  SnapshotData trim = sample();  // origin kTrim, topics_at_index, conf_at_index
  std::string bytes = encode_snapshot_data(trim);
  EXPECT_EQ(store::get_u32(bytes.data() + 8), 3U);
  auto decoded = decode_snapshot_data(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_TRUE(decoded->topics_at_index);
  EXPECT_TRUE(decoded->conf_at_index);
  EXPECT_EQ(*decoded, trim);

  trim.topics_at_index = false;  // a trim whose topic reading failed still knows its configuration
  bytes = encode_snapshot_data(trim);
  EXPECT_EQ(store::get_u32(bytes.data() + 8), 3U);
  decoded = decode_snapshot_data(bytes);
  ASSERT_TRUE(decoded.ok());
  EXPECT_FALSE(decoded->topics_at_index);
  EXPECT_TRUE(decoded->conf_at_index);
  EXPECT_EQ(*decoded, trim);

  trim.topics_at_index = true;
  trim.conf_at_index = false;  // the table only (what the previous version wrote)
  bytes = encode_snapshot_data(trim);
  EXPECT_EQ(store::get_u32(bytes.data() + 8), 2U);
  decoded = decode_snapshot_data(bytes);
  ASSERT_TRUE(decoded.ok());
  EXPECT_TRUE(decoded->topics_at_index);
  EXPECT_FALSE(decoded->conf_at_index) << "a version-2 trim's configuration is a placeholder";
  EXPECT_EQ(*decoded, trim);

  trim.topics_at_index = false;  // an older binary's trim, or one that knew neither
  bytes = encode_snapshot_data(trim);
  EXPECT_EQ(store::get_u32(bytes.data() + 8), 1U);
  decoded = decode_snapshot_data(bytes);
  ASSERT_TRUE(decoded.ok());
  EXPECT_FALSE(decoded->topics_at_index);
  EXPECT_FALSE(decoded->conf_at_index);
  EXPECT_EQ(*decoded, trim);

  SnapshotData installed = sample();
  installed.origin = SnapshotOrigin::kInstalled;
  bytes = encode_snapshot_data(installed);
  EXPECT_EQ(store::get_u32(bytes.data() + 8), 1U) << "older followers decode what a leader sends";
  decoded = decode_snapshot_data(bytes);
  ASSERT_TRUE(decoded.ok());
  EXPECT_TRUE(decoded->topics_at_index);
  EXPECT_TRUE(decoded->conf_at_index);
  EXPECT_EQ(*decoded, installed);
  // Version 2 is a trim's only, version 3 only where a lower one cannot say it: one encoding per
  // content.
  std::string as_version_2 = bytes;
  store::put_u32(as_version_2.data() + 8, 2);
  EXPECT_FALSE(decode_snapshot_data(resealed(as_version_2)).ok());

  installed.retired_ids = {9, 5};
  bytes = encode_snapshot_data(installed);
  EXPECT_EQ(store::get_u32(bytes.data() + 8), 3U);
  std::size_t expected = encoded_size_without_dedup(installed);
  for (const auto& client : installed.dedup_clients) expected += encoded_client_size(client);
  EXPECT_EQ(bytes.size(), expected);
  decoded = decode_snapshot_data(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(decoded->retired_ids, (std::vector<raft::NodeId>{9, 5}));
  EXPECT_EQ(*decoded, installed);
}

// Version 5 (review of dispatch3, M3): a trim's data that also carries the running max of the
// stamps as of its index, which the derived indexes seed their time lookups with. Only a trim's
// with its topic table (the scan reads both); an older file carries none (stamp_at_index false,
// 0: the node seeds nothing and its next trim carries the largest stamp it passes).
TEST(SnapshotData, TheRunningMaxStampIsVersion5AndOnlyATrimsWithItsTopicTable) {
  SnapshotData trim = sample();  // origin kTrim, topics_at_index, conf_at_index
  trim.stamp_at_index = true;
  trim.stamp_max_ms = 1'799'999'999'123;
  const std::string bytes = encode_snapshot_data(trim);
  EXPECT_EQ(store::get_u32(bytes.data() + 8), kSnapshotDataVersionWithStamp);
  std::size_t expected = encoded_size_without_dedup(trim);
  for (const auto& client : trim.dedup_clients) expected += encoded_client_size(client);
  EXPECT_EQ(bytes.size(), expected);
  auto decoded = decode_snapshot_data(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(*decoded, trim);
  trim.conf_at_index = false;  // the configuration unknown: still version 5
  decoded = decode_snapshot_data(encode_snapshot_data(trim));
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(*decoded, trim);
  trim.conf_at_index = true;

  // What an older binary's trim wrote (version 3, the same table): no stamp.
  SnapshotData old = trim;
  old.stamp_at_index = false;
  old.stamp_max_ms = 0;
  const std::string old_bytes = encode_snapshot_data(old);
  EXPECT_EQ(store::get_u32(old_bytes.data() + 8), 3U);
  decoded = decode_snapshot_data(old_bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_FALSE(decoded->stamp_at_index);
  EXPECT_EQ(decoded->stamp_max_ms, 0U);

  const std::size_t conf_size = store::get_u32(bytes.data() + 29);
  const std::size_t flags_at = 33 + conf_size;
  const std::size_t stamp_at = flags_at + 1 + 4;  // no retired ids
  auto changed = [&](std::size_t at, char value) {
    std::string copy = bytes;
    copy[at] = value;
    return resealed(copy);
  };
  EXPECT_FALSE(decode_snapshot_data(changed(28, 1)).ok()) << "an installed snapshot's";
  EXPECT_FALSE(decode_snapshot_data(changed(flags_at, 2 | 4)).ok()) << "without its topic table";
  EXPECT_FALSE(decode_snapshot_data(changed(flags_at, 1 | 2)).ok()) << "version 5 without its flag";
  std::string as_version_3 = bytes;
  store::put_u32(as_version_3.data() + 8, 3);
  EXPECT_FALSE(decode_snapshot_data(resealed(as_version_3)).ok()) << "version 3 with the flag";
  std::string without_stamp = bytes;
  without_stamp.erase(stamp_at, 8);
  EXPECT_FALSE(decode_snapshot_data(resealed(without_stamp)).ok()) << "the stamp left out";
  std::string truncated = bytes.substr(0, stamp_at + 4);
  EXPECT_FALSE(decode_snapshot_data(resealed(truncated)).ok());
  std::string as_version_4 = bytes;
  store::put_u32(as_version_4.data() + 8, 4);
  EXPECT_FALSE(decode_snapshot_data(resealed(as_version_4)).ok()) << "4 is the framed one's";
  std::string as_version_6 = bytes;
  store::put_u32(as_version_6.data() + 8, 6);
  EXPECT_FALSE(decode_snapshot_data(resealed(as_version_6)).ok());
}

// Version 3's fields break no rule unnoticed (resealed: the decoder's checks refuse them).
TEST(SnapshotData, BadRetiredIdsAndFlagsAreRefused) {
  SnapshotData installed = sample();
  installed.origin = SnapshotOrigin::kInstalled;
  installed.retired_ids = {9};
  const std::string good = encode_snapshot_data(installed);
  ASSERT_TRUE(decode_snapshot_data(good).ok());
  const std::size_t conf_size = store::get_u32(good.data() + 29);
  const std::size_t flags_at = 33 + conf_size;
  const std::size_t retired_at = flags_at + 1 + 4;
  auto with = [&](std::size_t at, std::uint64_t value, int width) {
    std::string bytes = good;
    if (width == 1) {
      bytes[at] = static_cast<char>(value);
    } else if (width == 4) {
      store::put_u32(bytes.data() + at, static_cast<std::uint32_t>(value));
    } else {
      store::put_u64(bytes.data() + at, value);
    }
    return resealed(bytes);
  };
  EXPECT_FALSE(decode_snapshot_data(with(flags_at, 1, 1)).ok()) << "installed: both flags";
  EXPECT_FALSE(decode_snapshot_data(with(flags_at, 7, 1)).ok()) << "an unknown flag";
  EXPECT_FALSE(decode_snapshot_data(with(retired_at, 0, 8)).ok()) << "retired id 0";
  EXPECT_FALSE(decode_snapshot_data(with(retired_at, 2, 8)).ok()) << "a member retired";
  EXPECT_FALSE(decode_snapshot_data(with(flags_at + 1, 1 << 20, 4)).ok()) << "too many ids";
  EXPECT_FALSE(decode_snapshot_data(with(flags_at + 1, (good.size() - retired_at) / 8 + 1, 4)).ok())
      << "a count past the bytes";
  SnapshotData repeated = installed;
  repeated.retired_ids = {9, 9};
  EXPECT_FALSE(decode_snapshot_data(encode_snapshot_data(repeated)).ok()) << "an id twice";
  // An installed snapshot without retired ids is version 1: as version 3 (count 0, the id's 8
  // bytes removed: well-formed, with nothing version 1 lacks) it is refused.
  std::string v3_empty = good;
  store::put_u32(v3_empty.data() + flags_at + 1, 0);
  v3_empty.erase(retired_at, 8);
  EXPECT_FALSE(decode_snapshot_data(resealed(v3_empty)).ok());
}

// Random mutations of a valid encoding, resealed so that they reach the structural checks: the
// decoder never crashes, and what it accepts encodes back to the same bytes (nothing it accepted
// was read past its end or half-parsed).
TEST(SnapshotData, FuzzedInputsAreRefusedOrDecodeExactly) {
  const std::string valid = encode_snapshot_data(sample());
  std::mt19937_64 prng(20261205);
  int accepted = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string bytes = valid;
    const int edits = 1 + static_cast<int>(prng() % 4);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = 8 + prng() % (bytes.size() - 8);
      switch (prng() % 3) {
        case 0:
          bytes[at] = static_cast<char>(prng());
          break;
        case 1:
          bytes.erase(at, 1 + prng() % 8);
          break;
        default:
          bytes.insert(at, std::string(1 + prng() % 8, static_cast<char>(prng())));
          break;
      }
      if (bytes.size() < 16) bytes.resize(16);
    }
    auto decoded = decode_snapshot_data(resealed(bytes));
    if (decoded.ok()) {
      ++accepted;
      EXPECT_EQ(encode_snapshot_data(*decoded), resealed(bytes)) << "round " << round;
    }
  }
  EXPECT_LT(accepted, 20000);
}

TEST(SnapshotDedup, ExportKeepsTheAppendsAtOrBelowTheIndexMostRecentClientFirst) {
  DedupTable table(100, 8);
  const std::vector<std::string> one = {"a"};
  const std::vector<std::string> two = {"b", "c"};
  table.record_append(10, 1, {1, 1, 1}, append_digest(one));
  table.record_append(20, 1, {2, 3, 1}, append_digest(two));
  table.record_append(10, 2, {4, 4, 2}, append_digest(one));  // client 10 most recent
  table.record_append(30, 5, {5, 6, 2}, append_digest(two));  // ends past the snapshot (index 5)
  std::vector<DedupTable::ClientState> exported;
  table.for_each_client_through(5, 5, [&](const DedupTable::ClientState& client) {
    exported.push_back(client);
    return true;
  });
  ASSERT_EQ(exported.size(), 2U) << "client 30 has nothing at or below 5 and forgot nothing";
  EXPECT_EQ(exported[0].client_id, 10U);
  EXPECT_EQ(exported[0].appends.size(), 2U);
  EXPECT_EQ(exported[1].client_id, 20U);

  DedupTable follower(100, 8);
  follower.record_append(99, 1, {1, 1, 1}, append_digest(one));  // its own, replaced
  follower.replace(6, 1, exported);
  DedupTable::Range range;
  EXPECT_EQ(follower.find(10, 2, one, &range), DedupTable::Lookup::kFound);
  EXPECT_EQ(range, (DedupTable::Range{4, 4, 2}));
  EXPECT_EQ(follower.find(20, 1, two, &range), DedupTable::Lookup::kFound);
  EXPECT_EQ(follower.find(20, 1, one, &range), DedupTable::Lookup::kReused);
  EXPECT_EQ(follower.find(30, 5, two, &range), DedupTable::Lookup::kUnknown);
  EXPECT_EQ(follower.find(99, 1, one, &range), DedupTable::Lookup::kUnknown);
  // The entries after the snapshot arrive by replication: a range starting at 6 may be the tail of
  // an append that began at or below 5, so a mismatch there cannot prove a reuse.
  follower.record_entry(30, 5, 6, 2, "c");
  EXPECT_EQ(follower.find(30, 5, two, &range), DedupTable::Lookup::kTooOld);

  // With its end committed, an append that straddles the snapshot travels whole, and its entries
  // after the snapshot, arriving by replication, do not turn it into a partial range.
  std::vector<DedupTable::ClientState> with_straddling;
  table.for_each_client_through(5, 6, [&](const DedupTable::ClientState& client) {
    with_straddling.push_back(client);
    return true;
  });
  ASSERT_EQ(with_straddling.size(), 3U);
  DedupTable whole(100, 8);
  whole.replace(6, 1, with_straddling);
  whole.record_entry(30, 5, 6, 2, "c");
  EXPECT_EQ(whole.find(30, 5, two, &range), DedupTable::Lookup::kFound);
  EXPECT_EQ(range, (DedupTable::Range{5, 6, 2}));

  // The receiver's per-client bound applies at the install; its client bound only from the next
  // new client on (review H1: a continued transfer's two leaders' clients are all kept).
  DedupTable small(1, 1);
  small.replace(6, 1, exported);
  EXPECT_EQ(small.clients(), 2U);
  EXPECT_EQ(small.find(10, 2, one, &range), DedupTable::Lookup::kFound);
  EXPECT_EQ(small.find(10, 1, one, &range), DedupTable::Lookup::kTooOld)
      << "the lower sequence beyond the per-client bound is forgotten";
  EXPECT_EQ(small.find(20, 1, two, &range), DedupTable::Lookup::kFound);
  small.record_append(40, 1, {7, 7, 2}, append_digest(one));
  EXPECT_EQ(small.clients(), 1U) << "back to its bound";
  EXPECT_EQ(small.find(20, 1, two, &range), DedupTable::Lookup::kUnknown);
}

// The sender's table can hold what the decoder refuses: a sequence recorded twice (a re-proposal
// after a truncation) and a sequence below forgotten_below (remembered after a truncation made
// room). Exported raw, every snapshot this leader sends would be refused and the follower would
// stay stranded; the export keeps what find() answers from and the decoder accepts it.
TEST(SnapshotDedup, WhatTheTableCanHoldExportsToDataTheDecoderAccepts) {
  const std::vector<std::string> first_try{"a"};
  const std::vector<std::string> second_try{"b"};
  DedupTable leader(8, 2);
  // Client 9, sequence 17: proposed at index 5 in term 1, re-proposed at index 8 in term 2.
  leader.record_append(9, 17, {5, 5, 1}, append_digest(first_try));
  leader.record_append(9, 17, {8, 8, 2}, append_digest(second_try));
  // Client 10: sequences 6, 7, 8 with room for two forget 6; the cut at 12 removes 8, making
  // room for sequence 4, replicated at index 12.
  leader.record_append(10, 6, {10, 10, 2}, append_digest(first_try));
  leader.record_append(10, 7, {11, 11, 2}, append_digest(first_try));
  leader.record_append(10, 8, {12, 12, 2}, append_digest(first_try));
  leader.truncate_from(12);
  leader.record_entry(10, 4, 12, 2, "a");

  SnapshotData data = sample();
  data.index = 20;
  data.term = 2;
  data.dedup_view_start = 1;
  data.dedup_clients.clear();
  std::vector<DedupTable::ClientState> raw;
  leader.for_each_client_through(data.index, data.index, [&](const DedupTable::ClientState& c) {
    raw.push_back(c);
    data.dedup_clients.push_back(exportable_client(c, data.term));
    return true;
  });
  ASSERT_EQ(raw.size(), 2U);
  // The table does hold both (else this test proves nothing).
  SnapshotData unsanitised = data;
  unsanitised.dedup_clients = raw;
  EXPECT_FALSE(decode_snapshot_data(encode_snapshot_data(unsanitised)).ok());

  auto decoded = decode_snapshot_data(encode_snapshot_data(data));
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  DedupTable follower(8, 2);
  follower.replace(21, 1, decoded->dedup_clients);
  DedupTable::Range range;
  // Answered as the leader answers: from the newest record of sequence 17.
  EXPECT_EQ(leader.find(9, 17, second_try, &range), DedupTable::Lookup::kFound);
  EXPECT_EQ(follower.find(9, 17, second_try, &range), DedupTable::Lookup::kFound);
  EXPECT_EQ(range, (DedupTable::Range{8, 8, 2}));
  EXPECT_EQ(follower.find(9, 17, first_try, &range), DedupTable::Lookup::kReused);
  // Sequence 7 is still answered; 4 (below forgotten_below) is refused, never appended again.
  EXPECT_EQ(follower.find(10, 7, first_try, &range), DedupTable::Lookup::kFound);
  EXPECT_EQ(follower.find(10, 4, first_try, &range), DedupTable::Lookup::kTooOld);
  // A range of a term above the snapshot's is not carried.
  DedupTable::ClientState future{11, 0, {{3, {15, 15, 3}, 0}}};
  EXPECT_TRUE(exportable_client(future, 2).appends.empty());
}

}  // namespace
}  // namespace raftlog::replica

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "store/checkpoint.h"
#include "store/durable_record.h"
#include "store/endian.h"
#include "store/entry_format.h"
#include "store/segment_format.h"

namespace raftlog::store {
namespace {

using entry_format::DecodeResult;

std::vector<char> encoded(const EntryMeta& meta, const std::string& payload) {
  std::vector<char> buffer(entry_format::record_bytes(payload.size()) + 64, '\0');
  entry_format::encode(meta, 5, payload, buffer.data());
  return buffer;
}

EntryMeta sample_meta() {
  EntryMeta meta;
  meta.index = 42;
  meta.term = 7;
  meta.type = EntryType::kConfig;
  meta.flags = 0xBEEF;
  meta.client_id = 0x1122334455667788ULL;
  meta.sequence = 99;
  return meta;
}

TEST(EntryFormat, RoundTripAndLayout) {
  const std::string payload = "hello, raftlog";
  auto buffer = encoded(sample_meta(), payload);
  EXPECT_EQ(get_u32(buffer.data()), entry_format::kMagic);
  EXPECT_EQ(get_u8(buffer.data() + 8), entry_format::kVersion);
  EXPECT_EQ(get_u8(buffer.data() + 9), 2);
  EXPECT_EQ(get_u16(buffer.data() + 10), 0xBEEF);
  EXPECT_EQ(get_u32(buffer.data() + 12), payload.size());
  EXPECT_EQ(get_u64(buffer.data() + 16), 42U);
  EXPECT_EQ(get_u64(buffer.data() + 24), 7U);
  entry_format::Decoded decoded;
  ASSERT_EQ(entry_format::decode(buffer.data(), buffer.size(), 1024, true, &decoded),
            DecodeResult::kOk);
  EXPECT_EQ(decoded.meta, sample_meta());
  EXPECT_EQ(decoded.generation, 5U);
  EXPECT_EQ(get_u64(buffer.data() + 48), 5U);
  EXPECT_EQ(decoded.payload, payload);
  EXPECT_EQ(decoded.record_bytes, 72U);  // 56 + 14 rounded up to 8
  EXPECT_EQ(entry_format::record_bytes(0), 56U);
  EXPECT_EQ(entry_format::record_bytes(1), 64U);
}

// The record checksum is part of the on-disk format: logs written before CRC32C moved to src/util must
// still verify. The value was recorded from the store's own CRC32C before the move.
TEST(EntryFormat, ChecksumOfAKnownRecordIsUnchanged) {
  const auto buffer = encoded(sample_meta(), "hello, raftlog");
  EXPECT_EQ(get_u32(buffer.data() + 4), 0x9D76A706U);
}

TEST(EntryFormat, DetectsEveryDamagedByte) {
  const std::string payload = "payload bytes";
  const auto good = encoded(sample_meta(), payload);
  const std::size_t record = entry_format::record_bytes(payload.size());
  const std::size_t covered =
      entry_format::kHeaderBytes + payload.size();  // padding is not covered
  for (std::size_t i = 0; i < covered; ++i) {
    auto bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x10);
    entry_format::Decoded decoded;
    const auto result = entry_format::decode(bad.data(), bad.size(), 1024, true, &decoded);
    EXPECT_NE(result, DecodeResult::kOk) << "flipped byte " << i << " of " << record;
  }
}

TEST(EntryFormat, EndTruncatedAndOversized) {
  std::vector<char> zeros(128, '\0');
  entry_format::Decoded decoded;
  EXPECT_EQ(entry_format::decode(zeros.data(), zeros.size(), 1024, true, &decoded),
            DecodeResult::kEnd);
  const std::string payload(100, 'x');
  auto buffer = encoded(sample_meta(), payload);
  EXPECT_EQ(entry_format::decode(buffer.data(), 100, 1024, true, &decoded),
            DecodeResult::kTruncated);
  EXPECT_EQ(entry_format::decode(buffer.data(), buffer.size(), 50, true, &decoded),
            DecodeResult::kBadSize);
  buffer[8] = 9;  // unknown version
  EXPECT_EQ(entry_format::decode(buffer.data(), buffer.size(), 1024, true, &decoded),
            DecodeResult::kBadVersion);
}

TEST(SegmentFormat, HeaderRoundTripAndCorruption) {
  char buffer[64];
  segment_format::encode_segment_header({1000, 17, 1 << 20}, buffer);
  auto header = segment_format::decode_segment_header(buffer);
  ASSERT_TRUE(header);
  EXPECT_EQ(header->base_index, 1000U);
  EXPECT_EQ(header->prev_term, 17U);
  EXPECT_EQ(header->segment_size_bytes, 1U << 20);
  for (int i = 0; i < 40; ++i) {
    char bad[64];
    std::memcpy(bad, buffer, 64);
    bad[i] = static_cast<char>(bad[i] ^ 1);
    EXPECT_FALSE(segment_format::decode_segment_header(bad)) << i;
  }
}

TEST(SegmentFormat, IndexRecordsAndNames) {
  char buffer[32];
  const segment_format::IndexRecord record{5, 3, 4096, 120};
  segment_format::encode_index_record(record, buffer);
  auto decoded = segment_format::decode_index_record(buffer);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(*decoded, record);
  char zeros[32] = {};
  EXPECT_FALSE(segment_format::decode_index_record(zeros));
  char header[64];
  segment_format::encode_index_header({9, 100}, header);
  ASSERT_TRUE(segment_format::decode_index_header(header));
  EXPECT_EQ(segment_format::decode_index_header(header)->capacity_records, 100U);

  EXPECT_EQ(segment_format::segment_file_name(1), "00000000000000000001.seg");
  EXPECT_EQ(segment_format::parse_segment_file_name("00000000000000000123.seg"), 123U);
  EXPECT_FALSE(segment_format::parse_segment_file_name("00000000000000000123.idx"));
  EXPECT_FALSE(segment_format::parse_segment_file_name("0000000000000000012x.seg"));
  EXPECT_FALSE(segment_format::parse_segment_file_name("123.seg"));
  EXPECT_FALSE(segment_format::parse_segment_file_name("99999999999999999999.seg"));  // > 2^64
  EXPECT_EQ(segment_format::parse_index_file_name("00000000000000000123.idx"), 123U);
}

TEST(CheckpointFormat, RoundTrip) {
  Checkpoint checkpoint{10, 5, 4000, 8, 0, 3};
  auto decoded = decode_checkpoint(encode_checkpoint(checkpoint));
  ASSERT_TRUE(decoded);
  EXPECT_EQ(*decoded, checkpoint);
  EXPECT_FALSE(decode_checkpoint("short"));
}

// Bytes from the disk are refused or decoded, never met with a failed check (the store's checks stay
// on in release builds and are for programmer errors only): seeded damage to valid records and
// random bytes, through every decoder. A record decoded from damaged bytes still lies in its input.
TEST(StoreFormats, DamagedBytesAreRefusedOrDecodedNeverAFailedCheck) {
  std::mt19937_64 rng(14);
  const std::string payload(300, 'p');
  const auto valid_entry = encoded(sample_meta(), payload);
  char valid_header[64];
  segment_format::encode_segment_header({1000, 17, 1 << 20}, valid_header);
  std::size_t decoded_entries = 0;
  for (int round = 0; round < 20000; ++round) {
    std::vector<char> bytes = valid_entry;
    if (round % 4 == 0) {
      for (char& byte : bytes) byte = static_cast<char>(rng());
    } else {
      for (int flips = 1 + static_cast<int>(rng() % 4); flips > 0; --flips) {
        bytes[rng() % bytes.size()] = static_cast<char>(rng());
      }
      if (round % 2 == 0) put_u32(bytes.data(), entry_format::kMagic);  // reach the size checks
      if (round % 3 == 0) put_u32(bytes.data() + 12, static_cast<std::uint32_t>(rng()));
    }
    const std::uint64_t available = rng() % (bytes.size() + 1);
    entry_format::Decoded decoded;
    const bool verify_crc = round % 5 != 0;
    if (entry_format::decode(bytes.data(), available, static_cast<std::uint32_t>(rng()), verify_crc,
                             &decoded) == DecodeResult::kOk) {
      ++decoded_entries;
      EXPECT_LE(decoded.record_bytes, available);
    }
    char header[64];
    std::memcpy(header, valid_header, sizeof(header));
    std::memcpy(header + rng() % 60, bytes.data(), 4);
    (void)segment_format::decode_segment_header(header);
    (void)segment_format::decode_index_header(bytes.data());
    (void)segment_format::decode_index_record(bytes.data());
    (void)decode_checkpoint(std::string_view(bytes.data(), rng() % 64));
    (void)DurableRecordFile::decode_slot(bytes.data(), available);
  }
  EXPECT_GT(decoded_entries, 0U);  // the damage reached the decoder's success path too
}

// The checks are active in this (release) build, not compiled out like <cassert>.
TEST(StoreChecks, AResultWithoutAValueOrErrorStops) {
  EXPECT_DEATH(Result<int>{Status()}, "Result constructed from an OK status");
  const Result<int> failed = Status::io("disk gone");
  EXPECT_DEATH((void)failed.value(), "value\\(\\) of a Result that holds an error");
}

TEST(StoreChecks, EncodingASegmentHeaderNoDecoderAcceptsStops) {
  char header[64];
  EXPECT_DEATH(segment_format::encode_segment_header({0, 0, 1 << 20}, header),
               "segment header decodes back");
}

}  // namespace
}  // namespace raftlog::store

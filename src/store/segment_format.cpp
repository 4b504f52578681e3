#include "store/segment_format.h"

#include <cstdio>
#include <cstring>

#include "store/endian.h"
#include "store/entry_format.h"
#include "util/check.h"
#include "util/crc32c.h"

namespace raftlog::store::segment_format {

void encode_segment_header(const SegmentHeader& header, char* out) {
  std::memset(out, 0, kSegmentHeaderBytes);
  put_u32(out + 8, kVersion);
  put_u32(out + 12, static_cast<std::uint32_t>(kSegmentHeaderBytes));
  put_u64(out + 16, header.base_index);
  put_u64(out + 24, header.prev_term);
  put_u64(out + 32, header.segment_size_bytes);
  put_u32(out + 4, util::crc32c::value(out + 8, kSegmentHeaderBytes - 8));
  put_u32(out, kSegmentMagic);
  // Once per segment: a full decode, CRC included. Also refuses base index 0, which no decode accepts.
  RAFTLOG_CHECK(decode_segment_header(out) == header,
                "an encoded segment header decodes back to itself");
}

std::optional<SegmentHeader> decode_segment_header(const char* in) {
  if (get_u32(in) != kSegmentMagic) return std::nullopt;
  if (util::crc32c::value(in + 8, kSegmentHeaderBytes - 8) != get_u32(in + 4)) return std::nullopt;
  if (get_u32(in + 8) != kVersion || get_u32(in + 12) != kSegmentHeaderBytes) return std::nullopt;
  SegmentHeader header;
  header.base_index = get_u64(in + 16);
  header.prev_term = get_u64(in + 24);
  header.segment_size_bytes = get_u64(in + 32);
  if (header.base_index == 0) return std::nullopt;
  return header;
}

void encode_index_header(const IndexHeader& header, char* out) {
  std::memset(out, 0, kIndexHeaderBytes);
  put_u32(out + 8, kVersion);
  put_u32(out + 12, static_cast<std::uint32_t>(kIndexRecordBytes));
  put_u64(out + 16, header.base_index);
  put_u64(out + 24, header.capacity_records);
  put_u32(out + 4, util::crc32c::value(out + 8, kIndexHeaderBytes - 8));
  put_u32(out, kIndexMagic);
  RAFTLOG_CHECK(decode_index_header(out) == header,
                "an encoded index header decodes back to itself");
}

std::optional<IndexHeader> decode_index_header(const char* in) {
  if (get_u32(in) != kIndexMagic) return std::nullopt;
  if (util::crc32c::value(in + 8, kIndexHeaderBytes - 8) != get_u32(in + 4)) return std::nullopt;
  if (get_u32(in + 8) != kVersion || get_u32(in + 12) != kIndexRecordBytes) return std::nullopt;
  IndexHeader header;
  header.base_index = get_u64(in + 16);
  header.capacity_records = get_u64(in + 24);
  return header;
}

namespace {
IndexRecord index_record_fields(const char* in) {
  IndexRecord record;
  record.index = get_u64(in);
  record.term = get_u64(in + 8);
  record.offset = get_u64(in + 16);
  record.record_bytes = get_u32(in + 24);
  return record;
}
}  // namespace

void encode_index_record(const IndexRecord& record, char* out) {
  put_u64(out, record.index);
  put_u64(out + 8, record.term);
  put_u64(out + 16, record.offset);
  put_u32(out + 24, record.record_bytes);
  put_u32(out + 28, util::crc32c::value(out, 28));
  // One record per appended entry: the fields read back without a second CRC pass.
  RAFTLOG_CHECK(index_record_fields(out) == record,
                "an encoded index record decodes back to itself");
}

std::optional<IndexRecord> decode_index_record(const char* in) {
  if (util::crc32c::value(in, 28) != get_u32(in + 28)) return std::nullopt;
  return index_record_fields(in);
}

std::uint64_t index_capacity_records(std::uint64_t segment_size_bytes) {
  return (segment_size_bytes - kSegmentHeaderBytes) / entry_format::kHeaderBytes;
}

std::uint64_t index_file_bytes(std::uint64_t segment_size_bytes) {
  return kIndexHeaderBytes + index_capacity_records(segment_size_bytes) * kIndexRecordBytes;
}

namespace {
std::string numbered_name(std::uint64_t base_index, const char* suffix) {
  char buffer[48];
  std::snprintf(buffer, sizeof(buffer), "%020llu%s", static_cast<unsigned long long>(base_index),
                suffix);
  return buffer;
}
std::optional<std::uint64_t> parse_numbered_name(const std::string& name, const char* suffix) {
  const std::size_t suffix_len = std::strlen(suffix);
  if (name.size() != 20 + suffix_len || name.compare(20, suffix_len, suffix) != 0)
    return std::nullopt;
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < 20; ++i) {
    const char c = name[i];
    if (c < '0' || c > '9') return std::nullopt;
    const std::uint64_t digit = static_cast<std::uint64_t>(c - '0');
    if (value > (UINT64_MAX - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  if (value == 0) return std::nullopt;
  return value;
}
}  // namespace

std::string segment_file_name(std::uint64_t base_index) {
  return numbered_name(base_index, ".seg");
}
std::string index_file_name(std::uint64_t base_index) { return numbered_name(base_index, ".idx"); }
std::optional<std::uint64_t> parse_segment_file_name(const std::string& name) {
  return parse_numbered_name(name, ".seg");
}
std::optional<std::uint64_t> parse_index_file_name(const std::string& name) {
  return parse_numbered_name(name, ".idx");
}

}  // namespace raftlog::store::segment_format

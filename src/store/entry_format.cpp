#include "store/entry_format.h"

#include <cstring>

#include "store/endian.h"
#include "util/check.h"
#include "util/crc32c.h"

namespace raftlog::store::entry_format {

namespace {

// Bytes [8, kHeaderBytes) of a record: everything but the magic and the CRC.
void put_header_fields(const EntryMeta& meta, std::uint64_t generation, std::uint32_t payload_size,
                       char* out) {
  put_u8(out + 8, kVersion);
  put_u8(out + 9, static_cast<std::uint8_t>(meta.type));
  put_u16(out + 10, meta.flags);
  put_u32(out + 12, payload_size);
  put_u64(out + 16, meta.index);
  put_u64(out + 24, meta.term);
  put_u64(out + 32, meta.client_id);
  put_u64(out + 40, meta.sequence);
  put_u64(out + 48, generation);
}

// The fields put_header_fields() writes, read back (the version and payload size are checked by
// the caller).
void get_header_fields(const char* in, EntryMeta* meta, std::uint64_t* generation) {
  meta->type = static_cast<EntryType>(get_u8(in + 9));
  meta->flags = get_u16(in + 10);
  meta->index = get_u64(in + 16);
  meta->term = get_u64(in + 24);
  meta->client_id = get_u64(in + 32);
  meta->sequence = get_u64(in + 40);
  *generation = get_u64(in + 48);
}

}  // namespace

void encode(const EntryMeta& meta, std::uint64_t generation, std::string_view payload, char* out) {
  RAFTLOG_CHECK(payload.size() <= UINT32_MAX, "an entry's payload size fits its 32-bit field");
  const auto payload_size = static_cast<std::uint32_t>(payload.size());
  put_header_fields(meta, generation, payload_size, out);
  if (!payload.empty()) std::memcpy(out + kHeaderBytes, payload.data(), payload.size());
  const std::uint64_t total = record_bytes(payload_size);
  const std::uint64_t padding = total - kHeaderBytes - payload_size;
  if (padding > 0) std::memset(out + kHeaderBytes + payload_size, 0, padding);
  put_u32(out + 4, util::crc32c::value(out + 8, kHeaderBytes - 8 + payload_size));
  put_u32(out, kMagic);
  // Paired with decode(): the record reads back as what was encoded. Without a second CRC pass (on
  // the append path): the CRC was computed over these bytes just above.
  Decoded written;
  RAFTLOG_CHECK(
      total % kAlignmentBytes == 0 &&
          decode(out, total, payload_size, /*verify_crc=*/false, &written) == DecodeResult::kOk &&
          written.meta == meta && written.generation == generation &&
          written.record_bytes == total && written.payload.size() == payload_size,
      "an encoded entry decodes back to the entry encoded");
}

void encode_header(const EntryMeta& meta, std::uint64_t generation, std::string_view payload,
                   char* out) {
  RAFTLOG_CHECK(payload.size() <= UINT32_MAX, "an entry's payload size fits its 32-bit field");
  const auto payload_size = static_cast<std::uint32_t>(payload.size());
  put_header_fields(meta, generation, payload_size, out);
  const std::uint32_t header_crc = util::crc32c::value(out + 8, kHeaderBytes - 8);
  put_u32(out + 4, util::crc32c::extend(header_crc, payload.data(), payload.size()));
  put_u32(out, kMagic);
  // Paired with decode()'s field reads (the payload is not next to this header, so decode() itself
  // cannot run on it).
  EntryMeta written;
  std::uint64_t written_generation = 0;
  get_header_fields(out, &written, &written_generation);
  RAFTLOG_CHECK(get_u32(out) == kMagic && get_u8(out + 8) == kVersion &&
                    get_u32(out + 12) == payload_size && written == meta &&
                    written_generation == generation,
                "an encoded entry header reads back as the entry encoded");
}

const char* to_string(DecodeResult result) {
  switch (result) {
    case DecodeResult::kOk:
      return "ok";
    case DecodeResult::kEnd:
      return "end of data (zero magic)";
    case DecodeResult::kTruncated:
      return "record extends past the end of the segment";
    case DecodeResult::kBadMagic:
      return "bad entry magic";
    case DecodeResult::kBadVersion:
      return "unknown entry format version";
    case DecodeResult::kBadSize:
      return "payload size above the maximum entry size";
    case DecodeResult::kBadChecksum:
      return "entry CRC32C mismatch";
  }
  return "unknown";
}

DecodeResult decode(const char* in, std::uint64_t available_bytes, std::uint32_t max_payload_bytes,
                    bool verify_crc, Decoded* out) {
  if (available_bytes < 4) return DecodeResult::kEnd;
  const std::uint32_t magic = get_u32(in);
  if (magic == 0) return DecodeResult::kEnd;
  if (available_bytes < kHeaderBytes) return DecodeResult::kTruncated;
  if (magic != kMagic) return DecodeResult::kBadMagic;
  if (get_u8(in + 8) != kVersion) return DecodeResult::kBadVersion;
  const std::uint32_t payload_size = get_u32(in + 12);
  if (payload_size > max_payload_bytes) return DecodeResult::kBadSize;
  const std::uint64_t total = record_bytes(payload_size);
  if (total > available_bytes) return DecodeResult::kTruncated;
  if (verify_crc &&
      util::crc32c::value(in + 8, kHeaderBytes - 8 + payload_size) != get_u32(in + 4)) {
    return DecodeResult::kBadChecksum;
  }
  get_header_fields(in, &out->meta, &out->generation);
  out->payload = std::string_view(in + kHeaderBytes, payload_size);
  out->record_bytes = total;
  // Holds for any input bytes (validated above), so a reader never steps outside its input.
  RAFTLOG_CHECK(out->record_bytes <= available_bytes && out->record_bytes % kAlignmentBytes == 0 &&
                    kHeaderBytes + out->payload.size() <= out->record_bytes,
                "a decoded entry lies within its input and is aligned");
  return DecodeResult::kOk;
}

}  // namespace raftlog::store::entry_format

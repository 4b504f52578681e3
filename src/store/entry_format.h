// Byte layout of one entry record in a segment (little-endian; docs/storage-format.md):
//
//   offset size field
//   0      4    magic 0x45464C52 ("RLFE" in file order)
//   4      4    crc32c over bytes [8, 56 + payload_size)  (header after the CRC, then payload)
//   8      1    format version (kEntryFormatVersion)
//   9      1    entry type (0 normal, 1 noop, 2 config; opaque to the store)
//   10     2    flags (opaque)
//   12     4    payload_size
//   16     8    index
//   24     8    term
//   32     8    client_id
//   40     8    sequence
//   48     8    generation: the open() count of the log instance that wrote the entry
//   56     n    payload
//   56+n   pad  zero bytes up to a multiple of 8 (records stay 8-byte aligned)
//
// A record whose first 4 bytes are zero marks the end of the written part of a segment (segments are
// preallocated and zero-filled, so unused space reads as zeros). The writer also stores such an END
// MARKER (4 zero bytes) right after every entry it appends, flushed together with the entry, so the
// end stays explicit even where a previous life left bytes behind a recovery cut.
//
// Generations never decrease along the log. Every open() starts a new, higher generation, so bytes
// left behind a recovery cut by an earlier life (valid-looking entries after a lost sector) can never
// be taken for a continuation of entries written later: their generation is lower. This is what lets
// recovery avoid zeroing (and reading) the whole preallocated tail of a segment.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "store/commit_log.h"

namespace raftlog::store::entry_format {

inline constexpr std::uint32_t kMagic = 0x45464C52U;
inline constexpr std::uint8_t kVersion = 1;
inline constexpr std::uint32_t kHeaderBytes = 56;
inline constexpr std::uint32_t kAlignmentBytes = 8;
inline constexpr std::uint32_t kEndMarkerBytes = 4;

constexpr std::uint64_t record_bytes(std::uint64_t payload_size) {
  return (kHeaderBytes + payload_size + kAlignmentBytes - 1) / kAlignmentBytes * kAlignmentBytes;
}

// Writes the record for (meta, payload) at `out`, which must have record_bytes(payload.size()) bytes.
// The magic is written LAST, after header and payload, so a record whose magic is present had its
// other bytes written first (within one process; power loss is covered by the CRC). Checks (always
// on) that the record decodes back to (meta, generation, payload size).
void encode(const EntryMeta& meta, std::uint64_t generation, std::string_view payload, char* out);

// Writes only the kHeaderBytes header of the record for (meta, payload) at `out`, with the
// CRC over the header and `payload` as encode() computes it, for a writer that writes the payload
// from where it already is (large entries: commit_log_append.cpp) instead of copying it next to the
// header. The record on disk is then header, payload, then zero padding up to record_bytes().
// Checks (always on) that the header reads back as (meta, generation, payload size).
void encode_header(const EntryMeta& meta, std::uint64_t generation, std::string_view payload,
                   char* out);

enum class DecodeResult {
  kOk,
  kEnd,        // magic is zero: end of the written part
  kTruncated,  // header or payload would extend past `available_bytes`
  kBadMagic,
  kBadVersion,
  kBadSize,  // payload_size above max_payload_bytes
  kBadChecksum,
};
const char* to_string(DecodeResult result);

struct Decoded {
  EntryMeta meta;
  std::uint64_t generation = 0;
  std::string_view payload;  // points into the input
  std::uint64_t record_bytes = 0;
};

// Validates and decodes the record at `in` (`available_bytes` readable). Verifies the CRC unless
// `verify_crc` is false (used only after the data was already verified, e.g. reads via the index).
// Bad bytes are a DecodeResult, never a failed check; on kOk the record lies within the input.
DecodeResult decode(const char* in, std::uint64_t available_bytes, std::uint32_t max_payload_bytes,
                    bool verify_crc, Decoded* out);

}  // namespace raftlog::store::entry_format

// The envelope: what an entry with a topic or keys carries at the start of its payload
// (docs/storage-format.md, "Entry envelope"). The store and the Raft core treat payloads as bytes;
// an entry whose flags have kEntryFlagEnvelope (src/replica/store_log_reader.h) holds, version 2
// (written since topic offsets are assigned by the leader):
//
//   offset size field
//   0      1    envelope version (kEnvelopeVersion = 2)
//   1      8    timestamp: the leader's append time, milliseconds since the Unix epoch (LE)
//   9      8    topic offset: the entry's offset in its topic's queue, set by the leader (LE);
//               0 and meaningless when the entry has no topic; at most kMaxTopicOffset
//   17     1    topic length t (0..kMaxTopicBytes; 0 = no topic)
//   18     t    topic (kTopicCharset)
//   18+t   1    key count k (0..kMaxKeysPerEntry)
//   ...         k times: key length (1 byte, 1..kMaxKeyBytes), key bytes
//   ...         the user's bytes (the rest of the payload)
//
// Version 1 (written before) has no topic offset field: the topic length follows the timestamp at
// offset 9. It still decodes (topic_offset absent: the offset is counted, see
// docs/design.md "Topic offsets"); it is never written any more.
//
// It has no checksum of its own: it is part of the entry's payload, which the entry's CRC32C covers
// on disk and the peer stream's checks in flight. Its decoder still trusts nothing: every length is
// checked against the bounds and the bytes available, so a hostile payload is an error, never a
// read past the end. Entries without a topic and keys carry no envelope at all: they stay exactly
// what they were before envelopes existed.
//
// Depends on the standard library only (it is linked by the replica, the server and src/derived).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace raftlog::derived {

inline constexpr std::uint8_t kEnvelopeVersion = 2;
inline constexpr std::uint8_t kEnvelopeVersionWithoutOffset = 1;
inline constexpr std::size_t kMaxTopicBytes = 128;
inline constexpr std::size_t kMaxKeysPerEntry = 16;
inline constexpr std::size_t kMaxKeyBytes = 128;
inline constexpr std::size_t kTimestampOffset = 1;
inline constexpr std::size_t kTimestampBytes = 8;
inline constexpr std::size_t kTopicOffsetOffset = 9;  // version 2 only
inline constexpr std::size_t kTopicOffsetBytes = 8;
// The highest topic offset an envelope may carry (2^62): far beyond any real topic, and low enough
// that offset + 1 and record arithmetic in src/derived never overflow on a forged value.
inline constexpr std::uint64_t kMaxTopicOffset = std::uint64_t{1} << 62;
inline constexpr std::size_t kFixedEnvelopeBytes = 1 + 8 + 8 + 1 + 1;
inline constexpr std::size_t kFixedEnvelopeBytesV1 = 1 + 8 + 1 + 1;
// The most bytes an envelope adds to an entry (it counts toward the entry and append size bounds).
inline constexpr std::size_t kMaxEnvelopeBytes =
    kFixedEnvelopeBytes + kMaxTopicBytes + kMaxKeysPerEntry * (1 + kMaxKeyBytes);

struct Envelope {
  std::uint64_t timestamp_ms = 0;
  std::string topic;              // empty: no topic
  std::vector<std::string> keys;  // at most kMaxKeysPerEntry
  friend bool operator==(const Envelope&, const Envelope&) = default;
};

// Why a topic or key is refused: "" when valid, else a sentence for an INVALID_ARGUMENT message.
// A topic is 1..kMaxTopicBytes of [A-Za-z0-9._-] starting with a letter or digit (it names a
// directory under derived/, so "." and ".." and slashes can never occur). A key is 1..kMaxKeyBytes
// of any bytes.
std::string topic_problem(std::string_view topic);
std::string keys_problem(const std::vector<std::string>& keys);

// The envelope's encoded size for `topic` and `keys` (which must be valid).
std::size_t envelope_bytes(std::string_view topic, const std::vector<std::string>& keys);

// Appends a version-2 envelope (topic offset 0: the leader stamps it), then `user_bytes`, to `out`.
// `topic` and `keys` must be valid (checked).
void encode_envelope(std::uint64_t timestamp_ms, std::string_view topic,
                     const std::vector<std::string>& keys, std::string_view user_bytes,
                     std::string* out);

enum class EnvelopeDecode {
  kOk,
  kTruncated,    // a length runs past the payload
  kBadVersion,   // unknown envelope version
  kBadTopic,     // too long or outside the charset
  kBadKeyCount,  // more than kMaxKeysPerEntry
  kBadKey,       // empty or too long
  kBadOffset,    // a topic offset above kMaxTopicOffset, or a non-zero one without a topic
};
const char* to_string(EnvelopeDecode result);

// What the replica needs of an envelope on its write path, decoded without allocating: every field
// and length is validated exactly as decode_envelope() does (keys included), the keys are only not
// collected.
struct EnvelopeHeader {
  std::uint8_t version = 0;
  std::uint64_t timestamp_ms = 0;
  bool has_topic_offset = false;  // version 2 with a topic
  std::uint64_t topic_offset = 0;
  std::string_view topic;  // points into the payload; empty: no topic
  std::size_t user_bytes_at = 0;
};
EnvelopeDecode decode_envelope_header(std::string_view payload, EnvelopeHeader* out);

struct DecodedEnvelope {
  std::uint8_t version = 0;
  std::uint64_t timestamp_ms = 0;
  bool has_topic_offset = false;  // version 2 with a topic
  std::uint64_t topic_offset = 0;
  std::string_view topic;  // point into the payload
  std::vector<std::string_view> keys;
  std::string_view user_bytes;
};

// Validates and decodes `payload`; on kOk every view lies within `payload`.
EnvelopeDecode decode_envelope(std::string_view payload, DecodedEnvelope* out);

// Overwrites the timestamp and the topic offset of a version-2 envelope in place (the leader stamps
// them when it proposes). False, and nothing written, unless `payload` decodes as a version-2
// envelope (decode_envelope_header) and `topic_offset` is at most kMaxTopicOffset (and 0 when the
// envelope has no topic).
bool stamp_envelope(std::string* payload, std::uint64_t timestamp_ms, std::uint64_t topic_offset);

// The bytes of an envelope entry that identify it for idempotent retries
// (src/replica/dedup_table.h): the payload from the topic length on, without the version, the
// timestamp and the topic offset, which the leader sets and a retry cannot know (and without the
// version, so that a retry of an append a version-1 leader wrote still matches). The whole payload
// when it is too short for its version's fixed fields or of an unknown version.
std::string_view envelope_identity(std::string_view payload);

}  // namespace raftlog::derived

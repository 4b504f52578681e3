// The envelope: what an entry with a topic or keys carries at the start of its payload
// (docs/storage-format.md, "Entry envelope"). The store and the Raft core treat payloads as bytes;
// an entry whose flags have kEntryFlagEnvelope (src/replica/store_log_reader.h) holds
//
//   offset size field
//   0      1    envelope version (kEnvelopeVersion)
//   1      8    timestamp: the leader's append time, milliseconds since the Unix epoch (LE)
//   9      1    topic length t (0..kMaxTopicBytes; 0 = no topic)
//   10     t    topic (kTopicCharset)
//   10+t   1    key count k (0..kMaxKeysPerEntry)
//   ...         k times: key length (1 byte, 1..kMaxKeyBytes), key bytes
//   ...         the user's bytes (the rest of the payload)
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

inline constexpr std::uint8_t kEnvelopeVersion = 1;
inline constexpr std::size_t kMaxTopicBytes = 128;
inline constexpr std::size_t kMaxKeysPerEntry = 16;
inline constexpr std::size_t kMaxKeyBytes = 128;
inline constexpr std::size_t kTimestampOffset = 1;
inline constexpr std::size_t kTimestampBytes = 8;
inline constexpr std::size_t kFixedEnvelopeBytes = 1 + 8 + 1 + 1;
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

// Appends the envelope, then `user_bytes`, to `out`. `topic` and `keys` must be valid (checked).
void encode_envelope(std::uint64_t timestamp_ms, std::string_view topic,
                     const std::vector<std::string>& keys, std::string_view user_bytes,
                     std::string* out);

// Overwrites the timestamp of an encoded envelope in place (the leader stamps it when it proposes).
// `payload` must be at least kFixedEnvelopeBytes long (checked).
void stamp_timestamp(std::string* payload, std::uint64_t timestamp_ms);

// The timestamp of an encoded envelope, or false when `payload` is too short or of another version.
bool peek_timestamp(std::string_view payload, std::uint64_t* timestamp_ms);

enum class EnvelopeDecode {
  kOk,
  kTruncated,    // a length runs past the payload
  kBadVersion,   // unknown envelope version
  kBadTopic,     // too long or outside the charset
  kBadKeyCount,  // more than kMaxKeysPerEntry
  kBadKey,       // empty or too long
};
const char* to_string(EnvelopeDecode result);

struct DecodedEnvelope {
  std::uint64_t timestamp_ms = 0;
  std::string_view topic;  // point into the payload
  std::vector<std::string_view> keys;
  std::string_view user_bytes;
};

// Validates and decodes `payload`; on kOk every view lies within `payload`.
EnvelopeDecode decode_envelope(std::string_view payload, DecodedEnvelope* out);

// The bytes of an entry that identify it for idempotent retries (src/replica/dedup_table.h): the
// payload without the timestamp, which the leader sets and a retry cannot know. Calls
// `visit(data, size)` for each part, in order.
template <typename Visit>
void visit_bytes_without_timestamp(std::string_view payload, Visit&& visit) {
  if (payload.size() < kTimestampOffset + kTimestampBytes) {
    visit(payload.data(), payload.size());
    return;
  }
  visit(payload.data(), kTimestampOffset);
  const std::size_t rest = kTimestampOffset + kTimestampBytes;
  visit(payload.data() + rest, payload.size() - rest);
}

}  // namespace raftlog::derived

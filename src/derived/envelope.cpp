#include "derived/envelope.h"

#include <cstring>
#include <stdexcept>

namespace raftlog::derived {
namespace {

void put_u64(char* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xFFU);
}

std::uint64_t get_u64(const char* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

bool topic_char(char c, bool first) {
  const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  return alnum || (!first && (c == '.' || c == '_' || c == '-'));
}

bool valid_topic(std::string_view topic) {
  if (topic.empty() || topic.size() > kMaxTopicBytes) return false;
  for (std::size_t i = 0; i < topic.size(); ++i) {
    if (!topic_char(topic[i], i == 0)) return false;
  }
  return true;
}

// Programmer errors only: callers validate with topic_problem()/keys_problem() first.
void require(bool condition, const char* what) {
  if (!condition) throw std::logic_error(what);
}

}  // namespace

std::string topic_problem(std::string_view topic) {
  if (topic.empty()) return "the topic is empty";
  if (topic.size() > kMaxTopicBytes) {
    return "the topic is " + std::to_string(topic.size()) + " bytes, more than the " +
           std::to_string(kMaxTopicBytes) + " allowed";
  }
  if (!valid_topic(topic)) {
    return "the topic may hold only letters, digits, '.', '_' and '-', and must start with a letter "
           "or digit";
  }
  return "";
}

std::string keys_problem(const std::vector<std::string>& keys) {
  if (keys.size() > kMaxKeysPerEntry) {
    return std::to_string(keys.size()) + " keys on one entry, more than the " +
           std::to_string(kMaxKeysPerEntry) + " allowed";
  }
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (keys[i].empty()) return "key " + std::to_string(i) + " is empty";
    if (keys[i].size() > kMaxKeyBytes) {
      return "key " + std::to_string(i) + " is " + std::to_string(keys[i].size()) +
             " bytes, more than the " + std::to_string(kMaxKeyBytes) + " allowed";
    }
  }
  return "";
}

std::size_t envelope_bytes(std::string_view topic, const std::vector<std::string>& keys) {
  std::size_t bytes = kFixedEnvelopeBytes + topic.size();
  for (const std::string& key : keys) bytes += 1 + key.size();
  return bytes;
}

void encode_envelope(std::uint64_t timestamp_ms, std::string_view topic,
                     const std::vector<std::string>& keys, std::string_view user_bytes,
                     std::string* out) {
  require(topic.empty() || valid_topic(topic), "encode_envelope: invalid topic");
  require(keys_problem(keys).empty(), "encode_envelope: invalid keys");
  const std::size_t start = out->size();
  out->resize(start + envelope_bytes(topic, keys));
  char* p = out->data() + start;
  *p++ = static_cast<char>(kEnvelopeVersion);
  put_u64(p, timestamp_ms);
  p += kTimestampBytes;
  put_u64(p, 0);  // the topic offset: the leader stamps it
  p += kTopicOffsetBytes;
  *p++ = static_cast<char>(topic.size());
  std::memcpy(p, topic.data(), topic.size());
  p += topic.size();
  *p++ = static_cast<char>(keys.size());
  for (const std::string& key : keys) {
    *p++ = static_cast<char>(key.size());
    std::memcpy(p, key.data(), key.size());
    p += key.size();
  }
  out->append(user_bytes);
}

const char* to_string(EnvelopeDecode result) {
  switch (result) {
    case EnvelopeDecode::kOk:
      return "ok";
    case EnvelopeDecode::kTruncated:
      return "truncated envelope";
    case EnvelopeDecode::kBadVersion:
      return "unknown envelope version";
    case EnvelopeDecode::kBadTopic:
      return "invalid topic in envelope";
    case EnvelopeDecode::kBadKeyCount:
      return "too many keys in envelope";
    case EnvelopeDecode::kBadKey:
      return "invalid key in envelope";
    case EnvelopeDecode::kBadOffset:
      return "invalid topic offset in envelope";
  }
  return "unknown";
}

namespace {

// The one decoder: both public decoders run it, so they accept exactly the same payloads. Calls
// `key(view)` for each key.
template <typename KeyVisit>
EnvelopeDecode walk_envelope(std::string_view payload, EnvelopeHeader* out, KeyVisit&& key) {
  if (payload.empty()) return EnvelopeDecode::kTruncated;
  const auto version = static_cast<std::uint8_t>(payload[0]);
  if (version != kEnvelopeVersion && version != kEnvelopeVersionWithoutOffset) {
    return EnvelopeDecode::kBadVersion;
  }
  const bool v2 = version == kEnvelopeVersion;
  if (payload.size() < (v2 ? kFixedEnvelopeBytes : kFixedEnvelopeBytesV1)) {
    return EnvelopeDecode::kTruncated;
  }
  out->version = version;
  out->timestamp_ms = get_u64(payload.data() + kTimestampOffset);
  std::size_t at = kTimestampOffset + kTimestampBytes;
  std::uint64_t topic_offset = 0;
  if (v2) {
    topic_offset = get_u64(payload.data() + at);
    at += kTopicOffsetBytes;
  }
  const std::size_t topic_size = static_cast<unsigned char>(payload[at++]);
  // The key count byte follows the topic: it must be there too.
  if (payload.size() - at < topic_size + 1) return EnvelopeDecode::kTruncated;
  out->topic = payload.substr(at, topic_size);
  if (topic_size != 0 && !valid_topic(out->topic)) return EnvelopeDecode::kBadTopic;
  if (topic_offset > kMaxTopicOffset || (topic_size == 0 && topic_offset != 0)) {
    return EnvelopeDecode::kBadOffset;
  }
  out->has_topic_offset = v2 && topic_size != 0;
  out->topic_offset = topic_offset;
  at += topic_size;
  const std::size_t key_count = static_cast<unsigned char>(payload[at++]);
  if (key_count > kMaxKeysPerEntry) return EnvelopeDecode::kBadKeyCount;
  for (std::size_t i = 0; i < key_count; ++i) {
    if (at >= payload.size()) return EnvelopeDecode::kTruncated;
    const std::size_t key_size = static_cast<unsigned char>(payload[at++]);
    if (key_size == 0 || key_size > kMaxKeyBytes) return EnvelopeDecode::kBadKey;
    if (payload.size() - at < key_size) return EnvelopeDecode::kTruncated;
    key(payload.substr(at, key_size));
    at += key_size;
  }
  out->user_bytes_at = at;
  return EnvelopeDecode::kOk;
}

}  // namespace

EnvelopeDecode decode_envelope_header(std::string_view payload, EnvelopeHeader* out) {
  return walk_envelope(payload, out, [](std::string_view) {});
}

EnvelopeDecode decode_envelope(std::string_view payload, DecodedEnvelope* out) {
  out->keys.clear();
  EnvelopeHeader header;
  const EnvelopeDecode result =
      walk_envelope(payload, &header, [&](std::string_view key) { out->keys.push_back(key); });
  if (result != EnvelopeDecode::kOk) return result;
  out->version = header.version;
  out->timestamp_ms = header.timestamp_ms;
  out->has_topic_offset = header.has_topic_offset;
  out->topic_offset = header.topic_offset;
  out->topic = header.topic;
  out->user_bytes = payload.substr(header.user_bytes_at);
  return EnvelopeDecode::kOk;
}

bool stamp_envelope(std::string* payload, std::uint64_t timestamp_ms, std::uint64_t topic_offset) {
  EnvelopeHeader header;
  if (decode_envelope_header(*payload, &header) != EnvelopeDecode::kOk) return false;
  if (header.version != kEnvelopeVersion || topic_offset > kMaxTopicOffset) return false;
  if (header.topic.empty() && topic_offset != 0) return false;
  put_u64(payload->data() + kTimestampOffset, timestamp_ms);
  put_u64(payload->data() + kTopicOffsetOffset, topic_offset);
  return true;
}

std::string_view envelope_identity(std::string_view payload) {
  if (payload.empty()) return payload;
  const auto version = static_cast<std::uint8_t>(payload[0]);
  std::size_t skip = 0;
  if (version == kEnvelopeVersion) {
    skip = kTopicOffsetOffset + kTopicOffsetBytes;
  } else if (version == kEnvelopeVersionWithoutOffset) {
    skip = kTimestampOffset + kTimestampBytes;
  }
  if (skip == 0 || payload.size() <= skip) return payload;
  return payload.substr(skip);
}

}  // namespace raftlog::derived

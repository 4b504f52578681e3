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
  p += 8;
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

void stamp_timestamp(std::string* payload, std::uint64_t timestamp_ms) {
  require(payload->size() >= kFixedEnvelopeBytes, "stamp_timestamp: not an envelope");
  put_u64(payload->data() + kTimestampOffset, timestamp_ms);
}

bool peek_timestamp(std::string_view payload, std::uint64_t* timestamp_ms) {
  if (payload.size() < kFixedEnvelopeBytes) return false;
  if (static_cast<std::uint8_t>(payload[0]) != kEnvelopeVersion) return false;
  *timestamp_ms = get_u64(payload.data() + kTimestampOffset);
  return true;
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
  }
  return "unknown";
}

EnvelopeDecode decode_envelope(std::string_view payload, DecodedEnvelope* out) {
  out->keys.clear();
  if (payload.empty()) return EnvelopeDecode::kTruncated;
  if (static_cast<std::uint8_t>(payload[0]) != kEnvelopeVersion) return EnvelopeDecode::kBadVersion;
  if (payload.size() < kFixedEnvelopeBytes) return EnvelopeDecode::kTruncated;
  out->timestamp_ms = get_u64(payload.data() + kTimestampOffset);
  std::size_t at = kTimestampOffset + kTimestampBytes;
  const std::size_t topic_size = static_cast<unsigned char>(payload[at++]);
  // The key count byte follows the topic: it must be there too.
  if (payload.size() - at < topic_size + 1) return EnvelopeDecode::kTruncated;
  out->topic = payload.substr(at, topic_size);
  if (topic_size != 0 && !valid_topic(out->topic)) return EnvelopeDecode::kBadTopic;
  at += topic_size;
  const std::size_t key_count = static_cast<unsigned char>(payload[at++]);
  if (key_count > kMaxKeysPerEntry) return EnvelopeDecode::kBadKeyCount;
  for (std::size_t i = 0; i < key_count; ++i) {
    if (at >= payload.size()) return EnvelopeDecode::kTruncated;
    const std::size_t key_size = static_cast<unsigned char>(payload[at++]);
    if (key_size == 0 || key_size > kMaxKeyBytes) return EnvelopeDecode::kBadKey;
    if (payload.size() - at < key_size) return EnvelopeDecode::kTruncated;
    out->keys.push_back(payload.substr(at, key_size));
    at += key_size;
  }
  out->user_bytes = payload.substr(at);
  return EnvelopeDecode::kOk;
}

}  // namespace raftlog::derived

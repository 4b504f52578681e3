// The entry envelope codec (src/derived/envelope.h): round trips, bounds, and hostile bytes.
#include "derived/envelope.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace raftlog::derived {
namespace {

std::string encoded(std::uint64_t timestamp, const std::string& topic,
                    const std::vector<std::string>& keys, const std::string& user) {
  std::string out;
  encode_envelope(timestamp, topic, keys, user, &out);
  return out;
}

TEST(Envelope, RoundTripsTopicKeysTimestampAndUserBytes) {
  const std::string payload = encoded(1'764'000'000'123, "orders", {"order-4711", "cust-9"}, "hi");
  EXPECT_EQ(payload.size(), envelope_bytes("orders", {"order-4711", "cust-9"}) + 2);
  DecodedEnvelope out;
  ASSERT_EQ(decode_envelope(payload, &out), EnvelopeDecode::kOk);
  EXPECT_EQ(out.timestamp_ms, 1'764'000'000'123U);
  EXPECT_EQ(out.topic, "orders");
  ASSERT_EQ(out.keys.size(), 2U);
  EXPECT_EQ(out.keys[0], "order-4711");
  EXPECT_EQ(out.keys[1], "cust-9");
  EXPECT_EQ(out.user_bytes, "hi");
}

TEST(Envelope, NoTopicNoKeysAndEmptyUserBytesRoundTrip) {
  const std::string payload = encoded(7, "", {}, "");
  EXPECT_EQ(payload.size(), kFixedEnvelopeBytes);
  DecodedEnvelope out;
  ASSERT_EQ(decode_envelope(payload, &out), EnvelopeDecode::kOk);
  EXPECT_EQ(out.timestamp_ms, 7U);
  EXPECT_TRUE(out.topic.empty());
  EXPECT_TRUE(out.keys.empty());
  EXPECT_TRUE(out.user_bytes.empty());
}

TEST(Envelope, StampTheTimestampAndTopicOffsetInPlace) {
  std::string payload = encoded(0, "t", {"k"}, "body");
  ASSERT_TRUE(stamp_envelope(&payload, 99, 41));
  EnvelopeHeader header;
  ASSERT_EQ(decode_envelope_header(payload, &header), EnvelopeDecode::kOk);
  EXPECT_EQ(header.version, kEnvelopeVersion);
  EXPECT_EQ(header.timestamp_ms, 99U);
  EXPECT_TRUE(header.has_topic_offset);
  EXPECT_EQ(header.topic_offset, 41U);
  EXPECT_EQ(header.topic, "t");
  DecodedEnvelope out;
  ASSERT_EQ(decode_envelope(payload, &out), EnvelopeDecode::kOk);
  EXPECT_EQ(out.timestamp_ms, 99U);
  EXPECT_EQ(out.topic_offset, 41U);
  EXPECT_EQ(out.user_bytes, "body");
  EXPECT_EQ(payload.substr(header.user_bytes_at), "body");
}

// Stamping checks what it writes into: unchecked bytes are never stamped.
TEST(Envelope, StampingRefusesAnythingButAValidVersionTwoEnvelope) {
  std::string short_payload = "short";
  EXPECT_FALSE(stamp_envelope(&short_payload, 1, 0));
  EXPECT_EQ(short_payload, "short");
  std::string bad_key = encoded(0, "t", {"k"}, "");
  bad_key[kFixedEnvelopeBytes + 1] = 0;  // the key's length byte (after "t" and the key count)
  const std::string before = bad_key;
  EXPECT_FALSE(stamp_envelope(&bad_key, 1, 0));
  EXPECT_EQ(bad_key, before);
  std::string no_topic = encoded(0, "", {"k"}, "");
  EXPECT_FALSE(stamp_envelope(&no_topic, 1, 5));  // an offset needs a topic
  EXPECT_TRUE(stamp_envelope(&no_topic, 1, 0));
  std::string topic = encoded(0, "t", {}, "");
  EXPECT_FALSE(stamp_envelope(&topic, 1, kMaxTopicOffset + 1));
  EXPECT_TRUE(stamp_envelope(&topic, 1, kMaxTopicOffset));
}

TEST(Envelope, VersionOneStillDecodesWithoutATopicOffset) {
  std::string v1;
  v1.push_back(static_cast<char>(kEnvelopeVersionWithoutOffset));
  for (int i = 0; i < 8; ++i) v1.push_back(static_cast<char>(i == 0 ? 7 : 0));  // timestamp 7
  v1 += std::string("\x06orders\x01\x03key", 12);
  v1 += "body";
  DecodedEnvelope out;
  ASSERT_EQ(decode_envelope(v1, &out), EnvelopeDecode::kOk);
  EXPECT_EQ(out.version, kEnvelopeVersionWithoutOffset);
  EXPECT_EQ(out.timestamp_ms, 7U);
  EXPECT_FALSE(out.has_topic_offset);
  EXPECT_EQ(out.topic, "orders");
  ASSERT_EQ(out.keys.size(), 1U);
  EXPECT_EQ(out.keys[0], "key");
  EXPECT_EQ(out.user_bytes, "body");
  // A retry of that append reaches a version-2 leader as a version-2 envelope: the same identity.
  std::string v2 = encoded(123, "orders", {"key"}, "body");
  ASSERT_TRUE(stamp_envelope(&v2, 456, 9));
  EXPECT_EQ(envelope_identity(v1), envelope_identity(v2));
  EXPECT_NE(envelope_identity(v1), envelope_identity(encoded(0, "orders", {"key"}, "other")));
  // Version 1 is never stamped (the leader writes version 2 only).
  EXPECT_FALSE(stamp_envelope(&v1, 1, 0));
}

TEST(Envelope, AnOffsetOutOfBoundsOrWithoutATopicIsRefused) {
  std::string payload = encoded(0, "t", {}, "");
  for (int i = 0; i < 8; ++i) payload[kTopicOffsetOffset + i] = static_cast<char>(0xFF);
  DecodedEnvelope out;
  EXPECT_EQ(decode_envelope(payload, &out), EnvelopeDecode::kBadOffset);
  std::string no_topic = encoded(0, "", {}, "");
  no_topic[kTopicOffsetOffset] = 1;
  EXPECT_EQ(decode_envelope(no_topic, &out), EnvelopeDecode::kBadOffset);
}

TEST(Envelope, TopicAndKeyBoundsAreRefusedWithAReason) {
  EXPECT_EQ(topic_problem("orders.eu-1_a"), "");
  EXPECT_NE(topic_problem(""), "");
  EXPECT_NE(topic_problem(std::string(kMaxTopicBytes + 1, 'a')), "");
  EXPECT_EQ(topic_problem(std::string(kMaxTopicBytes, 'a')), "");
  for (const char* bad : {".", "..", "a/b", "-x", "_x", "a b", "caf\xc3\xa9", "a\n"}) {
    EXPECT_NE(topic_problem(bad), "") << bad;
  }
  EXPECT_EQ(keys_problem(std::vector<std::string>(kMaxKeysPerEntry, "k")), "");
  EXPECT_NE(keys_problem(std::vector<std::string>(kMaxKeysPerEntry + 1, "k")), "");
  EXPECT_NE(keys_problem({""}), "");
  EXPECT_NE(keys_problem({std::string(kMaxKeyBytes + 1, 'k')}), "");
  EXPECT_EQ(keys_problem({std::string(kMaxKeyBytes, '\0')}), "");  // keys are any bytes
  const std::vector<std::string> widest(kMaxKeysPerEntry, std::string(kMaxKeyBytes, 'k'));
  EXPECT_EQ(envelope_bytes(std::string(kMaxTopicBytes, 't'), widest), kMaxEnvelopeBytes);
}

// Every cut inside the envelope (before the user's bytes begin) is refused; a cut in the user's
// bytes decodes to fewer user bytes: only the entry's CRC can tell (it covers the whole payload).
TEST(Envelope, EveryTruncationOfTheEnvelopeIsRefused) {
  const std::string payload = encoded(5, "topic", {"a", "bcd"}, "user");
  const std::size_t envelope = envelope_bytes("topic", {"a", "bcd"});
  for (std::size_t size = 0; size < envelope; ++size) {
    DecodedEnvelope out;
    EXPECT_NE(decode_envelope(std::string_view(payload).substr(0, size), &out), EnvelopeDecode::kOk)
        << size;
  }
  for (std::size_t size = envelope; size <= payload.size(); ++size) {
    DecodedEnvelope out;
    ASSERT_EQ(decode_envelope(std::string_view(payload).substr(0, size), &out), EnvelopeDecode::kOk);
    EXPECT_EQ(out.user_bytes, payload.substr(envelope, size - envelope));
  }
}

// Every single-byte change in the envelope is either refused or decodes to views that stay inside
// the payload; which changes are caught depends on the field (a topic letter changed to another
// letter is a valid topic): the entry's CRC32C is what catches those on disk.
TEST(Envelope, EveryByteFlipIsRefusedOrStaysInBounds) {
  const std::string payload = encoded(5, "topic", {"a", "bcd"}, "user");
  const std::size_t envelope = envelope_bytes("topic", {"a", "bcd"});
  int refused = 0;
  int refused_version = 0;
  for (std::size_t at = 0; at < envelope; ++at) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string hostile = payload;
      hostile[at] = static_cast<char>(hostile[at] ^ (1 << bit));
      DecodedEnvelope out;
      if (decode_envelope(hostile, &out) != EnvelopeDecode::kOk) {
        ++refused;
        if (at == 0) ++refused_version;
        continue;
      }
      const char* begin = hostile.data();
      const char* end = hostile.data() + hostile.size();
      auto inside = [&](std::string_view view) {
        return view.empty() || (view.data() >= begin && view.data() + view.size() <= end);
      };
      EXPECT_TRUE(inside(out.topic) && inside(out.user_bytes)) << at << ":" << bit;
      for (std::string_view key : out.keys) EXPECT_TRUE(inside(key)) << at << ":" << bit;
      EXPECT_TRUE(out.topic.empty() || topic_problem(out.topic).empty());
    }
  }
  // Every flip of the version byte is refused; so are many of the lengths and topic bytes (the
  // timestamp's 64 bits are never: any value is a time).
  EXPECT_EQ(refused_version, 8);
  EXPECT_GT(refused, 8 + 16);
}

TEST(Envelope, AHostilePayloadNeverReadsOutOfBounds) {
  // Lengths claiming more than there is, at every field.
  const std::vector<std::string> hostile = {
      std::string("\x01", 1) + std::string(8, '\0') + "\xff",
      std::string("\x01", 1) + std::string(8, '\0') + "\x01" + "a",
      std::string("\x01", 1) + std::string(8, '\0') + "\x00\x01\x05" + "ab",
      std::string("\x01", 1) + std::string(8, '\0') + std::string("\x00\x11", 2),
      std::string("\x01", 1) + std::string(8, '\0') + std::string("\x00\x01\x00", 3),
      std::string("\x02", 1) + std::string(20, 'x'),
      std::string("\x02", 1) + std::string(16, '\0') + "\x05" + "ab",
      std::string("\x03", 1) + std::string(20, '\0'),
  };
  for (const std::string& bytes : hostile) {
    DecodedEnvelope out;
    EXPECT_NE(decode_envelope(bytes, &out), EnvelopeDecode::kOk);
  }
}

}  // namespace
}  // namespace raftlog::derived

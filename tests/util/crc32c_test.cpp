#include "util/crc32c.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <random>
#include <string>

namespace raftlog::util {
namespace {

// The Raft core's former private CRC32C (src/raft/crc32c.cpp before the merge, byte-at-a-time table),
// kept as the reference: ConfState payloads already in logs were checksummed with it, so the shared
// implementation must give the same value for every input, on both of its paths.
std::uint32_t former_raft_crc32c(const void* data, std::size_t size_bytes) {
  static const std::array<std::uint32_t, 256> table = [] {
    std::array<std::uint32_t, 256> made{};
    for (std::uint32_t byte = 0; byte < 256; ++byte) {
      std::uint32_t crc = byte;
      for (int bit = 0; bit < 8; ++bit) crc = (crc & 1u) != 0 ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
      made[byte] = crc;
    }
    return made;
  }();
  const auto* bytes = static_cast<const unsigned char*>(data);
  std::uint32_t crc = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < size_bytes; ++i) crc = table[(crc ^ bytes[i]) & 0xFFu] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

TEST(Crc32c, KnownVectors) {
  // RFC 3720 / iSCSI test vectors and the classic check value.
  EXPECT_EQ(crc32c::value("123456789"), 0xE3069283U);
  EXPECT_EQ(crc32c::value(std::string(32, '\0')), 0x8A9136AAU);
  EXPECT_EQ(crc32c::value(std::string(32, '\xff')), 0x62A8AB43U);
  std::string ascending(32, '\0');
  for (int i = 0; i < 32; ++i) ascending[static_cast<std::size_t>(i)] = static_cast<char>(i);
  EXPECT_EQ(crc32c::value(ascending), 0x46DD794EU);
  EXPECT_EQ(crc32c::value("", 0), 0U);
}

TEST(Crc32c, PortableAndHardwareAgreeOnVectorsAndRandomData) {
  EXPECT_EQ(crc32c::extend_portable(0, "123456789", 9), 0xE3069283U);
  EXPECT_EQ(crc32c::extend_hardware(0, "123456789", 9), 0xE3069283U);
  std::mt19937_64 rng(42);
  for (int round = 0; round < 300; ++round) {
    // Sizes on both sides of the 3-stream thresholds (3 x 256 and 3 x 8192 bytes).
    const std::size_t limit = round % 3 == 0 ? 100000 : (round % 3 == 1 ? 30000 : 2000);
    std::string data(rng() % limit, '\0');
    for (char& c : data) c = static_cast<char>(rng());
    const std::size_t offset = data.empty() ? 0 : rng() % data.size();  // unaligned starts too
    const char* p = data.data() + offset;
    const std::size_t n = data.size() - offset;
    ASSERT_EQ(crc32c::extend_portable(0, p, n), crc32c::extend_hardware(0, p, n)) << round;
  }
  std::printf("SSE4.2 crc32 instruction available: %s\n",
              crc32c::hardware_available() ? "yes" : "no");
}

TEST(Crc32c, MatchesTheRaftCoresFormerImplementationOnEveryPath) {
  EXPECT_EQ(former_raft_crc32c("123456789", 9), 0xE3069283U);  // the reference itself is right
  std::mt19937_64 rng(7);
  for (int round = 0; round < 200; ++round) {
    // Short config-sized payloads and lengths past the 3-stream thresholds (3 x 256 and 3 x 8192 bytes).
    const std::size_t limit = round % 2 == 0 ? 200 : 30000;
    std::string data(rng() % limit, '\0');
    for (char& c : data) c = static_cast<char>(rng());
    const std::uint32_t expected = former_raft_crc32c(data.data(), data.size());
    ASSERT_EQ(crc32c::value(data), expected) << round;
    ASSERT_EQ(crc32c::extend_portable(0, data.data(), data.size()), expected) << round;
    ASSERT_EQ(crc32c::extend_hardware(0, data.data(), data.size()), expected) << round;
  }
}

TEST(Crc32c, ExtendEqualsWholeBuffer) {
  const std::string data = "The quick brown fox jumps over the lazy dog, repeatedly and at length.";
  for (std::size_t split = 0; split <= data.size(); ++split) {
    const std::uint32_t first = crc32c::value(data.data(), split);
    EXPECT_EQ(crc32c::extend(first, data.data() + split, data.size() - split), crc32c::value(data));
    const std::uint32_t first_portable = crc32c::extend_portable(0, data.data(), split);
    EXPECT_EQ(crc32c::extend_portable(first_portable, data.data() + split, data.size() - split),
              crc32c::value(data));
  }
}

}  // namespace
}  // namespace raftlog::util

#include "sim/prng.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>

namespace raftlog::sim {
namespace {

TEST(SimSplitMix64, MatchesTheReferenceSequence) {
  // Reference outputs of splitmix64 from state 0 (Vigna's published generator).
  std::uint64_t state = 0;
  EXPECT_EQ(splitmix64(state), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(splitmix64(state), 0x6e789e6aa1b965f4ULL);
}

TEST(SimPrng, SameSeedSameSequenceDifferentSeedDifferentSequence) {
  Prng a(42);
  Prng b(42);
  Prng c(43);
  int differences = 0;
  for (int i = 0; i < 1000; ++i) {
    const std::uint64_t value = a.next_u64();
    EXPECT_EQ(value, b.next_u64());
    if (value != c.next_u64()) ++differences;
  }
  EXPECT_GT(differences, 990);
}

TEST(SimPrng, BelowStaysInRangeAndCoversIt) {
  Prng prng(7);
  std::array<int, 10> counts{};
  constexpr int kDraws = 100'000;
  for (int i = 0; i < kDraws; ++i) {
    const std::uint64_t value = prng.below(10);
    ASSERT_LT(value, 10U);
    ++counts[value];
  }
  // Each bucket expects 10,000; 5 sigma is about 475.
  for (int count : counts) {
    EXPECT_GT(count, 9'400);
    EXPECT_LT(count, 10'600);
  }
  EXPECT_EQ(prng.below(1), 0U);
}

TEST(SimPrng, BetweenIsInclusive) {
  Prng prng(9);
  bool saw_low = false;
  bool saw_high = false;
  for (int i = 0; i < 10'000; ++i) {
    const std::uint64_t value = prng.between(5, 8);
    ASSERT_GE(value, 5U);
    ASSERT_LE(value, 8U);
    saw_low |= value == 5;
    saw_high |= value == 8;
  }
  EXPECT_TRUE(saw_low);
  EXPECT_TRUE(saw_high);
  EXPECT_EQ(prng.between(3, 3), 3U);
}

TEST(SimPrng, ChanceHonoursItsExtremesAndRate) {
  Prng prng(11);
  int hits = 0;
  for (int i = 0; i < 100'000; ++i) {
    ASSERT_FALSE(prng.chance_per_million(0));
    ASSERT_TRUE(prng.chance_per_million(1'000'000));
    if (prng.chance_per_million(250'000)) ++hits;
  }
  EXPECT_GT(hits, 24'000);
  EXPECT_LT(hits, 26'000);
}

TEST(SimPrng, DerivedSeedsAreDeterministicAndDistinct) {
  Prng a(5);
  Prng b(5);
  const std::uint64_t first = a.derive_seed();
  EXPECT_EQ(first, b.derive_seed());
  EXPECT_NE(first, a.derive_seed());
}

}  // namespace
}  // namespace raftlog::sim

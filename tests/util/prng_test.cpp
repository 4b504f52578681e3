#include "util/prng.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string>
#include <type_traits>

namespace raftlog::util {
namespace {

TEST(SplitMix64, MatchesTheReferenceSequence) {
  // Reference outputs of splitmix64 from state 0 (Vigna's published generator).
  std::uint64_t state = 0;
  EXPECT_EQ(splitmix64(state), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(splitmix64(state), 0x6e789e6aa1b965f4ULL);
  SplitMix64Prng prng(0);
  EXPECT_EQ(prng.next_u64(), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(prng.next_u64(), 0x6e789e6aa1b965f4ULL);
}

// Both streams are pinned: a simulator seed names one run (the simulator's Prng, and the cores' election
// timeouts drawn from SplitMix64Prng). These values were recorded from src/sim/prng.cpp and
// src/raft/prng.cpp before the two were merged into src/util; a change here changes every seed's run.
TEST(Prng, StreamsMatchTheGeneratorsTheyReplaced) {
  Prng simulator(42);
  EXPECT_EQ(simulator.next_u64(), 0x15780b2e0c2ec716ULL);
  EXPECT_EQ(simulator.next_u64(), 0x6104d9866d113a7eULL);
  EXPECT_EQ(simulator.next_u64(), 0xae17533239e499a1ULL);
  const std::array<std::uint64_t, 8> simulator_below_10{2, 2, 9, 3, 6, 4, 4, 7};
  Prng simulator_again(42);
  for (std::uint64_t expected : simulator_below_10) EXPECT_EQ(simulator_again.below(10), expected);

  // The Raft core seeds its generator with random_seed ^ (id * 0x9E3779B97F4A7C15); here seed 42, id 3.
  const std::uint64_t core_seed = 42 ^ (3 * 0x9E3779B97F4A7C15ULL);
  SplitMix64Prng core(core_seed);
  EXPECT_EQ(core.next_u64(), 0x6545d3b48b05c974ULL);
  EXPECT_EQ(core.next_u64(), 0xd898a231b906c08fULL);
  EXPECT_EQ(core.next_u64(), 0xd38688dd05123b1eULL);
  const std::array<std::uint64_t, 8> core_below_10{2, 5, 4, 9, 4, 1, 4, 5};
  SplitMix64Prng core_again(core_seed);
  for (std::uint64_t expected : core_below_10) EXPECT_EQ(core_again.below(10), expected);
}

// The uniform draws are shared by both generators, so each property is checked over both.
template <typename Generator>
class UniformDraws : public ::testing::Test {};
using Generators = ::testing::Types<Prng, SplitMix64Prng>;
struct GeneratorName {
  template <typename Generator>
  static std::string GetName(int) {
    return std::is_same_v<Generator, Prng> ? "Prng" : "SplitMix64Prng";
  }
};
TYPED_TEST_SUITE(UniformDraws, Generators, GeneratorName);

TYPED_TEST(UniformDraws, SameSeedSameSequenceDifferentSeedDifferentSequence) {
  TypeParam a(42);
  TypeParam b(42);
  TypeParam c(43);
  int differences = 0;
  for (int i = 0; i < 1000; ++i) {
    const std::uint64_t value = a.next_u64();
    EXPECT_EQ(value, b.next_u64());
    if (value != c.next_u64()) ++differences;
  }
  EXPECT_GT(differences, 990);
}

TYPED_TEST(UniformDraws, BelowStaysInRangeAndCoversIt) {
  TypeParam prng(7);
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

TYPED_TEST(UniformDraws, BetweenIsInclusive) {
  TypeParam prng(9);
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

TYPED_TEST(UniformDraws, ChanceHonoursItsExtremesAndRate) {
  TypeParam prng(11);
  int hits = 0;
  for (int i = 0; i < 100'000; ++i) {
    ASSERT_FALSE(prng.chance_per_million(0));
    ASSERT_TRUE(prng.chance_per_million(1'000'000));
    if (prng.chance_per_million(250'000)) ++hits;
  }
  EXPECT_GT(hits, 24'000);
  EXPECT_LT(hits, 26'000);
}

TYPED_TEST(UniformDraws, DerivedSeedsAreDeterministicAndDistinct) {
  TypeParam a(5);
  TypeParam b(5);
  const std::uint64_t first = a.derive_seed();
  EXPECT_EQ(first, b.derive_seed());
  EXPECT_NE(first, a.derive_seed());
}

// A zero bound has no valid answer (and `% 0` is undefined): the check stops the process in release
// builds too, as the Raft core's own assertion did before the merge.
TYPED_TEST(UniformDraws, ABrokenPreconditionStopsTheProcess) {
  TypeParam prng(13);
  EXPECT_DEATH(prng.below(0), "positive bound");
  EXPECT_DEATH(prng.between(2, 1), "low <= high");
  EXPECT_DEATH(prng.chance_per_million(1'000'001), "at most 1,000,000");
}

}  // namespace
}  // namespace raftlog::util

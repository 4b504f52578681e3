#include "sim/prng.h"

#include <cassert>

namespace raftlog::sim {

std::uint64_t splitmix64(std::uint64_t& state) {
  state += 0x9e3779b97f4a7c15ULL;
  std::uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

namespace {
std::uint64_t rotate_left(std::uint64_t value, int bits) { return (value << bits) | (value >> (64 - bits)); }
}  // namespace

Prng::Prng(std::uint64_t seed) {
  std::uint64_t mixer = seed;
  for (std::uint64_t& word : state_) word = splitmix64(mixer);
  // xoshiro's one forbidden state is all zeros; splitmix64 never yields four zero words in a row.
  assert((state_[0] | state_[1] | state_[2] | state_[3]) != 0);
}

std::uint64_t Prng::next_u64() {
  const std::uint64_t result = rotate_left(state_[1] * 5, 7) * 9;
  const std::uint64_t shifted = state_[1] << 17;
  state_[2] ^= state_[0];
  state_[3] ^= state_[1];
  state_[1] ^= state_[2];
  state_[0] ^= state_[3];
  state_[2] ^= shifted;
  state_[3] = rotate_left(state_[3], 45);
  return result;
}

std::uint64_t Prng::below(std::uint64_t bound) {
  assert(bound > 0);
  // Reject the top sliver of the range that would make `value % bound` favour small results.
  const std::uint64_t limit = UINT64_MAX - (UINT64_MAX % bound);
  // Each draw is rejected with probability < 1/2, so 64 draws all failing is < 2^-64: a bound, not a hope.
  for (int attempt = 0; attempt < 64; ++attempt) {
    const std::uint64_t value = next_u64();
    if (value < limit) return value % bound;
  }
  return next_u64() % bound;
}

std::uint64_t Prng::between(std::uint64_t low, std::uint64_t high) {
  assert(low <= high);
  if (high - low == UINT64_MAX) return next_u64();
  return low + below(high - low + 1);
}

bool Prng::chance_per_million(std::uint32_t per_million) {
  assert(per_million <= 1'000'000);
  return below(1'000'000) < per_million;
}

std::uint64_t Prng::derive_seed() {
  std::uint64_t mixer = next_u64();
  return splitmix64(mixer);
}

}  // namespace raftlog::sim

#include "util/prng.h"

namespace raftlog::util {

std::uint64_t splitmix64(std::uint64_t& state) {
  state += 0x9e3779b97f4a7c15ULL;
  std::uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

namespace {
std::uint64_t rotate_left(std::uint64_t value, int bits) {
  return (value << bits) | (value >> (64 - bits));
}
}  // namespace

Xoshiro256Bits::Xoshiro256Bits(std::uint64_t seed) {
  std::uint64_t mixer = seed;
  for (std::uint64_t& word : state_) word = splitmix64(mixer);
  // xoshiro's one forbidden state is all zeros; splitmix64 never yields four zero words in a row.
  RAFTLOG_CHECK((state_[0] | state_[1] | state_[2] | state_[3]) != 0,
                "xoshiro256** state is all zeros");
}

std::uint64_t Xoshiro256Bits::next_u64() {
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

}  // namespace raftlog::util

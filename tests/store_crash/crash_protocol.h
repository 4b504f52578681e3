// What the crash-test writer (a child process) tells the test (its parent) through a pipe, and the
// deterministic payloads both sides agree on.
//
// The writer sends one AckRecord per append only after append() returned in sync mode, i.e. after the
// entry is durable. Records are 32 bytes, below PIPE_BUF, so concurrent writer threads never
// interleave inside a record. The parent may SIGKILL the writer at any moment; a record is either
// fully in the pipe (the entry was acknowledged) or absent.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "util/prng.h"

namespace raftlog::crash_test {

struct AckRecord {
  std::uint64_t index = 0;
  std::uint64_t term = 0;
  std::uint64_t payload_hash = 0;  // fnv1a64 of the payload
  std::uint32_t payload_size = 0;
  std::uint32_t magic = 0;  // kAckMagic: guards against a misaligned or garbage stream
};
static_assert(sizeof(AckRecord) == 32);

inline constexpr std::uint32_t kAckMagic = 0xAC4ED001;

inline std::uint64_t fnv1a64(std::string_view bytes) {
  std::uint64_t hash = 14695981039346656037ULL;
  for (const char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ULL;
  }
  return hash;
}

// Payload of `index` for a run seeded with `seed`: 1..max_bytes pseudo-random bytes.
inline std::string make_payload(std::uint64_t seed, std::uint64_t index, std::uint64_t max_bytes) {
  std::uint64_t state = seed * 0x100000001B3ULL ^ index;
  const std::size_t size = 1 + static_cast<std::size_t>(util::splitmix64(state) % max_bytes);
  std::string payload(size, '\0');
  for (std::size_t i = 0; i < size; i += 8) {
    const std::uint64_t word = util::splitmix64(state);
    for (std::size_t b = 0; b < 8 && i + b < size; ++b)
      payload[i + b] = static_cast<char>(word >> (8 * b));
  }
  return payload;
}

}  // namespace raftlog::crash_test

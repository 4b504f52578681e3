#include "util/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace raftlog::util::crc32c {
namespace {

constexpr std::uint32_t kPolynomial = 0x82F63B78U;

// Slicing-by-8 tables: table[k][b] is the CRC of byte b followed by k zero bytes.
struct Tables {
  std::array<std::array<std::uint32_t, 256>, 8> t{};
  constexpr Tables() {
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t crc = i;
      for (int bit = 0; bit < 8; ++bit) crc = (crc & 1U) ? (crc >> 1) ^ kPolynomial : crc >> 1;
      t[0][i] = crc;
    }
    for (std::uint32_t i = 0; i < 256; ++i) {
      for (std::size_t k = 1; k < 8; ++k) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xFFU];
    }
  }
};
constexpr Tables kTables;

// Shifting a raw CRC register value over n zero bytes is linear in the register bits, so it is a
// table lookup per register byte. Used to combine three independent crc32 instruction streams (the
// instruction has 3-cycle latency but 1-cycle throughput: one dependent chain runs at a third of
// the possible speed). Same technique as Mark Adler's crc32c.c.
struct ShiftTable {
  std::array<std::array<std::uint32_t, 256>, 4> t{};
  explicit ShiftTable(std::size_t zero_bytes) {
    std::array<std::uint32_t, 32> bit_shift{};
    for (int bit = 0; bit < 32; ++bit) {
      std::uint32_t crc = 1U << bit;
      for (std::size_t i = 0; i < zero_bytes; ++i) crc = kTables.t[0][crc & 0xFFU] ^ (crc >> 8);
      bit_shift[static_cast<std::size_t>(bit)] = crc;
    }
    for (std::size_t k = 0; k < 4; ++k) {
      for (std::uint32_t b = 0; b < 256; ++b) {
        std::uint32_t value = 0;
        for (std::uint32_t j = 0; j < 8; ++j) {
          if (b & (1U << j)) value ^= bit_shift[k * 8 + j];
        }
        t[k][b] = value;
      }
    }
  }
  std::uint32_t shift(std::uint32_t crc) const {
    return t[0][crc & 0xFFU] ^ t[1][(crc >> 8) & 0xFFU] ^ t[2][(crc >> 16) & 0xFFU] ^
           t[3][crc >> 24];
  }
};

constexpr std::size_t kLongStreamBytes = 8192;
constexpr std::size_t kShortStreamBytes = 256;

#if defined(__x86_64__)
const ShiftTable& long_shift() {
  static const ShiftTable table(kLongStreamBytes);
  return table;
}
const ShiftTable& short_shift() {
  static const ShiftTable table(kShortStreamBytes);
  return table;
}

// Three interleaved streams of `stream_bytes` each, combined by shifting.
__attribute__((target("sse4.2"))) inline std::uint64_t crc_three_streams(std::uint64_t c0,
                                                                         const unsigned char*& p,
                                                                         std::size_t& size,
                                                                         std::size_t stream_bytes,
                                                                         const ShiftTable& shift) {
  while (size >= 3 * stream_bytes) {
    std::uint64_t c1 = 0;
    std::uint64_t c2 = 0;
    const unsigned char* end = p + stream_bytes;
    while (p < end) {
      std::uint64_t w0;
      std::uint64_t w1;
      std::uint64_t w2;
      std::memcpy(&w0, p, 8);
      std::memcpy(&w1, p + stream_bytes, 8);
      std::memcpy(&w2, p + 2 * stream_bytes, 8);
      c0 = _mm_crc32_u64(c0, w0);
      c1 = _mm_crc32_u64(c1, w1);
      c2 = _mm_crc32_u64(c2, w2);
      p += 8;
    }
    c0 = shift.shift(static_cast<std::uint32_t>(c0)) ^ c1;
    c0 = shift.shift(static_cast<std::uint32_t>(c0)) ^ c2;
    p += 2 * stream_bytes;
    size -= 3 * stream_bytes;
  }
  return c0;
}

__attribute__((target("sse4.2"))) std::uint32_t extend_sse42(std::uint32_t crc, const void* data,
                                                             std::size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t c = ~crc;
  c = crc_three_streams(c, p, size, kLongStreamBytes, long_shift());
  c = crc_three_streams(c, p, size, kShortStreamBytes, short_shift());
  while (size >= 8) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);
    c = _mm_crc32_u64(c, word);
    p += 8;
    size -= 8;
  }
  auto c32 = static_cast<std::uint32_t>(c);
  while (size > 0) {
    c32 = _mm_crc32_u8(c32, *p);
    ++p;
    --size;
  }
  return ~c32;
}
#endif

bool detect_hardware() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("sse4.2");
#else
  return false;
#endif
}

const bool kHardware = detect_hardware();

}  // namespace

std::uint32_t extend_portable(std::uint32_t crc, const void* data, std::size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint32_t c = ~crc;
  const auto& t = kTables.t;
  while (size >= 8) {
    std::uint32_t lo;
    std::uint32_t hi;
    std::memcpy(&lo, p, 4);  // little-endian hosts only (x86-64, aarch64)
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;
    c = t[7][lo & 0xFFU] ^ t[6][(lo >> 8) & 0xFFU] ^ t[5][(lo >> 16) & 0xFFU] ^ t[4][lo >> 24] ^
        t[3][hi & 0xFFU] ^ t[2][(hi >> 8) & 0xFFU] ^ t[1][(hi >> 16) & 0xFFU] ^ t[0][hi >> 24];
    p += 8;
    size -= 8;
  }
  while (size > 0) {
    c = t[0][(c ^ *p) & 0xFFU] ^ (c >> 8);
    ++p;
    --size;
  }
  return ~c;
}

std::uint32_t extend_hardware(std::uint32_t crc, const void* data, std::size_t size) {
#if defined(__x86_64__)
  if (kHardware) return extend_sse42(crc, data, size);
#endif
  return extend_portable(crc, data, size);
}

bool hardware_available() { return kHardware; }

std::uint32_t extend(std::uint32_t crc, const void* data, std::size_t size) {
  return kHardware ? extend_hardware(crc, data, size) : extend_portable(crc, data, size);
}

}  // namespace raftlog::util::crc32c

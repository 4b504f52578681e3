// Little-endian fixed-width field access for on-disk formats (unaligned-safe via memcpy).
// raftlog targets little-endian hosts (x86-64, aarch64); the static_assert keeps it honest.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace raftlog::store {

static_assert(std::endian::native == std::endian::little, "on-disk formats assume little-endian");

inline void put_u8(char* p, std::uint8_t v) { std::memcpy(p, &v, 1); }
inline void put_u16(char* p, std::uint16_t v) { std::memcpy(p, &v, 2); }
inline void put_u32(char* p, std::uint32_t v) { std::memcpy(p, &v, 4); }
inline void put_u64(char* p, std::uint64_t v) { std::memcpy(p, &v, 8); }
inline std::uint8_t get_u8(const char* p) {
  std::uint8_t v;
  std::memcpy(&v, p, 1);
  return v;
}
inline std::uint16_t get_u16(const char* p) {
  std::uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline std::uint32_t get_u32(const char* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline std::uint64_t get_u64(const char* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace raftlog::store

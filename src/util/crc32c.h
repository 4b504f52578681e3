// CRC32C (Castagnoli, reflected polynomial 0x82F63B78): the checksum of every on-disk store record
// (src/store) and of the Raft core's ConfState payloads (src/raft), one implementation for both so
// the two can never disagree. Uses the SSE4.2 crc32 instruction when the CPU has it (checked once at
// startup), a slicing-by-8 table otherwise. Both paths give identical results (tested against known
// vectors and a bit-at-a-time reference).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace raftlog::util::crc32c {

// Extends `crc` (the value returned for the preceding bytes, 0 to start) over `data`.
std::uint32_t extend(std::uint32_t crc, const void* data, std::size_t size);
inline std::uint32_t value(const void* data, std::size_t size) { return extend(0, data, size); }
inline std::uint32_t value(std::string_view s) { return extend(0, s.data(), s.size()); }

// The two implementations, exposed so tests can compare them.
std::uint32_t extend_portable(std::uint32_t crc, const void* data, std::size_t size);
// Returns extend_portable's result when the CPU lacks SSE4.2.
std::uint32_t extend_hardware(std::uint32_t crc, const void* data, std::size_t size);
bool hardware_available();

}  // namespace raftlog::util::crc32c

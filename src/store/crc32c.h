// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of every on-disk record.
// Uses the SSE4.2 crc32 instruction when the CPU has it (checked once at startup), a slicing table
// otherwise. Both paths give identical results (tested against known vectors).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace raftlog::store::crc32c {

// Extends `crc` (the value returned for the preceding bytes, 0 to start) over `data`.
std::uint32_t extend(std::uint32_t crc, const void* data, std::size_t size);
inline std::uint32_t value(const void* data, std::size_t size) { return extend(0, data, size); }
inline std::uint32_t value(std::string_view s) { return extend(0, s.data(), s.size()); }

// The two implementations, exposed so tests can compare them.
std::uint32_t extend_portable(std::uint32_t crc, const void* data, std::size_t size);
// Returns extend_portable's result when the CPU lacks SSE4.2.
std::uint32_t extend_hardware(std::uint32_t crc, const void* data, std::size_t size);
bool hardware_available();

}  // namespace raftlog::store::crc32c

// CRC-32C (Castagnoli) for the core's own encoded records (ConfState payloads). The core links nothing
// outside the standard library, so it carries its own small table-driven implementation.
#pragma once

#include <cstddef>
#include <cstdint>

namespace raftlog::raft {

std::uint32_t crc32c(const void* data, std::size_t size_bytes);

}  // namespace raftlog::raft

// The suspect marker: the index of an entry a reader found corrupt (a CRC mismatch in data the log had
// made durable), recorded so that the next recovery verifies that entry's segment in full instead of
// trusting it with a spot check. Recovery never truncates on the marker's word alone: only a mismatch
// it finds itself cuts the log (and only with Options::allow_truncate_corrupted_flushed_data).
// Stored in SUSPECT through DurableRecordFile (two CRC'd slots); cleared once a recovery has checked it.
//
// Payload layout (little-endian, 16 bytes):
//   0 u32 marker version (1)   4 u32 reserved (0)
//   8 u64 suspect_index        0 = nothing suspect
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace raftlog::store {

inline constexpr const char* kSuspectFileName = "SUSPECT";

std::string encode_suspect_marker(std::uint64_t suspect_index);
// nullopt when the payload has the wrong size or version (recovery then checks nothing extra).
std::optional<std::uint64_t> decode_suspect_marker(std::string_view payload);

}  // namespace raftlog::store

// The version-1 envelope (src/derived/envelope.h: no topic offset), as binaries from before topic
// offsets wrote it, for the tests that feed such entries to the indexes, a replica or a node.
// envelope_test.cpp spells the bytes out itself: it tests the decoder of this format.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "derived/envelope.h"

namespace raftlog::testing {

// Version 1, the timestamp (little-endian), `topic`, no keys, then `body`.
inline std::string v1_envelope(std::string_view topic, std::string_view body,
                               std::uint64_t timestamp_ms = 0) {
  std::string payload(1, static_cast<char>(derived::kEnvelopeVersionWithoutOffset));
  for (int i = 0; i < 8; ++i)
    payload.push_back(static_cast<char>((timestamp_ms >> (8 * i)) & 0xFF));
  payload.push_back(static_cast<char>(topic.size()));
  payload.append(topic);
  payload.push_back('\0');  // no keys
  payload.append(body);
  return payload;
}

}  // namespace raftlog::testing

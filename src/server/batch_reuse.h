// reset_for_reuse(): empties a peer stream element (RaftMessageBatch or RaftMessage) between two
// uses without letting one large batch pin its memory for the stream's lifetime.
//
// Why: the transport reuses one element per stream for reading and one for writing. protobuf's
// Clear() keeps every cleared message and entry object and the capacity of every payload string,
// so a single catch-up batch (up to 64 messages of up to 1024 entries, about 70 MiB) stayed
// allocated until the stream ended, and each larger batch ratcheted the footprint up: the live
// heap of a loaded 3-node cluster grew by megabytes per node over a 25-minute soak
// (docs/benchmarks.md, "Memory"). An element that held more than kMaxReusedElementBytes is
// replaced by a fresh one instead; the common small batches keep reusing their objects.
#pragma once

#include <cstddef>

#include "raftlog/peer/v1/peer.pb.h"

namespace raftlog::server {

inline constexpr std::size_t kMaxReusedElementBytes = 256 * 1024;
// What one entry or message object costs an element besides its payload, about (object, headers).
inline constexpr std::size_t kReusedObjectBytes = 64;

// Bytes an element holds, from its current contents (payload sizes and object counts; no
// serialization walk, so it is cheap next to the parse or encode that filled it).
inline std::size_t held_bytes(const raftlog::peer::v1::RaftMessage& message) {
  std::size_t bytes = kReusedObjectBytes;
  for (const auto& entry : message.entries()) bytes += entry.payload().size() + kReusedObjectBytes;
  return bytes;
}
inline std::size_t held_bytes(const raftlog::peer::v1::RaftMessageBatch& batch) {
  std::size_t bytes = 0;
  for (const auto& message : batch.messages()) bytes += held_bytes(message);
  return bytes;
}

// Call before the element is filled again (its previous contents are no longer referred to).
// Returns true when the element was replaced by a fresh one.
template <typename Element>
bool reset_for_reuse(Element& element) {
  if (held_bytes(element) > kMaxReusedElementBytes) {
    element = Element();  // the old objects and their capacity are freed here
    return true;
  }
  element.Clear();
  return false;
}

}  // namespace raftlog::server

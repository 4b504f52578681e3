// Which snapshot data format a leader sends a peer, from the formats the peer says it decodes on
// its latest message (peer.proto, RaftMessage.snapshot_formats; the bits in snapshot_chunks.h).
// One function, so that the transport's answers to the replica (MessageSender::
// takes_framed_snapshot_data, takes_stamped_snapshot_data) and its test are the same decision: a
// peer that sets bit 0 only (a node from before stamp5) must get version 4, never version 6, which
// it refuses (unknown framed version) and would be sent again after every retry timeout (review of
// stamp5, M2).
#pragma once

#include <cstdint>

#include "replica/snapshot_encoding.h"
#include "server/snapshot_chunks.h"

namespace raftlog::server {

// Bits 0 and 1: framed version 6 (the running max stamp in its head); bit 0 alone: framed version
// 4; otherwise (no bit, or bit 1 without bit 0, which no node sends): versions 1..3, which every
// node decodes. Unknown bits are ignored.
inline replica::SnapshotDataFormat snapshot_format_for(std::uint32_t peer_formats) {
  if ((peer_formats & kSnapshotFormatFramed) == 0) return replica::SnapshotDataFormat::kPlain;
  if ((peer_formats & kSnapshotFormatFramedWithStamp) == 0) {
    return replica::SnapshotDataFormat::kFramed;
  }
  return replica::SnapshotDataFormat::kFramedWithStamp;
}

}  // namespace raftlog::server

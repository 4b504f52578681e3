// What the two ends of a peer stream (raftlog.peer.v1.Peer/StreamBatches) agree on, besides the
// messages themselves (message_codec.h): the sender (peer_outbound.h) and the receiver
// (peer_inbound.h) both use these.
#pragma once

#include <cstddef>
#include <string_view>

namespace raftlog::server {

// Messages per stream element (RaftMessageBatch); the receiver refuses more (peer.proto).
inline constexpr std::size_t kMaxMessagesPerBatch = 64;
// What repeated-field framing adds per message inside a batch, at most (tag + length varint).
inline constexpr std::size_t kBatchFramingBytes = 6;
// gRPC's size checks count the whole framed message; leave room above our own bound.
inline constexpr std::size_t kGrpcHeadroomBytes = 64 * 1024;
// Initial metadata a receiver sends once the first message of a stream passed its checks.
inline constexpr std::string_view kPeerAcceptedKey = "raftlog-peer-accepted";
// Client metadata naming an outbound stream's lane ("control" or "append"), for the receiver's logs.
inline constexpr std::string_view kPeerLaneKey = "raftlog-peer-lane";
// Client metadata naming the address the sender is reached at (PeerTransportOptions::
// advertise_address), so that a receiver whose configurations do not list the sender yet can answer
// it (peer_admission.h). Validated like a member address; a receiver ignores it for its configured
// peers.
inline constexpr std::string_view kPeerAddressKey = "raftlog-peer-address";

}  // namespace raftlog::server

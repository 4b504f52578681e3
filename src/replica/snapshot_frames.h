// Snapshot data version 4: framed, so that a transfer can resume by client id after a leader
// change (docs/design.md, "Snapshot transfer"; docs/storage-format.md, "Snapshot data").
//
// Versions 1..3 (snapshot_data.h) carry one CRC-32C of the whole data, and almost every field
// depends on the node that encoded it (the dedup table's LRU order and set, the consumer group
// section, the timestamp floor). So two leaders at the same point never encode the same bytes, and a
// follower's partial was useless to a new leader. Version 4 splits the data by who may vouch for it:
//   - HEAD: what every node encodes identically at the point (index, term, the configuration in
//     force there, the topic table there). Its CRC-32C (over the file header and the frame) is
//     the head's identity: a new leader with the same head CRC describes the same state;
//   - CLIENTS blocks: the dedup clients in ascending client id, at most kSnapshotBlockBytes of
//     records each, each naming its first and last id and the view start of the node that encoded
//     it. Each client record is a set of facts about the committed prefix through the point, valid
//     whoever built it, so a follower may keep one leader's blocks of ids <= X and take another
//     leader's clients of ids > X (the table spliced answers each client as one of them would);
//   - TRAILER: the sender-dependent rest (timestamp floor, retired ids, the node's section, the
//     sender's dedup view start), resent whole by whoever completes the data.
// Each frame after the head has a CRC-32C seeded with the head's, so a block is valid only under
// the head it was encoded for.
//
// Layout, little-endian: u32 magic "RLSF", u32 version 4; then frames, each u8 kind, u32 body
// length, the body, u32 CRC-32C:
//   HEAD (kind 1, exactly once, first; CRC of every byte from the magic to the body's end):
//     u64 index, u64 term, u32 length + raft::encode_config bytes, u32 topic count, the topics
//     (as version 3's, strictly increasing);
//   CLIENTS (kind 2, any number; body at most kMaxSnapshotBlockBodyBytes; CRC of kind, length
//     and body, seeded with the head CRC): u64 first client id, u64 last client id, u64 the
//     encoder's dedup view start (at most index + 1), u32 client count (at least 1), the clients
//     (as version 3's); ids strictly increase within the block and across blocks, and the block's
//     first and last id name its first and last client;
//   TRAILER (kind 3, exactly once, last; CRC as a block's): u64 timestamp floor (ms), u32 retired
//     id count + the ids (as version 3's), u32 length + the node's section, u64 the encoder's dedup
//     view start (at most index + 1).
// Nothing follows the trailer. The data is always an installed snapshot's (a leader's send; a trim
// still writes versions 1..3 and 5): topics and configuration are the ones as of the index.
//
// Version 6 (stamp5): version 4 whose HEAD ends, after the topics, with u8 flags (bit 0: the stamp
// is known; no other bit) and u64 the running max of the entries' stamps as of the index (0 when not
// known). A leader knows it exactly at its first index - 1 (its trims carry it: snapshot_data.h,
// version 5), not at a point above (then "not known", as version 4 says nothing); the follower's
// derived indexes seed their time lookups with it (docs/design.md, "Time lookups after a trim").
// It is a function of the committed prefix through the index, so it belongs in HEAD: two leaders
// that know it encode the same head. Sent only to a peer that says it decodes it (a second
// capability bit beside version 4's, server/snapshot_chunks.h); every other peer gets version 4 as
// before. The version is among the bytes the head's CRC covers and every later frame's CRC is
// seeded with it, so no block of one version is valid under the other's head: a follower's partial
// of one version is never continued with another leader's frames of the other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "replica/snapshot_data.h"
#include "replica/snapshot_frame_walk.h"
#include "store/status.h"

namespace raftlog::replica {

// kFramedSnapshotMagic, kFramedSnapshotVersion, kSnapshotBlockBytes, kMaxSnapshotBlockBodyBytes:
// snapshot_frame_walk.h.
// Distinct encoders' view starts a spliced data may name (its blocks' and its trailer's): one per
// leader that contributed blocks to one transfer. More is refused (the transfer starts again at 0).
inline constexpr std::size_t kMaxSnapshotSenders = 16;

// Where each frame of an encoding sits: what a continuation is cut from (kept beside the bytes in
// SnapshotEncoding) and what a follower's partial is checked against.
struct SnapshotFrames {
  struct Block {
    std::uint64_t begin = 0;  // of the frame's kind byte
    std::uint64_t end = 0;    // past its CRC
    std::uint64_t first_client = 0;
    std::uint64_t last_client = 0;
    friend bool operator==(const Block&, const Block&) = default;
  };
  std::uint32_t head_crc32c = 0;
  std::uint64_t head_end = 0;  // past the head's CRC: where the first block (or the trailer) starts
  std::vector<Block> blocks;
  std::uint64_t trailer_begin = 0;  // 0 until the trailer is known complete
  std::uint64_t trailer_end = 0;
  friend bool operator==(const SnapshotFrames&, const SnapshotFrames&) = default;
};

struct FramedSnapshotData {
  std::string bytes;
  SnapshotFrames frames;
};

// Bytes the framed encoding of `data` in `version` (4 or 6) takes without its dedup clients, and an
// upper bound of what `client_bytes` of client records (encoded_client_size) add with their blocks'
// own fields: a sender stops gathering clients where the sum would pass its budget.
std::size_t framed_size_without_dedup(const SnapshotData& data,
                                      std::uint32_t version = kFramedSnapshotVersion);
std::size_t framed_clients_size_bound(std::size_t client_bytes);

// Precondition: as encode_snapshot_data's, origin kInstalled, and no spliced view starts (one
// encoder). The clients are written in ascending id whatever their order in `data`. `block_bytes`
// (at most kSnapshotBlockBytes): where blocks close; smaller only in tests, to cut small data in
// many blocks. `version`: kFramedSnapshotVersion (4: the stamp left out) or
// kFramedSnapshotVersionWithStamp (6: `stamp_max_ms` when `stamp_at_index`, else "not known").
FramedSnapshotData encode_framed_snapshot_data(const SnapshotData& data,
                                               std::size_t block_bytes = kSnapshotBlockBytes,
                                               std::uint32_t version = kFramedSnapshotVersion);
// Called by decode_snapshot_data for data starting with kFramedSnapshotMagic: the whole data, every
// frame checked. The clients come back in ascending id; the view starts of blocks whose encoder
// was not the trailer's go to spliced_view_starts.
store::Result<SnapshotData> decode_framed_snapshot_data(std::string_view bytes);

// How far a prefix of a version-4 or 6 data (a follower's partial) is usable: every complete frame
// in it checked as the decoder checks it (kCorruption for the first problem: such a partial is
// dropped); an incomplete last frame is where the prefix was cut, not a problem.
struct FramedPrefix {
  bool head_complete = false;
  std::uint64_t last_client_id = 0;  // of the last complete block; 0 when none
  std::uint64_t blocks_end = 0;      // past the last complete frame before the trailer (head_end
                                     // when no block is complete; 0 without a complete head)
  bool complete = false;             // the trailer too: the whole data
  SnapshotFrames frames;             // the complete frames
};
store::Result<FramedPrefix> scan_framed_snapshot_prefix(std::string_view bytes);

}  // namespace raftlog::replica

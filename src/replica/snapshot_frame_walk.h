// Walking the frames of snapshot data version 4 (and 6: the same frames) without decoding them:
// what a follower's transport names in its receipt (where its partial may be continued by another
// leader), what it checks before it splices another leader's continuation onto its partial, and
// how a new leader cuts that continuation from its own encoding (docs/design.md, "Snapshot
// transfer", *A new leader continues*). The layout is snapshot_frames.h's; this file knows only
// the frames (kind, length, CRC-32C), a block's first and last client id and the length of its
// client records, so that the transport (src/server) uses it without the replica's tables. The
// client records themselves are decoded and checked by decode_framed_snapshot_data, as for any
// snapshot, before an install.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace raftlog::replica {

inline constexpr std::uint32_t kFramedSnapshotMagic = 0x46534C52;  // "RLSF" in file order
inline constexpr std::uint32_t kFramedSnapshotVersion = 4;
// Version 6: version 4 whose HEAD also carries the running max stamp as of the index, or says it is
// not known (snapshot_frames.h). Its frames after the head are version 4's, so everything here walks
// both alike; the version is in the bytes the head's CRC covers, so a partial of one version is
// never continued with frames of the other (their heads differ).
inline constexpr std::uint32_t kFramedSnapshotVersionWithStamp = 6;
// A CLIENTS block holds records up to this many bytes (a new block starts before a client that would
// take it beyond): what a follower loses at most of a transfer cut mid-block.
inline constexpr std::size_t kSnapshotBlockBytes = std::size_t{256} << 10;
// The largest block body a decoder accepts: the records' bound plus the block's own fields.
inline constexpr std::size_t kMaxSnapshotBlockBodyBytes = kSnapshotBlockBytes + 8 + 8 + 8 + 4;
// The largest whole data a receiver decodes (snapshot_data.h kMaxSnapshotDataBytes): a continued
// data (a follower's kept bytes and the continuation) must stay within it, or the follower refuses
// every chunk of it (review M3).
inline constexpr std::uint64_t kMaxFramedSnapshotBytes = std::uint64_t{64} << 20;

// Where another leader may continue a follower's framed partial: after its head, or after a
// complete CLIENTS block. The follower computes it from the bytes it holds (FramedFrameWalk) and
// names it in its receipt; a new leader whose encoding of the same point has the same head CRC
// sends only its clients with ids above last_client_id and its trailer (make_framed_continuation).
struct FramedSplicePoint {
  std::uint32_t head_crc32c = 0;
  std::uint64_t kept_bytes = 0;      // past the head's or the block's CRC
  std::uint64_t last_client_id = 0;  // the block's last client; 0 after the head
  std::uint32_t kept_crc32c = 0;     // CRC-32C of the bytes [0, kept_bytes)
  // The data digest (snapshot_data_digest) of the frames in [0, kept_bytes): what the spliced
  // data's digest extends. Absent on a receipt from a node from before digests (peer.proto): no
  // continuation is cut for it, none is spliced with it.
  std::optional<std::uint32_t> kept_digest = std::nullopt;
  friend bool operator==(const FramedSplicePoint&, const FramedSplicePoint&) = default;
};

// The digest of a snapshot's data: the part of its identity that depends on every byte
// (docs/design.md, "Snapshot transfer", *The data's digest*). The whole-data CRC-32C does not for
// version 4: each frame ends with its own CRC-32C, so a valid frame cancels out of a CRC running
// over it, and two encodings of one layout (the same frame lengths) share the whole CRC. For data
// whose bytes walk as version 4's frames (magic, version 4 or 6, then frames of kind, length, body,
// CRC up to the data's end), the CRC-32C of the frames' own CRC-32Cs, 4 bytes each, little-endian,
// in data order: it does not cancel (nothing in it is a CRC of the bytes before), it changes with
// every frame's content (each frame's CRC does), it costs a walk of the frames' headers (no byte of
// a body is read), a follower's partial extends it as its frames arrive, and a continuation's
// extends the kept frames' (kept_digest). For any other data (versions 1..3, whose own CRC-32C sits
// at the data's start, not its end: the whole-data CRC does not cancel), `data_crc32c`. The frames'
// CRCs are not checked here: the decoder checks each against its frame before an install, so data
// that matches a digest but not its frames is refused there.
std::uint32_t snapshot_data_digest(std::string_view data, std::uint32_t data_crc32c);
// The digest `seed` (the digest of the frames before them; 0 at the data's start, after its magic
// and version) extended over the whole frames in `frames`; nullopt when they do not walk as frames
// to their end.
std::optional<std::uint32_t> extend_frames_digest(std::uint32_t seed, std::string_view frames);

// Follows a version-4 (or 6) data's prefix as it grows (a partial's bytes from offset 0) and keeps
// its last splice point. Each complete frame is checked: its CRC-32C (a block's seeded with the
// head's), its kind in place (the head first, blocks, the trailer last), a block's ids (first <=
// last, above the previous block's last) and its records' lengths adding up to its body. An
// incomplete last frame is where the prefix was cut. Bytes that are not version 4 or 6, or a frame
// that fails a check, end the walk for good: such a partial names no splice point (its whole data's
// CRC-32C, or the decoder, refuses it in the end, as before).
class FramedFrameWalk {
 public:
  // `bytes`: the data from offset 0, the same bytes as at the last call, maybe more.
  void advance(std::string_view bytes);
  std::optional<FramedSplicePoint> splice_point() const;
  bool failed() const { return failed_; }

 private:
  bool failed_ = false;
  bool head_complete_ = false;
  bool trailer_complete_ = false;
  std::uint32_t head_crc32c_ = 0;
  std::uint64_t walked_ = 0;          // past the last complete frame
  std::uint64_t kept_bytes_ = 0;      // past the head or the last complete block
  std::uint64_t last_client_id_ = 0;  // of that block
  std::uint32_t kept_crc32c_ = 0;     // of [0, kept_bytes_)
  std::uint32_t kept_digest_ = 0;     // snapshot_data_digest's running value over [0, kept_bytes_)
};

// Whether `bytes` (a follower's partial) may be cut at `point` and continued: the frames up to
// point.kept_bytes walk as FramedFrameWalk walks them, one of them ends exactly there (the head,
// with last_client_id 0, or a block whose last client is last_client_id), the head's CRC is
// point.head_crc32c, the bytes before it have point.kept_crc32c and their frames the digest
// point.kept_digest (which must be present: the CRC alone does not tell two encodings of one layout
// apart). "" when it may, else why not.
std::string check_splice_point(std::string_view bytes, const FramedSplicePoint& point);

// What a new leader sends a follower whose partial names a splice point of the same snapshot point.
struct FramedContinuation {
  enum class Outcome : std::uint8_t {
    kMade,
    kNotFramed,  // `encoding` is not version 4 or 6 (an older peer's format), or not whole
    kOtherHead,  // its head CRC is not the point's: another head (the nodes' states differ)
  };
  Outcome outcome = Outcome::kNotFramed;
  // kMade: the encoding's clients with ids above the point's last client, re-blocked (the block
  // the point falls in is cut at the first id above it; the blocks after it are copied as they
  // are), then its trailer. Appended to the follower's first point.kept_bytes, the result is a
  // whole version-4 (or 6) data of the encoding's version.
  std::string bytes;
};
// `encoding`: the leader's own whole version-4 or version-6 data (walked and checked as above all
// the same).
FramedContinuation make_framed_continuation(std::string_view encoding,
                                            const FramedSplicePoint& point);

}  // namespace raftlog::replica

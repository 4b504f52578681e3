#include "replica/snapshot_frame_walk.h"

#include "store/byte_io.h"
#include "store/endian.h"
#include "util/crc32c.h"

namespace raftlog::replica {
namespace {

enum class Kind : std::uint8_t { kHead = 1, kClients = 2, kTrailer = 3 };

constexpr std::size_t kFileHeaderBytes = 4 + 4;           // magic, version
constexpr std::size_t kBlockFieldsBytes = 8 + 8 + 8 + 4;  // first id, last id, view start, count
constexpr std::size_t kClientHeaderBytes = 8 + 8 + 4;     // id, forgotten_below, append count
constexpr std::size_t kAppendBytes = 8 + 8 + 8 + 8 + 4;   // sequence, range, term, digest
constexpr std::uint32_t kMaxAppendsPerRecord = 4096;      // snapshot_data.h kMaxAppendsPerClient
constexpr std::uint64_t kMaxFrameBytes = std::uint64_t{64} << 20;  // kMaxSnapshotDataBytes

struct WalkedFrame {
  Kind kind{};
  std::uint64_t begin = 0;  // of its kind byte
  std::uint64_t end = 0;    // past its CRC
  std::uint32_t crc = 0;
  std::uint64_t first_client = 0;  // a block's
  std::uint64_t last_client = 0;
};

enum class Step { kFrame, kIncomplete, kBad };

// A block's body: its ids name its first and last record, the records' ids increase and their
// lengths add up to the body. Sets *first and *last.
bool block_body_walks(std::string_view body, std::uint64_t* first, std::uint64_t* last) {
  if (body.size() < kBlockFieldsBytes) return false;
  *first = store::get_u64(body.data());
  *last = store::get_u64(body.data() + 8);
  const std::uint32_t count = store::get_u32(body.data() + 24);
  if (count == 0 || *first == 0 || *first > *last) return false;
  std::uint64_t at = kBlockFieldsBytes;
  std::uint64_t previous = 0;
  for (std::uint32_t i = 0; i < count; ++i) {
    if (body.size() - at < kClientHeaderBytes) return false;
    const std::uint64_t id = store::get_u64(body.data() + at);
    const std::uint32_t appends = store::get_u32(body.data() + at + 16);
    if (appends > kMaxAppendsPerRecord || id <= previous) return false;
    if ((i == 0 && id != *first) || (i + 1 == count && id != *last)) return false;
    const std::uint64_t size = kClientHeaderBytes + std::uint64_t{appends} * kAppendBytes;
    if (body.size() - at < size) return false;
    at += size;
    previous = id;
  }
  return at == body.size();
}

// The frame at `at`, checked: its CRC (the head's over every byte from 0, seed 0; the others' over
// the frame, seeded with `head_crc`) and, for a block, its body.
Step walk_frame(std::string_view bytes, std::uint64_t at, std::uint32_t head_crc,
                WalkedFrame* out) {
  if (bytes.size() < at || bytes.size() - at < 1 + 4) return Step::kIncomplete;
  const std::uint8_t kind = static_cast<std::uint8_t>(bytes[at]);
  const std::uint32_t length = store::get_u32(bytes.data() + at + 1);
  if (kind < 1 || kind > 3 || length > kMaxFrameBytes) return Step::kBad;
  if (kind == static_cast<std::uint8_t>(Kind::kClients) && length > kMaxSnapshotBlockBodyBytes) {
    return Step::kBad;
  }
  if (bytes.size() - at - 5 < std::uint64_t{length} + 4) return Step::kIncomplete;
  const std::uint64_t body_end = at + 5 + length;
  const bool head = kind == static_cast<std::uint8_t>(Kind::kHead);
  const std::uint64_t crc_from = head ? 0 : at;
  const std::uint32_t crc = util::crc32c::extend(head ? 0 : head_crc, bytes.data() + crc_from,
                                                 body_end - crc_from);
  if (store::get_u32(bytes.data() + body_end) != crc) return Step::kBad;
  out->kind = static_cast<Kind>(kind);
  out->begin = at;
  out->end = body_end + 4;
  out->crc = crc;
  if (out->kind == Kind::kClients &&
      !block_body_walks(bytes.substr(at + 5, length), &out->first_client, &out->last_client)) {
    return Step::kBad;
  }
  return Step::kFrame;
}

// snapshot_data_digest's step: the digest extended over one frame's CRC-32C.
std::uint32_t extend_digest(std::uint32_t digest, std::uint32_t frame_crc) {
  char crc[4];
  store::put_u32(crc, frame_crc);
  return util::crc32c::extend(digest, crc, sizeof crc);
}

// Versions 4 and 6: the same frames (6 has more in its head's body, which nothing here reads).
bool framed_header(std::string_view bytes) {
  if (bytes.size() < kFileHeaderBytes || store::get_u32(bytes.data()) != kFramedSnapshotMagic) {
    return false;
  }
  const std::uint32_t version = store::get_u32(bytes.data() + 4);
  return version == kFramedSnapshotVersion || version == kFramedSnapshotVersionWithStamp;
}

}  // namespace

void FramedFrameWalk::advance(std::string_view bytes) {
  if (failed_ || trailer_complete_) return;
  if (!head_complete_) {
    if (bytes.size() < kFileHeaderBytes) return;
    if (!framed_header(bytes)) {
      failed_ = true;
      return;
    }
    walked_ = kFileHeaderBytes;
  }
  while (true) {
    WalkedFrame frame;
    const Step step = walk_frame(bytes, walked_, head_crc32c_, &frame);
    if (step == Step::kIncomplete) return;
    // The head first and once; blocks in ascending ids.
    if (step == Step::kBad || (frame.kind == Kind::kHead) == head_complete_ ||
        (frame.kind == Kind::kClients && frame.first_client <= last_client_id_)) {
      failed_ = true;
      return;
    }
    walked_ = frame.end;
    if (frame.kind == Kind::kTrailer) {
      trailer_complete_ = true;
      return;
    }
    if (frame.kind == Kind::kHead) {
      head_complete_ = true;
      head_crc32c_ = frame.crc;
      kept_crc32c_ = util::crc32c::value(bytes.data(), frame.end);
    } else {
      kept_crc32c_ =
          util::crc32c::extend(kept_crc32c_, bytes.data() + frame.begin, frame.end - frame.begin);
      last_client_id_ = frame.last_client;
    }
    kept_digest_ = extend_digest(kept_digest_, frame.crc);
    kept_bytes_ = frame.end;
  }
}

std::optional<FramedSplicePoint> FramedFrameWalk::splice_point() const {
  // A whole data is not a partial: nothing to continue.
  if (failed_ || !head_complete_ || trailer_complete_) return std::nullopt;
  return FramedSplicePoint{head_crc32c_, kept_bytes_, last_client_id_, kept_crc32c_, kept_digest_};
}

std::optional<std::uint32_t> extend_frames_digest(std::uint32_t seed, std::string_view frames) {
  std::uint64_t at = 0;
  while (at < frames.size()) {
    if (frames.size() - at < 1 + 4) return std::nullopt;
    const std::uint64_t length = store::get_u32(frames.data() + at + 1);
    if (frames.size() - at - 5 < length + 4) return std::nullopt;
    seed = extend_digest(seed, store::get_u32(frames.data() + at + 5 + length));
    at += 5 + length + 4;
  }
  return seed;
}

std::uint32_t snapshot_data_digest(std::string_view data, std::uint32_t data_crc32c) {
  if (!framed_header(data)) return data_crc32c;
  return extend_frames_digest(0, data.substr(kFileHeaderBytes)).value_or(data_crc32c);
}

std::string check_splice_point(std::string_view bytes, const FramedSplicePoint& point) {
  if (point.kept_bytes > bytes.size()) {
    return "it keeps " + std::to_string(point.kept_bytes) + " bytes, the partial holds " +
           std::to_string(bytes.size());
  }
  FramedFrameWalk walk;
  walk.advance(bytes.substr(0, point.kept_bytes));
  const std::optional<FramedSplicePoint> held = walk.splice_point();
  if (!held) return "the partial's bytes before it are not a framed snapshot's head and blocks";
  if (held->kept_bytes != point.kept_bytes) {
    return "no head or client block of the partial ends at byte " +
           std::to_string(point.kept_bytes);
  }
  if (held->head_crc32c != point.head_crc32c) return "the partial has another head";
  if (held->last_client_id != point.last_client_id) {
    return "the partial's block there ends at client " + std::to_string(held->last_client_id) +
           ", not " + std::to_string(point.last_client_id);
  }
  if (held->kept_crc32c != point.kept_crc32c) return "the partial's bytes before it differ";
  if (!point.kept_digest) return "it names no digest of the bytes before it (an older sender)";
  if (held->kept_digest != point.kept_digest) {
    return "the partial's frames before it differ (another encoding of the same layout)";
  }
  return {};
}

namespace {

// The block `frame` of `encoding` without its clients of ids <= `last_kept`: the same view start,
// its CRC seeded with `head_crc`. Its ids were walked (block_body_walks): the cut is exact.
std::string cut_block(std::string_view encoding, const WalkedFrame& frame,
                      std::uint64_t last_kept, std::uint32_t head_crc) {
  const std::string_view body = encoding.substr(frame.begin + 5, frame.end - frame.begin - 9);
  const std::uint32_t count = store::get_u32(body.data() + 24);
  std::uint64_t at = kBlockFieldsBytes;
  std::uint32_t skipped = 0;
  while (store::get_u64(body.data() + at) <= last_kept) {
    at += kClientHeaderBytes +
          std::uint64_t{store::get_u32(body.data() + at + 16)} * kAppendBytes;
    ++skipped;
  }
  std::string out;
  out.push_back(static_cast<char>(Kind::kClients));
  store::append_u32(&out, static_cast<std::uint32_t>(kBlockFieldsBytes + body.size() - at));
  store::append_u64(&out, store::get_u64(body.data() + at));  // its new first client
  out.append(body.substr(8, 16));                               // last client, view start
  store::append_u32(&out, count - skipped);
  out.append(body.substr(at));
  store::append_u32(&out, util::crc32c::extend(head_crc, out.data(), out.size()));
  return out;
}

}  // namespace

FramedContinuation make_framed_continuation(std::string_view encoding,
                                            const FramedSplicePoint& point) {
  FramedContinuation result;
  if (!framed_header(encoding)) return result;
  WalkedFrame frame;
  if (walk_frame(encoding, kFileHeaderBytes, 0, &frame) != Step::kFrame ||
      frame.kind != Kind::kHead) {
    return result;
  }
  const std::uint32_t head_crc = frame.crc;
  if (head_crc != point.head_crc32c) {
    result.outcome = FramedContinuation::Outcome::kOtherHead;
    return result;
  }
  std::string cut;                 // the block the point falls in, without the kept clients
  std::uint64_t copy_from = 0;     // where the encoding's own frames are copied from
  std::uint64_t last_client = 0;
  while (true) {
    const std::uint64_t at = frame.end;
    if (walk_frame(encoding, at, head_crc, &frame) != Step::kFrame || frame.kind == Kind::kHead ||
        (frame.kind == Kind::kClients && frame.first_client <= last_client)) {
      return result;
    }
    if (frame.kind == Kind::kTrailer) {
      if (frame.end != encoding.size()) return result;
      if (copy_from == 0) copy_from = frame.begin;
      break;
    }
    last_client = frame.last_client;
    if (copy_from != 0 || frame.last_client <= point.last_client_id) continue;
    if (frame.first_client > point.last_client_id) {
      copy_from = frame.begin;
    } else {
      cut = cut_block(encoding, frame, point.last_client_id, head_crc);
      copy_from = frame.end;
    }
  }
  result.outcome = FramedContinuation::Outcome::kMade;
  result.bytes = std::move(cut);
  result.bytes.append(encoding.substr(copy_from));
  return result;
}

}  // namespace raftlog::replica

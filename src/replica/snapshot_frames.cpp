#include "replica/snapshot_frames.h"

#include <algorithm>
#include <set>

#include "replica/snapshot_data_codec.h"
#include "store/byte_io.h"
#include "store/endian.h"
#include "util/crc32c.h"

namespace raftlog::replica {
namespace {

using detail::snapshot_corrupt;
using Reader = store::ByteReader;

enum class FrameKind : std::uint8_t { kHead = 1, kClients = 2, kTrailer = 3 };

constexpr std::size_t kFileHeaderBytes = 4 + 4;            // magic, version
constexpr std::size_t kFrameOverheadBytes = 1 + 4 + 4;     // kind, length, CRC
constexpr std::size_t kBlockFieldsBytes = 8 + 8 + 8 + 4;   // first id, last id, view start, count
// The largest client record: encoded_client_size at kMaxAppendsPerClient appends.
constexpr std::size_t kMaxClientRecordBytes = 8 + 8 + 4 + kMaxAppendsPerClient * (8 + 8 + 8 + 8 + 4);
static_assert(kMaxAppendsPerClient == 4096 && kMaxSnapshotDataBytes == std::size_t{64} << 20 &&
                  kMaxFramedSnapshotBytes == kMaxSnapshotDataBytes,
              "snapshot_frame_walk.cpp's bounds are these");
static_assert(kMaxClientRecordBytes < kSnapshotBlockBytes,
              "a closed block holds more than the bound less one client's record");

// Starts a frame of `kind`: its body follows; finish_frame writes its length and CRC.
std::size_t start_frame(std::string* out, FrameKind kind) {
  const std::size_t begin = out->size();
  out->push_back(static_cast<char>(kind));
  store::append_u32(out, 0);
  return begin;
}

// Returns the frame's CRC: over [crc_from, body end), seeded with `seed`.
std::uint32_t finish_frame(std::string* out, std::size_t begin, std::size_t crc_from,
                           std::uint32_t seed) {
  store::put_u32(out->data() + begin + 1,
                 static_cast<std::uint32_t>(out->size() - begin - 1 - 4));
  const std::uint32_t crc =
      util::crc32c::extend(seed, out->data() + crc_from, out->size() - crc_from);
  store::append_u32(out, crc);
  return crc;
}

// Version 6's head flags byte: bit 0, the running max stamp that follows is known.
constexpr std::uint8_t kHeadStampKnown = 1;
constexpr std::size_t kHeadStampBytes = 1 + 8;  // version 6: flags, stamp

bool known_version(std::uint32_t version) {
  return version == kFramedSnapshotVersion || version == kFramedSnapshotVersionWithStamp;
}

std::size_t head_body_size(const SnapshotData& data, std::uint32_t version) {
  std::size_t size = 8 + 8 + 4 + raft::encode_config(data.conf).size() + 4;
  for (const TopicOffsets::TopicNext& topic : data.topics) size += detail::encoded_topic_size(topic);
  if (version == kFramedSnapshotVersionWithStamp) size += kHeadStampBytes;
  return size;
}

std::size_t trailer_body_size(const SnapshotData& data) {
  return 8 + 4 + 8 * data.retired_ids.size() + 4 + data.section.size() + 8;
}

}  // namespace

std::size_t framed_size_without_dedup(const SnapshotData& data, std::uint32_t version) {
  return kFileHeaderBytes + 2 * kFrameOverheadBytes + head_body_size(data, version) +
         trailer_body_size(data);
}

std::size_t framed_clients_size_bound(std::size_t client_bytes) {
  // Every block but the last closes holding more than kSnapshotBlockBytes - kMaxClientRecordBytes
  // of records (the client that did not fit is at most kMaxClientRecordBytes).
  const std::size_t blocks = client_bytes / (kSnapshotBlockBytes - kMaxClientRecordBytes) + 1;
  return client_bytes + blocks * (kFrameOverheadBytes + kBlockFieldsBytes);
}

FramedSnapshotData encode_framed_snapshot_data(const SnapshotData& data, std::size_t block_bytes,
                                               std::uint32_t version) {
  block_bytes = std::min(block_bytes, kSnapshotBlockBytes);
  if (!known_version(version)) version = kFramedSnapshotVersion;  // the precondition's, kept safe
  FramedSnapshotData out;
  std::string& bytes = out.bytes;
  store::append_u32(&bytes, kFramedSnapshotMagic);
  store::append_u32(&bytes, version);
  const std::size_t head = start_frame(&bytes, FrameKind::kHead);
  store::append_u64(&bytes, data.index);
  store::append_u64(&bytes, data.term);
  const std::string conf = raft::encode_config(data.conf);
  store::append_u32(&bytes, static_cast<std::uint32_t>(conf.size()));
  bytes += conf;
  detail::append_topics(&bytes, data.topics);
  if (version == kFramedSnapshotVersionWithStamp) {
    // Not known: 0, so that one content has one encoding (and one head CRC on every leader).
    bytes.push_back(static_cast<char>(data.stamp_at_index ? kHeadStampKnown : 0));
    store::append_u64(&bytes, data.stamp_at_index ? data.stamp_max_ms : 0);
  }
  const std::uint32_t head_crc = finish_frame(&bytes, head, 0, 0);
  out.frames.head_crc32c = head_crc;
  out.frames.head_end = bytes.size();

  std::vector<const DedupTable::ClientState*> clients;
  clients.reserve(data.dedup_clients.size());
  for (const DedupTable::ClientState& client : data.dedup_clients) clients.push_back(&client);
  std::sort(clients.begin(), clients.end(),
            [](const auto* a, const auto* b) { return a->client_id < b->client_id; });
  std::size_t next = 0;
  while (next < clients.size()) {
    // One block: clients while its records stay within block_bytes (at least one).
    std::size_t end = next;
    std::size_t records = 0;
    while (end < clients.size() &&
           (end == next || records + encoded_client_size(*clients[end]) <= block_bytes)) {
      records += encoded_client_size(*clients[end]);
      ++end;
    }
    const std::size_t begin = start_frame(&bytes, FrameKind::kClients);
    store::append_u64(&bytes, clients[next]->client_id);
    store::append_u64(&bytes, clients[end - 1]->client_id);
    store::append_u64(&bytes, data.dedup_view_start);
    store::append_u32(&bytes, static_cast<std::uint32_t>(end - next));
    for (std::size_t i = next; i < end; ++i) detail::append_client(&bytes, *clients[i]);
    finish_frame(&bytes, begin, begin, head_crc);
    out.frames.blocks.push_back(SnapshotFrames::Block{begin, bytes.size(), clients[next]->client_id,
                                                      clients[end - 1]->client_id});
    next = end;
  }

  const std::size_t trailer = start_frame(&bytes, FrameKind::kTrailer);
  store::append_u64(&bytes, data.timestamp_floor_ms);
  store::append_u32(&bytes, static_cast<std::uint32_t>(data.retired_ids.size()));
  for (raft::NodeId id : data.retired_ids) store::append_u64(&bytes, id);
  store::append_u32(&bytes, static_cast<std::uint32_t>(data.section.size()));
  bytes += data.section;
  store::append_u64(&bytes, data.dedup_view_start);
  finish_frame(&bytes, trailer, trailer, head_crc);
  out.frames.trailer_begin = trailer;
  out.frames.trailer_end = bytes.size();
  return out;
}

namespace {

// One frame read from `bytes` at `at`: its kind and body, checked against its CRC.
struct Frame {
  FrameKind kind{};
  std::string_view body;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  std::uint32_t crc = 0;
};

// kIncomplete: the bytes end inside the frame (a prefix's cut).
enum class FrameRead { kOk, kIncomplete };

store::Result<FrameRead> read_frame(std::string_view bytes, std::uint64_t at, std::uint32_t seed,
                                    std::uint64_t crc_from, Frame* frame) {
  if (bytes.size() - at < 1 + 4) return FrameRead::kIncomplete;
  const std::uint8_t kind = static_cast<std::uint8_t>(bytes[at]);
  const std::uint32_t length = store::get_u32(bytes.data() + at + 1);
  if (kind < 1 || kind > 3) return snapshot_corrupt("a frame of unknown kind " + std::to_string(kind));
  // Bounds before the bytes are awaited: a prefix's cut never hides an impossible length.
  if (kind == static_cast<std::uint8_t>(FrameKind::kClients) &&
      length > kMaxSnapshotBlockBodyBytes) {
    return snapshot_corrupt("a client block of " + std::to_string(length) + " bytes");
  }
  if (length > kMaxSnapshotDataBytes) return snapshot_corrupt("a frame of " + std::to_string(length) + " bytes");
  if (bytes.size() - at - 5 < std::uint64_t{length} + 4) return FrameRead::kIncomplete;
  const std::uint64_t body_end = at + 5 + length;
  const std::uint32_t crc =
      util::crc32c::extend(seed, bytes.data() + crc_from, body_end - crc_from);
  if (store::get_u32(bytes.data() + body_end) != crc) {
    return snapshot_corrupt("checksum mismatch in the frame at byte " + std::to_string(at));
  }
  frame->kind = static_cast<FrameKind>(kind);
  frame->body = bytes.substr(at + 5, length);
  frame->begin = at;
  frame->end = body_end + 4;
  frame->crc = crc;
  return FrameRead::kOk;
}

store::Status decode_head(std::string_view body, std::uint32_t version, SnapshotData* data) {
  Reader in(body);
  std::uint32_t conf_size = 0;
  if (!in.u64(&data->index) || !in.u64(&data->term) || !in.u32(&conf_size)) {
    return snapshot_corrupt("a truncated head");
  }
  if (data->index == 0 || data->index > detail::kMaxSnapshotIndex || data->term == 0 ||
      data->term > raft::kMaxTerm) {
    return snapshot_corrupt("index " + std::to_string(data->index) + " term " +
                            std::to_string(data->term));
  }
  std::string conf;
  if (conf_size > raft::kMaxConfigBytes || !in.bytes(conf_size, &conf)) {
    return snapshot_corrupt("a bad configuration length");
  }
  std::optional<raft::ConfState> decoded_conf = raft::decode_config(conf);
  if (!decoded_conf) return snapshot_corrupt("a configuration that does not decode");
  data->conf = std::move(*decoded_conf);
  RAFTLOG_RETURN_IF_ERROR(detail::decode_topics(in, data));
  if (version == kFramedSnapshotVersionWithStamp) {
    std::uint8_t flags = 0;
    if (!in.u8(&flags) || !in.u64(&data->stamp_max_ms)) {
      return snapshot_corrupt("a head truncated before its running max stamp");
    }
    // Any stamp value is one an entry could carry (the index takes envelope stamps raw); only the
    // encoding is checked: one flag, and 0 when it says not known.
    if ((flags & ~kHeadStampKnown) != 0) {
      return snapshot_corrupt("unknown head flags " + std::to_string(flags));
    }
    data->stamp_at_index = (flags & kHeadStampKnown) != 0;
    if (!data->stamp_at_index && data->stamp_max_ms != 0) {
      return snapshot_corrupt("a running max stamp said not known but not 0");
    }
  }
  if (!in.done()) return snapshot_corrupt("trailing bytes in the head");
  return store::Status();
}

// A block's clients appended to data->dedup_clients; *last_id: the last id so far (strictly
// increasing across blocks); *view_start: the block's encoder's.
store::Status decode_block(std::string_view body, SnapshotData* data, std::uint64_t* last_id,
                           std::uint64_t* view_start, SnapshotFrames::Block* block) {
  Reader in(body);
  std::uint32_t count = 0;
  if (!in.u64(&block->first_client) || !in.u64(&block->last_client) || !in.u64(view_start) ||
      !in.u32(&count)) {
    return snapshot_corrupt("a truncated client block");
  }
  if (*view_start > data->index + 1) return snapshot_corrupt("a dedup view start past the index");
  if (count == 0 || count > in.remaining() / (8 + 8 + 4)) {
    return snapshot_corrupt("a client block of " + std::to_string(count) + " clients");
  }
  for (std::uint32_t i = 0; i < count; ++i) {
    DedupTable::ClientState client;
    RAFTLOG_RETURN_IF_ERROR(detail::decode_client(in, *data, &client));
    if (client.client_id <= *last_id) {
      return snapshot_corrupt("dedup client " + std::to_string(client.client_id) +
                              " out of order after " + std::to_string(*last_id));
    }
    if ((i == 0 && client.client_id != block->first_client) ||
        (i + 1 == count && client.client_id != block->last_client)) {
      return snapshot_corrupt("a client block whose first or last id is not its clients'");
    }
    *last_id = client.client_id;
    data->dedup_clients.push_back(std::move(client));
  }
  if (!in.done()) return snapshot_corrupt("trailing bytes in a client block");
  return store::Status();
}

store::Status decode_trailer(std::string_view body, SnapshotData* data) {
  Reader in(body);
  std::uint32_t retired = 0;
  if (!in.u64(&data->timestamp_floor_ms) || !in.u32(&retired)) {
    return snapshot_corrupt("a truncated trailer");
  }
  RAFTLOG_RETURN_IF_ERROR(detail::decode_retired_ids(in, retired, data));
  std::uint32_t section_size = 0;
  if (!in.u32(&section_size) || section_size > kMaxSnapshotSectionBytes ||
      !in.bytes(section_size, &data->section)) {
    return snapshot_corrupt("a bad node section");
  }
  if (!in.u64(&data->dedup_view_start)) return snapshot_corrupt("a truncated trailer");
  if (data->dedup_view_start > data->index + 1) {
    return snapshot_corrupt("a dedup view start past the index");
  }
  if (!in.done()) return snapshot_corrupt("trailing bytes after the trailer's fields");
  return store::Status();
}

// Reads the frames of `bytes` in order into `data` and `prefix`. `allow_cut`: an incomplete
// frame ends the scan (a prefix); else the data must be whole.
store::Status parse(std::string_view bytes, bool allow_cut, SnapshotData* data,
                    FramedPrefix* prefix) {
  if (bytes.size() > kMaxSnapshotDataBytes) {
    return snapshot_corrupt(std::to_string(bytes.size()) + " bytes");
  }
  if (bytes.size() < kFileHeaderBytes) {
    return allow_cut ? store::Status() : snapshot_corrupt("shorter than its header");
  }
  if (store::get_u32(bytes.data()) != kFramedSnapshotMagic) return snapshot_corrupt("bad magic");
  const std::uint32_t version = store::get_u32(bytes.data() + 4);
  if (!known_version(version)) {
    return snapshot_corrupt("unknown framed version " + std::to_string(version));
  }
  data->origin = SnapshotOrigin::kInstalled;
  data->topics_at_index = true;
  data->conf_at_index = true;
  Frame frame;
  auto read = read_frame(bytes, kFileHeaderBytes, 0, 0, &frame);
  if (!read.ok()) return read.status();
  if (*read == FrameRead::kIncomplete) {
    return allow_cut ? store::Status() : snapshot_corrupt("a truncated head");
  }
  if (frame.kind != FrameKind::kHead) return snapshot_corrupt("no head first");
  RAFTLOG_RETURN_IF_ERROR(decode_head(frame.body, version, data));
  SnapshotFrames& frames = prefix->frames;
  frames.head_crc32c = frame.crc;
  frames.head_end = frame.end;
  prefix->head_complete = true;
  prefix->blocks_end = frame.end;
  std::uint64_t last_id = 0;
  std::set<std::uint64_t> view_starts;
  while (true) {
    read = read_frame(bytes, prefix->blocks_end, frames.head_crc32c, prefix->blocks_end, &frame);
    if (!read.ok()) return read.status();
    if (*read == FrameRead::kIncomplete) {
      return allow_cut ? store::Status() : snapshot_corrupt("truncated after byte " +
                                                            std::to_string(prefix->blocks_end));
    }
    if (frame.kind == FrameKind::kHead) return snapshot_corrupt("a second head");
    if (frame.kind == FrameKind::kTrailer) break;
    SnapshotFrames::Block block;
    std::uint64_t view_start = 0;
    RAFTLOG_RETURN_IF_ERROR(decode_block(frame.body, data, &last_id, &view_start, &block));
    view_starts.insert(view_start);
    if (view_starts.size() > kMaxSnapshotSenders) {
      return snapshot_corrupt("client blocks of more than " +
                              std::to_string(kMaxSnapshotSenders) + " encoders");
    }
    block.begin = frame.begin;
    block.end = frame.end;
    frames.blocks.push_back(block);
    prefix->last_client_id = last_id;
    prefix->blocks_end = frame.end;
  }
  RAFTLOG_RETURN_IF_ERROR(decode_trailer(frame.body, data));
  if (frame.end != bytes.size()) return snapshot_corrupt("bytes after the trailer");
  view_starts.erase(data->dedup_view_start);
  data->spliced_view_starts.assign(view_starts.begin(), view_starts.end());
  frames.trailer_begin = frame.begin;
  frames.trailer_end = frame.end;
  prefix->complete = true;
  return store::Status();
}

}  // namespace

store::Result<SnapshotData> decode_framed_snapshot_data(std::string_view bytes) {
  SnapshotData data;
  FramedPrefix prefix;
  RAFTLOG_RETURN_IF_ERROR(parse(bytes, /*allow_cut=*/false, &data, &prefix));
  return data;
}

store::Result<FramedPrefix> scan_framed_snapshot_prefix(std::string_view bytes) {
  SnapshotData data;
  FramedPrefix prefix;
  RAFTLOG_RETURN_IF_ERROR(parse(bytes, /*allow_cut=*/true, &data, &prefix));
  return prefix;
}

}  // namespace raftlog::replica

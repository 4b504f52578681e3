#include "replica/snapshot_encoding.h"

#include <string>
#include <utility>

#include "util/crc32c.h"

namespace raftlog::replica {

SnapshotKey key_of(const SnapshotData& data, SnapshotDataFormat format) {
  SnapshotKey key{data.index, data.term, data.conf, data.retired_ids, format};
  key.stamp_known = data.stamp_at_index;
  key.stamp = data.stamp_at_index ? data.stamp_max_ms : 0;
  return key;
}

SnapshotEncoding::Encoded SnapshotEncoding::encode(const SnapshotData& data,
                                                   SnapshotDataFormat format) {
  Encoded encoded;
  std::string bytes;
  if (format != SnapshotDataFormat::kPlain) {
    FramedSnapshotData framed = encode_framed_snapshot_data(
        data, kSnapshotBlockBytes,
        format == SnapshotDataFormat::kFramedWithStamp ? kFramedSnapshotVersionWithStamp
                                                       : kFramedSnapshotVersion);
    bytes = std::move(framed.bytes);
    encoded.frames = std::make_shared<const SnapshotFrames>(std::move(framed.frames));
  } else {
    bytes = encode_snapshot_data(data);
  }
  encoded.crc32c = util::crc32c::value(bytes);
  encoded.bytes = raft::Payload(std::move(bytes));
  return encoded;
}

SnapshotEncoding::Encoded SnapshotEncoding::get(const SnapshotData& data, Clock::time_point now,
                                                SnapshotDataFormat format) {
  const SnapshotKey key = key_of(data, format);
  const auto has_section = [&] { return !data.section.empty(); };
  if (auto kept = find(key, has_section, now)) return *std::move(kept);
  keep(key, data.section.empty(), encode(data, format), now);
  return kept_->encoded;
}

std::optional<SnapshotEncoding::Encoded> SnapshotEncoding::find(
    const SnapshotKey& key, const std::function<bool()>& has_section, Clock::time_point now) {
  expire(now);
  if (!kept_ || !(kept_->key == key) || (kept_->without_section && has_section())) {
    return std::nullopt;
  }
  ++counters_.reuses;
  kept_->used_at = now;
  return kept_->encoded;
}

void SnapshotEncoding::keep(const SnapshotKey& key, bool without_section, Encoded encoded,
                            Clock::time_point now) {
  kept_ = Kept{key, without_section, std::move(encoded), now, now};
  ++counters_.encodes;
}

void SnapshotEncoding::expire(Clock::time_point now) {
  if (kept_ && (now - kept_->used_at >= kSnapshotEncodingIdleAge ||
                now - kept_->made_at >= kSnapshotEncodingMaxAge)) {
    kept_.reset();
  }
}

}  // namespace raftlog::replica

#include "replica/snapshot_encoding.h"

#include <string>
#include <utility>

#include "util/crc32c.h"

namespace raftlog::replica {

SnapshotKey key_of(const SnapshotData& data) {
  return SnapshotKey{data.index, data.term, data.conf, data.retired_ids};
}

SnapshotEncoding::Encoded SnapshotEncoding::get(const SnapshotData& data, Clock::time_point now) {
  const SnapshotKey key = key_of(data);
  const auto has_section = [&] { return !data.section.empty(); };
  if (auto kept = find(key, has_section, now)) return *std::move(kept);
  std::string bytes = encode_snapshot_data(data);
  const std::uint32_t crc = util::crc32c::value(bytes);
  keep(key, data.section.empty(), Encoded{raft::Payload(std::move(bytes)), crc}, now);
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

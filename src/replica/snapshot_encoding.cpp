#include "replica/snapshot_encoding.h"

#include <string>
#include <utility>

#include "util/crc32c.h"

namespace raftlog::replica {

SnapshotEncoding::Encoded SnapshotEncoding::get(const SnapshotData& data, Clock::time_point now) {
  expire(now);
  if (kept_ && kept_->index == data.index && kept_->term == data.term && kept_->conf == data.conf &&
      kept_->retired_ids == data.retired_ids &&
      !(kept_->without_section && !data.section.empty())) {
    ++counters_.reuses;
    kept_->used_at = now;
    return kept_->encoded;
  }
  std::string bytes = encode_snapshot_data(data);
  const std::uint32_t crc = util::crc32c::value(bytes);
  kept_ = Kept{data.index,
               data.term,
               data.conf,
               data.retired_ids,
               data.section.empty(),
               Encoded{raft::Payload(std::move(bytes)), crc},
               now,
               now};
  ++counters_.encodes;
  return kept_->encoded;
}

void SnapshotEncoding::expire(Clock::time_point now) {
  if (kept_ && (now - kept_->used_at >= kSnapshotEncodingIdleAge ||
                now - kept_->made_at >= kSnapshotEncodingMaxAge)) {
    kept_.reset();
  }
}

}  // namespace raftlog::replica

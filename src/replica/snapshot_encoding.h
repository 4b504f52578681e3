// The leader's last encoded snapshot data, reused (docs/design.md, "Snapshot transfer").
//
// Why: a stranded follower's snapshot is sent again after every snapshot retry timeout, and every
// follower stranded behind the same first index gets the same point. Encoding its data (tens of MiB
// of dedup state at most) and its CRC-32C on the Raft loop each time cost the loop that much per
// send, and a follower that must resume an interrupted transfer needs byte-identical data anyway
// (server/snapshot_chunks.h: a transfer resumes only for the same CRC). So the replica keeps the
// bytes and CRC of the last encoding and hands out the same shared buffer while it is valid:
//   - for the same point, term and configuration (what the data says it describes);
//   - until an install or a trim (either changes the log the data's dedup and topic parts were
//     taken from), or until this node stops leading;
//   - for at most kSnapshotEncodingMaxAge after it was made: the data's consumer group section and
//     timestamp floor are as of the encoding, still valid for its point (the follower replays the
//     entries after it), but the older they are, the more a follower replays; long enough for a
//     64 MiB transfer over a slow link (1 MB/s) to be retried several times with the same bytes.
// Bounded: one encoding, at most the replica's snapshot data budget (ReplicaConfig::
// max_snapshot_data_bytes), its buffer shared with the messages in flight, not copied.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

#include "raft/types.h"
#include "replica/snapshot_data.h"

namespace raftlog::replica {

inline constexpr std::chrono::minutes kSnapshotEncodingMaxAge{5};

struct SnapshotEncodingCounters {
  std::uint64_t encodes = 0;  // snapshot data encoded for a send
  std::uint64_t reuses = 0;   // sends that reused the last encoding
};

class SnapshotEncoding {
 public:
  using Clock = std::chrono::steady_clock;

  struct Encoded {
    raft::Payload bytes;
    std::uint32_t crc32c = 0;
  };

  // The encoding of `data` (origin kInstalled, as a leader sends it): the kept one when it is for
  // the same index, term and configuration and younger than kSnapshotEncodingMaxAge at `now`, else
  // a new one, which replaces it.
  Encoded get(const SnapshotData& data, Clock::time_point now);
  // An install or a trim changed the log it was taken from, or this node stopped leading.
  void invalidate() { kept_.reset(); }
  // Drops an encoding older than kSnapshotEncodingMaxAge (so it does not hold its bytes).
  void expire(Clock::time_point now);

  bool holds() const { return kept_.has_value(); }
  const SnapshotEncodingCounters& counters() const { return counters_; }

 private:
  struct Kept {
    raft::Index index = 0;
    raft::Term term = 0;
    raft::ConfState conf;
    Encoded encoded;
    Clock::time_point made_at{};
  };
  std::optional<Kept> kept_;
  SnapshotEncodingCounters counters_;
};

}  // namespace raftlog::replica

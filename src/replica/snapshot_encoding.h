// The leader's last encoded snapshot data, reused (docs/design.md, "Snapshot transfer").
//
// Why: a stranded follower's snapshot is sent again after every snapshot retry timeout, and every
// follower stranded behind the same first index gets the same point. Encoding its data (tens of MiB
// of dedup state at most) and its CRC-32C on the Raft loop each time cost the loop that much per
// send, and a follower that must resume an interrupted transfer needs byte-identical data anyway
// (server/snapshot_chunks.h: a transfer resumes only for the same CRC). So the replica keeps the
// bytes and CRC of the last encoding and hands out the same shared buffer while it is valid:
//   - for the same point, term and configuration (what the data says it describes), unless it was
//     made without the node's section (raftlogd: the consumer group table, empty while the
//     dispatcher has not applied past the point) and the data now has one: a fresh encoding carries
//     the table, which the follower would otherwise mark unknown;
//   - until an install or a trim (either changes the log the data's dedup and topic parts were
//     taken from), or until this node stops leading;
//   - while it was used (sent, or its transfer made progress: touch()) within
//     kSnapshotEncodingIdleAge, and for at most kSnapshotEncodingMaxAge
//     after it was made: the data's consumer group section and timestamp floor are as of the
//     encoding, still valid for its point (the follower replays the entries after it), but the
//     older they are, the more a follower replays. Counted from the last use, so a transfer over a
//     slow link that keeps being retried keeps its bytes (a resume needs them identical) up to the
//     hard bound: a 64 MiB snapshot at 40 KB/s.
// Bounded: one encoding, at most the replica's snapshot data budget (ReplicaConfig::
// max_snapshot_data_bytes), its buffer shared with the messages in flight, not copied.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "raft/types.h"
#include "replica/snapshot_data.h"
#include "replica/snapshot_frames.h"

namespace raftlog::replica {

inline constexpr std::chrono::minutes kSnapshotEncodingIdleAge{5};
inline constexpr std::chrono::minutes kSnapshotEncodingMaxAge{30};

// What an encoding stands for: the point, its term and configuration, and the ids retired as of it
// (a committed removal after the encoding adds one, CONFSTATE rewritten, without moving the point,
// and the follower must learn it). The leader computes it before it gathers anything, so a send
// that the kept encoding serves never walks the dedup table (replica_snapshot_send.cpp).
// How the data is encoded: framed with the running max stamp (version 6, snapshot_frames.h) for a
// peer that says it takes it, framed (version 4) for a peer that takes only that one, or versions
// 1..3 for a peer that takes neither (it does not say so on its messages: an older node).
enum class SnapshotDataFormat : std::uint8_t { kPlain, kFramed, kFramedWithStamp };

struct SnapshotKey {
  raft::Index index = 0;
  raft::Term term = 0;
  raft::ConfState conf;
  std::vector<raft::NodeId> retired_ids;
  SnapshotDataFormat format = SnapshotDataFormat::kFramed;
  // The running max stamp as of the point, when the leader knows it there (SnapshotData's
  // stamp_at_index, stamp_max_ms): only version 6 carries it. A trim or an install (the only
  // changes to it) invalidates the encoding anyway; kept here so the key says all it stands for.
  bool stamp_known = false;
  std::uint64_t stamp = 0;
  friend bool operator==(const SnapshotKey&, const SnapshotKey&) = default;
};
SnapshotKey key_of(const SnapshotData& data, SnapshotDataFormat format);

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
    // kFramed: where each frame sits (a continuation is cut from it); null for kPlain.
    std::shared_ptr<const SnapshotFrames> frames;
  };
  // Encodes `data` as `format` says, with its CRC-32C and (framed) its frame index. Off the loop.
  static Encoded encode(const SnapshotData& data, SnapshotDataFormat format);

  // The encoding of `data` (origin kInstalled, as a leader sends it) in `format`: the kept one when
  // it may stand for it (see the top of this file) at `now`, else a new one, which replaces it.
  Encoded get(const SnapshotData& data, Clock::time_point now,
              SnapshotDataFormat format = SnapshotDataFormat::kFramed);
  // The kept encoding when it may stand for data of `key` at `now` (a reuse, counted), else
  // nullopt. `has_section` (whether the data would now carry the node's section) is asked only when
  // the kept one was made without it.
  std::optional<Encoded> find(const SnapshotKey& key, const std::function<bool()>& has_section,
                              Clock::time_point now);
  // Keeps `encoded`, made (off the loop) from data of `key` with or without the node's section:
  // an encode, counted; it replaces the kept one.
  void keep(const SnapshotKey& key, bool without_section, Encoded encoded, Clock::time_point now);
  // `sends` more sends took an encoding as it was made (they waited for it): counted as reuses.
  void count_shared(std::uint64_t sends) { counters_.reuses += sends; }
  // A transfer of the snapshot at `index` made progress (raftlogd: its chunks went out): a use, so
  // a transfer slower than kSnapshotEncodingIdleAge keeps its bytes for its retry.
  void touch(raft::Index index, Clock::time_point now) {
    if (kept_ && kept_->key.index == index) kept_->used_at = now;
  }
  // An install or a trim changed the log it was taken from, or this node stopped leading.
  void invalidate() { kept_.reset(); }
  // Drops an encoding unused for kSnapshotEncodingIdleAge or older than kSnapshotEncodingMaxAge
  // (so it does not hold its bytes).
  void expire(Clock::time_point now);

  bool holds() const { return kept_.has_value(); }
  const SnapshotEncodingCounters& counters() const { return counters_; }

 private:
  struct Kept {
    SnapshotKey key;
    bool without_section = false;  // the node's section was empty
    Encoded encoded;
    Clock::time_point made_at{};
    Clock::time_point used_at{};
  };
  std::optional<Kept> kept_;
  SnapshotEncodingCounters counters_;
};

}  // namespace raftlog::replica

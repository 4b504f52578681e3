// Snapshot transfer in chunks (docs/design.md, "Snapshot transfer"), the part without gRPC: the
// bounds, where a chunk sits in its snapshot, and the receiver's reassembly.
//
// A snapshot's data (src/replica/snapshot_data.h: dedup, topic and group tables as of its index) can
// exceed the 8 MiB a peer message may carry. The sender's append lane (peer_queue.h) cuts data of more
// than kSnapshotChunkBytes into chunks made one at a time as the lane's writes go out, at most
// kSnapshotWindowBytes of them held by the lane at once, so a snapshot never fills the queue and never
// holds up the control lane's heartbeats. The receiver (SnapshotReassembler) puts them back together
// and hands its core one whole raft::Message, only once every byte arrived in order and the CRC-32C of
// the whole data matched.
//
// Memory: a leader holds one snapshot per follower it is sending to (a newer one for the same
// follower replaces it), each shared with the core's message, plus at most kSnapshotWindowBytes of
// encoded chunks per follower. A follower holds at most one partial snapshot per sending peer, each at
// most the snapshot data its replica accepts (PeerTransportOptions::max_snapshot_receive_bytes,
// 64 MiB in raftlogd; never above kMaxSnapshotBytes) (it grows with the bytes received, not with the total a chunk announces), and
// a chunk of a higher term drops every partial of a lower term, so after a leader change only the new
// leader's remains.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "raft/types.h"

namespace raftlog::server {

// A snapshot whose data is larger than this is sent in chunks of at most this many data bytes; a
// smaller one travels whole in one SNAPSHOT message, as before chunking existed.
inline constexpr std::size_t kSnapshotChunkBytes = std::size_t{1} << 20;
// The largest snapshot data a sender sends or a receiver reassembles (a leader refuses to send a
// larger one and logs it; a chunk announcing more ends its stream as malformed). raftlog's snapshot
// data is bounded far below this by the replica's own table bounds.
inline constexpr std::uint64_t kMaxSnapshotBytes = std::uint64_t{256} << 20;
// Sender flow control: the chunk data bytes one peer's append lane holds at once (queued, being
// written, awaiting the handshake). The next chunk is made only once earlier ones were sent.
inline constexpr std::size_t kSnapshotWindowBytes = 4 * kSnapshotChunkBytes;
// A partial snapshot that received no chunk for this long is dropped (its sender died or gave up; a
// leader retries with a new snapshot from offset 0 after its snapshot retry timeout anyway).
inline constexpr std::chrono::seconds kSnapshotPartialIdleTimeout{30};

// Where a chunk's data sits in its snapshot's data.
struct SnapshotChunkPlace {
  std::uint64_t offset = 0;       // of the chunk's first byte
  std::uint64_t total_bytes = 0;  // of the whole data (> kSnapshotChunkBytes when chunked)
  std::uint32_t data_crc32c = 0;  // of the whole data

  friend bool operator==(const SnapshotChunkPlace&, const SnapshotChunkPlace&) = default;
};

// A chunk as the codec decoded and checked it (structure and bounds; message_codec.h): `message` is
// the kSnapshot with index, term and configuration and empty data; `data` the chunk's bytes.
struct SnapshotChunk {
  raft::Message message;
  SnapshotChunkPlace place;
  std::string data;
};

// A partial snapshot being reassembled, for status and metrics.
struct SnapshotReceiveProgress {
  raft::NodeId from = raft::kNoNode;
  raft::Term term = 0;    // of the messages carrying it
  raft::Index index = 0;  // the snapshot's
  std::uint64_t received_bytes = 0;
  std::uint64_t total_bytes = 0;
};

// The last whole snapshot handed to the core (reassembled, or received in one message).
struct SnapshotDelivery {
  raft::NodeId from = raft::kNoNode;
  raft::Term term = 0;
  raft::Index index = 0;
  std::uint64_t bytes = 0;
  std::chrono::steady_clock::time_point at{};
};

struct SnapshotReceiveCounters {
  std::uint64_t chunks_received = 0;      // chunks given to add()
  std::uint64_t snapshots_delivered = 0;  // whole snapshots handed on (chunked or not)
  std::uint64_t partials_replaced = 0;    // a new snapshot (offset 0) replaced a partial, or a
                                          // higher term's chunk dropped another peer's partial
  std::uint64_t chunks_refused = 0;       // stale, out of order or not matching the partial: the
                                          // chunk and its peer's partial are dropped
  std::uint64_t checksum_mismatches = 0;  // complete, but the CRC-32C did not match: dropped
  std::uint64_t partials_expired = 0;     // kSnapshotPartialIdleTimeout without a chunk
};

// Everything the receiver knows about snapshot transfers, for status and metrics.
struct SnapshotReceiveStatus {
  std::vector<SnapshotReceiveProgress> partials;  // by sending peer
  std::optional<SnapshotDelivery> last_delivered;
  SnapshotReceiveCounters counters;
};

// Reassembles chunked snapshots, one partial per sending peer. Not synchronized (the transport's
// inbound side guards it with a lock). The rules, checked on every chunk:
//   - a chunk announcing a total above the node's bound (max_total_bytes) is refused, and its peer's
//     partial dropped;
//   - a chunk at offset 0 starts a new partial for its peer, replacing that peer's partial if any;
//   - any other chunk must continue its peer's partial exactly: same message term, snapshot index,
//     snapshot term, configuration, total size and CRC, at the offset where the partial ends;
//     otherwise the chunk is refused and the partial dropped (a lost chunk, a stream that broke, a
//     stale or forged chunk: the leader sends the snapshot again after its retry timeout);
//   - a chunk whose term is below another peer's partial's is refused (a deposed leader's); one
//     above drops the partials of lower terms (a new leader's snapshot replaces the old one's);
//   - the last byte completes it: the CRC-32C of the whole data is checked and the whole message
//     returned, or the partial dropped and counted.
class SnapshotReassembler {
 public:
  using Clock = std::chrono::steady_clock;

  // `max_total_bytes`: the largest snapshot data this node accepts (its replica's decoding bound;
  // at most kMaxSnapshotBytes): a chunk announcing more is refused, so no peer can make this node
  // hold bytes it would refuse at the end anyway.
  explicit SnapshotReassembler(std::uint64_t max_total_bytes = kMaxSnapshotBytes,
                               Clock::duration idle_timeout = kSnapshotPartialIdleTimeout)
      : max_total_bytes_(std::min(max_total_bytes, kMaxSnapshotBytes)),
        idle_timeout_(idle_timeout) {}

  // Takes one chunk (the codec checked its structure: 1 <= data size, offset + size <= total <=
  // kMaxSnapshotBytes). Returns the whole kSnapshot message once this chunk completed a checked
  // snapshot. *problem is set (else cleared) when the chunk was refused or completed a snapshot
  // whose CRC did not match, for the log.
  std::optional<raft::Message> add(SnapshotChunk chunk, Clock::time_point now,
                                   std::string* problem);
  // A snapshot that arrived whole in one message is handed on as well: remember it for status.
  void record_delivered(const raft::Message& snapshot, Clock::time_point now);
  // Drops partials idle for longer than the idle timeout (also done by add()).
  void expire(Clock::time_point now);

  SnapshotReceiveStatus status() const;
  std::size_t partial_count() const { return partials_.size(); }

 private:
  struct Partial {
    raft::Message message;  // the first chunk's header (index, terms, configuration), no data
    SnapshotChunkPlace place;
    std::string data;  // the bytes received so far, from offset 0
    Clock::time_point last_chunk_at{};
  };

  // Whether `chunk` continues `partial` exactly (the same snapshot, the next offset).
  static std::string mismatch(const Partial& partial, const SnapshotChunk& chunk);
  std::optional<raft::Message> complete(raft::NodeId from, Clock::time_point now,
                                        std::string* problem);

  const std::uint64_t max_total_bytes_;
  const Clock::duration idle_timeout_;
  std::map<raft::NodeId, Partial> partials_;
  std::optional<SnapshotDelivery> last_delivered_;
  SnapshotReceiveCounters counters_;
};

}  // namespace raftlog::server

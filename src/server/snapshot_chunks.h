// Snapshot transfer in chunks (docs/design.md, "Snapshot transfer"), the part without gRPC: the
// bounds, where a chunk sits in its snapshot, the receiver's reassembly and its receipts.
//
// A snapshot's data (src/replica/snapshot_data.h: dedup, topic and group tables as of its index) can
// exceed the 8 MiB a peer message may carry. The sender's append lane (peer_queue.h) cuts data of more
// than kSnapshotChunkBytes into chunks made one at a time as the lane's writes go out, at most
// kSnapshotWindowBytes of them held by the lane at once, so a snapshot never fills the queue and never
// holds up the control lane's heartbeats. The receiver (SnapshotReassembler) puts them back together
// and hands its core one whole raft::Message, only once every byte arrived in order and the CRC-32C of
// the whole data matched.
//
// Resuming: while it holds a partial snapshot the receiver puts a SnapshotReceipt (the snapshot's
// identity and the contiguous bytes it holds) on every message it sends to any peer (its heartbeat
// and append answers). A sender that (re)sends a snapshot of the same identity to that peer starts
// at the acknowledged offset instead of 0 (peer_queue.h), and the receiver continues its partial:
// after a dropped chunk, a broken stream, or a new leader that sends byte-identical data.
//
// Memory: a leader holds one snapshot per follower it is sending to (a newer one for the same
// follower replaces it), each shared with the core's message, plus at most kSnapshotWindowBytes of
// encoded chunks per follower, the last continuation it sent a follower (LaneQueue::
// kept_continuation: at most 64 MiB per follower lane, until its last chunk is written, it is
// replaced, or it idles), and one receipt per peer (SnapshotReceipts). A follower holds at most
// one partial snapshot per sending peer, each at most the snapshot data its replica accepts
// (PeerTransportOptions::max_snapshot_receive_bytes, 64 MiB in raftlogd; never above
// kMaxSnapshotBytes) (it grows with the bytes received, not with the total a chunk announces), and a
// chunk of a higher term drops every partial of a lower term except one of the same identity, which
// the new sender continues, so after a leader change only one remains.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "raft/types.h"
#include "replica/snapshot_frame_walk.h"

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
// A partial snapshot that received no chunk of its data for this long is dropped (its sender died or
// gave up). Chunks refused as a gap count as received: a lane that did not see a chunk's loss (a
// stream that broke after its writes completed) sends the rest of the transfer first, then the leader
// retries 5 s (its snapshot retry timeout) after the last chunk, and resumes from the receipt. A new
// leader is elected within a few election timeouts, well within it. A partial a restart restored
// (SnapshotReassembler::restore) starts idling only once a leader is heard (start_idle_clocks):
// a node whose start-up takes long (a large log's recovery, its indexes' rebuild) keeps it until
// a leader could resume it.
inline constexpr std::chrono::seconds kSnapshotPartialIdleTimeout{30};

// Snapshot data formats a node decodes, as it says on every message (peer.proto, RaftMessage.
// snapshot_formats): the framed version 4 (replica/snapshot_frames.h), and from stamp5 on the
// framed version 6 (version 4 with the running max stamp in its head). Versions 1..3 every node
// decodes. A node from before stamp5 sets bit 0 only and gets version 4, as before.
inline constexpr std::uint32_t kSnapshotFormatFramed = 1;
inline constexpr std::uint32_t kSnapshotFormatFramedWithStamp = 2;
inline constexpr std::uint32_t kOwnSnapshotFormats =
    kSnapshotFormatFramed | kSnapshotFormatFramedWithStamp;

// Where a chunk's data sits in its snapshot's data.
struct SnapshotChunkPlace {
  std::uint64_t offset = 0;       // of the chunk's first byte
  std::uint64_t total_bytes = 0;  // of the whole data (> kSnapshotChunkBytes when chunked)
  std::uint32_t data_crc32c = 0;  // of the whole data
  // replica::snapshot_data_digest of the whole data; absent from a sender from before digests.
  std::optional<std::uint32_t> data_digest = std::nullopt;

  friend bool operator==(const SnapshotChunkPlace&, const SnapshotChunkPlace&) = default;
};

// What identifies a snapshot's data across transfers, senders and terms: two chunks of the same
// identity carry bytes of the same data (up to the digest's collisions, 2^-32 for two encodings,
// which the whole data's checks at the end catch only as far as a CRC can). The whole-data CRC-32C
// alone is not enough: two framed encodings of one layout share it (replica::snapshot_data_digest),
// so the digest is part of the identity. An identity without one (a sender from before digests) is
// continued only by its own sender at the partial's term or below, where the bytes it repeats match
// the held ones; that sender's resume by offset with another encoding in the same term is not told
// apart (docs/design.md, "Snapshot transfer", *The data's digest*).
struct SnapshotIdentity {
  raft::Index index = 0;
  raft::Term term = 0;  // the snapshot's (of its last entry), not the message's
  std::uint64_t total_bytes = 0;
  std::uint32_t data_crc32c = 0;
  std::optional<std::uint32_t> data_digest = std::nullopt;

  friend bool operator==(const SnapshotIdentity&, const SnapshotIdentity&) = default;
};

// A receiver's acknowledgement (peer.proto, SnapshotReceipt): it holds the first `received_bytes`
// bytes of the snapshot `snapshot` (0 < received_bytes < snapshot.total_bytes, as the codec checks).
// `splice`: for framed data (version 4), where another leader may continue it (its head CRC, the
// end of its head or last complete client block, that block's last client, the CRC-32C of the
// bytes before it; 0 < kept_bytes <= received_bytes), computed by the receiver from the bytes it
// holds (replica::FramedFrameWalk).
struct SnapshotReceipt {
  SnapshotIdentity snapshot;
  std::uint64_t received_bytes = 0;
  std::optional<replica::FramedSplicePoint> splice = std::nullopt;

  friend bool operator==(const SnapshotReceipt&, const SnapshotReceipt&) = default;
};

// A chunk as the codec decoded and checked it (structure and bounds; message_codec.h): `message` is
// the kSnapshot with index, term and configuration and empty data; `data` the chunk's bytes.
// `splice`: a new leader's continuation (docs/design.md, "Snapshot transfer", *A new leader
// continues*): its data is the follower's partial up to splice->kept_bytes (another sender's bytes
// of the same snapshot point) followed by this sender's clients above splice->last_client_id and
// its trailer; `place` counts from the data's start and its CRC-32C is the whole spliced data's.
// The receiver splices only when its partial's bytes match the point exactly.
struct SnapshotChunk {
  raft::Message message;
  SnapshotChunkPlace place;
  std::string data;
  std::optional<replica::FramedSplicePoint> splice = std::nullopt;
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
  // Resuming: chunks whose bytes the partial held already (a sender that resumed from an older
  // receipt, or started again at 0 with the same data): skipped, the partial kept; and partials of
  // a lower term that a higher term's sender continued (same identity) instead of replacing them.
  std::uint64_t chunks_duplicate = 0;
  std::uint64_t partials_continued = 0;
  // A restart: the partial this node kept on disk (snapshot_partial_file.h) put back at start, and
  // its data bytes, which the sender's resumed transfer does not send again.
  std::uint64_t partials_restored = 0;
  std::uint64_t bytes_restored = 0;
  // The file that keeps the partial on disk: files found at start that were dropped (unreadable,
  // not a regular file, another cluster's or node's, above the bound, a disk past its watermark; a
  // stale one naming a snapshot the log already holds is removed, not counted), and writes that
  // failed or were not made for lack of room (the file is then removed; the transfer goes on in
  // memory only).
  std::uint64_t partial_files_dropped = 0;
  std::uint64_t partial_file_write_failures = 0;
  // A new leader's continuation: partials spliced (cut at the continuation's point and continued
  // with its bytes), the bytes they kept, and continuations refused (the partial did not match
  // the point: it is dropped and the leader's next attempt starts at 0).
  std::uint64_t partials_spliced = 0;
  std::uint64_t splice_kept_bytes = 0;
  std::uint64_t splices_refused = 0;
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
//   - a chunk whose term is below a leader message's this node received (note_leader_term), or
//     below another peer's partial's, is refused (a deposed leader's); one
//     above drops the partials of lower terms (a deposed leader's), except one of the chunk's
//     identity (index, snapshot term, configuration, total size, CRC) when the chunk's peer has
//     none: the new sender continues it (a new leader that sends byte-identical data);
//   - a chunk of its peer's partial's identity, at a message term at least the partial's, continues
//     it: at the offset where the partial ends it is appended; bytes the partial holds already are
//     skipped (counted as duplicates, the rest appended); a chunk past its end (a gap: a lost chunk,
//     or a sender that resumed from a wrong offset) is refused and the partial kept, so the sender's
//     next attempt resumes from the receipt;
//   - a chunk of another identity starts a new partial at offset 0 (replacing the peer's), and is
//     refused otherwise, dropping the peer's partial (a stale or forged chunk, or a new snapshot the
//     receiver missed the start of: the sender has no receipt for it and starts again at 0);
//   - a chunk of a continuation (SnapshotChunk::splice) of another identity than its peer's partial
//     (or a lower term's partial of another peer, moved to it as above) but of the same snapshot
//     point (index, term, configuration) splices it when the chunk starts at the point and the
//     partial's bytes match it (check_splice_point: a head or block ends there with that last
//     client, the head CRC and the CRC-32C of the bytes before it): the partial is cut there and
//     takes the continuation's identity; otherwise the chunk is refused and the partial dropped
//     (counted in splices_refused), so the sender's next attempt starts at 0, except a chunk of a
//     lower term or not at the point (the first was lost): refused, the partial kept;
//   - the last byte completes it: the CRC-32C of the whole data is checked and the whole message
//     returned (with the header of the last chunk: its sender, term and commit), or the partial
//     dropped and counted.
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
  // A leader's message (an append, a heartbeat, a chunk) of `term` reached this node, or this node
  // itself is at `term` (it sent a message of it): a chunk of a lower term is a deposed leader's,
  // refused (counted in chunks_refused) whether or not a partial of the new term exists (the
  // node's core would ignore the whole snapshot anyway).
  void note_leader_term(raft::Term term) { leader_term_ = std::max(leader_term_, term); }
  // A snapshot that arrived whole in one message is handed on as well: remember it for status.
  void record_delivered(const raft::Message& snapshot, Clock::time_point now);
  // Drops partials idle for longer than the idle timeout (also done by add()).
  void expire(Clock::time_point now);
  // Drops the partials of snapshots of an index at or below `index` (the node's commit index: the
  // entries arrived by replication or were installed; the core would ignore such a snapshot),
  // counted as replaced. Returns how many.
  std::size_t drop_through(raft::Index index);

  SnapshotReceiveStatus status() const;
  std::size_t partial_count() const { return partials_.size(); }
  // What this node tells its peers (SnapshotReceipts::set_own): the partial of the highest term
  // (of most bytes among equals), if any; *valid_until (if given): when that partial would expire
  // without another chunk, so the receipt does not outlive it.
  std::optional<SnapshotReceipt> receipt(Clock::time_point* valid_until = nullptr) const;

  // A partial as the file that keeps it on disk follows it (snapshot_partial_file.h).
  struct PartialView {
    raft::NodeId from = raft::kNoNode;
    // Numbers each partial started (from offset 0, or restored); kept when a new sender continues
    // it, so the file knows whether the bytes it holds are still the partial's.
    std::uint64_t generation = 0;
    const raft::Message* header = nullptr;  // the latest chunk's; no data
    SnapshotChunkPlace place;               // total and CRC (offset 0)
    std::string_view data;                  // the bytes held, from offset 0
  };
  std::optional<PartialView> partial_of_generation(std::uint64_t generation) const;
  std::optional<PartialView> partial_from(raft::NodeId from) const;
  // Puts back a partial a restart kept on disk (its header from `header.from`, 1 <= data size <
  // place.total_bytes <= the bound), so its receipt goes out on this node's messages and the
  // sender resumes after it; counted. Its idle clock waits for start_idle_clocks() (or a chunk of
  // it): until then it neither expires nor does its receipt. "" when restored, else why not (the
  // caller drops the file). Before any chunk: a partial of that sender is not replaced.
  std::string restore(raft::Message header, SnapshotChunkPlace place, std::string data,
                      Clock::time_point now);
  // A leader was heard: the restored partials' idle clocks start at `now`. Returns whether a
  // restored partial was still waiting for it.
  bool start_idle_clocks(Clock::time_point now);

 private:
  struct Partial {
    raft::Message message;  // the latest chunk's header (index, terms, configuration), no data
    SnapshotChunkPlace place;
    std::string data;  // the bytes received so far, from offset 0
    replica::FramedFrameWalk frames;  // of `data`: its splice point, for the receipt
    Clock::time_point last_chunk_at{};
    // False for a restored partial until a leader is heard (start_idle_clocks) or a chunk of it
    // arrives: it does not expire meanwhile.
    bool idle_clock_started = true;
    std::uint64_t generation = 0;  // PartialView::generation
  };
  static PartialView view_of(raft::NodeId from, const Partial& partial);

  // "" when `chunk` carries bytes of `partial`'s snapshot (its identity and configuration), else how
  // it differs.
  static std::string mismatch(const Partial& partial, const SnapshotChunk& chunk);
  // "" when `chunk`, of `partial`'s identity, may continue it; else why it is of another encoding:
  // a chunk without a digest at a later term than the partial's, or bytes that differ from the
  // held ones where they overlap (review resume5 M1).
  static std::string other_encoding(const Partial& partial, const SnapshotChunk& chunk);
  // Under the rules above, for a chunk from a peer with a partial of the chunk's identity.
  std::optional<raft::Message> continue_partial(Partial& partial, SnapshotChunk chunk,
                                                Clock::time_point now, std::string* problem);
  // A continuation's chunk for a partial of another identity: splices it, or refuses the chunk and
  // drops the partial.
  std::optional<raft::Message> splice_partial(std::map<raft::NodeId, Partial>::iterator found,
                                              SnapshotChunk chunk, Clock::time_point now,
                                              std::string* problem);
  // The higher-term rule: drops lower-term partials of other peers, or moves one of the chunk's
  // identity to the chunk's peer.
  void drop_or_continue_lower_terms(const SnapshotChunk& chunk);
  std::optional<raft::Message> complete(raft::NodeId from, Clock::time_point now,
                                        std::string* problem);

  const std::uint64_t max_total_bytes_;
  const Clock::duration idle_timeout_;
  raft::Term leader_term_ = 0;  // note_leader_term
  std::map<raft::NodeId, Partial> partials_;
  std::uint64_t next_generation_ = 1;
  std::optional<SnapshotDelivery> last_delivered_;
  SnapshotReceiveCounters counters_;
};

// The receipts a transport exchanges (thread-safe): on a receiver, its own, put on every message it
// sends; on a sender, the latest each peer put on its messages (none when its latest message had
// none: it holds no partial, or runs a build from before receipts). One per peer: at most
// kMaxPeersTracked peers (the transport's configured and admitted ones are far fewer); a receipt from
// a further peer is ignored.
class SnapshotReceipts {
 public:
  static constexpr std::size_t kMaxPeersTracked = 128;

  // The snapshot formats `peer` said its latest message (0: a node from before the field).
  void record_formats(raft::NodeId peer, std::uint32_t formats);
  // None said yet (no message from `peer` since the start): 0, the versions every node decodes.
  std::uint32_t formats_of(raft::NodeId peer) const;

  // `valid_until`: when the partial it describes expires unless a chunk arrives (then set again).
  void set_own(std::optional<SnapshotReceipt> receipt,
               std::chrono::steady_clock::time_point valid_until =
                   std::chrono::steady_clock::time_point::max());
  // None once `now` is past the receipt's valid_until: its partial has idled out.
  std::optional<SnapshotReceipt> own(std::chrono::steady_clock::time_point now) const;
  // From a checked message of `peer`: its receipt, or none.
  void record(raft::NodeId peer, const std::optional<SnapshotReceipt>& receipt);
  std::optional<SnapshotReceipt> from_peer(raft::NodeId peer) const;

 private:
  mutable std::mutex mu_;
  std::optional<SnapshotReceipt> own_;
  std::chrono::steady_clock::time_point own_valid_until_{};
  std::map<raft::NodeId, SnapshotReceipt> peers_;
  std::map<raft::NodeId, std::uint32_t> formats_;  // at most kMaxPeersTracked
};

}  // namespace raftlog::server

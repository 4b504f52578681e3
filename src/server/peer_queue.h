// The outbound queueing policy of the peer transport, without gRPC: which lane a message takes, what
// a lane's queue holds and drops, and what its next write carries (transport.h has the why of lanes,
// bounds, age and batches; docs/design.md, "Transport").
//
// A LaneQueue has custody of the messages of one lane to one peer from send() until they are counted
// as sent or dropped, in three stages:
//   queued      waiting, in arrival order (messages that come back go to the front);
//   writing     the batch of the lane's one write in flight, taken from the front of the queue;
//   unconfirmed a stream's first batch, written, until the peer accepts the stream (handshake).
// The bounds count all three, so a message that comes back to the queue always fits. Every message
// leaves through exactly one counter: sent, or dropped (queue full, expired, oversize, send failed).
//
// Not synchronized: the transport guards each lane's queue with that lane's lock. The one exception
// is writing(): between take_batch() and the call that settles the write, nothing changes it, so the
// thread that owns the write may read it (to encode it) without the lock.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "raft/types.h"
#include "server/snapshot_chunks.h"
#include "util/rate_limit.h"

namespace raftlog::server {

// The two outbound streams of a peer: entry-carrying appends, and everything else, so a heartbeat or
// a vote never waits behind (or is dropped because of) a multi-MiB batch.
enum class Lane : std::uint8_t { kControl = 0, kAppend = 1 };
inline constexpr std::size_t kLaneCount = 2;

// Any message with entries goes on the append lane, so every control message is accounted
// kQueuedMessageHeaderBytes and the control lane's message bound bounds its bytes too.
Lane lane_for(const raft::Message& message);
const char* lane_name(Lane lane);  // "control" or "append"

// Queue accounting charges every message this much on top of its entries (entries already include
// raft::Entry::kEntryOverheadBytes each): close to the encoded size of a message's fixed fields.
inline constexpr std::size_t kQueuedMessageHeaderBytes = 64;
// What a message counts against its lane's byte bound.
std::size_t queued_bytes(const raft::Message& message);
// The control lane's byte bound for a bound of `max_messages`: entry-less messages, each accounted
// kQueuedMessageHeaderBytes.
std::size_t control_lane_max_bytes(std::size_t max_messages);

// One chunk of a snapshot the lane sends in chunks (snapshot_chunks.h): which transfer it belongs to,
// and which bytes of the message's snapshot data it carries.
struct QueuedChunk {
  std::uint64_t transfer = 0;  // LaneQueue's number for the snapshot it belongs to
  SnapshotChunkPlace place;
  std::size_t length = 0;  // data bytes from place.offset
  // The message carries its whole snapshot (data of at most one chunk): sent as it is, tracked for
  // progress like a transfer of one chunk.
  bool whole = false;
  // A continuation's chunk (SnapshotChunk::splice): the message's data starts at its kept_bytes.
  std::optional<replica::FramedSplicePoint> splice = std::nullopt;
};

struct QueuedMessage {
  raft::Message message;  // for a chunk: the whole snapshot message (its data shared, not copied)
  std::chrono::steady_clock::time_point enqueued_at;
  std::size_t bytes = 0;             // queued_bytes(message), or a chunk's own share
  std::optional<QueuedChunk> chunk;  // set: send only this chunk of message's snapshot data
};

// Why a chunked transfer started at 0 although the peer's receipt named a partial it holds
// (raftlog_snapshot_resume_missed_total{reason}, docs/metrics.md; the plan for resuming across
// leaders: docs/design.md, "Known limits").
enum class ResumeMiss : std::uint8_t {
  kPoint,       // the receipt names another snapshot point (index or term): after a leader change
                // whose new leader's log starts elsewhere, or after a trim or install moved it
  kBytes,       // the same point, other data (length or CRC): another leader's encoding
  kBeyondSent,  // this very data, but more bytes than this lane ever made of it (not trusted)
  // The same point, other data, and the receipt names a splice point (a framed partial), but:
  kHead,          // the partial's head differs from this data's (another state at the point)
  kContinuation,  // no continuation could be cut (this data is not framed, or the spliced total
                  // would pass what a receiver decodes, replica::kMaxFramedSnapshotBytes)
  // The same point, but the receipt names no data digest (a follower from before digests, or a
  // splice point without one): its partial may be another encoding of the same layout, which the
  // CRC does not tell apart (SnapshotIdentity), so it is neither resumed nor continued.
  kDigest,
};
inline constexpr std::size_t kResumeMissReasons = 6;
// The metric's label: "point", "bytes", "beyond_sent", "head", "continuation", "digest".
const char* to_string(ResumeMiss reason);

// Resume misses counted by reason (indexed by ResumeMiss).
struct ResumeMissCounts {
  std::array<std::uint64_t, kResumeMissReasons> by_reason{};

  std::uint64_t& operator[](ResumeMiss reason) {
    return by_reason[static_cast<std::size_t>(reason)];
  }
  std::uint64_t operator[](ResumeMiss reason) const {
    return by_reason[static_cast<std::size_t>(reason)];
  }
  ResumeMissCounts& operator+=(const ResumeMissCounts& other) {
    for (std::size_t i = 0; i < kResumeMissReasons; ++i) by_reason[i] += other.by_reason[i];
    return *this;
  }
};

// What a lane does with the snapshot it sends in chunks, for status and metrics.
struct SnapshotSendProgress {
  enum class State : std::uint8_t {
    kSending,    // chunks left to send
    kSent,       // every chunk was sent (written on an accepted stream); the install is the peer's
    kAbandoned,  // a chunk was dropped (expired, stream closed) or a newer snapshot replaced it
  };
  raft::Term term = 0;  // of the message
  raft::Index index = 0;
  std::uint64_t total_bytes = 0;
  std::uint64_t sent_bytes = 0;  // by this transfer, from skipped_bytes on
  State state = State::kSending;
  // A resumed transfer: the bytes the peer acknowledged holding, which this one starts after.
  std::uint64_t skipped_bytes = 0;
  // Started at 0 although the peer's receipt named a partial: why it could not resume.
  std::optional<ResumeMiss> resume_missed;
};
const char* to_string(SnapshotSendProgress::State state);

// What a lane's queue has done with the messages it was given.
struct LaneQueueCounters {
  std::uint64_t sent_messages = 0;
  std::uint64_t dropped_queue_full = 0;   // push() found the queue at a bound
  std::uint64_t dropped_expired = 0;      // older than max_age when its turn came
  std::uint64_t dropped_oversize = 0;     // larger than max_message_bytes (payload, or encoded)
  std::uint64_t dropped_send_failed = 0;  // came back from a failed write after close()
  std::chrono::steady_clock::time_point last_send_ok{};  // epoch (zero) if never
  // Snapshots sent, whole (push) or in chunks (push_snapshot): started, wholly sent, abandoned (a
  // chunk or the message dropped, or replaced by a newer snapshot before it was all sent).
  std::uint64_t snapshots_started = 0;
  std::uint64_t snapshots_sent = 0;
  std::uint64_t snapshots_abandoned = 0;
  // Chunked snapshots started at a peer's receipt instead of 0, and the data bytes they skipped.
  std::uint64_t snapshots_resumed = 0;
  std::uint64_t snapshot_bytes_skipped = 0;
  // Chunked snapshots started at 0 although the peer's receipt named a partial, by reason.
  ResumeMissCounts snapshot_resume_missed;
  // Continuations (a new leader's data after the peer's splice point) sent instead of the whole
  // data, and the bytes they did not send (the peer's kept prefix).
  std::uint64_t snapshots_continued = 0;
  std::uint64_t snapshot_resume_saved_bytes = 0;
};

// A new leader's continuation for a peer whose receipt names a splice point of the same snapshot
// point (replica::make_framed_continuation): made by the transport before it takes the lane's lock
// (it copies the data after the point: up to 64 MiB, some 10-20 ms), when the lane keeps none it
// may resume (LaneQueue::kept_continuation).
struct SnapshotContinuation {
  replica::FramedSplicePoint point;  // the receipt's
  replica::FramedContinuation::Outcome outcome = replica::FramedContinuation::Outcome::kNotFramed;
  raft::Payload bytes;  // kMade: the data after point.kept_bytes
  // kMade: the spliced data's CRC-32C (the point's extended over `bytes`), computed with the cut,
  // outside the lane's lock.
  std::uint32_t spliced_crc32c = 0;
  // kMade: the spliced data's digest (the point's kept_digest extended over the frames in `bytes`);
  // none when the point names no kept_digest (then the continuation is not used: kDigest).
  std::optional<std::uint32_t> spliced_digest = std::nullopt;

  // What the peer's partial becomes once spliced: the snapshot at `index` (of term `term`) whose
  // data is the point's kept bytes followed by `bytes`.
  SnapshotIdentity spliced_identity(raft::Index index, raft::Term term) const {
    return SnapshotIdentity{index, term, point.kept_bytes + bytes.size(), spliced_crc32c,
                            spliced_digest};
  }
};
SnapshotContinuation make_snapshot_continuation(const raft::Payload& data,
                                                const replica::FramedSplicePoint& point);

struct LaneQueueLimits {
  std::size_t max_messages = 0;  // held: queued + writing + unconfirmed; at least 1
  std::size_t max_bytes = 0;     // held, as queued_bytes() counts them
  // One write: its encoded messages plus batch_framing_bytes each stay within it, except a single
  // message; a message that alone encodes larger (or whose entries alone are larger) is dropped.
  std::size_t max_message_bytes = 0;
  std::size_t max_batch_messages = 0;  // messages per write; at least 1
  std::size_t batch_framing_bytes = 0;
  std::chrono::milliseconds max_age{0};  // a queued message older than this is dropped, not sent
  // A kept continuation (LaneQueue::kept_continuation) without a chunk made of it for this long is
  // dropped by expire(): the peer's partial it would resume has idled out too (the transport's
  // snapshot_partial_idle_timeout, 30 s, counts from a partial's last chunk).
  std::chrono::milliseconds kept_continuation_idle{kSnapshotPartialIdleTimeout};
};

// Decides, one encoded message at a time in batch order, which messages of a taken batch its write
// carries (LaneQueueLimits::max_message_bytes). Once one does not fit, it and every later message of
// the batch wait for the next write: stop adding.
class BatchPlan {
 public:
  enum class Verdict : std::uint8_t {
    kAdd,       // in this write
    kOversize,  // dropped: it alone exceeds max_message_bytes
    kFull,      // the write is full: this message and the rest go back to the front of the queue
  };

  explicit BatchPlan(const LaneQueueLimits& limits)
      : max_message_bytes_(limits.max_message_bytes), framing_bytes_(limits.batch_framing_bytes) {}

  Verdict add(std::size_t encoded_bytes);
  std::size_t kept() const { return kept_; }
  // One per add(), in order.
  const std::vector<Verdict>& verdicts() const { return verdicts_; }

 private:
  std::size_t max_message_bytes_;
  std::size_t framing_bytes_;
  std::size_t batch_bytes_ = 0;
  std::size_t kept_ = 0;
  std::vector<Verdict> verdicts_;
};

class LaneQueue {
 public:
  using Clock = std::chrono::steady_clock;

  enum class Admission : std::uint8_t {
    kQueued,
    kOversize,  // its entries alone exceed max_message_bytes (counted)
    kFull,      // a bound would be exceeded (counted)
    kClosed,    // after close() (not counted: the transport is stopping)
  };

  explicit LaneQueue(const LaneQueueLimits& limits);

  const LaneQueueLimits& limits() const { return limits_; }

  // Queues `message` at the back, unless it is refused (see Admission).
  Admission push(raft::Message message, Clock::time_point now);
  // A kSnapshot whose data exceeds kSnapshotChunkBytes, to be sent in chunks with `data_crc32c`
  // (of the whole data): it replaces the lane's previous one (whose chunks not yet written are
  // dropped), and its chunks are made one at a time by take_batch() while the lane holds less than
  // kSnapshotWindowBytes of them and its bounds allow. kOversize (counted) for data over
  // kMaxSnapshotBytes.
  // `receipt`: the peer's latest (SnapshotReceipts), from the network. The transfer starts at its
  // offset instead of 0 (counted as resumed) only when it names this snapshot's identity (index,
  // term, total, CRC, digest: replica::snapshot_data_digest of the data, computed here from its
  // frames' headers; a receipt without a digest is a miss, kDigest) and, if the lane sent this
  // identity before in the message's term, an offset one of its transfers of it reached (a peer
  // cannot hold bytes it was never sent; a new leader, which sent none, trusts any offset below
  // the total, and so does a leader again in a later term: another leader may have sent the same
  // bytes meanwhile); otherwise it is ignored.
  // When the receipt names the same point but other data, and a splice point: the transfer sends
  // `continuation` (made for that very point) instead, from the point on (counted as continued,
  // the point's bytes as saved): its chunks carry the point, their place counts from the data's
  // start and their CRC-32C is the spliced data's (the point's CRC extended over the
  // continuation). Without one, or one that could not be made, it starts at 0 (a miss: kHead,
  // kContinuation).
  // When the receipt names the spliced data of `continuation` itself (the peer spliced it, and the
  // transfer broke: a closed stream, an expired chunk, the peer's restart from its SNAPSHOT.partial)
  // at or past its point, the transfer resumes it by offset as it would this lane's own data (the
  // beyond-sent check against what the lane made of the spliced data; counted as resumed, not as
  // continued again).
  Admission push_snapshot(raft::Message message, std::uint32_t data_crc32c, Clock::time_point now,
                          const std::optional<SnapshotReceipt>& receipt = std::nullopt,
                          const SnapshotContinuation* continuation = nullptr);
  // The continuation the lane keeps of its latest continued transfer, when it was cut from the data
  // `data` (the leader's whole encoding, by identity) and `receipt` names its spliced data: the
  // transport hands it back to push_snapshot instead of cutting a new one (no copy), and the
  // transfer resumes at the receipt's offset. Kept (its bytes shared with the transfer's chunks)
  // from a push_snapshot that continued or resumed it until the next push_snapshot that does
  // neither, its transfer's last chunk is sent, clear(), or limits().kept_continuation_idle without
  // a chunk made of it (expire(), which the transport also calls on a timer while one is kept):
  // at most one per lane, at most replica::kMaxFramedSnapshotBytes.
  std::optional<SnapshotContinuation> kept_continuation(const SnapshotIdentity& data,
                                                        const SnapshotReceipt& receipt) const;
  bool keeps_continuation() const { return kept_continuation_.has_value(); }
  // The lane's latest snapshot (whole or chunked), if it had one since it was last cleared.
  std::optional<SnapshotSendProgress> snapshot_progress() const;
  // The data bytes of one chunk: kSnapshotChunkBytes, or half the message bound when that is
  // smaller (a chunk with its headers always fits one write). Data above it is sent in chunks.
  std::size_t snapshot_chunk_bytes() const;
  // Drops (counts as expired) the queued messages older than max_age at `now`.
  void expire(Clock::time_point now);

  // Something to write: a queued message, or the next chunk of the snapshot being sent.
  bool has_queued() const { return !queue_.empty() || can_make_chunk(); }
  // Whether the next batch (the first max_batch_messages queued) accounts for more than `bytes`.
  bool next_batch_exceeds(std::size_t bytes) const;

  // Moves the next batch (everything queued, then new chunks of the snapshot being sent, up to
  // max_batch_messages) into the write. Requires no write: writing() empty.
  const std::vector<QueuedMessage>& take_batch();
  const std::vector<QueuedMessage>& writing() const { return writing_; }
  // After encoding writing() message by message into `plan`: drops the oversize ones and puts the
  // ones the write did not take (kFull and after) back at the front; writing() is then, index for
  // index, what the write carries (maybe nothing).
  void settle_batch(const BatchPlan& plan);

  // The ends of a write: the peer has accepted the stream (the write is sent); the stream's first
  // write, the peer has not answered yet (it becomes unconfirmed); or the write failed (its
  // messages go back to the front of the queue).
  void write_sent(Clock::time_point now);
  void write_unconfirmed();
  void write_failed();
  // The ends of the handshake: the peer accepted the stream (the unconfirmed batch is sent), or
  // refused it or the stream ended (it goes back to the front).
  void unconfirmed_sent(Clock::time_point now);
  void unconfirmed_failed();

  // From now on push() refuses and messages that come back are dropped (counted as send failed).
  void close();
  bool closed() const { return closed_; }
  // Forgets every held message (uncounted). After close(), once no write can end any more.
  void clear();

  std::size_t held_messages() const {
    return queue_.size() + writing_.size() + unconfirmed_.size();
  }
  std::size_t held_bytes() const { return held_bytes_; }
  const LaneQueueCounters& counters() const { return counters_; }

 private:
  // Puts `items` (in queue order) back at the front of the queue, or drops them once closed; empties
  // `items`.
  void requeue_front(std::vector<QueuedMessage>& items);
  void count_sent(std::vector<QueuedMessage>& items, Clock::time_point now);  // and empties it
  // The snapshot being sent in chunks: its next chunk fits the window and the lane's bounds.
  bool can_make_chunk() const;
  std::size_t next_chunk_length() const;
  QueuedMessage make_chunk(Clock::time_point now);
  // A message leaves the lane (sent, or dropped): a chunk of the current transfer updates it.
  void chunk_left(const QueuedMessage& item, bool sent);
  void abandon_snapshot();
  // Where a new transfer of `identity` starts, given the peer's receipt (push_snapshot); at 0 for
  // a receipt it cannot resume from, `*missed` says why (unset: no receipt, or a resume).
  std::uint64_t resume_offset(const SnapshotIdentity& identity,
                              const std::optional<SnapshotReceipt>& receipt,
                              std::optional<ResumeMiss>* missed) const;
  // Whether `continuation` is the one the peer spliced, to be resumed by offset (its spliced data
  // is the receipt's, and the receipt holds its point).
  static bool resumes_continuation(const SnapshotIdentity& data,
                                   const std::optional<SnapshotReceipt>& receipt,
                                   const SnapshotContinuation* continuation);
  // Whether `continuation` may replace the data for the peer whose receipt missed by kBytes; if
  // not, *missed says why.
  static bool usable_continuation(const std::optional<SnapshotReceipt>& receipt,
                                  const SnapshotContinuation* continuation,
                                  std::optional<ResumeMiss>* missed);

  // The snapshot being sent in chunks (or the last one, for status).
  struct OutgoingSnapshot {
    raft::Message message;  // data shared with the core's message; released once done
    std::uint64_t transfer = 0;
    SnapshotChunkPlace place;         // total and CRC; offset unused
    std::uint64_t next_offset = 0;    // of the next chunk to make
    std::size_t window_bytes = 0;     // data bytes of its chunks the lane holds
    std::uint64_t skipped_bytes = 0;  // resumed: the chunks start here
    std::optional<ResumeMiss> resume_missed;
    std::optional<replica::FramedSplicePoint> splice;  // a continuation's
    std::uint64_t sent_bytes = 0;
    SnapshotSendProgress::State state = SnapshotSendProgress::State::kSending;
  };
  std::optional<OutgoingSnapshot> snapshot_;
  std::uint64_t next_transfer_ = 1;
  // The data of the lane's latest chunked transfers and the highest offset any of them made (or
  // started at): a receipt above it names bytes this lane never sent (resume_offset).
  std::optional<SnapshotIdentity> made_identity_;
  std::uint64_t made_through_ = 0;
  raft::Term made_term_ = 0;  // the term of the messages they were made for (push_snapshot)
  // kept_continuation(): the latest continuation sent, the identity of the data it was cut from,
  // and when a chunk was last made of it.
  struct KeptContinuation {
    SnapshotIdentity source;
    SnapshotContinuation continuation;
    Clock::time_point last_used{};
  };
  std::optional<KeptContinuation> kept_continuation_;

  // A miss is logged at most once a minute per lane (a follower that keeps a stale partial would
  // log one per snapshot retry otherwise).
  util::RateLimit resume_miss_log_{std::chrono::minutes(1)};

  const LaneQueueLimits limits_;
  std::deque<QueuedMessage> queue_;  // arrival order; requeued messages go back to the front
  std::vector<QueuedMessage> writing_;
  std::vector<QueuedMessage> unconfirmed_;
  std::size_t held_bytes_ = 0;  // of queue_ + writing_ + unconfirmed_
  bool closed_ = false;
  LaneQueueCounters counters_;
};

}  // namespace raftlog::server

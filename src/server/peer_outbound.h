// PeerOutbound: the sending side of the peer transport — per peer two lanes, each a LaneQueue
// (peer_queue.h: what is held, dropped and batched) with its own gRPC channel and one
// client-streaming call driven by the callback API; who writes a batch and when (the caller of
// send(), a write's completion, or the encoder thread for large batches), the handshake, reconnects
// with backoff, and the shutdown of outbound streams. transport.h describes the behaviour.
#pragma once

#include <grpcpp/grpcpp.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <shared_mutex>
#include <string>
#include <vector>

#include "raftlog/peer/v1/peer.grpc.pb.h"
#include "server/peer_queue.h"
#include "server/peer_stream_auth.h"
#include "server/snapshot_chunks.h"
#include "server/timer_thread.h"
#include "server/transport.h"
#include "util/rate_limit.h"

namespace raftlog::server {

// Peers start at different moments: a peer not reachable yet this long after start() is not an
// outage worth a warning (a normal cluster start would print one per peer and lane); past it, one
// "unreachable since start" line per lane.
inline constexpr std::chrono::seconds kPeerStartupGrace{10};
// A flapping lane logs "down" at most once per this interval, with the count of outages held back.
inline constexpr std::chrono::seconds kPeerDownLogInterval{30};

class PeerOutbound {
 public:
  // `options`, `auth` and `receipts` must outlive this (the transport owns them all). `receipts`:
  // this node's own goes on every message it sends; a peer's decides where a snapshot to it starts.
  PeerOutbound(const PeerTransportOptions& options, const PeerStreamAuth& auth,
               const SnapshotReceipts& receipts);
  PeerOutbound(const PeerOutbound&) = delete;
  PeerOutbound& operator=(const PeerOutbound&) = delete;

  // Starts the reconnect timer and the encoder threads and opens one stream per lane of every peer.
  void start();
  // Refuses new messages and streams, cancels the open streams and waits until gRPC has ended them
  // (their reactors point into this), then forgets every queued message. Once.
  void stop();

  bool send(raft::Message message);  // PeerTransport::send
  // PeerTransport::set_peers and the admission of unconfigured peers (peer_admission.h), one peer at
  // a time (any thread, serialized by the caller). add_peer of a peer at a new address retires the
  // old link first; false when the peer cannot be added (at kMaxLinks, kMaxRetiredPeers retired links
  // still alive, or stopped): the caller retries later.
  bool add_peer(raft::NodeId id, const std::string& address);
  void remove_peer(raft::NodeId id);
  // Live links: the configured peers and the admitted unconfigured ones.
  static constexpr std::size_t kMaxLinks =
      PeerTransportOptions::kMaxPeers + PeerTransportOptions::kMaxUnconfiguredPeers;
  // A removed peer's links are retired: they stop taking messages, may still write what they queued
  // for up to kRetiredLinger (a removed node's last heartbeat tells it that its removal committed),
  // then their streams are cancelled. A retired link is freed once nothing refers to it any more
  // (its stream ended, its pending reconnect or encoder job ran; PeerLanes are reference-counted).
  // This bounds how many retired links may be alive at once; an add beyond it fails until some are
  // freed (about a reconnect backoff later).
  static constexpr std::size_t kMaxRetiredPeers = 4 * PeerTransportOptions::kMaxPeers;
  static constexpr std::chrono::milliseconds kRetiredLinger{500};
  std::vector<PeerStats> peer_stats() const;
  std::uint64_t dropped_unknown_peer() const { return dropped_unknown_peer_.load(); }
  // PeerTransport::outbound_totals.
  OutboundTotals totals() const;
  // Retired links not freed yet (for tests and stats).
  std::size_t retired_links() const;
  // Tests only: runs in open_stream after the call is created and before its StartCall (the window
  // in which a cancel must not reach gRPC, see OutboundStream), with the peer's id. Set before
  // start(); it may call add_peer and remove_peer.
  void set_before_start_call_for_testing(std::function<void(raft::NodeId)> hook);
  // Tests only: runs on the encoder thread before it cuts a snapshot's continuation (send()), with
  // the peer's id. Set before start().
  void set_before_continuation_cut_for_testing(std::function<void(raft::NodeId)> hook);

 private:
  class OutboundStream;
  struct PeerLanes;

  // Everything the transport knows about one lane to one peer (its own channel, queue and stream).
  // Fields under `mu` are shared by send() (the Raft loop), the stream's reactions (gRPC threads),
  // the timer threads, stop() and peer_stats().
  struct PeerLink {
    PeerLink(Lane link_lane, const LaneQueueLimits& limits) : lane(link_lane), queue(limits) {}

    PeerLanes* owner = nullptr;  // the lanes this link is one of (set once, at construction)
    raft::NodeId id = raft::kNoNode;
    std::string address;
    const Lane lane;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<raftlog::peer::v1::Peer::Stub> stub;

    mutable std::mutex mu;
    std::minstd_rand jitter;
    // The lane's messages. Its writing() is read without `mu` by the thread that claimed the write
    // (OutboundStream::write_claimed), to encode it (peer_queue.h).
    LaneQueue queue;
    OutboundStream* stream = nullptr;  // the open stream, or null (cleared in its OnDone)
    // A pump of this lane waits for the encoder thread; until it runs, other threads leave the
    // lane's writes to it (so at most one pending encoder job per lane).
    bool encoder_scheduled = false;
    std::uint32_t backoff_ms = 0;  // the next reconnect delay, before jitter
    std::uint32_t consecutive_failures = 0;
    bool up = false;       // the last stream was accepted and has not failed since (for log lines)
    bool ever_up = false;  // some stream of this lane was accepted since start()
    bool startup_reported = false;  // "unreachable since start/added" was logged
    // When this node started tracking the peer (its start, or a configuration or admission that
    // added it later): the start-up grace and the "unreachable since" line count from here.
    const std::chrono::steady_clock::time_point created_at = std::chrono::steady_clock::now();
    // "peer down" lines of a flapping lane: at most one per kPeerDownLogInterval.
    util::RateLimit down_log{kPeerDownLogInterval};
    // The stream's counters; the queue's are added when a snapshot is taken.
    LaneStats stats;

    // Snapshots handed to this lane by send(): a continuation cut on the encoder thread is pushed
    // only when no newer snapshot came meanwhile (cut_off_loop); and whether such a cut waits for
    // that thread (at most one per lane: another one meanwhile is cut inline).
    std::uint64_t snapshots_handed = 0;
    bool cut_scheduled = false;
    // While the queue keeps a continuation, a check on the reconnect timer drops it once idle
    // (schedule_kept_expiry): a lane that writes nothing more (this node stopped leading) would
    // otherwise hold up to 64 MiB until its next write. At most one pending per lane.
    bool kept_expiry_scheduled = false;

    bool stopping() const { return queue.closed(); }  // under mu
  };

  // One peer's lanes, indexed by Lane. Shared: links_ owns a live peer's lanes; whoever may still
  // touch a lane without links_mu_ holds a reference too (an open stream, a pending reconnect or
  // encoder job, a send() in progress), so retired lanes are freed when the last of those ends.
  struct PeerLanes : std::enable_shared_from_this<PeerLanes> {
    PeerLanes(const LaneQueueLimits& control, const LaneQueueLimits& append)
        : lanes{PeerLink(Lane::kControl, control), PeerLink(Lane::kAppend, append)} {
      for (PeerLink& link : lanes) link.owner = this;
    }
    PeerLanes(const PeerLanes&) = delete;
    PeerLanes& operator=(const PeerLanes&) = delete;
    std::array<PeerLink, kLaneCount> lanes;
    PeerLink& lane(Lane which) { return lanes[static_cast<std::size_t>(which)]; }
  };
  using LanesRef = std::shared_ptr<PeerLanes>;

  // What push_locked needs of a chunked snapshot: its data's CRC, the peer's receipt, the
  // continuation for it (or none), and, from a cut off the loop, the lane's snapshots_handed when
  // the cut was scheduled (0: from send() itself).
  struct SnapshotSend {
    std::uint32_t crc = 0;
    std::optional<SnapshotReceipt> receipt;
    const SnapshotContinuation* continuation = nullptr;
    std::uint64_t cut_number = 0;
  };
  // Queues `message` on `link` (a chunked snapshot when `snapshot` is set) and starts a write when
  // the stream is idle. False when the lane refused it, or a cut off the loop was overtaken by a
  // newer snapshot (dropped: the core sends again after its snapshot retry timeout).
  bool enqueue(PeerLink& link, raft::Message message, const SnapshotSend* snapshot);
  // Hands the cut of `message`'s continuation for `receipt` (up to 64 MiB copied and its frames
  // walked: tens of ms) and the push that follows it to the encoder thread, so the Raft loop's
  // send() does not wait for it. False (`message` untouched) when a cut of this lane is already
  // waiting or the thread refused it: the caller cuts inline.
  bool cut_off_loop(PeerLink& link, raft::Message& message, std::uint32_t crc,
                    const SnapshotReceipt& receipt);
  // Checks `link`'s kept continuation (LaneQueue::expire) kept_continuation_idle from now, and
  // again while one is kept. Not under link.mu.
  void schedule_kept_expiry(PeerLink& link);
  LaneQueueLimits lane_limits(Lane lane) const;
  void connect(PeerLink& link, raft::NodeId id, const std::string& address);

  // None of these is called with a PeerLink::mu held, and none calls into gRPC with one held: gRPC
  // may run a reaction inline in the calling thread, and reactions take the lock.
  void open_stream(PeerLink& link);
  // Who runs a pump: a caller (send() on the Raft loop, a gRPC reaction, open_stream) writes small
  // batches itself and leaves large ones to the encoder thread, which writes whatever is queued.
  enum class PumpThread : std::uint8_t { kCaller, kEncoder };
  void pump(PeerLink& link, PumpThread thread = PumpThread::kCaller);
  // Encodes the lane's taken batch into `batch`, as much of it as one write carries.
  BatchPlan encode_batch(const LaneQueue& queue, raftlog::peer::v1::RaftMessageBatch& batch) const;
  void on_write_done(PeerLink& link, OutboundStream* stream, bool ok);
  void on_initial_metadata(PeerLink& link, OutboundStream* stream, bool ok);
  void on_stream_done(PeerLink& link, OutboundStream* stream, const grpc::Status& status);
  // Under link.mu: the delay before the next stream of a lane whose stream just ended.
  std::uint32_t reconnect_delay_locked(PeerLink& link, const OutboundStream& ended);
  void schedule_reconnect(PeerLink& link, std::chrono::steady_clock::time_point when);
  // Under link.mu.
  bool release_due_locked(OutboundStream* stream);
  // Takes the next batch from the lane's queue and claims the stream's write, or returns null:
  // nothing to write, the stream cannot take a write now, or the encoder thread writes it
  // (*hand_to_encoder: and the caller must schedule that).
  OutboundStream* claim_write_locked(PeerLink& link, PumpThread thread, bool* hand_to_encoder);
  void schedule_encoder(PeerLink& link);  // not under link.mu
  void record_failure_locked(PeerLink& link, const std::string& error);
  void stream_ended();
  // From stop(), once no new stream can open: cancels the lane's open stream, if any.
  void cancel(PeerLink& link);

  // Under links_mu_ (exclusive): takes `id`'s links out of links_ into retired_; returns them.
  LanesRef retire_locked(raft::NodeId id);
  // Under links_mu_: forgets retired links that were freed; returns how many are still alive.
  std::size_t prune_retired_locked();
  // Closes a retired peer's lanes to new messages and cancels their streams after kRetiredLinger
  // (at once when stopping or when a lane has no stream). Not under links_mu_.
  void close_retired(const LanesRef& lanes);
  // Every live (and, with_retired, every retired and not yet freed) peer's lanes.
  std::vector<LanesRef> all_lanes(bool with_retired) const;

  const PeerTransportOptions& options_;
  const PeerStreamAuth& auth_;
  const SnapshotReceipts& receipts_;
  // The peers: added and removed by add_peer/remove_peer (the configuration), read by send() and
  // peer_stats(). Removed ones move to retired_ (weakly: they are freed when nothing uses them), so
  // stop() can still cancel their streams.
  mutable std::shared_mutex links_mu_;
  std::map<raft::NodeId, LanesRef> links_;
  std::vector<std::weak_ptr<PeerLanes>> retired_;
  bool started_ = false;  // under links_mu_
  bool stopped_ = false;  // under links_mu_
  std::chrono::steady_clock::time_point started_at_ =
      std::chrono::steady_clock::now();  // set by start()
  // Reconnect backoff of every lane: one thread, at most one pending reconnect per lane.
  TimerThread reconnect_timer_;
  // Encodes and starts the writes of large batches (kInlineEncodeMaxBytes) off the Raft loop and
  // gRPC's callback threads, and cuts snapshot continuations (cut_off_loop): one thread, at most
  // one pending encoder job per lane and one pending cut per append lane.
  TimerThread append_encoder_;
  std::atomic<std::uint64_t> dropped_unknown_peer_{0};
  // Every lane's queue-full drops, by Lane, kept here too: a removed peer's links (and their
  // counters) go, the total must not shrink.
  std::array<std::atomic<std::uint64_t>, kLaneCount> dropped_queue_full_{};
  std::function<void(raft::NodeId)> before_start_call_for_testing_;  // set before start()
  std::function<void(raft::NodeId)> before_continuation_cut_for_testing_;  // set before start()
  util::RateLimit add_refused_log_{kPeerDownLogInterval};  // under links_mu_ (exclusive)

  std::mutex streams_mu_;
  std::condition_variable streams_cv_;
  std::size_t live_streams_ = 0;  // created and not yet past OnDone
};

}  // namespace raftlog::server

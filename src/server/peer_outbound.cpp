// PeerOutbound (peer_outbound.h; transport.h describes the behaviour): the set of peers and their
// links (added, replaced, retired, stopped), send() into a lane's queue, and the writes of its
// batches (who encodes a batch and starts the write, and what a write's completion does). A
// stream's opening, handshake, cancel, end and reconnect are in peer_outbound_stream.cpp.
#include "server/peer_outbound.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>

#include "server/batch_reuse.h"
#include "server/check.h"
#include "server/message_codec.h"
#include "server/peer_outbound_stream.h"
#include "server/peer_protocol.h"
#include "util/crc32c.h"

namespace raftlog::server {

namespace pb = raftlog::peer::v1;
using Clock = std::chrono::steady_clock;

namespace {

// A batch whose queued messages account for more than this is encoded by the encoder thread, not by
// whoever found the stream idle (transport.h, "the encoder thread"): at this size the encoding costs
// far more than the hand-off to another thread, and at 4-8 MiB it held the Raft loop for hundreds of
// milliseconds on a loaded machine. Smaller batches, the common case, keep the hand-off free path.
constexpr std::size_t kInlineEncodeMaxBytes = 256 * 1024;

// Adds one lane's counters into a peer's totals (see PeerStats).
void add_lane_stats(const LaneStats& lane, LaneStats* total) {
  total->queued_messages += lane.queued_messages;
  total->queued_bytes += lane.queued_bytes;
  total->sent_messages += lane.sent_messages;
  total->dropped_queue_full += lane.dropped_queue_full;
  total->dropped_expired += lane.dropped_expired;
  total->dropped_oversize += lane.dropped_oversize;
  total->dropped_send_failed += lane.dropped_send_failed;
  total->connects += lane.connects;
  total->connect_failures += lane.connect_failures;
  total->connected = total->connected || lane.connected;
  if (lane.snapshot) total->snapshot = lane.snapshot;
  total->snapshots_started += lane.snapshots_started;
  total->snapshots_sent += lane.snapshots_sent;
  total->snapshots_abandoned += lane.snapshots_abandoned;
  total->snapshots_resumed += lane.snapshots_resumed;
  total->snapshot_bytes_skipped += lane.snapshot_bytes_skipped;
  total->snapshot_resume_missed += lane.snapshot_resume_missed;
  total->snapshots_continued += lane.snapshots_continued;
  total->snapshot_resume_saved_bytes += lane.snapshot_resume_saved_bytes;
  total->last_send_ok = std::max(total->last_send_ok, lane.last_send_ok);
  if (!lane.last_error.empty() &&
      (total->last_error.empty() || lane.last_error_at > total->last_error_at)) {
    total->last_error = lane.last_error;
    total->last_error_at = lane.last_error_at;
  }
}

// A lane's stats: its stream's counters and its queue's.
LaneStats lane_snapshot(const LaneStats& stream_stats, const LaneQueue& queue) {
  LaneStats lane = stream_stats;
  const LaneQueueCounters& counters = queue.counters();
  lane.queued_messages = queue.held_messages();
  lane.queued_bytes = queue.held_bytes();
  lane.sent_messages = counters.sent_messages;
  lane.dropped_queue_full = counters.dropped_queue_full;
  lane.dropped_expired = counters.dropped_expired;
  lane.dropped_oversize = counters.dropped_oversize;
  lane.dropped_send_failed = counters.dropped_send_failed;
  lane.last_send_ok = counters.last_send_ok;
  lane.snapshot = queue.snapshot_progress();
  lane.snapshots_started = counters.snapshots_started;
  lane.snapshots_sent = counters.snapshots_sent;
  lane.snapshots_abandoned = counters.snapshots_abandoned;
  lane.snapshots_resumed = counters.snapshots_resumed;
  lane.snapshot_bytes_skipped = counters.snapshot_bytes_skipped;
  lane.snapshot_resume_missed = counters.snapshot_resume_missed;
  lane.snapshots_continued = counters.snapshots_continued;
  lane.snapshot_resume_saved_bytes = counters.snapshot_resume_saved_bytes;
  return lane;
}

}  // namespace

PeerOutbound::PeerOutbound(const PeerTransportOptions& options, const PeerStreamAuth& auth,
                           const SnapshotReceipts& receipts)
    : options_(options),
      auth_(auth),
      receipts_(receipts),
      // One pending reconnect per lane at most (only a stream's OnDone schedules one, and only the
      // reconnect opens the next stream); twice that leaves room without hiding a leak.
      // Peers come and go with the configuration: sized for the most there can be, live and
      // retired (a retired lane's last pending reconnect finds it closed and does nothing).
      // A retired lane may also have its delayed cancel pending (kRetiredLinger).
      // And a kept continuation's expiry check per append lane (schedule_kept_expiry).
      reconnect_timer_("peer-reconnect",
                       (2 * kLaneCount + 1) * (kMaxLinks + kMaxRetiredPeers) + 2),
      // An encoder job per lane, and a continuation's cut per append lane (cut_off_loop).
      append_encoder_("peer-encoder", (kLaneCount + 1) * (kMaxLinks + kMaxRetiredPeers) + 2) {
  for (const auto& [id, address] : options_.peers) {
    auto lanes =
        std::make_shared<PeerLanes>(lane_limits(Lane::kControl), lane_limits(Lane::kAppend));
    for (PeerLink& link : lanes->lanes) connect(link, id, address);
    links_.emplace(id, std::move(lanes));
  }
}

LaneQueueLimits PeerOutbound::lane_limits(Lane lane) const {
  LaneQueueLimits limits;
  if (lane == Lane::kAppend) {
    limits.max_messages = options_.max_queued_messages;
    limits.max_bytes = options_.max_queued_bytes;
  } else {
    limits.max_messages = options_.max_queued_control_messages;
    limits.max_bytes = control_lane_max_bytes(options_.max_queued_control_messages);
  }
  limits.max_message_bytes = options_.limits.max_message_bytes;
  limits.max_batch_messages = kMaxMessagesPerBatch;
  limits.batch_framing_bytes = kBatchFramingBytes;
  limits.max_age = std::chrono::milliseconds(options_.max_message_age_ms);
  limits.kept_continuation_idle = options_.snapshot_partial_idle_timeout;
  return limits;
}

void PeerOutbound::connect(PeerLink& link, raft::NodeId id, const std::string& address) {
  link.id = id;
  link.address = address;
  link.jitter.seed(static_cast<std::minstd_rand::result_type>(
      options_.self_id * 1000003u + id * 2u + static_cast<unsigned>(link.lane)));
  link.backoff_ms = options_.reconnect_backoff_min_ms;

  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(
      static_cast<int>(options_.limits.max_message_bytes + kGrpcHeadroomBytes));
  // gRPC's channel owns connection backoff; these make it follow our bounds instead of its defaults
  // (1 s initial, 120 s max, 20 s connect timeout), which would delay failover.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
              static_cast<int>(options_.reconnect_backoff_min_ms));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
              static_cast<int>(options_.reconnect_backoff_max_ms));
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, static_cast<int>(options_.connect_timeout_ms));
  // One connection per lane, not shared with the other lane or process-wide (tests run several nodes
  // in a process): a control message never waits behind a batch in HTTP/2 flow control or in the TCP
  // connection.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  link.channel = grpc::CreateCustomChannel(address, auth_.channel_credentials(), args);
  link.stub = pb::Peer::NewStub(link.channel);
}

std::vector<PeerOutbound::LanesRef> PeerOutbound::all_lanes(bool with_retired) const {
  std::shared_lock lock(links_mu_);
  std::vector<LanesRef> result;
  for (const auto& [id, lanes] : links_) result.push_back(lanes);
  if (with_retired) {
    for (const std::weak_ptr<PeerLanes>& retired : retired_) {
      if (LanesRef lanes = retired.lock()) result.push_back(std::move(lanes));
    }
  }
  return result;
}

std::size_t PeerOutbound::retired_links() const {
  std::shared_lock lock(links_mu_);
  std::size_t alive = 0;
  for (const std::weak_ptr<PeerLanes>& retired : retired_) alive += retired.expired() ? 0 : 1;
  return alive;
}

void PeerOutbound::start() {
  started_at_ = Clock::now();
  reconnect_timer_.start();
  append_encoder_.start();
  {
    std::unique_lock lock(links_mu_);
    started_ = true;
  }
  // Connect at once, so the first messages do not wait for a connection.
  for (const LanesRef& lanes : all_lanes(/*with_retired=*/false)) {
    for (PeerLink& link : lanes->lanes) open_stream(link);
  }
}

PeerOutbound::LanesRef PeerOutbound::retire_locked(raft::NodeId id) {
  const auto found = links_.find(id);
  if (found == links_.end()) return nullptr;
  LanesRef lanes = std::move(found->second);
  links_.erase(found);
  retired_.push_back(lanes);
  return lanes;
}

std::size_t PeerOutbound::prune_retired_locked() {
  std::erase_if(retired_,
                [](const std::weak_ptr<PeerLanes>& retired) { return retired.expired(); });
  return retired_.size();
}

void PeerOutbound::close_retired(const LanesRef& lanes) {
  if (lanes == nullptr) return;
  // close() refuses new messages; an open stream still writes what is queued (a removed node's last
  // heartbeat, Raft's "your removal committed") until it is cancelled kRetiredLinger later. What is
  // left goes when the stream ends (on_stream_done), or now when there is none.
  bool linger = false;
  for (PeerLink& link : lanes->lanes) {
    std::lock_guard link_lock(link.mu);
    link.queue.close();
    if (link.stream == nullptr) {
      link.queue.clear();
    } else if (link.queue.has_queued()) {
      linger = true;
    }
  }
  if (linger && reconnect_timer_.schedule(Clock::now() + kRetiredLinger, [this, lanes] {
        for (PeerLink& link : lanes->lanes) cancel(link);
      })) {
    return;
  }
  for (PeerLink& link : lanes->lanes) cancel(link);
}

bool PeerOutbound::add_peer(raft::NodeId id, const std::string& address) {
  LanesRef replaced;
  LanesRef added;
  bool open_now = false;
  {
    std::unique_lock lock(links_mu_);
    if (stopped_) return false;
    const auto found = links_.find(id);
    if (found != links_.end() && found->second->lanes[0].address == address) return true;
    const bool replacing = found != links_.end();
    const std::size_t retired = prune_retired_locked();
    if ((!replacing && links_.size() >= kMaxLinks) ||
        retired + (replacing ? 1 : 0) > kMaxRetiredPeers) {
      // The caller retries (a retired link is freed once its stream ended): at most one line per
      // kPeerDownLogInterval.
      if (const std::optional<std::uint64_t> held_back = add_refused_log_.admit(Clock::now())) {
        spdlog::error(
            "node {}: cannot add peer {} at {} yet: {} links, {} retired links not freed yet "
            "({} more refusal(s) not logged)",
            options_.self_id, id, address, links_.size(), retired, *held_back);
      }
      return false;
    }
    if (replacing) replaced = retire_locked(id);
    added = std::make_shared<PeerLanes>(lane_limits(Lane::kControl), lane_limits(Lane::kAppend));
    for (PeerLink& link : added->lanes) connect(link, id, address);
    links_.emplace(id, added);
    open_now = started_;
  }
  close_retired(replaced);
  spdlog::info("node {}: peer {} at {}{}", options_.self_id, id, address,
               replaced != nullptr ? " (new address)" : "");
  if (open_now) {
    for (PeerLink& link : added->lanes) open_stream(link);
  }
  return true;
}

void PeerOutbound::remove_peer(raft::NodeId id) {
  LanesRef removed;
  {
    std::unique_lock lock(links_mu_);
    if (stopped_) return;
    removed = retire_locked(id);
  }
  if (removed == nullptr) return;
  close_retired(removed);
  spdlog::info("node {}: peer {} removed", options_.self_id, id);
}

void PeerOutbound::stop() {
  {
    std::unique_lock lock(links_mu_);
    stopped_ = true;  // add_peer and remove_peer do nothing from now on: the set below is final
  }
  const std::vector<LanesRef> every_lane = all_lanes(/*with_retired=*/true);
  // No new streams (open_stream checks stopping(), and the timer stops), then cancel the open ones
  // and wait for their OnDone, since they point into links_.
  for (const LanesRef& lanes : every_lane) {
    for (PeerLink& link : lanes->lanes) {
      std::lock_guard link_lock(link.mu);
      link.queue.close();
    }
  }
  reconnect_timer_.stop();
  for (const LanesRef& lanes : every_lane) {
    for (PeerLink& link : lanes->lanes) cancel(link);
  }
  // A pending encoder job is dropped (its streams are cancelled); a running one finishes first.
  append_encoder_.stop();
  {
    std::unique_lock lock(streams_mu_);
    // Cancelled calls end promptly; the wait is not cut short because the reactors use links_.
    // Bounded in practice by gRPC's cancellation; the log line shows a stall.
    while (!streams_cv_.wait_for(lock, std::chrono::milliseconds(options_.stop_timeout_ms),
                                 [&] { return live_streams_ == 0; })) {
      spdlog::warn("node {}: peer transport stop: {} outbound stream(s) not ended after {} ms",
                   options_.self_id, live_streams_, options_.stop_timeout_ms);
    }
  }
  for (const LanesRef& lanes : every_lane) {
    for (PeerLink& link : lanes->lanes) {
      std::lock_guard link_lock(link.mu);
      link.queue.clear();
    }
  }
}

void PeerOutbound::set_before_start_call_for_testing(std::function<void(raft::NodeId)> hook) {
  before_start_call_for_testing_ = std::move(hook);
}

void PeerOutbound::set_before_continuation_cut_for_testing(std::function<void(raft::NodeId)> hook) {
  before_continuation_cut_for_testing_ = std::move(hook);
}

bool PeerOutbound::send(raft::Message message) {
  LanesRef lanes;
  {
    std::shared_lock lock(links_mu_);
    const auto found = links_.find(message.to);
    if (found != links_.end()) lanes = found->second;
  }
  if (lanes == nullptr) {
    dropped_unknown_peer_.fetch_add(1);
    return false;
  }
  // Valid after the lock: we hold a reference (a send racing a removal finds the queue closed).
  PeerLink& link = lanes->lane(lane_for(message));
  // A snapshot too large for one message is sent in chunks (snapshot_chunks.h), from where the
  // peer's latest receipt says it holds the same data up to. Its CRC comes with it when the
  // replica computed it (once per encoding it reuses), else it is computed here, before the lock:
  // a few milliseconds per 100 MiB with SSE4.2.
  const bool chunked = message.type == raft::MessageType::kSnapshot && message.snapshot &&
                       message.snapshot->data.size() > link.queue.snapshot_chunk_bytes();
  if (!chunked) return enqueue(link, std::move(message), nullptr);
  SnapshotSend snapshot;
  snapshot.crc = message.snapshot->data_crc32c ? *message.snapshot->data_crc32c
                                               : util::crc32c::value(message.snapshot->data.view());
  snapshot.receipt = receipts_.from_peer(message.to);
  const std::optional<SnapshotReceipt>& receipt = snapshot.receipt;
  // A partial of the same point but other data (another leader's, or the one this lane spliced
  // onto it) that names a splice point: the continuation the lane keeps when the receipt names its
  // spliced data (resumed by offset, no copy), else this node's data after the point, cut on the
  // encoder thread (or here, outside the lane's lock, when it cannot take it) (docs/design.md,
  // "Snapshot transfer", *A new leader continues*).
  const SnapshotIdentity data{
      message.snapshot->index, message.snapshot->term, message.snapshot->data.size(), snapshot.crc,
      replica::snapshot_data_digest(message.snapshot->data.view(), snapshot.crc)};
  std::optional<SnapshotContinuation> continuation;
  // Not for a receipt without the digests (a follower from before them): the lane neither resumes
  // nor continues it (ResumeMiss::kDigest), so a cut would be copied for nothing.
  if (receipt && receipt->splice && receipt->splice->kept_digest && receipt->snapshot.data_digest &&
      receipt->snapshot.index == data.index && receipt->snapshot.term == data.term &&
      receipt->snapshot != data) {
    {
      std::lock_guard lock(link.mu);
      continuation = link.queue.kept_continuation(data, *receipt);
    }
    if (!continuation && cut_off_loop(link, message, snapshot.crc, *receipt)) return true;
    if (!continuation) {
      continuation = make_snapshot_continuation(message.snapshot->data, *receipt->splice);
    }
  }
  snapshot.continuation = continuation ? &*continuation : nullptr;
  return enqueue(link, std::move(message), &snapshot);
}

bool PeerOutbound::enqueue(PeerLink& link, raft::Message message, const SnapshotSend* snapshot) {
  bool start_write = false;
  bool expiry = false;  // a kept continuation's check to schedule
  {
    std::lock_guard lock(link.mu);
    if (snapshot != nullptr && snapshot->cut_number != 0) {
      link.cut_scheduled = false;
      // A newer snapshot came while this one's continuation was cut: that one stands.
      if (link.snapshots_handed != snapshot->cut_number) return false;
    } else if (message.type == raft::MessageType::kSnapshot) {
      ++link.snapshots_handed;
    }
    const std::uint64_t full_before = link.queue.counters().dropped_queue_full;
    const LaneQueue::Admission admission =
        snapshot != nullptr
            ? link.queue.push_snapshot(std::move(message), snapshot->crc, Clock::now(),
                                       snapshot->receipt, snapshot->continuation)
            : link.queue.push(std::move(message), Clock::now());
    // Exactly what the queue counted (a push may also drop a chunk of an older transfer).
    dropped_queue_full_[static_cast<std::size_t>(link.lane)] +=
        link.queue.counters().dropped_queue_full - full_before;
    if (admission != LaneQueue::Admission::kQueued) {
      if (snapshot != nullptr && admission == LaneQueue::Admission::kOversize) {
        spdlog::error("node {}: a snapshot for peer {} exceeds {} bytes: not sent",
                      options_.self_id, link.id, kMaxSnapshotBytes);
      }
      return false;
    }
    // Only an idle stream needs a push; a write in flight picks the message up when it completes.
    start_write = link.stream != nullptr && link.stream->can_take_write();
    expiry = link.queue.keeps_continuation() && !link.kept_expiry_scheduled;
    if (expiry) link.kept_expiry_scheduled = true;
  }
  if (expiry) schedule_kept_expiry(link);
  if (start_write) pump(link);
  return true;
}

void PeerOutbound::schedule_kept_expiry(PeerLink& link) {
  PeerLink* link_ptr = &link;
  // Weakly: a removed peer's lanes are not held alive for this (cleared when they go).
  const auto check = [this, link_ptr, lanes = link.owner->weak_from_this()] {
    const LanesRef alive = lanes.lock();
    if (alive == nullptr) return;
    bool again = false;
    {
      std::lock_guard lock(link_ptr->mu);
      link_ptr->queue.expire(Clock::now());
      again = link_ptr->queue.keeps_continuation() && !link_ptr->stopping();
      link_ptr->kept_expiry_scheduled = again;
    }
    if (again) schedule_kept_expiry(*link_ptr);
  };
  const auto delay = link.queue.limits().kept_continuation_idle + std::chrono::milliseconds(10);
  if (reconnect_timer_.schedule(Clock::now() + delay, check)) return;
  // Refused once stop() has begun: the lane is cleared then anyway.
  std::lock_guard lock(link.mu);
  link.kept_expiry_scheduled = false;
}

bool PeerOutbound::cut_off_loop(PeerLink& link, raft::Message& message, std::uint32_t crc,
                                const SnapshotReceipt& receipt) {
  struct PendingCut {
    raft::Message message;
    SnapshotSend send;
  };
  auto pending = std::make_shared<PendingCut>();
  {
    std::lock_guard lock(link.mu);
    if (link.cut_scheduled || link.stopping()) return false;
    link.cut_scheduled = true;
    pending->send = SnapshotSend{crc, receipt, nullptr, ++link.snapshots_handed};
  }
  pending->message = std::move(message);
  PeerLink* link_ptr = &link;
  // The job keeps the lanes alive (our caller holds a reference, so shared_from_this is valid).
  const bool scheduled = append_encoder_.schedule(
      Clock::now(), [this, link_ptr, pending, keep = link.owner->shared_from_this()] {
        if (before_continuation_cut_for_testing_)
          before_continuation_cut_for_testing_(link_ptr->id);
        const SnapshotContinuation continuation = make_snapshot_continuation(
            pending->message.snapshot->data, *pending->send.receipt->splice);
        pending->send.continuation = &continuation;
        enqueue(*link_ptr, std::move(pending->message), &pending->send);
      });
  if (scheduled) return true;
  // Refused once stop() has begun: the caller goes on as before this existed.
  message = std::move(pending->message);
  std::lock_guard lock(link.mu);
  link.cut_scheduled = false;
  return false;
}

OutboundTotals PeerOutbound::totals() const {
  OutboundTotals totals;
  totals.dropped_queue_full_control =
      dropped_queue_full_[static_cast<std::size_t>(Lane::kControl)].load();
  totals.dropped_queue_full_append =
      dropped_queue_full_[static_cast<std::size_t>(Lane::kAppend)].load();
  return totals;
}

std::vector<PeerStats> PeerOutbound::peer_stats() const {
  std::vector<PeerStats> result;
  for (const LanesRef& lanes : all_lanes(/*with_retired=*/false)) {
    PeerStats stats;
    stats.id = lanes->lanes[0].id;
    for (const PeerLink& link : lanes->lanes) {
      std::lock_guard lock(link.mu);
      stats.address = link.address;
      (link.lane == Lane::kAppend ? stats.append : stats.control) =
          lane_snapshot(link.stats, link.queue);
    }
    add_lane_stats(stats.control, &stats);
    add_lane_stats(stats.append, &stats);
    result.push_back(std::move(stats));
  }
  return result;
}

void PeerOutbound::pump(PeerLink& link, PumpThread thread) {
  // Bounded: every pass starts a write and returns, or returns, or removes at least one message from
  // the queue for good (an oversize batch of one), so at most the lane's max_messages + 1 passes.
  for (std::size_t pass = 0; pass <= link.queue.limits().max_messages; ++pass) {
    OutboundStream* stream = nullptr;
    bool hand_to_encoder = false;
    {
      std::lock_guard lock(link.mu);
      stream = claim_write_locked(link, thread, &hand_to_encoder);
    }
    if (hand_to_encoder) schedule_encoder(link);
    if (stream == nullptr) return;
    // The claim keeps the stream and the taken batch ours: encode it outside the lock, so send() on
    // the Raft loop never waits for an encoding. The queue itself changes only under the lock below.
    const BatchPlan plan = encode_batch(link.queue, stream->batch);
    bool release = false;
    {
      std::lock_guard lock(link.mu);
      link.queue.settle_batch(plan);  // writing() is now, index for index, stream->batch
      if (plan.kept() == 0) {
        stream->write_claimed = false;
        release = release_due_locked(stream);
      } else if (!stream->accepted) {
        stream->handshake_written = true;
      }
    }
    if (plan.kept() == 0) {
      if (release) stream->RemoveHold();
      continue;
    }
    // After StartWrite the stream is not ours any more: OnWriteDone may already be running.
    stream->StartWrite(&stream->batch);
    return;
  }
}

BatchPlan PeerOutbound::encode_batch(const LaneQueue& queue, pb::RaftMessageBatch& batch) const {
  reset_for_reuse(batch);
  BatchPlan plan(queue.limits());
  // While this node reassembles a snapshot, every message it sends says how far it got.
  const std::optional<SnapshotReceipt> receipt = receipts_.own(Clock::now());
  for (const QueuedMessage& item : queue.writing()) {
    pb::RaftMessage* wire = batch.add_messages();
    if (item.chunk && !item.chunk->whole) {
      encode_snapshot_chunk(item.message, item.chunk->place, item.chunk->length,
                            options_.cluster_id, wire, item.chunk->splice);
    } else {
      encode_message(item.message, options_.cluster_id, wire);
    }
    if (receipt) encode_snapshot_receipt(*receipt, wire);
    const BatchPlan::Verdict verdict = plan.add(wire->ByteSizeLong());
    if (verdict == BatchPlan::Verdict::kAdd) continue;
    batch.mutable_messages()->RemoveLast();
    if (verdict == BatchPlan::Verdict::kFull) break;  // it and the rest wait for the next write
  }
  return plan;
}

PeerOutbound::OutboundStream* PeerOutbound::claim_write_locked(PeerLink& link, PumpThread thread,
                                                               bool* hand_to_encoder) {
  if (thread == PumpThread::kEncoder) link.encoder_scheduled = false;
  OutboundStream* stream = link.stream;
  if (stream == nullptr || !stream->can_take_write()) return nullptr;
  link.queue.expire(Clock::now());
  if (!link.queue.has_queued()) return nullptr;
  if (thread == PumpThread::kCaller &&
      (link.encoder_scheduled || link.queue.next_batch_exceeds(kInlineEncodeMaxBytes))) {
    // Encoding a batch of MiBs (and gRPC's serialization of it, inside StartWrite) would hold the
    // Raft loop or a gRPC callback thread for milliseconds, far longer on a loaded machine, while
    // ticks, heartbeats and their answers wait: the encoder thread writes it instead.
    *hand_to_encoder = !link.encoder_scheduled;
    link.encoder_scheduled = true;
    return nullptr;
  }
  link.queue.take_batch();
  stream->write_claimed = true;
  return stream;
}

void PeerOutbound::schedule_encoder(PeerLink& link) {
  // The job keeps the lanes alive (our caller holds a reference, so shared_from_this is valid).
  PeerLink* link_ptr = &link;
  if (append_encoder_.schedule(Clock::now(),
                               [this, link_ptr, keep = link.owner->shared_from_this()] {
                                 pump(*link_ptr, PumpThread::kEncoder);
                               }))
    return;
  // Refused once stop() has begun, or if the one-per-lane bound were broken: then the lane would
  // wait for the next send(), so say so loudly.
  std::lock_guard lock(link.mu);
  link.encoder_scheduled = false;
  if (!link.stopping()) {
    spdlog::error(
        "node {}: peer {} {} lane: the encoder thread refused a batch; it waits for the next "
        "message",
        options_.self_id, link.id, lane_name(link.lane));
  }
}

void PeerOutbound::on_write_done(PeerLink& link, OutboundStream* stream, bool ok) {
  bool write_next = false;
  bool release = false;
  {
    std::lock_guard lock(link.mu);
    RAFTLOG_CHECK(stream->write_claimed && !link.queue.writing().empty(),
                  "write completion without a write");
    stream->write_claimed = false;
    if (ok && stream->accepted) {
      link.queue.write_sent(Clock::now());
      write_next = !stream->closing;
    } else if (ok && !stream->closing) {
      link.queue.write_unconfirmed();  // counted or requeued when the handshake answer comes
    } else {
      // A failed write means the call had already ended, so the peer never processed the batch
      // (likewise a first batch on a refused stream): it goes back to the front of the queue, still
      // subject to the age limit, for the next stream.
      link.queue.write_failed();
      stream->closing = true;
      link.stats.connected = false;
    }
    release = release_due_locked(stream);
  }
  if (release) {
    stream->RemoveHold();  // OnDone runs after this reaction returns
    return;
  }
  if (write_next) pump(link);
}

}  // namespace raftlog::server

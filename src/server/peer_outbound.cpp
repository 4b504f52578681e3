#include "server/peer_outbound.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>

#include "server/batch_reuse.h"
#include "server/check.h"
#include "server/message_codec.h"
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

std::string describe(const grpc::Status& status) {
  if (status.ok()) return "stream ended by the peer";
  if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    // The one peer-protocol change so far: nodes built before batched peer streams lack the method.
    return "the peer does not implement Peer/StreamBatches: it runs an older raftlogd; stop every "
           "node and "
           "start them all with the same version (docs/operations.md, \"Upgrading\") (gRPC status "
           "12: " +
           status.error_message() + ")";
  }
  return "gRPC status " + std::to_string(static_cast<int>(status.error_code())) + ": " +
         status.error_message();
}

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
  return lane;
}

}  // namespace

// One outbound client-streaming call (raftlog.peer.v1.Peer/StreamBatches) to a peer. Writes are
// started by whoever finds the stream idle with a message queued: send() on the Raft loop, or the
// reaction to the previous write, so no thread waits for messages. One write is in flight at a time.
//
// Lifetime: the reactor holds one hold (AddHold before StartCall), so gRPC cannot call OnDone, which
// deletes it, before the hold is removed. The hold is removed exactly once, by whoever makes
// release_due_locked() true: the stream is closing (a write failed, the peer refused the stream, or
// stop()), no write is claimed, and stop() is not cancelling it. A thread other than a reaction of
// this stream touches it only while link.stream points to it (under link.mu) or while it owns the
// write claim or the cancel, since both keep the hold.
//
// A call is never cancelled before its StartCall has returned: with gRPC 1.51 a TryCancel that ran
// while StartCall was running (a reconnect opening the stream while set_peers removed its peer)
// left the call's start and finish operations never completed, so OnDone never came and stop()
// waited forever. A cancel() that finds the stream not started only marks it
// (cancel_after_start); open_stream calls TryCancel once StartCall has returned.
class PeerOutbound::OutboundStream final : public grpc::ClientWriteReactor<pb::RaftMessageBatch> {
 public:
  OutboundStream(PeerOutbound* outbound, PeerLink* link)
      : keep_alive(link->owner->shared_from_this()), outbound_(outbound), link_(link) {}

  void OnWriteDone(bool ok) override { outbound_->on_write_done(*link_, this, ok); }
  void OnReadInitialMetadataDone(bool ok) override {
    outbound_->on_initial_metadata(*link_, this, ok);
  }
  void OnDone(const grpc::Status& status) override {
    outbound_->on_stream_done(*link_, this, status);
  }

  // Under link->mu: whether a write may start now (until the peer accepts the stream, only its first
  // batch is written: the handshake).
  bool can_take_write() const {
    return started && !closing && !write_claimed && (accepted || !handshake_written);
  }

  // The stream's lanes live at least as long as the stream (a retired link is freed after this).
  const LanesRef keep_alive;
  grpc::ClientContext context;
  pb::StreamSummary summary;
  pb::RaftMessageBatch batch;  // the batch being written; only the write claimant touches it

  // Under link->mu.
  bool started = false;       // StartCall returned
  bool accepted = false;      // the peer checked our first message and said so (kPeerAcceptedKey)
  bool reached_peer = false;  // the peer answered the call (initial metadata, accepting or not)
  bool handshake_written = false;  // a first batch was written before acceptance: wait for it
  bool write_claimed = false;      // a write is being prepared or is in flight
  bool closing = false;  // no new writes; the hold goes once nothing else needs the stream
  bool hold_released = false;
  bool cancel_in_progress = false;  // cancel() or open_stream is calling TryCancel
  bool cancel_after_start = false;  // cancelled before StartCall: open_stream calls TryCancel

 private:
  PeerOutbound* outbound_;
  PeerLink* link_;
};

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
      reconnect_timer_("peer-reconnect", 2 * kLaneCount * (kMaxLinks + kMaxRetiredPeers) + 2),
      append_encoder_("peer-encoder", kLaneCount * (kMaxLinks + kMaxRetiredPeers) + 2) {
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

void PeerOutbound::cancel(PeerLink& link) {
  OutboundStream* to_cancel = nullptr;
  {
    std::lock_guard link_lock(link.mu);
    OutboundStream* stream = link.stream;
    if (stream != nullptr && !stream->hold_released) {
      stream->closing = true;
      if (!stream->started) {
        // Its open_stream has not returned from StartCall yet: cancelling the call now would leave
        // it never ending (see OutboundStream); open_stream cancels it once started.
        stream->cancel_after_start = true;
      } else if (!stream->cancel_in_progress) {
        stream->cancel_in_progress = true;
        to_cancel = stream;
      }
    }
    link.stats.connected = false;
  }
  if (to_cancel == nullptr) return;
  to_cancel->context.TryCancel();
  bool release = false;
  {
    std::lock_guard link_lock(link.mu);
    to_cancel->cancel_in_progress = false;
    release = release_due_locked(to_cancel);
  }
  if (release) to_cancel->RemoveHold();
}

void PeerOutbound::set_before_start_call_for_testing(std::function<void(raft::NodeId)> hook) {
  before_start_call_for_testing_ = std::move(hook);
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
  bool start_write = false;
  {
    // A snapshot too large for one message is sent in chunks (snapshot_chunks.h), from where the
    // peer's latest receipt says it holds the same data up to. Its CRC comes with it when the
    // replica computed it (once per encoding it reuses), else it is computed here, before the
    // lock: a few milliseconds per 100 MiB with SSE4.2.
    const bool chunked = message.type == raft::MessageType::kSnapshot && message.snapshot &&
                         message.snapshot->data.size() > link.queue.snapshot_chunk_bytes();
    std::uint32_t crc = 0;
    std::optional<SnapshotReceipt> receipt;
    if (chunked) {
      crc = message.snapshot->data_crc32c ? *message.snapshot->data_crc32c
                                          : util::crc32c::value(message.snapshot->data.view());
      receipt = receipts_.from_peer(message.to);
    }
    std::lock_guard lock(link.mu);
    const std::uint64_t full_before = link.queue.counters().dropped_queue_full;
    const LaneQueue::Admission admission =
        chunked ? link.queue.push_snapshot(std::move(message), crc, Clock::now(), receipt)
                : link.queue.push(std::move(message), Clock::now());
    // Exactly what the queue counted (a push may also drop a chunk of an older transfer).
    dropped_queue_full_[static_cast<std::size_t>(link.lane)] +=
        link.queue.counters().dropped_queue_full - full_before;
    if (admission != LaneQueue::Admission::kQueued) {
      if (chunked && admission == LaneQueue::Admission::kOversize) {
        spdlog::error("node {}: a snapshot for peer {} exceeds {} bytes: not sent", options_.self_id,
                      link.id, kMaxSnapshotBytes);
      }
      return false;
    }
    // Only an idle stream needs a push; a write in flight picks the message up when it completes.
    start_write = link.stream != nullptr && link.stream->can_take_write();
  }
  if (start_write) pump(link);
  return true;
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

void PeerOutbound::open_stream(PeerLink& link) {
  OutboundStream* stream = nullptr;
  {
    std::lock_guard lock(link.mu);
    if (link.stopping() || link.stream != nullptr) return;
    link.queue.expire(Clock::now());
    stream = new OutboundStream(this, &link);
    link.stream = stream;
    ++link.stats.connects;
  }
  {
    std::lock_guard lock(streams_mu_);
    ++live_streams_;
  }
  stream->context.AddMetadata(std::string(kPeerLaneKey), lane_name(link.lane));
  if (!options_.advertise_address.empty()) {
    stream->context.AddMetadata(std::string(kPeerAddressKey), options_.advertise_address);
  }
  // Fail fast (the default): on a channel that cannot connect the call fails at once, or when the
  // connection attempt does (connect_timeout_ms), and the reconnect timer tries again.
  auth_.add_stream_metadata(stream->context, link.id);
  link.stub->async()->StreamBatches(&stream->context, &stream->summary, stream);
  if (before_start_call_for_testing_) before_start_call_for_testing_(link.id);
  stream->AddHold();
  stream->StartCall();
  bool cancel_now = false;
  bool release = false;
  {
    std::lock_guard lock(link.mu);
    stream->started = true;
    // A cancel() that came before StartCall left the TryCancel to us (see OutboundStream).
    cancel_now = stream->cancel_after_start;
    if (cancel_now) stream->cancel_in_progress = true;
    // A reaction may already have closed the stream (StartCall can fail at once); it could not
    // release the hold before `started`.
    release = release_due_locked(stream);
  }
  if (cancel_now) {
    stream->context.TryCancel();
    std::lock_guard lock(link.mu);
    stream->cancel_in_progress = false;
    release = release_due_locked(stream);
  }
  if (release) {
    stream->RemoveHold();
    return;
  }
  pump(link);
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
                            options_.cluster_id, wire);
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

void PeerOutbound::on_initial_metadata(PeerLink& link, OutboundStream* stream, bool ok) {
  bool accepted = false;
  if (ok) {
    // Handshake: the peer answers our first message with initial metadata once it has checked the
    // cluster id and node ids, or ends the call. Without this a refused stream would look healthy
    // until the next write, and the refused messages would count as sent.
    const auto& metadata = stream->context.GetServerInitialMetadata();
    accepted = metadata.find(grpc::string_ref(kPeerAcceptedKey.data(), kPeerAcceptedKey.size())) !=
               metadata.end();
  }
  bool write_next = false;
  bool release = false;
  {
    std::lock_guard lock(link.mu);
    stream->reached_peer = ok;
    if (accepted) {
      stream->accepted = true;
      link.stats.connected = !stream->closing;
      link.queue.unconfirmed_sent(Clock::now());
      link.backoff_ms = options_.reconnect_backoff_min_ms;
      link.consecutive_failures = 0;
      if (!link.up) {
        spdlog::info("node {}: peer {} ({}) up ({} lane)", options_.self_id, link.id, link.address,
                     lane_name(link.lane));
        link.up = true;
        link.ever_up = true;
      }
      write_next = !stream->closing;
    } else {
      stream->closing = true;
      link.stats.connected = false;
      link.queue.unconfirmed_failed();
    }
    release = release_due_locked(stream);
  }
  if (release) {
    stream->RemoveHold();
    return;
  }
  if (write_next) pump(link);
}

void PeerOutbound::on_stream_done(PeerLink& link, OutboundStream* stream,
                                  const grpc::Status& status) {
  std::optional<Clock::time_point> reconnect_at;
  {
    std::lock_guard lock(link.mu);
    RAFTLOG_CHECK(link.stream == stream, "OnDone for a stream that is not the link's");
    RAFTLOG_CHECK(!stream->write_claimed, "OnDone with a write claimed");
    link.stream = nullptr;
    link.stats.connected = false;
    // Every write and the handshake answer completed before OnDone, so nothing is left in flight;
    // requeue defensively all the same.
    link.queue.unconfirmed_failed();
    if (!link.stopping()) {
      record_failure_locked(link, describe(status));
      link.queue.expire(Clock::now());
      reconnect_at =
          Clock::now() + std::chrono::milliseconds(reconnect_delay_locked(link, *stream));
    } else {
      // A closed lane (a removed peer's, or stop()) opens no stream again: what it held goes now,
      // so a retired link keeps no messages (nothing is in flight once OnDone runs).
      link.queue.clear();
    }
  }
  LanesRef keep = stream->keep_alive;  // a retired link may be freed once we are done with it
  delete stream;
  if (reconnect_at.has_value()) schedule_reconnect(link, *reconnect_at);
  keep.reset();
  stream_ended();  // last: stop() may destroy the transport once the count reaches zero
}

std::uint32_t PeerOutbound::reconnect_delay_locked(PeerLink& link, const OutboundStream& ended) {
  std::uint32_t delay_ms = options_.reconnect_backoff_min_ms;
  if (ended.reached_peer) {
    // The connection may be fine while the peer refuses our streams (wrong cluster id, a peer that is
    // shutting down): back off so a refusing peer is not hammered. An accepted stream reset the
    // backoff to the minimum.
    delay_ms = link.backoff_ms;
    link.backoff_ms = std::min(link.backoff_ms * 2, options_.reconnect_backoff_max_ms);
  }
  // Otherwise the call never reached the peer: the channel could not connect. The channel spaces its
  // connection attempts by its own backoff (the same bounds), and a fail-fast call on a channel that
  // is waiting to retry fails locally, so trying again after the minimum costs no traffic and opens
  // the stream as soon as the channel is up (an extra doubling here would add up to
  // reconnect_backoff_max_ms to every recovery).
  std::uniform_int_distribution<std::uint32_t> jitter_ms(0, delay_ms / 4);
  return delay_ms + jitter_ms(link.jitter);
}

void PeerOutbound::schedule_reconnect(PeerLink& link, Clock::time_point when) {
  PeerLink* link_ptr = &link;
  if (reconnect_timer_.schedule(when, [this, link_ptr, keep = link.owner->shared_from_this()] {
        open_stream(*link_ptr);
      }))
    return;
  // Refused once stop() has begun (which opens no more streams anyway), or if the one-per-peer bound
  // were broken: then the peer would never reconnect, so say so loudly.
  std::lock_guard lock(link.mu);
  if (!link.stopping()) {
    spdlog::error(
        "node {}: peer {} {} lane: reconnect timer refused a reconnect; the lane stays down",
        options_.self_id, link.id, lane_name(link.lane));
  }
}

bool PeerOutbound::release_due_locked(OutboundStream* stream) {
  if (!stream->started || !stream->closing || stream->write_claimed || stream->hold_released ||
      stream->cancel_in_progress) {
    return false;
  }
  stream->hold_released = true;
  return true;
}

void PeerOutbound::record_failure_locked(PeerLink& link, const std::string& error) {
  ++link.stats.connect_failures;
  link.stats.last_error = error;
  link.stats.last_error_at = Clock::now();
  // One log line per outage, not one per attempt; a lane that flaps logs at most one per
  // kPeerDownLogInterval.
  const bool new_outage = link.up || link.consecutive_failures == 0;
  link.up = false;
  ++link.consecutive_failures;
  const Clock::time_point now = Clock::now();
  if (!link.ever_up) {
    // Not reached since start: normal while the cluster's nodes come up (kPeerStartupGrace), so the
    // first failure is an info line (the cause stays visible: a refused TLS handshake, a wrong
    // address) and only a peer still unreachable after the grace is a warning.
    if (link.consecutive_failures == 1) {
      spdlog::info("node {}: peer {} ({}) not reachable yet: {} lane: {}", options_.self_id,
                   link.id, link.address, lane_name(link.lane), error);
    }
    // A peer added after this node's start (a new member, an admitted node) gets its own grace,
    // counted from its addition, not from the start.
    const bool added_later = link.created_at > started_at_;
    const Clock::time_point since = added_later ? link.created_at : started_at_;
    if (!link.startup_reported && now - since >= kPeerStartupGrace) {
      link.startup_reported = true;
      spdlog::warn("node {}: peer {} ({}) unreachable since {} ({} s): {} lane: {}",
                   options_.self_id, link.id, link.address, added_later ? "added" : "start",
                   std::chrono::duration_cast<std::chrono::seconds>(now - since).count(),
                   lane_name(link.lane), error);
    }
    return;
  }
  if (!new_outage) return;
  if (const std::optional<std::uint64_t> held_back = link.down_log.admit(now)) {
    if (*held_back == 0) {
      spdlog::warn("node {}: peer {} ({}) down: {} lane: {}", options_.self_id, link.id,
                   link.address, lane_name(link.lane), error);
    } else {
      spdlog::warn(
          "node {}: peer {} ({}) down: {} lane: {} ({} more outage(s) in the last {} s not logged)",
          options_.self_id, link.id, link.address, lane_name(link.lane), error, *held_back,
          kPeerDownLogInterval.count());
    }
  }
}

void PeerOutbound::stream_ended() {
  std::lock_guard lock(streams_mu_);
  RAFTLOG_CHECK(live_streams_ > 0, "more outbound streams ended than started");
  --live_streams_;
  if (live_streams_ == 0) streams_cv_.notify_all();
}

}  // namespace raftlog::server

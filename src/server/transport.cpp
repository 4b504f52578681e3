#include "server/transport.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <type_traits>
#include <utility>

#include "raftlog/peer/v1/peer.grpc.pb.h"
#include "server/batch_reuse.h"
#include "server/check.h"
#include "server/peer_auth.h"
#include "server/timer_thread.h"
#include "server/tls_files.h"

namespace raftlog::server {

namespace pb = raftlog::peer::v1;
using Clock = std::chrono::steady_clock;

namespace {

// Queue accounting charges every message this much on top of its entries (entries already include
// raft::Entry::kEntryOverheadBytes each): close to the encoded size of a message's fixed fields.
constexpr std::size_t kMessageHeaderBytes = 64;
// Messages per stream element (RaftMessageBatch); the receiver refuses more (peer.proto).
constexpr int kMaxMessagesPerBatch = 64;
// What repeated-field framing adds per message inside a batch, at most (tag + length varint).
constexpr std::size_t kBatchFramingBytes = 6;
// gRPC's size checks count the whole framed message; leave room above our own bound.
constexpr std::size_t kGrpcHeadroomBytes = 64 * 1024;
// A batch whose queued messages account for more than this is encoded by the encoder thread, not by
// whoever found the stream idle (transport.h, "the encoder thread"): at this size the encoding costs
// far more than the hand-off to another thread, and at 4-8 MiB it held the Raft loop for hundreds of
// milliseconds on a loaded machine. Smaller batches, the common case, keep the hand-off free path.
constexpr std::size_t kInlineEncodeMaxBytes = 256 * 1024;
constexpr std::size_t kMaxClusterIdBytes = 256;
// Initial metadata a receiver sends once the first message of a stream passed its checks.
constexpr std::string_view kPeerAcceptedKey = "raftlog-peer-accepted";
// Client metadata naming an outbound stream's lane ("control" or "append"), for the receiver's logs.
constexpr std::string_view kPeerLaneKey = "raftlog-peer-lane";
constexpr std::size_t kMaxQueuedMessagesBound = 1u << 20;
// gRPC sizes are ints.
constexpr std::size_t kMaxMessageBytesBound = (1u << 30);

std::size_t estimate_bytes(const raft::Message& message) {
  std::size_t bytes = kMessageHeaderBytes;
  for (const raft::Entry& entry : message.entries) bytes += entry.byte_size();
  return bytes;
}

std::string describe(const grpc::Status& status) {
  if (status.ok()) return "stream ended by the peer";
  if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    // The one peer-protocol change so far: nodes built before batched peer streams lack the method.
    return "the peer does not implement Peer/StreamBatches: it runs an older raftlogd; stop every node and "
           "start them all with the same version (docs/operations.md, \"Upgrading\") (gRPC status 12: " +
           status.error_message() + ")";
  }
  return "gRPC status " + std::to_string(static_cast<int>(status.error_code())) + ": " +
         status.error_message();
}

// The two outbound streams of a peer (transport.h, "lanes"): entry-carrying appends, and everything
// else, so a heartbeat or a vote never waits behind a multi-MiB batch.
enum class Lane : std::uint8_t { kControl = 0, kAppend = 1 };
constexpr std::size_t kLaneCount = 2;
constexpr std::array<Lane, kLaneCount> kLanes = {Lane::kControl, Lane::kAppend};

const char* lane_name(Lane lane) { return lane == Lane::kAppend ? "append" : "control"; }

// Any message with entries goes on the append lane, so the control lane's messages are all
// kMessageHeaderBytes in the accounting and its message bound bounds its bytes too.
Lane lane_for(const raft::Message& message) {
  return message.type == raft::MessageType::kAppend || !message.entries.empty() ? Lane::kAppend : Lane::kControl;
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
  total->last_send_ok = std::max(total->last_send_ok, lane.last_send_ok);
  if (!lane.last_error.empty() && (total->last_error.empty() || lane.last_error_at > total->last_error_at)) {
    total->last_error = lane.last_error;
    total->last_error_at = lane.last_error_at;
  }
}

struct QueuedMessage {
  raft::Message message;
  Clock::time_point enqueued_at;
  std::size_t bytes = 0;
};

}  // namespace

std::string validate_options(const PeerTransportOptions& options) {
  if (options.cluster_id.empty()) return "cluster_id must not be empty";
  if (options.cluster_id.size() > kMaxClusterIdBytes) {
    return "cluster_id is longer than " + std::to_string(kMaxClusterIdBytes) + " bytes";
  }
  if (options.self_id == raft::kNoNode) return "self_id must not be 0";
  if (options.peers.size() > PeerTransportOptions::kMaxPeers) {
    return "more than " + std::to_string(PeerTransportOptions::kMaxPeers) + " peers";
  }
  for (const auto& [id, address] : options.peers) {
    if (id == raft::kNoNode) return "peer id 0 is not allowed";
    if (id == options.self_id) return "the peer list contains this node's own id " + std::to_string(id);
    if (address.empty()) return "peer " + std::to_string(id) + " has an empty address";
  }
  if (options.max_queued_messages == 0 || options.max_queued_messages > kMaxQueuedMessagesBound) {
    return "max_queued_messages must be in [1, " + std::to_string(kMaxQueuedMessagesBound) + "]";
  }
  if (options.max_queued_bytes == 0) return "max_queued_bytes must be positive";
  if (options.max_queued_control_messages == 0 || options.max_queued_control_messages > kMaxQueuedMessagesBound) {
    return "max_queued_control_messages must be in [1, " + std::to_string(kMaxQueuedMessagesBound) + "]";
  }
  if (options.max_message_age_ms == 0) return "max_message_age_ms must be positive";
  if (options.limits.max_message_bytes < 1024 || options.limits.max_message_bytes > kMaxMessageBytesBound) {
    return "limits.max_message_bytes must be in [1024, " + std::to_string(kMaxMessageBytesBound) + "]";
  }
  if (options.limits.max_entries_per_message == 0) return "limits.max_entries_per_message must be positive";
  if (options.reconnect_backoff_min_ms == 0) return "reconnect_backoff_min_ms must be positive";
  if (options.reconnect_backoff_min_ms > options.reconnect_backoff_max_ms) {
    return "reconnect_backoff_min_ms must not exceed reconnect_backoff_max_ms";
  }
  if (options.connect_timeout_ms == 0) return "connect_timeout_ms must be positive";
  if (options.stop_timeout_ms == 0) return "stop_timeout_ms must be positive";
  if (!options.peer_secret.empty() &&
      (options.peer_secret.size() < kMinPeerSecretBytes || options.peer_secret.size() > kMaxPeerSecretBytes)) {
    return "peer_secret must be " + std::to_string(kMinPeerSecretBytes) + " to " +
           std::to_string(kMaxPeerSecretBytes) + " bytes";
  }
  return {};
}

class PeerTransport::Impl {
 public:
  Impl(PeerTransportOptions options, MessageHandler on_message);
  ~Impl() { stop(); }

  grpc::Service* service() { return &service_; }
  std::size_t max_receive_message_bytes() const {
    return options_.limits.max_message_bytes + kGrpcHeadroomBytes;
  }
  void start();
  bool stop();
  bool send(raft::Message message);
  std::vector<PeerStats> peer_stats() const;
  InboundStats inbound_stats() const {
    std::lock_guard lock(inbound_mu_);
    return inbound_stats_;
  }
  std::uint64_t dropped_unknown_peer() const { return dropped_unknown_peer_.load(); }

 private:
  class OutboundStream;
  class InboundStream;
  template <typename Element>
  class InboundReactor;

  // Everything the transport knows about one lane to one peer (its own channel, queue and stream).
  // Fields under `mu` are shared by send() (the Raft loop), the stream's reactions (gRPC threads),
  // the timer thread, stop() and peer_stats().
  struct PeerLink {
    raft::NodeId id = raft::kNoNode;
    std::string address;
    Lane lane = Lane::kControl;
    std::size_t max_messages = 0;  // this lane's queue bounds (PeerTransportOptions)
    std::size_t max_bytes = 0;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<pb::Peer::Stub> stub;

    mutable std::mutex mu;
    std::minstd_rand jitter;
    std::deque<QueuedMessage> queue;  // arrival order; requeued messages go back to the front
    // The messages of the stream's current write (one batch, in queue order). Filled and emptied
    // under `mu`; in between only the thread that claimed the write (OutboundStream::write_claimed)
    // touches it, to encode it.
    std::vector<QueuedMessage> writing;
    // The first batch of a stream, written but not yet counted: the peer has not accepted the stream
    // (handshake). Counted as sent on acceptance, requeued on refusal.
    std::vector<QueuedMessage> unconfirmed;
    // Bytes of queue + writing + unconfirmed. With held_messages() it is what the bounds limit, so a
    // message that goes back to the queue always fits.
    std::size_t held_bytes = 0;
    OutboundStream* stream = nullptr;  // the open stream, or null (cleared in its OnDone)
    bool stopping = false;
    // A pump of this lane waits for the encoder thread; until it runs, other threads leave the
    // lane's writes to it (so at most one pending encoder job per lane).
    bool encoder_scheduled = false;
    std::uint32_t backoff_ms = 0;  // the next reconnect delay, before jitter
    std::uint32_t consecutive_failures = 0;
    bool up = false;  // the last stream was accepted and has not failed since (for log lines)
    LaneStats stats;  // queued_* are filled in when a snapshot is taken

    std::size_t held_messages() const { return queue.size() + writing.size() + unconfirmed.size(); }
  };

  // One peer's lanes, indexed by Lane.
  struct PeerLanes {
    std::array<PeerLink, kLaneCount> lanes;
    PeerLink& lane(Lane which) { return lanes[static_cast<std::size_t>(which)]; }
  };

  class PeerService final : public pb::Peer::CallbackService {
   public:
    explicit PeerService(Impl* impl) : impl_(impl) {}
    grpc::ServerReadReactor<pb::RaftMessage>* Stream(grpc::CallbackServerContext* context,
                                                     pb::StreamSummary* summary) override;
    grpc::ServerReadReactor<pb::RaftMessageBatch>* StreamBatches(grpc::CallbackServerContext* context,
                                                                 pb::StreamSummary* summary) override;

   private:
    Impl* impl_;
  };

  std::shared_ptr<grpc::ChannelCredentials> channel_credentials() const;
  // With a peer secret: the authenticator an outgoing stream to `to` carries (peer_auth.h).
  void add_peer_auth_metadata(grpc::ClientContext& context, raft::NodeId to) const;
  // "" when the caller may open a peer stream, else why not. Sets *authenticated_from to the peer
  // its certificate and/or authenticator names, or kNoNode when neither TLS nor a secret is
  // configured (then any caller may open one).
  std::string authenticate_inbound(const grpc::ServerContextBase& context, raft::NodeId* authenticated_from) const;
  // Each: "" and *from set to the peer that the caller's certificate (mutual TLS) or authenticator
  // (peer secret) names, else why not.
  std::string authenticate_by_certificate(const grpc::ServerContextBase& context, raft::NodeId* from) const;
  std::string authenticate_by_secret(const grpc::ServerContextBase& context, raft::NodeId* from) const;
  // "" when `wire` may be delivered on a stream authenticated as `authenticated_from` (kNoNode: not
  // authenticated) that so far carried messages from *stream_from (kNoNode before the first one),
  // else why not; sets *code for the refusal.
  std::string check_inbound(const pb::RaftMessage& wire, raft::NodeId authenticated_from, raft::NodeId* stream_from,
                            grpc::StatusCode* code) const;

  // Outbound. None of these is called with a PeerLink::mu held, and none calls into gRPC with one
  // held: gRPC may run a reaction inline in the calling thread, and reactions take the lock.
  void open_stream(PeerLink& link);
  // Who runs a pump: a caller (send() on the Raft loop, a gRPC reaction, open_stream) writes small
  // batches itself and leaves large ones to the encoder thread, which writes whatever is queued.
  enum class PumpThread : std::uint8_t { kCaller, kEncoder };
  void pump(PeerLink& link, PumpThread thread = PumpThread::kCaller);
  void on_write_done(PeerLink& link, OutboundStream* stream, bool ok);
  void on_initial_metadata(PeerLink& link, OutboundStream* stream, bool ok);
  void on_stream_done(PeerLink& link, OutboundStream* stream, const grpc::Status& status);
  // Under link.mu.
  bool release_due_locked(OutboundStream* stream);
  // Moves the next batch into link.writing and claims the stream's write, or returns null: nothing
  // to write, the stream cannot take a write now, or the encoder thread writes it (*hand_to_encoder:
  // and the caller must schedule that).
  OutboundStream* claim_write_locked(PeerLink& link, PumpThread thread, bool* hand_to_encoder);
  bool next_batch_is_large_locked(const PeerLink& link) const;
  void schedule_encoder(PeerLink& link);  // not under link.mu
  // Puts `items` (in queue order) back at the front of the queue and empties it.
  void requeue_front_locked(PeerLink& link, std::vector<QueuedMessage>& items);
  void count_sent_locked(PeerLink& link, std::vector<QueuedMessage>& items);  // and empties it
  void expire_stale_locked(PeerLink& link, Clock::time_point now);
  void record_failure_locked(PeerLink& link, const std::string& error);
  void outbound_stream_ended();
  // From stop(), once no new stream can open: cancels the lane's open stream, if any.
  void cancel_outbound(PeerLink& link);

  // Inbound bookkeeping: register/unregister a stream, and run the callback unless stopping.
  std::uint64_t register_inbound(InboundStream* stream);  // 0 when stopping
  void unregister_inbound(std::uint64_t stream_id);
  bool deliver(raft::Message message);

  const PeerTransportOptions options_;
  const MessageHandler on_message_;
  std::map<raft::NodeId, std::unique_ptr<PeerLanes>> links_;  // fixed after construction
  PeerService service_{this};
  // Reconnect backoff of every lane: one thread, at most one pending reconnect per lane.
  TimerThread reconnect_timer_;
  // Encodes and starts the writes of large batches (kInlineEncodeMaxBytes) off the Raft loop and
  // gRPC's callback threads: one thread, at most one pending job per lane.
  TimerThread append_encoder_;
  std::atomic<bool> started_{false};
  std::atomic<std::uint64_t> dropped_unknown_peer_{0};

  std::mutex stop_mu_;  // serializes start() and stop()
  bool stopped_ = false;
  bool stop_result_ = true;

  std::mutex outbound_mu_;
  std::condition_variable outbound_cv_;
  std::size_t live_outbound_streams_ = 0;  // created and not yet past OnDone

  mutable std::mutex inbound_mu_;
  std::condition_variable inbound_cv_;
  bool inbound_stopping_ = false;
  std::map<std::uint64_t, InboundStream*> inbound_streams_;  // registered and not yet past OnDone
  std::uint64_t next_inbound_id_ = 1;
  std::size_t callbacks_running_ = 0;
  InboundStats inbound_stats_;
};

// One outbound client-streaming call (raftlog.peer.v1.Peer/Stream) to a peer. Writes are started by
// whoever finds the stream idle with a message queued: send() on the Raft loop, or the reaction to
// the previous write, so no thread waits for messages. One write is in flight at a time.
//
// Lifetime: the reactor holds one hold (AddHold before StartCall), so gRPC cannot call OnDone, which
// deletes it, before the hold is removed. The hold is removed exactly once, by whoever makes
// release_due_locked() true: the stream is closing (a write failed, the peer refused the stream, or
// stop()), no write is claimed, and stop() is not cancelling it. A thread other than a reaction of
// this stream touches it only while link.stream points to it (under link.mu) or while it owns the
// write claim or the cancel, since both keep the hold.
class PeerTransport::Impl::OutboundStream final : public grpc::ClientWriteReactor<pb::RaftMessageBatch> {
 public:
  OutboundStream(Impl* impl, PeerLink* link) : impl_(impl), link_(link) {}

  void OnWriteDone(bool ok) override { impl_->on_write_done(*link_, this, ok); }
  void OnReadInitialMetadataDone(bool ok) override { impl_->on_initial_metadata(*link_, this, ok); }
  void OnDone(const grpc::Status& status) override { impl_->on_stream_done(*link_, this, status); }

  grpc::ClientContext context;
  pb::StreamSummary summary;
  pb::RaftMessageBatch batch;  // the batch being written; only the write claimant touches it

  // Under link->mu.
  bool started = false;            // StartCall returned
  bool accepted = false;           // the peer checked our first message and said so (kPeerAcceptedKey)
  bool reached_peer = false;       // the peer answered the call (initial metadata, accepting or not)
  bool handshake_written = false;  // a first batch was written before acceptance: wait for it
  bool write_claimed = false;      // a write is being prepared or is in flight
  bool closing = false;            // no new writes; the hold goes once nothing else needs the stream
  bool hold_released = false;
  bool cancel_in_progress = false;  // stop() is calling TryCancel

 private:
  Impl* impl_;
  PeerLink* link_;
};

// One inbound stream from a peer, the part shared by Stream (one message per element) and
// StreamBatches (up to kMaxMessagesPerBatch). Reads one element at a time; its messages are checked,
// then handed to on_message in order, before the next read starts, so one sender's messages arrive
// in order.
//
// Lifetime: gRPC calls OnDone (which deletes the reactor) only after Finish. Finish is called once,
// by the reaction that ends the stream, unless stop() has pinned the stream to cancel it: then the
// reaction leaves its status in deferred_finish and stop() calls Finish after TryCancel. So
// stop() can cancel any registered stream that is not finishing without racing its destruction.
class PeerTransport::Impl::InboundStream {
 public:
  InboundStream(Impl* owner, grpc::CallbackServerContext* server_context, pb::StreamSummary* stream_summary)
      : impl(owner), context(server_context), summary(stream_summary) {}
  virtual ~InboundStream() = default;
  InboundStream(const InboundStream&) = delete;
  InboundStream& operator=(const InboundStream&) = delete;

  // The reactor's operations.
  virtual void start_read() = 0;
  virtual void start_send_initial_metadata() = 0;
  virtual void finish_call(grpc::Status status) = 0;

  // From the reactor's constructor: registers, authenticates, starts the first read.
  void begin();
  // From OnReadDone: `messages` are the element's messages (at least one), in order.
  void on_messages(const std::vector<const pb::RaftMessage*>& messages);
  void on_read_failed();
  // From OnDone, last: the reactor is gone.
  static void ended(Impl* owner, std::uint64_t stream_id);

  // Ends the stream with `status` (now, or after stop()'s cancel). Once per stream.
  void finish(grpc::Status status);
  void reject(grpc::StatusCode code, const std::string& message);

  Impl* const impl;
  grpc::CallbackServerContext* const context;
  pb::StreamSummary* const summary;
  std::uint64_t id = 0;  // 0: not registered (the transport was stopping)
  raft::NodeId authenticated_from = raft::kNoNode;  // set by begin(): the peer the caller proved to be
  raft::NodeId stream_from = raft::kNoNode;
  std::uint64_t received = 0;

  // Under impl->inbound_mu_.
  bool finishing = false;
  int cancel_pins = 0;
  std::optional<grpc::Status> deferred_finish;
};

template <typename Element>
class PeerTransport::Impl::InboundReactor final : public grpc::ServerReadReactor<Element>, public InboundStream {
 public:
  InboundReactor(Impl* owner, grpc::CallbackServerContext* server_context, pb::StreamSummary* stream_summary)
      : InboundStream(owner, server_context, stream_summary) {
    begin();
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      on_read_failed();
      return;
    }
    std::vector<const pb::RaftMessage*> messages;
    if constexpr (std::is_same_v<Element, pb::RaftMessageBatch>) {
      if (wire_.messages_size() == 0 || wire_.messages_size() > kMaxMessagesPerBatch) {
        reject(grpc::StatusCode::INVALID_ARGUMENT, "a batch must hold 1 to " + std::to_string(kMaxMessagesPerBatch) +
                                                       " messages, not " + std::to_string(wire_.messages_size()));
        return;
      }
      messages.reserve(static_cast<std::size_t>(wire_.messages_size()));
      for (const pb::RaftMessage& message : wire_.messages()) messages.push_back(&message);
    } else {
      messages.push_back(&wire_);
    }
    on_messages(messages);
  }
  void OnDone() override {
    Impl* const owner = impl;
    const std::uint64_t stream_id = id;
    delete this;
    ended(owner, stream_id);
  }

  void start_read() override {
    // The previous element's messages were decoded and delivered (on_messages) or refused.
    reset_for_reuse(wire_);
    this->StartRead(&wire_);
  }
  void start_send_initial_metadata() override { this->StartSendInitialMetadata(); }
  void finish_call(grpc::Status status) override { this->Finish(std::move(status)); }

 private:
  Element wire_;
};

PeerTransport::Impl::Impl(PeerTransportOptions options, MessageHandler on_message)
    : options_(std::move(options)),
      on_message_(std::move(on_message)),
      // One pending reconnect per lane at most (only a stream's OnDone schedules one, and only the
      // reconnect opens the next stream); twice that leaves room without hiding a leak.
      reconnect_timer_(2 * kLaneCount * options_.peers.size() + 2),
      append_encoder_(kLaneCount * options_.peers.size() + 2) {
  const std::string problem = validate_options(options_);
  RAFTLOG_CHECK(problem.empty(), problem.c_str());
  RAFTLOG_CHECK(on_message_ != nullptr, "PeerTransport needs an on_message handler");

  for (const auto& [id, address] : options_.peers) {
    auto lanes = std::make_unique<PeerLanes>();
    for (const Lane lane : kLanes) {
      PeerLink& link = lanes->lane(lane);
      link.id = id;
      link.address = address;
      link.lane = lane;
      if (lane == Lane::kAppend) {
        link.max_messages = options_.max_queued_messages;
        link.max_bytes = options_.max_queued_bytes;
      } else {
        link.max_messages = options_.max_queued_control_messages;
        link.max_bytes = options_.max_queued_control_messages * kMessageHeaderBytes;
      }
      link.jitter.seed(static_cast<std::minstd_rand::result_type>(options_.self_id * 1000003u + id * 2u +
                                                                  static_cast<unsigned>(lane)));
      link.backoff_ms = options_.reconnect_backoff_min_ms;

      grpc::ChannelArguments args;
      args.SetMaxSendMessageSize(static_cast<int>(max_receive_message_bytes()));
      // gRPC's channel owns connection backoff; these make it follow our bounds instead of its
      // defaults (1 s initial, 120 s max, 20 s connect timeout), which would delay failover.
      args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, static_cast<int>(options_.reconnect_backoff_min_ms));
      args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, static_cast<int>(options_.reconnect_backoff_max_ms));
      args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, static_cast<int>(options_.connect_timeout_ms));
      // One connection per lane, not shared with the other lane or process-wide (tests run several
      // nodes in a process): a control message never waits behind a batch in HTTP/2 flow control or
      // in the TCP connection.
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      link.channel = grpc::CreateCustomChannel(address, channel_credentials(), args);
      link.stub = pb::Peer::NewStub(link.channel);
    }
    links_.emplace(id, std::move(lanes));
  }
}

std::shared_ptr<grpc::ChannelCredentials> PeerTransport::Impl::channel_credentials() const {
  if (!options_.tls.has_value()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = options_.tls->ca_pem;
  ssl.pem_private_key = options_.tls->key_pem;
  ssl.pem_cert_chain = options_.tls->cert_pem;
  return grpc::SslCredentials(ssl);
}

void PeerTransport::Impl::add_peer_auth_metadata(grpc::ClientContext& context, raft::NodeId to) const {
  if (options_.peer_secret.empty()) return;
  context.AddMetadata(std::string(kPeerAuthMetadataKey),
                      peer_auth_token(options_.peer_secret, options_.cluster_id, options_.self_id, to));
}

std::string PeerTransport::Impl::authenticate_inbound(const grpc::ServerContextBase& context,
                                                      raft::NodeId* authenticated_from) const {
  *authenticated_from = raft::kNoNode;
  raft::NodeId by_certificate = raft::kNoNode;
  if (options_.tls.has_value()) {
    if (std::string problem = authenticate_by_certificate(context, &by_certificate); !problem.empty()) return problem;
    *authenticated_from = by_certificate;
  }
  if (!options_.peer_secret.empty()) {
    raft::NodeId by_secret = raft::kNoNode;
    if (std::string problem = authenticate_by_secret(context, &by_secret); !problem.empty()) return problem;
    if (by_certificate != raft::kNoNode && by_secret != by_certificate) {
      return "the caller's certificate names node " + std::to_string(by_certificate) +
             " but its peer authenticator names node " + std::to_string(by_secret);
    }
    *authenticated_from = by_secret;
  }
  return "";
}

std::string PeerTransport::Impl::authenticate_by_certificate(const grpc::ServerContextBase& context,
                                                             raft::NodeId* from) const {
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) {
    return "peer streams need a TLS client certificate from the cluster CA; none was presented";
  }
  // The caller's own certificate, and the chain gRPC verified, which need not start with it (gRPC
  // 1.51 puts the root first): the chain only supplies intermediates for checking the certificate.
  const std::vector<grpc::string_ref> leaf = auth->FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME);
  if (leaf.empty()) return "peer streams need a TLS client certificate from the cluster CA; none was found";
  const std::string certificate(leaf.front().data(), leaf.front().size());
  std::string with_chain = certificate;
  const std::vector<grpc::string_ref> chain = auth->FindPropertyValues(GRPC_X509_PEM_CERT_CHAIN_PROPERTY_NAME);
  if (!chain.empty()) with_chain += "\n" + std::string(chain.front().data(), chain.front().size());
  if (std::string problem = verify_certificate_chain(with_chain, options_.tls->ca_pem); !problem.empty()) {
    return "the caller's certificate is not from the cluster CA (" + problem + ")";
  }
  // A certificate speaks for the one node it names, so one member's key cannot impersonate another.
  std::uint64_t named = 0;
  if (std::string problem = certificate_node_id(certificate, &named); !problem.empty()) {
    return "the caller's certificate names no node: " + problem;
  }
  if (links_.find(named) == links_.end()) {
    return "the caller's certificate names node " + std::to_string(named) + ", which is not a peer of node " +
           std::to_string(options_.self_id);
  }
  *from = named;
  return "";
}

std::string PeerTransport::Impl::authenticate_by_secret(const grpc::ServerContextBase& context,
                                                        raft::NodeId* from) const {
  const auto& metadata = context.client_metadata();
  const grpc::string_ref key(kPeerAuthMetadataKey.data(), kPeerAuthMetadataKey.size());
  const auto found = metadata.find(key);
  if (found == metadata.end()) {
    return "peer streams need the cluster's peer secret (--peer-secret-file): this one carried no " +
           std::string(kPeerAuthMetadataKey) + " metadata";
  }
  if (metadata.count(key) != 1) return "the stream carried more than one " + std::string(kPeerAuthMetadataKey);
  std::uint64_t named = 0;
  const std::string_view token(found->second.data(), found->second.size());
  if (std::string problem =
          verify_peer_auth_token(token, options_.peer_secret, options_.cluster_id, options_.self_id, &named);
      !problem.empty()) {
    return problem;
  }
  if (links_.find(named) == links_.end()) {
    return "the peer authenticator names node " + std::to_string(named) + ", which is not a peer of node " +
           std::to_string(options_.self_id);
  }
  *from = named;
  return "";
}

void PeerTransport::Impl::start() {
  RAFTLOG_CHECK(!started_.exchange(true), "PeerTransport::start called twice");
  std::lock_guard lock(stop_mu_);
  if (stopped_) return;
  reconnect_timer_.start();
  append_encoder_.start();
  // Connect at once, so the first messages do not wait for a connection.
  for (auto& [id, lanes] : links_) {
    for (PeerLink& link : lanes->lanes) open_stream(link);
  }
}

bool PeerTransport::Impl::stop() {
  std::lock_guard stop_lock(stop_mu_);
  if (stopped_) return stop_result_;
  stopped_ = true;

  // Inbound first, so on_message stops as early as possible. Pin every stream that is not already
  // finishing, cancel it outside the lock (gRPC may run reactions inline), then finish the ones
  // whose reaction deferred its Finish to us.
  std::vector<InboundStream*> pinned;
  {
    std::lock_guard lock(inbound_mu_);
    inbound_stopping_ = true;
    for (auto& [id, stream] : inbound_streams_) {
      if (stream->finishing) continue;
      ++stream->cancel_pins;
      pinned.push_back(stream);
    }
  }
  for (InboundStream* stream : pinned) stream->context->TryCancel();
  std::vector<std::pair<InboundStream*, grpc::Status>> deferred;
  {
    std::lock_guard lock(inbound_mu_);
    for (InboundStream* stream : pinned) {
      --stream->cancel_pins;
      if (stream->cancel_pins == 0 && stream->deferred_finish.has_value()) {
        deferred.emplace_back(stream, *stream->deferred_finish);
        stream->deferred_finish.reset();
      }
    }
  }
  for (auto& [stream, status] : deferred) stream->finish_call(std::move(status));
  {
    std::unique_lock lock(inbound_mu_);
    // A running callback is short by contract; it must finish before stop() returns.
    inbound_cv_.wait(lock, [&] { return callbacks_running_ == 0; });
    stop_result_ = inbound_cv_.wait_for(lock, std::chrono::milliseconds(options_.stop_timeout_ms),
                                        [&] { return inbound_streams_.empty(); });
  }
  if (!stop_result_) {
    spdlog::warn("node {}: peer transport stop: {} inbound stream(s) still open after {} ms", options_.self_id,
                 inbound_stats().open_streams, options_.stop_timeout_ms);
  }

  // Outbound: no new streams (open_stream checks `stopping`, and the timer stops), then cancel the
  // open ones and wait for their OnDone, since they point into links_.
  for (auto& [id, lanes] : links_) {
    for (PeerLink& link : lanes->lanes) {
      std::lock_guard link_lock(link.mu);
      link.stopping = true;
    }
  }
  reconnect_timer_.stop();
  for (auto& [id, lanes] : links_) {
    for (PeerLink& link : lanes->lanes) cancel_outbound(link);
  }
  // A pending encoder job is dropped (its streams are cancelled); a running one finishes first.
  append_encoder_.stop();
  {
    std::unique_lock lock(outbound_mu_);
    // Cancelled calls end promptly; the wait is not cut short because the reactors use links_.
    // Bounded in practice by gRPC's cancellation; the log line shows a stall.
    while (!outbound_cv_.wait_for(lock, std::chrono::milliseconds(options_.stop_timeout_ms),
                                  [&] { return live_outbound_streams_ == 0; })) {
      spdlog::warn("node {}: peer transport stop: {} outbound stream(s) not ended after {} ms", options_.self_id,
                   live_outbound_streams_, options_.stop_timeout_ms);
    }
  }
  for (auto& [id, lanes] : links_) {
    for (PeerLink& link : lanes->lanes) {
      std::lock_guard link_lock(link.mu);
      link.queue.clear();
      link.writing.clear();
      link.unconfirmed.clear();
      link.held_bytes = 0;
    }
  }
  return stop_result_;
}

void PeerTransport::Impl::cancel_outbound(PeerLink& link) {
  OutboundStream* to_cancel = nullptr;
  {
    std::lock_guard link_lock(link.mu);
    OutboundStream* stream = link.stream;
    if (stream != nullptr && !stream->hold_released) {
      stream->closing = true;
      stream->cancel_in_progress = true;
      to_cancel = stream;
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

bool PeerTransport::Impl::send(raft::Message message) {
  const auto found = links_.find(message.to);
  if (found == links_.end()) {
    dropped_unknown_peer_.fetch_add(1);
    return false;
  }
  PeerLink& link = found->second->lane(lane_for(message));
  const std::size_t bytes = estimate_bytes(message);
  bool start_write = false;
  {
    std::lock_guard lock(link.mu);
    if (link.stopping) return false;
    // The exact encoded size is checked when the message is written; payloads alone over the bound
    // cannot fit.
    if (bytes - kMessageHeaderBytes > options_.limits.max_message_bytes) {
      ++link.stats.dropped_oversize;
      return false;
    }
    if (link.held_messages() >= link.max_messages || link.held_bytes + bytes > link.max_bytes) {
      ++link.stats.dropped_queue_full;
      return false;
    }
    link.queue.push_back(QueuedMessage{std::move(message), Clock::now(), bytes});
    link.held_bytes += bytes;
    // Only an idle stream needs a push; a write in flight picks the message up when it completes.
    const OutboundStream* stream = link.stream;
    start_write = stream != nullptr && stream->started && !stream->closing && !stream->write_claimed &&
                  (stream->accepted || !stream->handshake_written);
  }
  if (start_write) pump(link);
  return true;
}

std::vector<PeerStats> PeerTransport::Impl::peer_stats() const {
  std::vector<PeerStats> result;
  result.reserve(links_.size());
  for (const auto& [id, lanes] : links_) {
    PeerStats stats;
    stats.id = id;
    for (PeerLink& link : lanes->lanes) {
      std::lock_guard lock(link.mu);
      stats.address = link.address;
      LaneStats& lane = link.lane == Lane::kAppend ? stats.append : stats.control;
      lane = link.stats;
      lane.queued_messages = link.held_messages();
      lane.queued_bytes = link.held_bytes;
    }
    add_lane_stats(stats.control, &stats);
    add_lane_stats(stats.append, &stats);
    result.push_back(std::move(stats));
  }
  return result;
}

// --- outbound --------------------------------------------------------------------------------------

void PeerTransport::Impl::open_stream(PeerLink& link) {
  OutboundStream* stream = nullptr;
  {
    std::lock_guard lock(link.mu);
    if (link.stopping || link.stream != nullptr) return;
    expire_stale_locked(link, Clock::now());
    stream = new OutboundStream(this, &link);
    link.stream = stream;
    ++link.stats.connects;
  }
  {
    std::lock_guard lock(outbound_mu_);
    ++live_outbound_streams_;
  }
  stream->context.AddMetadata(std::string(kPeerLaneKey), lane_name(link.lane));
  // Fail fast (the default): on a channel that cannot connect the call fails at once, or when the
  // connection attempt does (connect_timeout_ms), and the reconnect timer tries again.
  add_peer_auth_metadata(stream->context, link.id);
  link.stub->async()->StreamBatches(&stream->context, &stream->summary, stream);
  stream->AddHold();
  stream->StartCall();
  bool release = false;
  {
    std::lock_guard lock(link.mu);
    stream->started = true;
    // A reaction may already have closed the stream (StartCall can fail at once); it could not
    // release the hold before `started`.
    release = release_due_locked(stream);
  }
  if (release) {
    stream->RemoveHold();
    return;
  }
  pump(link);
}

void PeerTransport::Impl::pump(PeerLink& link, PumpThread thread) {
  // Bounded: every pass starts a write and returns, or returns, or removes at least one message from
  // the queue for good (an oversize batch of one), so at most the lane's max_messages + 1 passes.
  for (std::size_t pass = 0; pass <= link.max_messages; ++pass) {
    OutboundStream* stream = nullptr;
    bool hand_to_encoder = false;
    {
      std::lock_guard lock(link.mu);
      stream = claim_write_locked(link, thread, &hand_to_encoder);
    }
    if (hand_to_encoder) schedule_encoder(link);
    if (stream == nullptr) return;
    // The claim keeps the stream and the messages in `writing` ours: encode them outside the lock, so
    // send() on the Raft loop never waits for an encoding. `writing` itself (read by peer_stats())
    // changes only under the lock below.
    reset_for_reuse(stream->batch);
    std::size_t batch_bytes = 0;
    std::size_t kept = 0;
    std::size_t overflow_from = link.writing.size();  // messages from here on wait for the next batch
    std::vector<bool> oversize(link.writing.size(), false);
    for (std::size_t i = 0; i < link.writing.size(); ++i) {
      pb::RaftMessage* wire = stream->batch.add_messages();
      encode_message(link.writing[i].message, options_.cluster_id, wire);
      const std::size_t wire_bytes = wire->ByteSizeLong();
      if (wire_bytes > options_.limits.max_message_bytes) {
        stream->batch.mutable_messages()->RemoveLast();
        oversize[i] = true;
        continue;
      }
      // A batch stays within max_message_bytes, except one message alone (the receiver's gRPC limit
      // has headroom above max_message_bytes for the framing).
      if (kept > 0 && batch_bytes + wire_bytes + kBatchFramingBytes > options_.limits.max_message_bytes) {
        stream->batch.mutable_messages()->RemoveLast();
        overflow_from = i;
        break;
      }
      batch_bytes += wire_bytes + kBatchFramingBytes;
      ++kept;
    }
    bool release = false;
    {
      std::lock_guard lock(link.mu);
      std::vector<QueuedMessage> batch_messages;
      std::vector<QueuedMessage> overflow;
      batch_messages.reserve(kept);
      for (std::size_t i = 0; i < link.writing.size(); ++i) {
        if (i >= overflow_from) {
          overflow.push_back(std::move(link.writing[i]));
        } else if (oversize[i]) {
          ++link.stats.dropped_oversize;
          link.held_bytes -= link.writing[i].bytes;
        } else {
          batch_messages.push_back(std::move(link.writing[i]));
        }
      }
      link.writing = std::move(batch_messages);  // index for index with stream->batch
      requeue_front_locked(link, overflow);
      if (kept == 0) {
        stream->write_claimed = false;
        release = release_due_locked(stream);
      } else if (!stream->accepted) {
        stream->handshake_written = true;
      }
    }
    if (kept == 0) {
      if (release) stream->RemoveHold();
      continue;
    }
    // After StartWrite the stream is not ours any more: OnWriteDone may already be running.
    stream->StartWrite(&stream->batch);
    return;
  }
}

PeerTransport::Impl::OutboundStream* PeerTransport::Impl::claim_write_locked(PeerLink& link, PumpThread thread,
                                                                           bool* hand_to_encoder) {
  if (thread == PumpThread::kEncoder) link.encoder_scheduled = false;
  OutboundStream* stream = link.stream;
  if (stream == nullptr || !stream->started || stream->closing || stream->write_claimed) return nullptr;
  // Until the peer accepts the stream only its first batch is written (the handshake).
  if (!stream->accepted && stream->handshake_written) return nullptr;
  expire_stale_locked(link, Clock::now());
  if (link.queue.empty()) return nullptr;
  if (thread == PumpThread::kCaller && (link.encoder_scheduled || next_batch_is_large_locked(link))) {
    // Encoding a batch of MiBs (and gRPC's serialization of it, inside StartWrite) would hold the
    // Raft loop or a gRPC callback thread for milliseconds, far longer on a loaded machine, while
    // ticks, heartbeats and their answers wait: the encoder thread writes it instead.
    *hand_to_encoder = !link.encoder_scheduled;
    link.encoder_scheduled = true;
    return nullptr;
  }
  // Everything queued, up to a batch: what piled up while the previous write was in flight leaves in
  // one element.
  while (!link.queue.empty() && link.writing.size() < static_cast<std::size_t>(kMaxMessagesPerBatch)) {
    link.writing.push_back(std::move(link.queue.front()));
    link.queue.pop_front();
  }
  stream->write_claimed = true;
  return stream;
}

bool PeerTransport::Impl::next_batch_is_large_locked(const PeerLink& link) const {
  std::size_t bytes = 0;
  std::size_t messages = 0;
  for (const QueuedMessage& item : link.queue) {
    bytes += item.bytes;
    if (bytes > kInlineEncodeMaxBytes) return true;
    if (++messages == static_cast<std::size_t>(kMaxMessagesPerBatch)) break;
  }
  return false;
}

void PeerTransport::Impl::schedule_encoder(PeerLink& link) {
  PeerLink* link_ptr = &link;
  if (append_encoder_.schedule(Clock::now(), [this, link_ptr] { pump(*link_ptr, PumpThread::kEncoder); })) return;
  // Refused once stop() has begun, or if the one-per-lane bound were broken: then the lane would
  // wait for the next send(), so say so loudly.
  std::lock_guard lock(link.mu);
  link.encoder_scheduled = false;
  if (!link.stopping) {
    spdlog::error("node {}: peer {} {} lane: the encoder thread refused a batch; it waits for the next message",
                  options_.self_id, link.id, lane_name(link.lane));
  }
}

void PeerTransport::Impl::on_write_done(PeerLink& link, OutboundStream* stream, bool ok) {
  bool write_next = false;
  bool release = false;
  {
    std::lock_guard lock(link.mu);
    RAFTLOG_CHECK(stream->write_claimed && !link.writing.empty(), "write completion without a write");
    stream->write_claimed = false;
    if (ok && stream->accepted) {
      count_sent_locked(link, link.writing);
      write_next = !stream->closing;
    } else if (ok && !stream->closing) {
      link.unconfirmed = std::move(link.writing);  // counted or requeued when the handshake answer comes
      link.writing.clear();
    } else {
      // A failed write means the call had already ended, so the peer never processed the batch
      // (likewise a first batch on a refused stream): it goes back to the front of the queue, still
      // subject to the age limit, for the next stream.
      requeue_front_locked(link, link.writing);
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

void PeerTransport::Impl::on_initial_metadata(PeerLink& link, OutboundStream* stream, bool ok) {
  bool accepted = false;
  if (ok) {
    // Handshake: the peer answers our first message with initial metadata once it has checked the
    // cluster id and node ids, or ends the call. Without this a refused stream would look healthy
    // until the next write, and the refused messages would count as sent.
    const auto& metadata = stream->context.GetServerInitialMetadata();
    accepted = metadata.find(grpc::string_ref(kPeerAcceptedKey.data(), kPeerAcceptedKey.size())) != metadata.end();
  }
  bool write_next = false;
  bool release = false;
  {
    std::lock_guard lock(link.mu);
    stream->reached_peer = ok;
    if (accepted) {
      stream->accepted = true;
      link.stats.connected = !stream->closing;
      count_sent_locked(link, link.unconfirmed);
      link.backoff_ms = options_.reconnect_backoff_min_ms;
      link.consecutive_failures = 0;
      if (!link.up) {
        spdlog::info("node {}: peer {} ({}) up ({} lane)", options_.self_id, link.id, link.address,
                     lane_name(link.lane));
        link.up = true;
      }
      write_next = !stream->closing;
    } else {
      stream->closing = true;
      link.stats.connected = false;
      requeue_front_locked(link, link.unconfirmed);
    }
    release = release_due_locked(stream);
  }
  if (release) {
    stream->RemoveHold();
    return;
  }
  if (write_next) pump(link);
}

void PeerTransport::Impl::on_stream_done(PeerLink& link, OutboundStream* stream, const grpc::Status& status) {
  std::optional<Clock::time_point> reconnect_at;
  {
    std::lock_guard lock(link.mu);
    RAFTLOG_CHECK(link.stream == stream, "OnDone for a stream that is not the link's");
    RAFTLOG_CHECK(!stream->write_claimed, "OnDone with a write claimed");
    link.stream = nullptr;
    link.stats.connected = false;
    // Every write and the handshake answer completed before OnDone, so nothing is left in flight;
    // requeue defensively all the same.
    requeue_front_locked(link, link.unconfirmed);
    if (!link.stopping) {
      record_failure_locked(link, describe(status));
      expire_stale_locked(link, Clock::now());
      std::uint32_t delay_ms = options_.reconnect_backoff_min_ms;
      if (stream->reached_peer) {
        // The connection may be fine while the peer refuses our streams (wrong cluster id, a peer
        // that is shutting down): back off so a refusing peer is not hammered. An accepted stream
        // reset the backoff to the minimum.
        delay_ms = link.backoff_ms;
        link.backoff_ms = std::min(link.backoff_ms * 2, options_.reconnect_backoff_max_ms);
      }
      // Otherwise the call never reached the peer: the channel could not connect. The channel spaces
      // its connection attempts by its own backoff (the same bounds), and a fail-fast call on a
      // channel that is waiting to retry fails locally, so trying again after the minimum costs no
      // traffic and opens the stream as soon as the channel is up (an extra doubling here would add
      // up to reconnect_backoff_max_ms to every recovery).
      std::uniform_int_distribution<std::uint32_t> jitter_ms(0, delay_ms / 4);
      reconnect_at = Clock::now() + std::chrono::milliseconds(delay_ms + jitter_ms(link.jitter));
    }
  }
  delete stream;
  if (reconnect_at.has_value()) {
    PeerLink* link_ptr = &link;
    if (!reconnect_timer_.schedule(*reconnect_at, [this, link_ptr] { open_stream(*link_ptr); })) {
      // Refused once stop() has begun (which opens no more streams anyway), or if the one-per-peer
      // bound were broken: then the peer would never reconnect, so say so loudly.
      std::lock_guard lock(link.mu);
      if (!link.stopping) {
        spdlog::error("node {}: peer {} {} lane: reconnect timer refused a reconnect; the lane stays down",
                      options_.self_id, link.id, lane_name(link.lane));
      }
    }
  }
  outbound_stream_ended();  // last: stop() may destroy the transport once the count reaches zero
}

bool PeerTransport::Impl::release_due_locked(OutboundStream* stream) {
  if (!stream->started || !stream->closing || stream->write_claimed || stream->hold_released ||
      stream->cancel_in_progress) {
    return false;
  }
  stream->hold_released = true;
  return true;
}

void PeerTransport::Impl::requeue_front_locked(PeerLink& link, std::vector<QueuedMessage>& items) {
  // held_bytes and held_messages() already count the messages, so they fit within the bounds.
  for (auto it = items.rbegin(); it != items.rend(); ++it) {
    if (link.stopping) {
      ++link.stats.dropped_send_failed;
      link.held_bytes -= it->bytes;
      continue;
    }
    link.queue.push_front(std::move(*it));
  }
  items.clear();
}

void PeerTransport::Impl::count_sent_locked(PeerLink& link, std::vector<QueuedMessage>& items) {
  if (items.empty()) return;
  link.stats.sent_messages += items.size();
  link.stats.last_send_ok = Clock::now();
  for (const QueuedMessage& item : items) link.held_bytes -= item.bytes;
  items.clear();
}

void PeerTransport::Impl::expire_stale_locked(PeerLink& link, Clock::time_point now) {
  const Clock::time_point oldest_allowed = now - std::chrono::milliseconds(options_.max_message_age_ms);
  // The queue is in arrival order (requeued messages are older than the rest), so the stale
  // messages are a prefix.
  while (!link.queue.empty() && link.queue.front().enqueued_at < oldest_allowed) {
    link.held_bytes -= link.queue.front().bytes;
    link.queue.pop_front();
    ++link.stats.dropped_expired;
  }
}

void PeerTransport::Impl::record_failure_locked(PeerLink& link, const std::string& error) {
  ++link.stats.connect_failures;
  link.stats.last_error = error;
  link.stats.last_error_at = Clock::now();
  // One log line per outage, not one per attempt.
  const bool log_it = link.up || link.consecutive_failures == 0;
  link.up = false;
  ++link.consecutive_failures;
  if (log_it) {
    spdlog::warn("node {}: peer {} ({}) down: {} lane: {}", options_.self_id, link.id, link.address,
                 lane_name(link.lane), error);
  }
}

void PeerTransport::Impl::outbound_stream_ended() {
  std::lock_guard lock(outbound_mu_);
  RAFTLOG_CHECK(live_outbound_streams_ > 0, "more outbound streams ended than started");
  --live_outbound_streams_;
  if (live_outbound_streams_ == 0) outbound_cv_.notify_all();
}

// --- inbound ---------------------------------------------------------------------------------------

grpc::ServerReadReactor<pb::RaftMessage>* PeerTransport::Impl::PeerService::Stream(
    grpc::CallbackServerContext* context, pb::StreamSummary* summary) {
  return new InboundReactor<pb::RaftMessage>(impl_, context, summary);
}

grpc::ServerReadReactor<pb::RaftMessageBatch>* PeerTransport::Impl::PeerService::StreamBatches(
    grpc::CallbackServerContext* context, pb::StreamSummary* summary) {
  return new InboundReactor<pb::RaftMessageBatch>(impl_, context, summary);
}

void PeerTransport::Impl::InboundStream::begin() {
  id = impl->register_inbound(this);
  if (id == 0) {
    finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "peer transport is stopped"));
    return;
  }
  if (std::string problem = impl->authenticate_inbound(*context, &authenticated_from); !problem.empty()) {
    reject(grpc::StatusCode::UNAUTHENTICATED, problem);
    return;
  }
  start_read();
}

void PeerTransport::Impl::InboundStream::on_read_failed() {
  // The sender finished, the stream broke, or stop() cancelled it.
  summary->set_messages_received(received);
  finish(context->IsCancelled() ? grpc::Status::CANCELLED : grpc::Status::OK);
}

void PeerTransport::Impl::InboundStream::on_messages(const std::vector<const pb::RaftMessage*>& messages) {
  // Every message of the element is checked before any is delivered.
  std::vector<raft::Message> decoded(messages.size());
  for (std::size_t i = 0; i < messages.size(); ++i) {
    grpc::StatusCode code = grpc::StatusCode::OK;
    if (std::string problem = impl->check_inbound(*messages[i], authenticated_from, &stream_from, &code);
        !problem.empty()) {
      reject(code, problem);
      return;
    }
    if (std::string problem = decode_message(*messages[i], impl->options_.limits, &decoded[i]); !problem.empty()) {
      reject(grpc::StatusCode::INVALID_ARGUMENT, problem);
      return;
    }
  }
  if (received == 0) {
    context->AddInitialMetadata(std::string(kPeerAcceptedKey), "1");
    start_send_initial_metadata();
  }
  for (raft::Message& message : decoded) {
    if (!impl->deliver(std::move(message))) {
      finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "peer transport is stopped"));
      return;
    }
    ++received;
  }
  start_read();  // the decoded messages no longer refer to the element being read into
}

void PeerTransport::Impl::InboundStream::ended(Impl* owner, std::uint64_t stream_id) {
  if (stream_id != 0) owner->unregister_inbound(stream_id);  // last: stop() waits for it
}

void PeerTransport::Impl::InboundStream::reject(grpc::StatusCode code, const std::string& message) {
  spdlog::warn("node {}: refused peer stream from {}: {}", impl->options_.self_id, context->peer(), message);
  {
    std::lock_guard lock(impl->inbound_mu_);
    ++impl->inbound_stats_.rejected_streams;
  }
  finish(grpc::Status(code, message));
}

void PeerTransport::Impl::InboundStream::finish(grpc::Status status) {
  if (id != 0) {
    std::lock_guard lock(impl->inbound_mu_);
    RAFTLOG_CHECK(!finishing, "inbound stream finished twice");
    finishing = true;
    if (cancel_pins > 0) {
      deferred_finish = std::move(status);  // stop() is cancelling the call and finishes it after
      return;
    }
  }
  finish_call(std::move(status));
}

std::string PeerTransport::Impl::check_inbound(const pb::RaftMessage& wire, raft::NodeId authenticated_from,
                                               raft::NodeId* stream_from, grpc::StatusCode* code) const {
  *code = grpc::StatusCode::FAILED_PRECONDITION;
  if (wire.cluster_id() != options_.cluster_id) {
    return "cluster id \"" + wire.cluster_id() + "\" does not match this node's \"" + options_.cluster_id + "\"";
  }
  if (wire.to() != options_.self_id) {
    return "message for node " + std::to_string(wire.to()) + " reached node " + std::to_string(options_.self_id) +
           " (misconfigured peer address?)";
  }
  if (authenticated_from != raft::kNoNode && wire.from() != authenticated_from) {
    // A forged `from` (a member speaking for another, or an attacker replaying one's credential).
    *code = grpc::StatusCode::PERMISSION_DENIED;
    return "the caller authenticated as node " + std::to_string(authenticated_from) +
           " but sent a message from node " + std::to_string(wire.from());
  }
  if (links_.find(wire.from()) == links_.end()) {
    return "node " + std::to_string(wire.from()) + " is not a peer of node " + std::to_string(options_.self_id);
  }
  if (*stream_from == raft::kNoNode) *stream_from = wire.from();
  if (wire.from() != *stream_from) {
    return "stream from node " + std::to_string(*stream_from) + " carried a message from node " +
           std::to_string(wire.from());
  }
  *code = grpc::StatusCode::OK;
  return "";
}

std::uint64_t PeerTransport::Impl::register_inbound(InboundStream* stream) {
  std::lock_guard lock(inbound_mu_);
  if (inbound_stopping_) return 0;
  const std::uint64_t stream_id = next_inbound_id_++;
  inbound_streams_.emplace(stream_id, stream);
  ++inbound_stats_.open_streams;
  return stream_id;
}

void PeerTransport::Impl::unregister_inbound(std::uint64_t stream_id) {
  std::lock_guard lock(inbound_mu_);
  RAFTLOG_CHECK(inbound_streams_.erase(stream_id) == 1, "unknown inbound stream");
  --inbound_stats_.open_streams;
  inbound_cv_.notify_all();
}

bool PeerTransport::Impl::deliver(raft::Message message) {
  {
    std::lock_guard lock(inbound_mu_);
    if (inbound_stopping_) return false;
    ++callbacks_running_;
    ++inbound_stats_.received_messages;
  }
  on_message_(std::move(message));
  std::lock_guard lock(inbound_mu_);
  --callbacks_running_;
  if (callbacks_running_ == 0) inbound_cv_.notify_all();
  return true;
}

PeerTransport::PeerTransport(PeerTransportOptions options, MessageHandler on_message)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(on_message))) {}
PeerTransport::~PeerTransport() = default;
grpc::Service* PeerTransport::service() { return impl_->service(); }
std::size_t PeerTransport::max_receive_message_bytes() const { return impl_->max_receive_message_bytes(); }
void PeerTransport::start() { impl_->start(); }
bool PeerTransport::stop() { return impl_->stop(); }
bool PeerTransport::send(raft::Message message) { return impl_->send(std::move(message)); }
std::vector<PeerStats> PeerTransport::peer_stats() const { return impl_->peer_stats(); }
InboundStats PeerTransport::inbound_stats() const { return impl_->inbound_stats(); }
std::uint64_t PeerTransport::dropped_unknown_peer() const { return impl_->dropped_unknown_peer(); }

}  // namespace raftlog::server

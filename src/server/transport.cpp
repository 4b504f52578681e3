#include "server/transport.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <limits>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <utility>

#include "raftlog/peer/v1/peer.grpc.pb.h"
#include "server/check.h"
#include "server/tls_files.h"

namespace raftlog::server {

namespace pb = raftlog::peer::v1;
using Clock = std::chrono::steady_clock;

namespace {

// Queue accounting charges every message this much on top of its entries (entries already include
// raft::Entry::kEntryOverheadBytes each): close to the encoded size of a message's fixed fields.
constexpr std::size_t kMessageHeaderBytes = 64;
// Messages a sender moves out of its queue per wakeup: bounds the batch it holds outside the lock.
constexpr std::size_t kMaxBatchMessages = 64;
// gRPC's size checks count the whole framed message; leave room above our own bound.
constexpr std::size_t kGrpcHeadroomBytes = 64 * 1024;
constexpr std::size_t kMaxClusterIdBytes = 256;
// Initial metadata a receiver sends once the first message of a stream passed its checks.
constexpr std::string_view kPeerAcceptedKey = "raftlog-peer-accepted";
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
  return "gRPC status " + std::to_string(static_cast<int>(status.error_code())) + ": " +
         status.error_message();
}

const char* state_name(grpc_connectivity_state state) {
  switch (state) {
    case GRPC_CHANNEL_IDLE: return "idle";
    case GRPC_CHANNEL_CONNECTING: return "connecting";
    case GRPC_CHANNEL_READY: return "ready";
    case GRPC_CHANNEL_TRANSIENT_FAILURE: return "transient failure";
    case GRPC_CHANNEL_SHUTDOWN: return "shut down";
  }
  return "unknown";
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
  return {};
}

// Everything the transport knows about one peer. The sender thread is the only one that touches the
// stub and the stream; everything under `mu` is shared with send(), stop() and peer_stats().
struct PeerLink {
  raft::NodeId id = raft::kNoNode;
  std::string address;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::Peer::Stub> stub;
  std::minstd_rand jitter;  // sender thread only
  std::thread thread;

  mutable std::mutex mu;
  std::condition_variable cv;
  std::deque<QueuedMessage> queue;       // bounded by max_queued_messages and max_queued_bytes
  std::size_t queued_bytes = 0;
  bool stopping = false;
  grpc::ClientContext* active_context = nullptr;  // the open stream's context, for stop() to cancel
  std::uint32_t consecutive_failures = 0;
  bool up = false;  // the last stream was accepted and has not failed since (for log lines)
  PeerStats stats;  // queued_* are filled in when a snapshot is taken
};

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

  grpc::Status handle_stream(grpc::ServerContext* context, grpc::ServerReader<pb::RaftMessage>* reader,
                             pb::StreamSummary* summary);

 private:
  class PeerService final : public pb::Peer::Service {
   public:
    explicit PeerService(Impl* impl) : impl_(impl) {}
    grpc::Status Stream(grpc::ServerContext* context, grpc::ServerReader<pb::RaftMessage>* reader,
                        pb::StreamSummary* summary) override {
      return impl_->handle_stream(context, reader, summary);
    }

   private:
    Impl* impl_;
  };

  std::shared_ptr<grpc::ChannelCredentials> channel_credentials() const;
  // "" when the caller may open a peer stream (always without TLS), else why not.
  std::string authenticate_inbound(const grpc::ServerContext& context) const;
  void run_sender(PeerLink& link);
  bool wait_until_ready(PeerLink& link, std::string* error);
  bool pump_stream(PeerLink& link, std::string* error);
  void record_failure(PeerLink& link, const std::string& error);
  void expire_stale(PeerLink& link);
  void sleep_unless_stopping(PeerLink& link, std::uint32_t duration_ms);
  static bool stopping(const PeerLink& link) {
    std::lock_guard lock(link.mu);
    return link.stopping;
  }

  // Inbound bookkeeping: register/unregister a stream, and run the callback unless stopping.
  bool register_inbound(grpc::ServerContext* context);
  void unregister_inbound(grpc::ServerContext* context, bool rejected);
  bool deliver(raft::Message message);

  const PeerTransportOptions options_;
  const MessageHandler on_message_;
  std::map<raft::NodeId, std::unique_ptr<PeerLink>> links_;  // fixed after construction
  PeerService service_{this};
  std::atomic<bool> started_{false};
  std::atomic<std::uint64_t> dropped_unknown_peer_{0};

  std::mutex stop_mu_;  // serializes stop() calls
  bool stopped_ = false;
  bool stop_result_ = true;

  mutable std::mutex inbound_mu_;
  std::condition_variable inbound_cv_;
  bool inbound_stopping_ = false;
  std::set<grpc::ServerContext*> inbound_contexts_;
  std::size_t callbacks_running_ = 0;
  InboundStats inbound_stats_;
};

PeerTransport::Impl::Impl(PeerTransportOptions options, MessageHandler on_message)
    : options_(std::move(options)), on_message_(std::move(on_message)) {
  const std::string problem = validate_options(options_);
  RAFTLOG_CHECK(problem.empty(), problem.c_str());
  RAFTLOG_CHECK(on_message_ != nullptr, "PeerTransport needs an on_message handler");

  for (const auto& [id, address] : options_.peers) {
    auto link = std::make_unique<PeerLink>();
    link->id = id;
    link->address = address;
    link->stats.id = id;
    link->stats.address = address;
    link->jitter.seed(static_cast<std::minstd_rand::result_type>(options_.self_id * 1000003u + id));

    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(static_cast<int>(max_receive_message_bytes()));
    // gRPC's channel owns connection backoff; these make it follow our bounds instead of its
    // defaults (1 s initial, 120 s max, 20 s connect timeout), which would delay failover.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, static_cast<int>(options_.reconnect_backoff_min_ms));
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, static_cast<int>(options_.reconnect_backoff_max_ms));
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, static_cast<int>(options_.connect_timeout_ms));
    // One connection per peer link, not shared process-wide (tests run several nodes in a process).
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    link->channel = grpc::CreateCustomChannel(address, channel_credentials(), args);
    link->stub = pb::Peer::NewStub(link->channel);
    links_.emplace(id, std::move(link));
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

std::string PeerTransport::Impl::authenticate_inbound(const grpc::ServerContext& context) const {
  if (!options_.tls.has_value()) return "";
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) {
    return "peer streams need a TLS client certificate from the cluster CA; none was presented";
  }
  std::vector<grpc::string_ref> chain = auth->FindPropertyValues(GRPC_X509_PEM_CERT_CHAIN_PROPERTY_NAME);
  if (chain.empty()) chain = auth->FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME);
  if (chain.empty()) return "peer streams need a TLS client certificate from the cluster CA; none was found";
  const std::string pem(chain.front().data(), chain.front().size());
  if (std::string problem = verify_certificate_chain(pem, options_.tls->ca_pem); !problem.empty()) {
    return "the caller's certificate is not from the cluster CA (" + problem + ")";
  }
  return "";
}

void PeerTransport::Impl::start() {
  RAFTLOG_CHECK(!started_.exchange(true), "PeerTransport::start called twice");
  {
    std::lock_guard lock(stop_mu_);
    if (stopped_) return;
    for (auto& [id, link] : links_) {
      PeerLink* raw = link.get();
      raw->thread = std::thread([this, raw] { run_sender(*raw); });
    }
  }
}

bool PeerTransport::Impl::stop() {
  std::lock_guard stop_lock(stop_mu_);
  if (stopped_) return stop_result_;
  stopped_ = true;

  // Inbound first, so on_message stops as early as possible.
  std::unique_lock lock(inbound_mu_);
  inbound_stopping_ = true;
  for (grpc::ServerContext* context : inbound_contexts_) context->TryCancel();
  // A running callback is short by contract; it must finish before stop() returns.
  inbound_cv_.wait(lock, [&] { return callbacks_running_ == 0; });
  stop_result_ = inbound_cv_.wait_for(lock, std::chrono::milliseconds(options_.stop_timeout_ms),
                                      [&] { return inbound_contexts_.empty(); });
  lock.unlock();
  if (!stop_result_) {
    spdlog::warn("node {}: peer transport stop: {} inbound stream(s) still open after {} ms", options_.self_id,
                 inbound_stats().open_streams, options_.stop_timeout_ms);
  }

  for (auto& [id, link] : links_) {
    std::lock_guard link_lock(link->mu);
    link->stopping = true;
    if (link->active_context != nullptr) link->active_context->TryCancel();
    link->cv.notify_all();
  }
  for (auto& [id, link] : links_) {
    if (link->thread.joinable()) link->thread.join();
    std::lock_guard link_lock(link->mu);
    link->queue.clear();
    link->queued_bytes = 0;
  }
  return stop_result_;
}

bool PeerTransport::Impl::send(raft::Message message) {
  const auto found = links_.find(message.to);
  if (found == links_.end()) {
    dropped_unknown_peer_.fetch_add(1);
    return false;
  }
  PeerLink& link = *found->second;
  const std::size_t bytes = estimate_bytes(message);
  std::lock_guard lock(link.mu);
  if (link.stopping) return false;
  // The exact encoded size is checked by the sender; payloads alone over the bound cannot fit.
  if (bytes - kMessageHeaderBytes > options_.limits.max_message_bytes) {
    ++link.stats.dropped_oversize;
    return false;
  }
  if (link.queue.size() >= options_.max_queued_messages ||
      link.queued_bytes + bytes > options_.max_queued_bytes) {
    ++link.stats.dropped_queue_full;
    return false;
  }
  link.queue.push_back(QueuedMessage{std::move(message), Clock::now(), bytes});
  link.queued_bytes += bytes;
  link.cv.notify_one();
  return true;
}

std::vector<PeerStats> PeerTransport::Impl::peer_stats() const {
  std::vector<PeerStats> result;
  result.reserve(links_.size());
  for (const auto& [id, link] : links_) {
    std::lock_guard lock(link->mu);
    PeerStats stats = link->stats;
    stats.queued_messages = link->queue.size();
    stats.queued_bytes = link->queued_bytes;
    result.push_back(std::move(stats));
  }
  return result;
}

void PeerTransport::Impl::run_sender(PeerLink& link) {
  std::uint32_t backoff_ms = options_.reconnect_backoff_min_ms;
  // Bounded by stop(): every wait below wakes within kPollIntervalMs or on the link's condition.
  while (!stopping(link)) {
    std::string error;
    if (!wait_until_ready(link, &error)) {
      if (stopping(link)) break;
      // The channel spaces connection attempts by its own (configured) backoff: no extra sleep.
      record_failure(link, error);
      expire_stale(link);
      continue;
    }
    const bool delivered = pump_stream(link, &error);
    if (stopping(link)) break;
    record_failure(link, error);
    expire_stale(link);
    // The connection may be fine while the peer refuses our streams (wrong cluster id, a peer that
    // is shutting down): back off so a refusing peer is not hammered.
    if (delivered) backoff_ms = options_.reconnect_backoff_min_ms;
    std::uniform_int_distribution<std::uint32_t> jitter_ms(0, backoff_ms / 4);
    sleep_unless_stopping(link, backoff_ms + jitter_ms(link.jitter));
    backoff_ms = std::min(backoff_ms * 2, options_.reconnect_backoff_max_ms);
  }
}

bool PeerTransport::Impl::wait_until_ready(PeerLink& link, std::string* error) {
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(options_.connect_timeout_ms);
  grpc_connectivity_state state = link.channel->GetState(/*try_to_connect=*/true);
  while (state != GRPC_CHANNEL_READY) {
    if (stopping(link)) return false;
    const Clock::time_point now = Clock::now();
    if (now >= deadline) {
      *error = "not connected within " + std::to_string(options_.connect_timeout_ms) +
               " ms (channel " + state_name(state) + ")";
      return false;
    }
    const Clock::time_point poll_until =
        std::min(deadline, now + std::chrono::milliseconds(PeerTransport::kPollIntervalMs));
    link.channel->WaitForStateChange(state, std::chrono::system_clock::now() + (poll_until - now));
    state = link.channel->GetState(/*try_to_connect=*/true);
  }
  return true;
}

bool PeerTransport::Impl::pump_stream(PeerLink& link, std::string* error) {
  grpc::ClientContext context;
  {
    std::lock_guard lock(link.mu);
    if (link.stopping) return false;
    link.active_context = &context;
  }
  pb::StreamSummary summary;
  std::unique_ptr<grpc::ClientWriter<pb::RaftMessage>> writer = link.stub->Stream(&context, &summary);
  {
    std::lock_guard lock(link.mu);
    ++link.stats.connects;
  }

  bool accepted = false;  // the peer checked our first message and said so (kPeerAcceptedKey)
  bool broken = false;
  std::vector<QueuedMessage> batch;
  batch.reserve(kMaxBatchMessages);
  std::vector<QueuedMessage> sendable;  // the part of the batch still worth sending...
  std::vector<pb::RaftMessage> wires;   // ...and its encoding, index for index
  sendable.reserve(kMaxBatchMessages);
  wires.reserve(kMaxBatchMessages);
  while (!broken) {
    {
      std::unique_lock lock(link.mu);
      link.cv.wait(lock, [&] { return link.stopping || !link.queue.empty(); });
      if (link.stopping) break;
      while (!link.queue.empty() && batch.size() < kMaxBatchMessages) {
        link.queued_bytes -= link.queue.front().bytes;
        batch.push_back(std::move(link.queue.front()));
        link.queue.pop_front();
      }
    }

    const Clock::time_point now = Clock::now();
    std::uint64_t expired = 0;
    std::uint64_t oversize = 0;
    sendable.clear();
    wires.clear();
    for (QueuedMessage& item : batch) {
      if (now - item.enqueued_at > std::chrono::milliseconds(options_.max_message_age_ms)) {
        ++expired;
        continue;
      }
      pb::RaftMessage& wire = wires.emplace_back();
      encode_message(item.message, options_.cluster_id, &wire);
      if (wire.ByteSizeLong() > options_.limits.max_message_bytes) {
        ++oversize;
        wires.pop_back();
        continue;
      }
      sendable.push_back(std::move(item));
    }
    batch.clear();

    std::size_t sent = 0;
    for (; sent < wires.size(); ++sent) {
      grpc::WriteOptions write_options;
      // Let gRPC coalesce a batch into fewer frames; the last write of the batch flushes it.
      if (sent + 1 < wires.size()) write_options.set_buffer_hint();
      if (!writer->Write(wires[sent], write_options)) {
        broken = true;
        break;
      }
    }
    if (!accepted && sent > 0) {
      // Handshake: the peer answers our first message with initial metadata once it has checked the
      // cluster id and node ids, or ends the call. Without this a refused stream would look healthy
      // until the next write, and the refused messages would count as sent.
      writer->WaitForInitialMetadata();
      const auto& metadata = context.GetServerInitialMetadata();
      accepted = metadata.find(grpc::string_ref(kPeerAcceptedKey.data(), kPeerAcceptedKey.size())) != metadata.end();
      if (!accepted) {
        sent = 0;
        broken = true;
      }
    }

    std::lock_guard lock(link.mu);
    link.stats.dropped_expired += expired;
    link.stats.dropped_oversize += oversize;
    link.stats.sent_messages += sent;
    // A failed Write means the call had already ended, so the peer never processed that message or
    // the ones after it (likewise everything on a refused stream): they go back to the front of the
    // queue, still subject to the bounds and the age limit, for the next stream.
    for (std::size_t i = sendable.size(); i > sent; --i) {
      QueuedMessage& item = sendable[i - 1];
      if (link.stopping || link.queue.size() >= options_.max_queued_messages ||
          link.queued_bytes + item.bytes > options_.max_queued_bytes) {
        ++link.stats.dropped_send_failed;
        continue;
      }
      link.queued_bytes += item.bytes;
      link.queue.push_front(std::move(item));
    }
    if (sent > 0) link.stats.last_send_ok = Clock::now();
    link.stats.connected = accepted;
    if (accepted && !link.up) {
      spdlog::info("node {}: peer {} ({}) up", options_.self_id, link.id, link.address);
      link.up = true;
      link.consecutive_failures = 0;
    }
  }

  // Broken or refused: Finish() returns the peer's status at once. Stopping: stop() cancelled the call.
  const grpc::Status status = writer->Finish();
  *error = describe(status);
  std::lock_guard lock(link.mu);
  link.active_context = nullptr;
  link.stats.connected = false;
  return accepted;
}

void PeerTransport::Impl::record_failure(PeerLink& link, const std::string& error) {
  std::lock_guard lock(link.mu);
  ++link.stats.connect_failures;
  link.stats.last_error = error;
  // One log line per outage, not one per attempt.
  const bool log_it = link.up || link.consecutive_failures == 0;
  link.up = false;
  ++link.consecutive_failures;
  if (log_it) {
    spdlog::warn("node {}: peer {} ({}) down: {}", options_.self_id, link.id, link.address, error);
  }
}

void PeerTransport::Impl::expire_stale(PeerLink& link) {
  const Clock::time_point oldest_allowed = Clock::now() - std::chrono::milliseconds(options_.max_message_age_ms);
  std::lock_guard lock(link.mu);
  // The queue is in arrival order, so the stale messages are a prefix.
  while (!link.queue.empty() && link.queue.front().enqueued_at < oldest_allowed) {
    link.queued_bytes -= link.queue.front().bytes;
    link.queue.pop_front();
    ++link.stats.dropped_expired;
  }
}

void PeerTransport::Impl::sleep_unless_stopping(PeerLink& link, std::uint32_t duration_ms) {
  std::unique_lock lock(link.mu);
  link.cv.wait_for(lock, std::chrono::milliseconds(duration_ms), [&] { return link.stopping; });
}

bool PeerTransport::Impl::register_inbound(grpc::ServerContext* context) {
  std::lock_guard lock(inbound_mu_);
  if (inbound_stopping_) return false;
  inbound_contexts_.insert(context);
  ++inbound_stats_.open_streams;
  return true;
}

void PeerTransport::Impl::unregister_inbound(grpc::ServerContext* context, bool rejected) {
  std::lock_guard lock(inbound_mu_);
  inbound_contexts_.erase(context);
  --inbound_stats_.open_streams;
  if (rejected) ++inbound_stats_.rejected_streams;
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

grpc::Status PeerTransport::Impl::handle_stream(grpc::ServerContext* context,
                                                grpc::ServerReader<pb::RaftMessage>* reader,
                                                pb::StreamSummary* summary) {
  if (!register_inbound(context)) return {grpc::StatusCode::UNAVAILABLE, "peer transport is stopped"};

  const auto reject = [&](grpc::StatusCode code, const std::string& message) {
    spdlog::warn("node {}: refused peer stream from {}: {}", options_.self_id, context->peer(), message);
    unregister_inbound(context, /*rejected=*/true);
    return grpc::Status(code, message);
  };

  if (std::string problem = authenticate_inbound(*context); !problem.empty()) {
    return reject(grpc::StatusCode::UNAUTHENTICATED, problem);
  }

  pb::RaftMessage wire;
  raft::Message message;
  raft::NodeId stream_from = raft::kNoNode;
  std::uint64_t received = 0;
  // Bounded by the sender: the stream ends when it finishes, breaks, or stop() cancels it.
  while (reader->Read(&wire)) {
    if (wire.cluster_id() != options_.cluster_id) {
      return reject(grpc::StatusCode::FAILED_PRECONDITION, "cluster id \"" + wire.cluster_id() +
                                                               "\" does not match this node's \"" +
                                                               options_.cluster_id + "\"");
    }
    if (wire.to() != options_.self_id) {
      return reject(grpc::StatusCode::FAILED_PRECONDITION,
                    "message for node " + std::to_string(wire.to()) + " reached node " +
                        std::to_string(options_.self_id) + " (misconfigured peer address?)");
    }
    if (links_.find(wire.from()) == links_.end()) {
      return reject(grpc::StatusCode::FAILED_PRECONDITION,
                    "node " + std::to_string(wire.from()) + " is not a peer of node " +
                        std::to_string(options_.self_id));
    }
    if (stream_from == raft::kNoNode) stream_from = wire.from();
    if (wire.from() != stream_from) {
      return reject(grpc::StatusCode::FAILED_PRECONDITION,
                    "stream from node " + std::to_string(stream_from) + " carried a message from node " +
                        std::to_string(wire.from()));
    }
    const std::string problem = decode_message(wire, options_.limits, &message);
    if (!problem.empty()) return reject(grpc::StatusCode::INVALID_ARGUMENT, problem);
    if (received == 0) {
      context->AddInitialMetadata(std::string(kPeerAcceptedKey), "1");
      reader->SendInitialMetadata();
    }
    if (!deliver(std::move(message))) break;
    ++received;
  }
  summary->set_messages_received(received);
  unregister_inbound(context, /*rejected=*/false);
  if (context->IsCancelled()) return grpc::Status::CANCELLED;
  return grpc::Status::OK;
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

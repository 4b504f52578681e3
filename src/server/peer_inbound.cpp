#include "server/peer_inbound.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "server/batch_reuse.h"
#include "server/check.h"
#include "server/message_codec.h"
#include "server/peer_protocol.h"

namespace raftlog::server {

namespace pb = raftlog::peer::v1;

namespace {

// Only a leader sends these (a snapshot's chunks are checked apart).
bool is_leader_message(raft::MessageType type) {
  return type == raft::MessageType::kAppend || type == raft::MessageType::kHeartbeat ||
         type == raft::MessageType::kSnapshot;
}

}  // namespace

// One inbound stream from a peer, the part shared by Stream (one message per element) and
// StreamBatches (up to kMaxMessagesPerBatch). Reads one element at a time; its messages are checked,
// then handed to on_message in order, before the next read starts, so one sender's messages arrive
// in order.
//
// Lifetime: gRPC calls OnDone (which deletes the reactor) only after Finish. Finish is called once,
// by the reaction that ends the stream, unless stop() has pinned the stream to cancel it: then the
// reaction leaves its status in deferred_finish and stop() calls Finish after TryCancel. So
// stop() can cancel any registered stream that is not finishing without racing its destruction.
class PeerInbound::InboundStream {
 public:
  InboundStream(PeerInbound* owner, grpc::CallbackServerContext* server_context,
                pb::StreamSummary* stream_summary)
      : inbound(owner), context(server_context), summary(stream_summary) {}
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
  // The messages point into the element just read; their payloads are moved out while decoding.
  void on_messages(const std::vector<pb::RaftMessage*>& messages);
  void on_read_failed();
  // From OnDone, last: the reactor is gone.
  static void ended(PeerInbound* owner, std::uint64_t stream_id);

  // Ends the stream with `status` (now, or after stop()'s cancel). Once per stream.
  void finish(grpc::Status status);
  void reject(grpc::StatusCode code, const std::string& message, bool log = true);

  PeerInbound* const inbound;
  grpc::CallbackServerContext* const context;
  pb::StreamSummary* const summary;
  std::uint64_t id = 0;  // 0: not registered (the transport was stopping)
  raft::NodeId authenticated_from =
      raft::kNoNode;  // set by begin(): the peer the caller proved to be
  raft::NodeId stream_from = raft::kNoNode;
  std::uint64_t received = 0;

  // Under inbound->mu_.
  bool finishing = false;
  int cancel_pins = 0;
  std::optional<grpc::Status> deferred_finish;
};

template <typename Element>
class PeerInbound::InboundReactor final : public grpc::ServerReadReactor<Element>,
                                          public InboundStream {
 public:
  InboundReactor(PeerInbound* owner, grpc::CallbackServerContext* server_context,
                 pb::StreamSummary* stream_summary)
      : InboundStream(owner, server_context, stream_summary) {
    begin();
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      on_read_failed();
      return;
    }
    std::vector<pb::RaftMessage*> messages;
    if constexpr (std::is_same_v<Element, pb::RaftMessageBatch>) {
      const auto count = static_cast<std::size_t>(wire_.messages_size());
      if (count == 0 || count > kMaxMessagesPerBatch) {
        reject(grpc::StatusCode::INVALID_ARGUMENT, "a batch must hold 1 to " +
                                                       std::to_string(kMaxMessagesPerBatch) +
                                                       " messages, not " + std::to_string(count));
        return;
      }
      messages.reserve(count);
      for (pb::RaftMessage& message : *wire_.mutable_messages()) messages.push_back(&message);
    } else {
      messages.push_back(&wire_);
    }
    on_messages(messages);
  }
  void OnDone() override {
    PeerInbound* const owner = inbound;
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

PeerInbound::PeerInbound(const PeerTransportOptions& options, const PeerStreamAuth& auth,
                         PeerAdmission& admission, SnapshotReceipts& receipts,
                         PeerTransport::MessageHandler on_message)
    : options_(options),
      auth_(auth),
      admission_(admission),
      receipts_(receipts),
      on_message_(std::move(on_message)),
      reassembler_(options.max_snapshot_receive_bytes, options.snapshot_partial_idle_timeout),
      partial_file_(options.snapshot_partial_path,
                    SnapshotPartialExpectations{options.cluster_id, options.self_id,
                                                options.max_snapshot_receive_bytes,
                                                options.snapshot_partial_max_disk_used}) {
  RAFTLOG_CHECK(on_message_ != nullptr, "PeerTransport needs an on_message handler");
  // A partial a restart kept: its receipt goes out on this node's first messages, so the sender's
  // next attempt resumes after it.
  std::lock_guard lock(snapshot_mu_);
  const std::string loaded = partial_file_.load(
      reassembler_, options.snapshot_partial_stale_through, SnapshotReassembler::Clock::now());
  // Its idle clock starts at a leader's first message, not now: the node may take long to start.
  restored_partial_idle_clock_waiting_.store(reassembler_.partial_count() > 0);
  publish_receipt_locked();
  if (loaded.empty()) return;
  if (partial_file_.files_dropped() > 0 || partial_file_.write_failures() > 0) {
    spdlog::warn("node {}: {}", options_.self_id, loaded);
  } else {
    spdlog::info("node {}: {}", options_.self_id, loaded);
  }
}

bool PeerInbound::stop() {
  // Pin every stream that is not already finishing, cancel it outside the lock (gRPC may run
  // reactions inline), then finish the ones whose reaction deferred its Finish to us.
  std::vector<InboundStream*> pinned;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    for (auto& [id, stream] : streams_) {
      if (stream->finishing) continue;
      ++stream->cancel_pins;
      pinned.push_back(stream);
    }
  }
  for (InboundStream* stream : pinned) stream->context->TryCancel();
  std::vector<std::pair<InboundStream*, grpc::Status>> deferred;
  {
    std::lock_guard lock(mu_);
    for (InboundStream* stream : pinned) {
      --stream->cancel_pins;
      if (stream->cancel_pins == 0 && stream->deferred_finish.has_value()) {
        deferred.emplace_back(stream, *stream->deferred_finish);
        stream->deferred_finish.reset();
      }
    }
  }
  for (auto& [stream, status] : deferred) stream->finish_call(std::move(status));
  bool ended_in_time = false;
  {
    std::unique_lock lock(mu_);
    // A running callback is short by contract; it must finish before stop() returns.
    cv_.wait(lock, [&] { return callbacks_running_ == 0; });
    ended_in_time = cv_.wait_for(lock, std::chrono::milliseconds(options_.stop_timeout_ms),
                                 [&] { return streams_.empty(); });
  }
  if (!ended_in_time) {
    spdlog::warn("node {}: peer transport stop: {} inbound stream(s) still open after {} ms",
                 options_.self_id, stats().open_streams, options_.stop_timeout_ms);
  }
  return ended_in_time;
}

grpc::ServerReadReactor<pb::RaftMessage>* PeerInbound::PeerService::Stream(
    grpc::CallbackServerContext* context, pb::StreamSummary* summary) {
  return new InboundReactor<pb::RaftMessage>(inbound_, context, summary);
}

grpc::ServerReadReactor<pb::RaftMessageBatch>* PeerInbound::PeerService::StreamBatches(
    grpc::CallbackServerContext* context, pb::StreamSummary* summary) {
  return new InboundReactor<pb::RaftMessageBatch>(inbound_, context, summary);
}

void PeerInbound::InboundStream::begin() {
  id = inbound->register_stream(this);
  if (id == 0) {
    finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "peer transport is stopped"));
    return;
  }
  if (std::string problem = inbound->auth_.authenticate(*context, &authenticated_from);
      !problem.empty()) {
    reject(grpc::StatusCode::UNAUTHENTICATED, problem);
    return;
  }
  // The address the caller says it is reached at, for a node our configurations do not list yet.
  const auto& metadata = context->client_metadata();
  const grpc::string_ref address_key(kPeerAddressKey.data(), kPeerAddressKey.size());
  std::string_view advertised;
  if (const auto found = metadata.find(address_key); found != metadata.end()) {
    if (metadata.count(address_key) != 1) {
      reject(grpc::StatusCode::INVALID_ARGUMENT,
             "the stream carried more than one " + std::string(kPeerAddressKey));
      return;
    }
    advertised = std::string_view(found->second.data(), found->second.size());
  }
  grpc::StatusCode code = grpc::StatusCode::OK;
  if (std::string problem = inbound->admission_.admit_stream(authenticated_from, advertised, &code);
      !problem.empty()) {
    reject(code, problem, /*log=*/false);  // the admission logs its refusals, rate-limited
    return;
  }
  start_read();
}

void PeerInbound::InboundStream::on_read_failed() {
  // The sender finished, the stream broke, or stop() cancelled it.
  summary->set_messages_received(received);
  finish(context->IsCancelled() ? grpc::Status::CANCELLED : grpc::Status::OK);
}

void PeerInbound::InboundStream::on_messages(const std::vector<pb::RaftMessage*>& messages) {
  // Every message of the element is checked before any is delivered. A snapshot chunk is checked
  // like any message, then reassembled: only a whole, checked snapshot reaches on_message.
  std::vector<raft::Message> decoded(messages.size());
  std::vector<std::optional<SnapshotChunk>> chunks(messages.size());
  for (std::size_t i = 0; i < messages.size(); ++i) {
    grpc::StatusCode code = grpc::StatusCode::OK;
    if (std::string problem = inbound->check(*messages[i], authenticated_from, &stream_from, &code);
        !problem.empty()) {
      reject(code, problem);
      return;
    }
    inbound->record_receipt(*messages[i]);
    std::string problem;
    if (is_snapshot_chunk(*messages[i])) {
      problem = decode_snapshot_chunk(std::move(*messages[i]), inbound->options_.limits,
                                      &chunks[i].emplace());
    } else {
      problem = decode_message(std::move(*messages[i]), inbound->options_.limits, &decoded[i]);
    }
    if (!problem.empty()) {
      reject(grpc::StatusCode::INVALID_ARGUMENT, problem);
      return;
    }
  }
  if (received == 0) {
    context->AddInitialMetadata(std::string(kPeerAcceptedKey), "1");
    start_send_initial_metadata();
  }
  for (std::size_t i = 0; i < decoded.size(); ++i) {
    if (chunks[i]) {
      inbound->note_leader_heard(chunks[i]->message.term);
    } else if (is_leader_message(decoded[i].type)) {
      inbound->note_leader_heard(decoded[i].term);
    }
    if (chunks[i]) {
      ++received;  // the stream's count is of messages read; the core sees whole snapshots only
      std::optional<raft::Message> whole = inbound->reassemble(std::move(*chunks[i]));
      if (!whole) continue;
      decoded[i] = std::move(*whole);
    } else if (decoded[i].type == raft::MessageType::kSnapshot) {
      inbound->record_whole_snapshot(decoded[i]);
      ++received;
    } else {
      ++received;
    }
    if (!inbound->deliver(std::move(decoded[i]))) {
      finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "peer transport is stopped"));
      return;
    }
  }
  start_read();  // the decoded messages no longer refer to the element being read into
}

void PeerInbound::InboundStream::ended(PeerInbound* owner, std::uint64_t stream_id) {
  if (stream_id != 0) owner->unregister_stream(stream_id);  // last: stop() waits for it
}

void PeerInbound::InboundStream::reject(grpc::StatusCode code, const std::string& message,
                                        bool log) {
  if (log) {
    std::optional<std::uint64_t> held_back;
    {
      std::lock_guard lock(inbound->mu_);
      held_back = inbound->stream_refusal_log_.admit(util::RateLimit::Clock::now());
    }
    if (held_back) {
      spdlog::warn("node {}: refused peer stream from {}: {}{}", inbound->options_.self_id,
                   context->peer(), message,
                   *held_back == 0 ? std::string()
                                   : " (" + std::to_string(*held_back) +
                                         " more refused stream(s) not logged in the last " +
                                         std::to_string(kStreamRefusalLogInterval.count()) + " s)");
    }
  }
  inbound->count_rejected();
  finish(grpc::Status(code, message));
}

void PeerInbound::InboundStream::finish(grpc::Status status) {
  if (id != 0) {
    std::lock_guard lock(inbound->mu_);
    RAFTLOG_CHECK(!finishing, "inbound stream finished twice");
    finishing = true;
    if (cancel_pins > 0) {
      deferred_finish = std::move(status);  // stop() is cancelling the call and finishes it after
      return;
    }
  }
  finish_call(std::move(status));
}

std::string PeerInbound::check(const pb::RaftMessage& wire, raft::NodeId authenticated_from,
                               raft::NodeId* stream_from, grpc::StatusCode* code) const {
  *code = grpc::StatusCode::FAILED_PRECONDITION;
  if (wire.cluster_id() != options_.cluster_id) {
    return "cluster id \"" + wire.cluster_id() + "\" does not match this node's \"" +
           options_.cluster_id + "\"";
  }
  if (wire.to() != options_.self_id) {
    return "message for node " + std::to_string(wire.to()) + " reached node " +
           std::to_string(options_.self_id) + " (misconfigured peer address?)";
  }
  if (authenticated_from != raft::kNoNode && wire.from() != authenticated_from) {
    // A forged `from` (a member speaking for another, or an attacker replaying one's credential).
    *code = grpc::StatusCode::PERMISSION_DENIED;
    return "the caller authenticated as node " + std::to_string(authenticated_from) +
           " but sent a message from node " + std::to_string(wire.from());
  }
  if (!admission_.may_deliver(wire.from(), authenticated_from)) {
    return "node " + std::to_string(wire.from()) + " is not a peer of node " +
           std::to_string(options_.self_id);
  }
  if (*stream_from == raft::kNoNode) *stream_from = wire.from();
  if (wire.from() != *stream_from) {
    return "stream from node " + std::to_string(*stream_from) + " carried a message from node " +
           std::to_string(wire.from());
  }
  *code = grpc::StatusCode::OK;
  return "";
}

std::uint64_t PeerInbound::register_stream(InboundStream* stream) {
  std::lock_guard lock(mu_);
  if (stopping_) return 0;
  const std::uint64_t stream_id = next_stream_id_++;
  streams_.emplace(stream_id, stream);
  ++stats_.open_streams;
  return stream_id;
}

void PeerInbound::unregister_stream(std::uint64_t stream_id) {
  std::lock_guard lock(mu_);
  RAFTLOG_CHECK(streams_.erase(stream_id) == 1, "unknown inbound stream");
  --stats_.open_streams;
  cv_.notify_all();
}

bool PeerInbound::deliver(raft::Message message) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return false;
    ++callbacks_running_;
    ++stats_.received_messages;
  }
  on_message_(std::move(message));
  std::lock_guard lock(mu_);
  --callbacks_running_;
  if (callbacks_running_ == 0) cv_.notify_all();
  return true;
}

std::optional<raft::Message> PeerInbound::reassemble(SnapshotChunk chunk) {
  const auto now = SnapshotReassembler::Clock::now();
  std::string problem;
  std::optional<raft::Message> whole;
  std::optional<std::uint64_t> log_refusal;
  const raft::NodeId sender = chunk.message.from;
  {
    std::lock_guard lock(snapshot_mu_);
    reassembler_.note_leader_term(leader_term_heard_.load());
    reassembler_.note_leader_term(own_term_.load());
    whole = reassembler_.add(std::move(chunk), now, &problem);
    follow_partial_file_locked(sender);
    publish_receipt_locked();
    if (!problem.empty()) log_refusal = refusal_log_.admit(now);
  }
  // Refusals are rare (a lost chunk, a leader change mid-transfer, a forged one), but after a gap
  // every later chunk of that transfer is refused: at most one line per 5 s (all are counted).
  if (log_refusal) {
    spdlog::warn("node {}: {} ({} more refused since the last line)", options_.self_id, problem,
                 *log_refusal);
  }
  if (whole) {
    spdlog::info("node {}: snapshot {} ({} bytes) from node {} reassembled", options_.self_id,
                 whole->snapshot->index, whole->snapshot->data.size(), whole->from);
  }
  return whole;
}

void PeerInbound::note_own_term(raft::Term term) {
  raft::Term own = own_term_.load();
  while (own < term && !own_term_.compare_exchange_weak(own, term)) {
  }
}

void PeerInbound::note_leader_heard(raft::Term term) {
  raft::Term heard = leader_term_heard_.load();
  while (heard < term && !leader_term_heard_.compare_exchange_weak(heard, term)) {
  }
  if (!restored_partial_idle_clock_waiting_.load()) return;
  std::lock_guard lock(snapshot_mu_);
  restored_partial_idle_clock_waiting_.store(false);
  if (reassembler_.start_idle_clocks(SnapshotReassembler::Clock::now())) publish_receipt_locked();
}

void PeerInbound::record_whole_snapshot(const raft::Message& message) {
  std::lock_guard lock(snapshot_mu_);
  reassembler_.record_delivered(message, SnapshotReassembler::Clock::now());
}

void PeerInbound::drop_snapshot_partials_through(raft::Index index) {
  std::lock_guard lock(snapshot_mu_);
  if (reassembler_.drop_through(index) == 0) return;
  follow_partial_file_locked(std::nullopt);
  publish_receipt_locked();
}

SnapshotReceiveStatus PeerInbound::snapshot_status() const {
  std::lock_guard lock(snapshot_mu_);
  reassembler_.expire(SnapshotReassembler::Clock::now());
  follow_partial_file_locked(std::nullopt);
  publish_receipt_locked();
  SnapshotReceiveStatus status = reassembler_.status();
  status.counters.partial_files_dropped = partial_file_.files_dropped();
  status.counters.partial_file_write_failures = partial_file_.write_failures();
  return status;
}

void PeerInbound::follow_partial_file_locked(std::optional<raft::NodeId> sender) const {
  // Off the Raft loop: on the gRPC thread that reassembles (or a status reader), without a sync.
  const std::string failed = partial_file_.follow(reassembler_, sender);
  if (!failed.empty()) spdlog::warn("node {}: {}", options_.self_id, failed);
}

void PeerInbound::publish_receipt_locked() const {
  SnapshotReassembler::Clock::time_point valid_until{};
  const std::optional<SnapshotReceipt> receipt = reassembler_.receipt(&valid_until);
  receipts_.set_own(receipt, valid_until);
}

void PeerInbound::record_receipt(const pb::RaftMessage& wire) {
  std::string problem;
  const std::optional<SnapshotReceipt> receipt = decode_snapshot_receipt(wire, &problem);
  receipts_.record(wire.from(), receipt);
  receipts_.record_formats(wire.from(), wire.snapshot_formats());
  if (problem.empty()) return;
  std::optional<std::uint64_t> held_back;
  {
    std::lock_guard lock(snapshot_mu_);
    held_back = receipt_log_.admit(util::RateLimit::Clock::now());
  }
  if (held_back) {
    spdlog::warn("node {}: ignoring {} ({} more since the last line)", options_.self_id, problem,
                 *held_back);
  }
}

void PeerInbound::count_rejected() {
  std::lock_guard lock(mu_);
  ++stats_.rejected_streams;
}

}  // namespace raftlog::server

#include "server/client_services.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "api_errors/error_info.h"
#include "raftlog/v1/client.grpc.pb.h"
#include "server/append_stream.h"
#include "server/health_reporter.h"
#include "server/node.h"
#include "server/node_error_status.h"
#include "server/raw_messages.h"
#include "server/stream_limits.h"
#include "server/topics_wire.h"
#include "util/thread_name.h"
#include "util/build_info.h"

namespace raftlog::server {

namespace v1 = ::raftlog::v1;
using Clock = std::chrono::steady_clock;

namespace {

// The services, raw (see raw_messages.h): every request and response is a grpc::ByteBuffer.
using RawLogService =
    v1::Log::WithRawCallbackMethod_Append<v1::Log::WithRawCallbackMethod_AppendStream<
        v1::Log::WithRawCallbackMethod_Read<v1::Log::WithRawCallbackMethod_Tail<
            v1::Log::WithRawCallbackMethod_Status<v1::Log::Service>>>>>;
using RawAdminService =
    v1::Admin::WithRawCallbackMethod_TransferLeadership<v1::Admin::WithRawCallbackMethod_Flush<
        v1::Admin::WithRawCallbackMethod_Trim<v1::Admin::Service>>>;

// Parses a unary call's request; when it does not parse, finishes the call with INVALID_ARGUMENT
// and returns false.
template <typename Request>
bool parse_unary(grpc::CallbackServerContext* context, grpc::ServerUnaryReactor* reactor,
                 const grpc::ByteBuffer* bytes, Request* request) {
  if (parse_message(*bytes, request)) return true;
  reactor->Finish(
      malformed_request(context, "the request", request->GetTypeName(), "nothing was done"));
  return false;
}

// Finishes a unary call with `response` (OK), or INTERNAL if it cannot be serialized.
template <typename Response>
void finish_ok(grpc::ServerUnaryReactor* reactor, const Response& response, grpc::ByteBuffer* out) {
  reactor->Finish(serialize_message(response, out));
}

// The Node callback of a unary RPC answered by one Node call: a failed result ends the RPC with its
// status; a successful one fills a Response through `fill(result, &response)` and ends it with OK.
template <typename Result, typename Response, typename Fill>
std::function<void(Result)> finish_unary(grpc::CallbackServerContext* context,
                                         grpc::ServerUnaryReactor* reactor, grpc::ByteBuffer* out,
                                         Fill fill) {
  return [context, reactor, out, fill = std::move(fill)](Result result) {
    if (!result.error.ok()) {
      reactor->Finish(to_grpc(context, result.error));
      return;
    }
    Response response;
    fill(result, &response);
    finish_ok(reactor, response, out);
  };
}

void fill_entry(const raft::Entry& entry, v1::Entry* out) {
  out->set_index(entry.index);
  out->set_term(entry.term);
  if (!fill_envelope(entry, out)) out->set_payload(entry.payload);
  out->set_client_id(entry.client_id);
  out->set_sequence(entry.sequence);
  switch (entry.type) {
    case raft::EntryType::kNormal:
      out->set_type(entry.is_group_commit ? v1::ENTRY_TYPE_GROUP_COMMIT
                                          : v1::ENTRY_TYPE_NORMAL);
      break;
    case raft::EntryType::kNoop:
      out->set_type(v1::ENTRY_TYPE_NOOP);
      break;
    case raft::EntryType::kConfig:
      out->set_type(v1::ENTRY_TYPE_CONFIG);
      break;
  }
}

v1::Role to_proto(raft::Role role) {
  switch (role) {
    case raft::Role::kFollower:
      return v1::ROLE_FOLLOWER;
    case raft::Role::kPreCandidate:
      return v1::ROLE_PRE_CANDIDATE;
    case raft::Role::kCandidate:
      return v1::ROLE_CANDIDATE;
    case raft::Role::kLeader:
      return v1::ROLE_LEADER;
  }
  return v1::ROLE_UNSPECIFIED;
}

// One worker thread with a bounded queue, for work that must leave the Raft loop thread (copying a
// linearizable read's entries). submit() refuses when the queue is full or the executor stopped.
class ReadExecutor {
 public:
  static constexpr std::size_t kMaxQueued = 4096;  // = the Raft core's bound on pending reads

  ReadExecutor() : worker_([this] { run(); }) {}
  ~ReadExecutor() { stop(); }

  enum class Submit { kQueued, kFull, kStopped };

  Submit submit(std::function<void()> task) {
    {
      std::lock_guard lock(mu_);
      if (stopped_) return Submit::kStopped;
      if (queue_.size() >= kMaxQueued) return Submit::kFull;
      queue_.push_back(std::move(task));
    }
    cv_.notify_one();
    return Submit::kQueued;
  }

  // Runs what is queued, then joins the worker. Idempotent.
  void stop() {
    {
      std::lock_guard lock(mu_);
      stopped_ = true;
    }
    cv_.notify_one();
    if (worker_.joinable()) worker_.join();
  }

 private:
  void run() {
    while (true) {
      std::function<void()> task;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stopped_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopped and drained
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopped_ = false;
  std::thread worker_;  // last: starts after the members it uses
};

v1::SnapshotTransfer::State to_proto(SnapshotTransfer::State state) {
  switch (state) {
    case SnapshotTransfer::State::kSending:
      return v1::SnapshotTransfer::SENDING;
    case SnapshotTransfer::State::kSent:
      return v1::SnapshotTransfer::SENT;
    case SnapshotTransfer::State::kReceiving:
      return v1::SnapshotTransfer::RECEIVING;
    case SnapshotTransfer::State::kInstalling:
      return v1::SnapshotTransfer::INSTALLING;
  }
  return v1::SnapshotTransfer::STATE_UNSPECIFIED;
}

void snapshot_to_proto(const SnapshotTransfer& transfer, v1::SnapshotTransfer* out) {
  out->set_state(to_proto(transfer.state));
  out->set_peer(transfer.peer);
  out->set_index(transfer.index);
  out->set_term(transfer.term);
  out->set_bytes_done(transfer.bytes_done);
  out->set_bytes_total(transfer.bytes_total);
  out->set_bytes_skipped(transfer.bytes_skipped);
  out->set_resume_missed(transfer.resume_missed);
}

// The snapshot transfers into a Status answer whose peers are already filled in.
void add_snapshot_transfers(const SnapshotTransfers& transfers, v1::StatusResponse* response) {
  for (const SnapshotTransfer& sending : transfers.sending) {
    for (v1::PeerStatus& peer : *response->mutable_peers()) {
      if (peer.id() == sending.peer) snapshot_to_proto(sending, peer.mutable_snapshot());
    }
  }
  if (transfers.receiving) {
    snapshot_to_proto(*transfers.receiving, response->mutable_receiving_snapshot());
  }
  response->set_snapshots_sent(transfers.snapshots_sent);
  response->set_snapshots_abandoned(transfers.snapshots_abandoned);
  response->set_snapshots_received(transfers.received.snapshots_delivered);
  response->set_snapshot_chunks_refused(transfers.received.chunks_refused +
                                        transfers.received.checksum_mismatches);
  response->set_snapshots_resumed(transfers.snapshots_resumed);
  response->set_snapshot_bytes_skipped(transfers.snapshot_bytes_skipped);
  response->set_snapshot_partials_continued(transfers.received.partials_continued);
  response->set_snapshot_partials_restored(transfers.received.partials_restored);
  response->set_snapshot_bytes_restored(transfers.received.bytes_restored);
  // As the metric: dropped at start, or removed after a failed write (a failing disk shows).
  response->set_snapshot_partial_files_dropped(transfers.received.partial_files_dropped +
                                               transfers.received.partial_file_write_failures);
  response->set_snapshots_continued(transfers.snapshots_continued);
  response->set_snapshot_resume_saved_bytes(transfers.snapshot_resume_saved_bytes);
  response->set_snapshot_partials_spliced(transfers.received.partials_spliced);
  response->set_snapshot_splices_refused(transfers.received.splices_refused);
}

}  // namespace

class ClientServices::Impl {
 public:
  Impl(Node* node, ClientServiceLimits limits, ClientRequestObserver* observer)
      : node_(node),
        limits_(limits),
        log_(this),
        admin_(this),
        append_streams_(
            node,
            AppendStreamLimits{limits.max_append_streams, limits.max_append_streams_per_connection,
                               limits.max_appends_per_stream,
                               std::chrono::milliseconds(limits.stall_timeout_ms)},
            observer),
        tails_per_connection_(limits.max_tail_streams_per_connection) {}

  // --- raftlog.v1.Log ----------------------------------------------------------------------------
  class LogService final : public RawLogService {
   public:
    explicit LogService(Impl* owner) : owner_(owner) {}

    grpc::ServerUnaryReactor* Append(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request_bytes,
                                     grpc::ByteBuffer* response_bytes) override {
      grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
      v1::AppendRequest request;
      if (!parse_unary(context, reactor, request_bytes, &request)) return reactor;
      std::vector<std::string> payloads;  // moved, not copied
      payloads.reserve(static_cast<std::size_t>(request.entries_size()));
      for (std::string& payload : *request.mutable_entries())
        payloads.push_back(std::move(payload));
      std::vector<EntryAttributes> attributes = take_attributes(&request);
      // The node calls back exactly once (commit, failure, deadline or shutdown), on its loop thread.
      owner_->node_->append(std::move(payloads), request.client_id(), request.sequence(),
                            finish_unary<AppendResult, v1::AppendResponse>(
                                context, reactor, response_bytes,
                                [](const AppendResult& result, v1::AppendResponse* response) {
                                  response->set_first_index(result.first_index);
                                  response->set_last_index(result.last_index);
                                  response->set_term(result.term);
                                  response->set_duplicate(result.duplicate);
                                }),
                            std::move(attributes));
      return reactor;
    }

    AppendStreamServerReactor* AppendStream(grpc::CallbackServerContext* context) override {
      return owner_->append_streams_.open(context);
    }

    grpc::ServerUnaryReactor* Read(grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* request_bytes,
                                   grpc::ByteBuffer* response_bytes) override;

    grpc::ServerWriteReactor<grpc::ByteBuffer>* Tail(
        grpc::CallbackServerContext* context, const grpc::ByteBuffer* request_bytes) override;

    grpc::ServerUnaryReactor* Status(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request_bytes,
                                     grpc::ByteBuffer* response_bytes) override {
      grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
      v1::StatusRequest request;
      if (!parse_unary(context, reactor, request_bytes, &request)) return reactor;
      const NodeStatus status = owner_->node_->status();
      v1::StatusResponse response;
      response.set_node_id(status.node_id);
      response.set_address(status.address);
      response.set_role(to_proto(status.role));
      response.set_term(status.term);
      response.set_leader_id(status.leader_id);
      response.set_leader_address(status.leader_address);
      response.set_first_index(status.first_index);
      response.set_last_index(status.last_index);
      response.set_commit_index(status.commit_index);
      response.set_flushed_index(status.flushed_index);
      response.set_flush_mode(status.flush_mode == store::FlushMode::kSync ? v1::FLUSH_MODE_SYNC
                                                                           : v1::FLUSH_MODE_ASYNC);
      response.set_catching_up(status.catching_up);
      response.set_removed(status.removed);
      response.set_removed_by(status.removed_by);
      response.set_catching_up_to_index(status.catching_up_to_index);
      response.set_stranded_below_index(status.stranded_below_index);
      response.set_disk_used_ratio(status.disk_used_ratio);
      response.set_disk_high_watermark(status.disk_high_watermark);
      response.set_disk_over_high_watermark(status.disk_over_high_watermark);
      response.set_disk_keeping_leadership(status.disk_keeping_leadership);
      response.set_disk_handover_wait_ms(status.disk_handover_wait_ms);
      for (std::uint64_t id : status.voters) response.add_voters(id);
      for (std::uint64_t id : status.learners) response.add_learners(id);
      response.set_learner_catching_up_to_index(status.learner_catching_up_to_index);
      response.set_catching_up_to_leader_commit(status.catching_up_to_leader_commit);
      response.set_behind_leader_commit_entries(status.behind_leader_commit_entries);
      response.set_derived_indexed_through(status.derived_indexed_through);
      response.set_derived_lag_entries(status.derived_lag_entries);
      response.set_derived_problem(status.derived_problem);
      response.set_groups_applied_through(status.groups_applied_through);
      response.set_groups_retention_hold(status.groups_retention_hold);
      response.set_groups_bad_commits(status.groups_bad_commits);
      response.set_groups_refused_commits(status.groups_refused_commits);
      response.set_storage_fault(status.storage_fault);
      response.set_unvouched(status.unvouched);
      response.set_unvouched_hint(status.unvouched_hint);
      response.set_committed_conflict(status.committed_conflict);
      response.set_second_leader(status.second_leader);
      response.set_leadership_refused(status.leadership_refused);
      response.set_corrupt_index(status.corrupt_index);
      response.set_scrub_bytes_verified(status.scrub_bytes_verified);
      response.set_scrub_passes(status.scrub_passes);
      response.set_version(std::string(util::build_version()));
      response.set_revision(std::string(util::build_revision()));
      for (const PeerStatus& peer : status.peers) {
        v1::PeerStatus* out = response.add_peers();
        out->set_id(peer.id);
        out->set_address(peer.address);
        out->set_match_index(peer.match_index);
        out->set_lag_entries(peer.lag_entries);
        out->set_last_contact_ms(peer.last_contact_ms);
        out->set_probing(peer.probing);
        out->set_behind_first_index(peer.behind_first_index);
        out->set_lag_bytes(peer.lag_bytes);
        out->set_disk_over_watermark(peer.disk_over_watermark);
      }
      response.set_snapshots_above_first_index(status.snapshots_above_first_index);
      response.set_snapshot_encodes(status.snapshot_encodes);
      response.set_snapshot_encodings_reused(status.snapshot_encodings_reused);
      if (owner_->snapshot_transfers_) {
        const SnapshotTransfers transfers = owner_->snapshot_transfers_(status);
        add_snapshot_transfers(transfers, &response);
        response.set_not_serving_reason(not_serving_reason(status, transfers));
      } else {
        response.set_not_serving_reason(not_serving_reason(status));
      }
      finish_ok(reactor, response, response_bytes);
      return reactor;
    }

   private:
    Impl* owner_;
  };

  // --- raftlog.v1.Admin --------------------------------------------------------------------------
  class AdminService final : public RawAdminService {
   public:
    explicit AdminService(Impl* owner) : owner_(owner) {}

    grpc::ServerUnaryReactor* TransferLeadership(grpc::CallbackServerContext* context,
                                                 const grpc::ByteBuffer* request_bytes,
                                                 grpc::ByteBuffer* response_bytes) override {
      grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
      v1::TransferLeadershipRequest request;
      if (!parse_unary(context, reactor, request_bytes, &request)) return reactor;
      owner_->node_->transfer_leadership(
          request.target_id(),
          finish_unary<TransferResult, v1::TransferLeadershipResponse>(
              context, reactor, response_bytes,
              [](const TransferResult& result, v1::TransferLeadershipResponse* response) {
                response->set_leader_id(result.leader_id);
                response->set_term(result.term);
              }));
      return reactor;
    }

    grpc::ServerUnaryReactor* Flush(grpc::CallbackServerContext* context,
                                    const grpc::ByteBuffer* request_bytes,
                                    grpc::ByteBuffer* response_bytes) override {
      grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
      v1::FlushRequest request;
      if (!parse_unary(context, reactor, request_bytes, &request)) return reactor;
      // A flush is one msync/fdatasync: short enough to run on the callback thread.
      store::Status st = owner_->node_->flush_store();
      if (!st.ok()) {
        const std::string_view reason = st.code() == store::StatusCode::kNoSpace
                                            ? api_errors::reason::kDiskFull
                                            : api_errors::reason::kStorageError;
        reactor->Finish(reason_status(context, grpc::StatusCode::INTERNAL,
                                      "flush failed: " + st.to_string(), std::string(reason)));
        return reactor;
      }
      v1::FlushResponse response;
      response.set_flushed_index(owner_->node_->flushed_index());
      finish_ok(reactor, response, response_bytes);
      return reactor;
    }

    grpc::ServerUnaryReactor* Trim(grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* request_bytes,
                                   grpc::ByteBuffer* response_bytes) override {
      grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
      v1::TrimRequest request;
      if (!parse_unary(context, reactor, request_bytes, &request)) return reactor;
      owner_->node_->trim(request.before_index(),
                          finish_unary<TrimResult, v1::TrimResponse>(
                              context, reactor, response_bytes,
                              [](const TrimResult& result, v1::TrimResponse* response) {
                                response->set_first_index(result.first_index);
                                response->set_limit(result.limit);
                              }));
      return reactor;
    }

   private:
    Impl* owner_;
  };

  // --- Tail ----------------------------------------------------------------------------------------
  // One pump thread per stream: read committed entries, write one message, wait for the write to
  // complete (at most stall_timeout_ms, see await_write), repeat; wait for the commit index when
  // caught up. The reactor is deleted by whichever of the pump thread and OnDone finishes last.
  class TailReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
   public:
    TailReactor(Impl* owner, grpc::CallbackServerContext* context, std::uint64_t from,
                std::size_t max_bytes)
        : owner_(owner),
          context_(context),
          connection_(context->peer()),
          next_index_(from),
          max_bytes_(max_bytes) {}

    void start() {
      std::thread([this] {
        util::name_this_thread("tail-pump");
        pump();
      }).detach();
    }

    void OnWriteDone(bool ok) override {
      {
        std::lock_guard lock(mu_);
        write_pending_ = false;
        write_ok_ = ok;
      }
      cv_.notify_all();
    }
    void OnCancel() override {
      cancelled_.store(true);
      cv_.notify_all();
    }
    void OnDone() override { release(); }

    grpc::CallbackServerContext* context() const { return context_; }
    const std::string& connection() const { return connection_; }

   private:
    void pump() {
      grpc::Status final_status = grpc::Status::OK;
      Node* node = owner_->node_;
      const std::size_t max_entries = node->config().max_read_entries;
      const auto poll = std::chrono::milliseconds(owner_->limits_.tail_poll_ms);
      // A client resuming here after a failover may ask for an index this node has not committed
      // yet (it lags by a heartbeat, or it is a new leader before its first commit): wait a while
      // for it rather than end the tail with OUT_OF_RANGE.
      auto past_end_waited = std::chrono::milliseconds(0);
      while (!cancelled_.load() && !owner_->shutting_down_.load() && !node->stopping()) {
        std::vector<raft::Entry> entries;
        // Checked every round: a node may learn of its removal while a tail is open on it, and
        // its log then never moves again (the client resumes on a member).
        NodeError error = node->removed_refusal();
        if (error.ok()) error = node->read_committed(next_index_, max_entries, max_bytes_, &entries);
        if (error.reason == api_errors::reason::kIndexNotYetCommitted &&
            past_end_waited < kPastEndGrace) {
          node->wait_for_commit(next_index_ - 2, Clock::now() + poll);
          past_end_waited += poll;
          continue;
        }
        if (!error.ok()) {
          final_status = to_grpc(context_, error);
          break;
        }
        if (entries.empty()) {
          node->wait_for_commit(next_index_ - 1, Clock::now() + poll);
          continue;
        }
        response_.Clear();
        for (const raft::Entry& entry : entries) fill_entry(entry, response_.add_entries());
        response_.set_commit_index(node->commit_index());
        next_index_ = entries.back().index + 1;
        if (grpc::Status serialized = serialize_message(response_, &out_); !serialized.ok()) {
          final_status = serialized;
          break;
        }
        {
          std::lock_guard lock(mu_);
          write_pending_ = true;
        }
        // Not under mu_: gRPC may run OnWriteDone on this very thread.
        StartWrite(&out_);
        if (std::optional<grpc::Status> ended =
                await_write()) {  // the client went away, or takes nothing
          final_status = *ended;
          break;
        }
      }
      // Unregister first and touch nothing of owner_ afterwards: once the registry is empty,
      // ClientServices may be destroyed.
      owner_->unregister_tail(this);
      Finish(final_status);
      release();
    }

    // Waits for the write in flight; nullopt when it completed, else the status to end the stream
    // with. A reader that takes nothing leaves the write pending for good (HTTP/2 flow control)
    // while its connection stays up and answers keepalive pings: after the stall timeout the call
    // is cancelled with RESOURCE_EXHAUSTED, which completes the write (ok = false) and so frees
    // this thread and the stream's slot. Finish() has not been called yet, so the context is valid
    // for the cancel.
    std::optional<grpc::Status> await_write() {
      const auto timeout = std::chrono::milliseconds(owner_->limits_.stall_timeout_ms);
      std::unique_lock lock(mu_);
      if (cv_.wait_for(lock, timeout, [&] { return !write_pending_; })) {
        if (write_ok_) return std::nullopt;
        return grpc::Status::OK;  // the client is gone: nobody reads the status
      }
      lock.unlock();
      spdlog::info("Tail stream from {} at index {}: its reader took nothing for {} ms; ending it",
                   connection_, next_index_, timeout.count());
      grpc::Status stalled = end_stalled_stream(context_, "Tail stream", timeout);
      lock.lock();
      cv_.wait(lock, [&] { return !write_pending_; });  // a cancelled write completes promptly
      return stalled;
    }

    void release() {
      if (references_.fetch_sub(1) == 1) delete this;
    }

    static constexpr auto kPastEndGrace = std::chrono::seconds(5);
    Impl* owner_;
    grpc::CallbackServerContext* context_;
    const std::string connection_;  // gRPC's peer string: the per-connection count's key
    std::uint64_t next_index_;
    std::size_t max_bytes_;
    v1::TailResponse response_;
    grpc::ByteBuffer out_;  // response_ serialized: the write in flight
    std::mutex mu_;
    std::condition_variable cv_;
    bool write_pending_ = false;
    bool write_ok_ = true;
    std::atomic<bool> cancelled_{false};
    std::atomic<int> references_{2};  // the pump thread and gRPC's OnDone
  };

  // Registers a new Tail stream, or returns why it is refused (the node's bound, the connection's
  // bound, shutdown). Registration and shutdown() serialize on tails_mu_: a stream is either
  // refused or registered before shutdown() cancels and waits for every registered one.
  std::optional<grpc::Status> register_tail(TailReactor* tail) {
    std::lock_guard lock(tails_mu_);
    grpc::CallbackServerContext* context = tail->context();
    if (shutting_down_.load() || node_->stopping()) {
      return reason_status(context, grpc::StatusCode::UNAVAILABLE, "node shutting down",
                           std::string(api_errors::reason::kShuttingDown));
    }
    if (live_tails_.size() >= limits_.max_tail_streams) {
      return reason_status(
          context, grpc::StatusCode::RESOURCE_EXHAUSTED,
          "too many Tail streams on this node (" + std::to_string(limits_.max_tail_streams) + ")",
          std::string(api_errors::reason::kTooManyPending));
    }
    if (!tails_per_connection_.try_add(tail->connection())) {
      return reason_status(
          context, grpc::StatusCode::RESOURCE_EXHAUSTED,
          "too many Tail streams on this connection (" +
              std::to_string(tails_per_connection_.max_per_connection()) +
              ", --max-tail-streams-per-connection); close one or use another connection",
          std::string(api_errors::reason::kTooManyPending));
    }
    live_tails_.insert(tail);
    return std::nullopt;
  }

  std::size_t open_tail_streams() {
    std::lock_guard lock(tails_mu_);
    return live_tails_.size();
  }

  void unregister_tail(TailReactor* tail) {
    std::lock_guard lock(tails_mu_);
    live_tails_.erase(tail);
    tails_per_connection_.remove(tail->connection());
    tails_cv_.notify_all();
  }

  void shutdown() {
    append_streams_.shutdown();
    read_executor_.stop();
    std::unique_lock lock(tails_mu_);
    shutting_down_.store(true);
    // Cancelling ends a write blocked on a slow reader (OnWriteDone(false)); every other wait in a
    // pump lasts at most tail_poll_ms. So the registry empties promptly; the timeout only guards
    // against a gRPC bug, and is logged.
    for (TailReactor* tail : live_tails_) tail->context()->TryCancel();
    if (!tails_cv_.wait_for(lock, std::chrono::seconds(30), [&] { return live_tails_.empty(); })) {
      spdlog::error("{} Tail streams did not end within 30 s of shutdown", live_tails_.size());
    }
  }

  Node* node_;
  std::function<SnapshotTransfers(const NodeStatus&)> snapshot_transfers_;  // set before start
  ClientServiceLimits limits_;
  LogService log_;
  AdminService admin_;
  AppendStreams append_streams_;
  std::atomic<bool> shutting_down_{false};
  std::mutex tails_mu_;
  std::condition_variable tails_cv_;
  std::set<TailReactor*> live_tails_;  // guarded by tails_mu_; bounded by limits_.max_tail_streams
  ConnectionStreamCounts tails_per_connection_;  // guarded by tails_mu_
  ReadExecutor read_executor_;
};

grpc::ServerUnaryReactor* ClientServices::Impl::LogService::Read(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request_bytes,
    grpc::ByteBuffer* response_bytes) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  v1::ReadRequest request;
  if (!parse_unary(context, reactor, request_bytes, &request)) return reactor;
  const NodeConfig& config = owner_->node_->config();
  const std::size_t max_entries =
      request.max_entries() == 0
          ? config.max_read_entries
          : std::min<std::size_t>(request.max_entries(), config.max_read_entries);
  const std::size_t max_bytes =
      request.max_bytes() == 0
          ? config.max_read_bytes
          : std::min<std::uint64_t>(request.max_bytes(), config.max_read_bytes);
  const std::uint64_t from = request.from_index();
  Node* node = owner_->node_;
  auto serve = [node, context, reactor, response_bytes, from, max_entries, max_bytes]() {
    std::vector<raft::Entry> entries;
    NodeError error = node->removed_refusal();
    if (error.ok()) error = node->read_committed(from, max_entries, max_bytes, &entries);
    if (!error.ok()) {
      reactor->Finish(to_grpc(context, error));
      return;
    }
    v1::ReadResponse response;
    for (const raft::Entry& entry : entries) fill_entry(entry, response.add_entries());
    response.set_commit_index(node->commit_index());
    finish_ok(reactor, response, response_bytes);
  };
  if (!request.linearizable()) {
    serve();
    return reactor;
  }
  // ReadIndex: once the leader has confirmed its leadership and committed up to the read index,
  // everything completed before this call is readable. The copy is handed to the read executor:
  // the callback runs on the node's Raft loop, which must not spend its time copying payloads.
  ReadExecutor* executor = &owner_->read_executor_;
  node->read_index([context, reactor, serve, executor](ReadIndexResult result) {
    if (!result.error.ok()) {
      reactor->Finish(to_grpc(context, result.error));
      return;
    }
    switch (executor->submit(serve)) {
      case ReadExecutor::Submit::kQueued:
        return;
      case ReadExecutor::Submit::kFull:
        reactor->Finish(reason_status(context, grpc::StatusCode::RESOURCE_EXHAUSTED,
                                      "too many linearizable reads queued; retry later",
                                      std::string(api_errors::reason::kTooManyPending)));
        return;
      case ReadExecutor::Submit::kStopped:
        reactor->Finish(reason_status(context, grpc::StatusCode::UNAVAILABLE, "node shutting down",
                                      std::string(api_errors::reason::kShuttingDown)));
        return;
    }
  });
  return reactor;
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* ClientServices::Impl::LogService::Tail(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request_bytes) {
  Impl* owner = owner_;
  const NodeConfig& config = owner->node_->config();
  v1::TailRequest request;
  const bool parsed = parse_message(*request_bytes, &request);
  const std::size_t max_bytes =
      request.max_bytes_per_message() == 0
          ? std::min<std::uint64_t>(1 << 20, config.max_read_bytes)
          : std::min<std::uint64_t>(request.max_bytes_per_message(), config.max_read_bytes);
  auto* reactor = new TailReactor(owner, context, request.from_index(), max_bytes);
  // Refusals finish at once; OnDone() drops the reference the (never started) pump would hold.
  auto refuse = [&](const grpc::Status& status) {
    reactor->Finish(status);
    reactor->OnDone();
    return reactor;
  };
  if (!parsed) {
    return refuse(
        malformed_request(context, "the request", request.GetTypeName(), "no stream was opened"));
  }
  if (request.from_index() == 0) {
    return refuse(reason_status(context, grpc::StatusCode::INVALID_ARGUMENT, "indexes start at 1",
                                std::string(api_errors::reason::kBadIndexRange)));
  }
  if (std::optional<grpc::Status> refused = owner->register_tail(reactor)) return refuse(*refused);
  // The "accepted" signal: headers now, not with the first entry, which may be long in coming on a
  // quiet log. gRPC holds the send until the reactor is bound, and a refusal above never sends it.
  context->AddInitialMetadata(std::string(api_errors::kTailAcceptedMetadataKey),
                              std::to_string(request.from_index()));
  reactor->StartSendInitialMetadata();
  reactor->start();
  return reactor;
}

ClientServices::ClientServices(Node* node, ClientServiceLimits limits,
                               ClientRequestObserver* observer)
    : impl_(std::make_unique<Impl>(node, limits, observer)) {}

ClientServices::~ClientServices() { shutdown(); }

std::vector<grpc::Service*> ClientServices::services() { return {&impl_->log_, &impl_->admin_}; }

void ClientServices::set_snapshot_transfers_source(
    std::function<SnapshotTransfers(const NodeStatus&)> source) {
  impl_->snapshot_transfers_ = std::move(source);
}

void ClientServices::shutdown() { impl_->shutdown(); }

std::size_t ClientServices::open_tail_streams() const { return impl_->open_tail_streams(); }

std::size_t ClientServices::open_append_streams() const {
  return impl_->append_streams_.open_streams();
}

}  // namespace raftlog::server

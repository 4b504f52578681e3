#include "server/append_stream.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "server/check.h"
#include "server/node.h"
#include "server/node_error_status.h"
#include "server/raw_messages.h"
#include "server/topics_wire.h"
#include "util/thread_name.h"

namespace raftlog::server {

namespace v1 = ::raftlog::v1;
using Clock = std::chrono::steady_clock;

namespace {

void fill_answer(const AppendResult& result, v1::AppendStreamResult* out) {
  if (result.error.ok()) {
    v1::AppendResponse* response = out->mutable_response();
    response->set_first_index(result.first_index);
    response->set_last_index(result.last_index);
    response->set_term(result.term);
    response->set_duplicate(result.duplicate);
    return;
  }
  api_errors::ErrorAnswer answer = error_answer(result.error);
  out->set_code(static_cast<int>(answer.code));
  out->set_message(std::move(answer.message));
  api_errors::to_wire(answer.details, out->mutable_error_info());
}

}  // namespace

// All state below mu_ is touched from gRPC's callback threads (reads, writes, cancellation) and the
// Node's loop thread (answers). gRPC operations (StartRead, StartWrite, Finish) are started outside
// mu_ because gRPC may run the matching On...Done inline on the calling thread.
class AppendStreamReactor final : public AppendStreamServerReactor {
 public:
  AppendStreamReactor(AppendStreams* owner, Node* node, ClientRequestObserver* observer,
                      grpc::CallbackServerContext* context, std::size_t max_in_flight)
      : owner_(owner),
        node_(node),
        observer_(observer),
        context_(context),
        connection_(context->peer()),
        max_in_flight_(max_in_flight) {}

  void start() { StartRead(&request_bytes_); }

  const std::string& connection() const { return connection_; }

  // True when a write has been in flight for `timeout` or longer: the client reads no answers.
  bool write_stalled(Clock::time_point now, std::chrono::milliseconds timeout) {
    std::lock_guard lock(mu_);
    return writing_ && !finished_ && !cancelling_ && now - write_started_ >= timeout;
  }

  // Ends a stalled stream (stream_limits.h). The call is cancelled outside mu_ (gRPC may run
  // reactions on this thread); meanwhile cancelling_ holds back Finish, so OnDone cannot run and
  // the context stays valid. The caller holds a reference (retain()).
  void end_stalled(std::chrono::milliseconds timeout) {
    {
      std::lock_guard lock(mu_);
      if (finished_ || !writing_ || cancelling_) return;  // it moved on meanwhile
      cancelling_ = true;
    }
    spdlog::info("AppendStream from {}: its client has read no answer for {} ms; ending it",
                 connection_, timeout.count());
    grpc::Status stalled = end_stalled_stream(context_, "AppendStream", timeout);
    std::unique_lock lock(mu_);
    cancelling_ = false;
    stalled_status_ = std::move(stalled);
    const Actions actions = next_actions(lock);
    lock.unlock();
    act(actions);
  }

  // Shutdown: stop reading, drop answers still to come and finish UNAVAILABLE (SHUTTING_DOWN) as
  // soon as no write is in flight; the client retries elsewhere with the same sequence numbers.
  void shut_down() {
    std::unique_lock lock(mu_);
    shutting_down_ = true;
    const Actions actions = next_actions(lock);
    lock.unlock();
    act(actions);
  }

  // Keeps the reactor alive across a call from outside gRPC and the Node (AppendStreams::shutdown).
  void retain() { references_.fetch_add(1); }
  void release() {
    if (references_.fetch_sub(1) == 1) delete this;
  }

  // A reactor that never serves: finished at once with `status`, deleted by OnDone.
  void refuse(const grpc::Status& status) {
    {
      std::lock_guard lock(mu_);
      finished_ = true;
      registered_ = false;
    }
    Finish(status);
  }

  void OnReadDone(bool ok) override {
    // A raw read fails only on the client's half-close or a cancelled call; a request that does not
    // parse is caught here and ends the reading just as well, but the stream's status then says so.
    const bool parsed = ok && parse_message(request_bytes_, &request_);
    if (!parsed) {
      std::unique_lock lock(mu_);
      reads_done_ = true;
      if (ok) malformed_request_number_ = requests_read_ + 1;
      const Actions actions = next_actions(lock);
      lock.unlock();
      act(actions);
      return;
    }
    // Everything is taken out of request_ before mu_ is released: once paused, an answer on
    // another thread may start the next read into request_.
    const auto read_at = Clock::now();
    const std::size_t appends = 1 + static_cast<std::size_t>(request_.more_size());
    // Only reactions read, one at a time, so messages_read_ needs no lock.
    const std::uint64_t message = ++messages_read_;
    std::vector<Node::AppendCall> calls;
    calls.reserve(appends);
    calls.push_back(take_call(request_.request_id(), request_.mutable_append(), read_at, message));
    for (v1::AppendStreamItem& item : *request_.mutable_more()) {
      calls.push_back(take_call(item.request_id(), item.mutable_append(), read_at, message));
    }
    bool read_next = false;
    {
      std::lock_guard lock(mu_);
      if (stopped_locked()) return;  // cancelled meanwhile: nobody would see the answers
      ++requests_read_;
      // A message's appends count together: reading stops once max_in_flight_ are unanswered, so
      // at most 2 * max_in_flight_ - 1 are held (a message carries at most max_in_flight_).
      in_flight_ += appends;
      if (appends > 1) held_.emplace(message, HeldAnswers{appends, {}});
      read_next = in_flight_ < max_in_flight_;
      read_paused_ = !read_next;
      // No other read may start until these appends are queued on the node: the node then
      // proposes a stream's appends in the order they were sent (a paused read resumed by
      // OnWriteDone on another thread could otherwise overtake this one).
      handing_over_ = true;
      references_.fetch_add(appends);
    }
    if (appends > max_in_flight_) {
      // Refused as a whole, each append answered (the client matches answers by request_id).
      for (Node::AppendCall& call : calls) {
        call.done(failed_append(make_error(
            ErrorCode::kInvalidArgument,
            "AppendStream message of " + std::to_string(appends) + " appends; at most " +
                std::to_string(max_in_flight_) + " per message (--max-appends-per-stream)",
            std::string(api_errors::reason::kTooManyAppends))));
      }
    } else if (appends == 1) {
      Node::AppendCall& call = calls.front();
      node_->append(std::move(call.payloads), call.client_id, call.sequence, std::move(call.done),
                    std::move(call.attributes));
    } else {
      // The node calls each back exactly once (commit, failure, deadline or shutdown), on its
      // loop thread or, for an immediate refusal, on this one.
      node_->append_all(std::move(calls));
    }
    std::unique_lock lock(mu_);
    handing_over_ = false;
    // Reads are only ever started from reactions (here and OnWriteDone), never from answer() on the
    // Node's thread, which could race OnDone. Starting one after a cancellation or shutdown finished
    // the call is harmless: this reaction keeps the call alive and the read fails.
    Actions actions = next_actions(lock);  // may resume a read paused at the bound meanwhile
    if (read_next && !stopped_locked()) actions.read = true;
    lock.unlock();
    act(actions);
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock lock(mu_);
    RAFTLOG_CHECK(writing_ && in_flight_ >= written_, "a write completed that was not started");
    writing_ = false;
    in_flight_ -= written_;
    written_ = 0;
    if (!ok) broken_ = true;  // the client is gone: nothing more can be sent
    const Actions actions = next_actions(lock);
    lock.unlock();
    act(actions);
  }

  void OnCancel() override {
    std::unique_lock lock(mu_);
    cancelled_ = true;
    const Actions actions = next_actions(lock);
    lock.unlock();
    act(actions);
  }

  void OnDone() override {
    bool registered = false;
    {
      std::lock_guard lock(mu_);
      registered = registered_;
    }
    // Touch nothing of owner_ afterwards: once its registry is empty it may be destroyed.
    if (registered) owner_->unregister(this);
    release();
  }

 private:
  struct Actions {
    bool write = false;
    bool read = false;
    bool finish = false;
    grpc::Status status;
  };

  bool stopped_locked() const { return cancelled_ || broken_ || shutting_down_ || finished_; }

  // One append of the message just read, its payloads moved (not copied) out of `append`. The
  // node calls `done` exactly once; each call holds a reference (taken by OnReadDone).
  Node::AppendCall take_call(std::uint64_t request_id, v1::AppendRequest* append,
                             Clock::time_point read_at, std::uint64_t message) {
    Node::AppendCall call;
    call.client_id = append->client_id();
    call.sequence = append->sequence();
    call.payloads.reserve(static_cast<std::size_t>(append->entries_size()));
    for (std::string& payload : *append->mutable_entries()) {
      call.payloads.push_back(std::move(payload));
    }
    call.attributes = take_attributes(append);
    call.done = [this, request_id, read_at, message](AppendResult result) {
      answer(request_id, result, read_at, message);
    };
    return call;
  }

  // The Node's answer to one request.
  void answer(std::uint64_t request_id, const AppendResult& result,
              std::chrono::steady_clock::time_point read_at, std::uint64_t message) {
    if (observer_ != nullptr) {
      observer_->request_answered(kMetricsMethod, static_cast<int>(grpc_code(result.error.code)),
                                  std::chrono::steady_clock::now() - read_at, result.error.reason);
    }
    std::unique_lock lock(mu_);
    RAFTLOG_CHECK(in_flight_ > 0, "an answer for a request that is not in flight");
    if (stopped_locked()) {
      --in_flight_;  // nobody will read it; it no longer counts against the stream's bound
    } else if (auto group = held_.find(message); group != held_.end()) {
      // One of several appends of a message: written once the last of them is answered, so the
      // message's answers leave in one write (the node answers them in one loop round, one after
      // another; the first would otherwise go out alone and the rest in a second write).
      v1::AppendStreamResult& out = group->second.answers.emplace_back();
      out.set_request_id(request_id);
      fill_answer(result, &out);
      if (--group->second.unanswered == 0) {
        for (v1::AppendStreamResult& held : group->second.answers) {
          pending_.emplace_back().Swap(&held);
        }
        held_.erase(group);
      }
    } else {
      v1::AppendStreamResult& out = pending_.emplace_back();
      out.set_request_id(request_id);
      fill_answer(result, &out);
    }
    const Actions actions = next_actions(lock);
    lock.unlock();
    act(actions);
    release();  // the reference this append held; `this` may be gone after it
  }

  // Decides, under mu_, which gRPC operations to start; act() starts them after unlocking.
  Actions next_actions(std::unique_lock<std::mutex>& lock) {
    RAFTLOG_CHECK(lock.owns_lock(), "next_actions needs mu_");
    Actions actions;
    if (finished_) return actions;
    if (stopped_locked()) {
      // Finish only once no write is outstanding; a cancelled write completes promptly.
      if (!writing_ && !cancelling_) {
        finished_ = true;
        actions.finish = true;
        if (stalled_status_) {
          actions.status =
              *stalled_status_;  // not sent (the call is cancelled), but interceptors see it
        } else if (shutting_down_ && !cancelled_ && !broken_) {
          actions.status = reason_status(context_, grpc::StatusCode::UNAVAILABLE,
                                         "node shutting down; retry on another node",
                                         std::string(api_errors::reason::kShuttingDown));
        } else {
          actions.status = grpc::Status(grpc::StatusCode::CANCELLED, "append stream cancelled");
        }
      }
      return actions;
    }
    if (!writing_ && !pending_.empty()) {
      response_.Clear();
      response_.set_max_appends_per_message(static_cast<std::uint32_t>(max_in_flight_));
      for (v1::AppendStreamResult& result : pending_) response_.add_results()->Swap(&result);
      written_ = pending_.size();
      pending_.clear();
      writing_ = true;
      write_started_ = Clock::now();
      actions.write = true;
    }
    if (read_paused_ && in_flight_ < max_in_flight_ && !reads_done_ && !handing_over_) {
      read_paused_ = false;
      actions.read = true;
    }
    if (reads_done_ && in_flight_ == 0 && !writing_ && !cancelling_) {
      finished_ = true;
      actions.finish = true;
      actions.status = grpc::Status::OK;
      if (malformed_request_number_ != 0) {
        actions.status =
            malformed_request(context_,
                              "AppendStream request " + std::to_string(malformed_request_number_) +
                                  " (counting from 1)",
                              request_.GetTypeName(),
                              "neither it nor anything sent after it was read (the requests before "
                              "it were answered)");
      }
    }
    return actions;
  }

  // Called without mu_ (see the class comment). response_ is only touched by the one write in
  // flight, so it is serialized here; it is bounded by max_in_flight_ small answers, far below
  // protobuf's 2 GiB limit, the only way serialization fails.
  void act(const Actions& actions) {
    if (actions.write) {
      const grpc::Status serialized = serialize_message(response_, &response_bytes_);
      RAFTLOG_CHECK(serialized.ok(), "an AppendStreamResponse did not serialize");
      StartWrite(&response_bytes_);
    }
    if (actions.read) StartRead(&request_bytes_);
    if (actions.finish) Finish(actions.status);
  }

  static constexpr std::string_view kMetricsMethod = "raftlog.v1.Log/AppendStream";

  AppendStreams* owner_;
  Node* node_;
  ClientRequestObserver* observer_;
  grpc::CallbackServerContext* context_;
  const std::string connection_;  // gRPC's peer string: the per-connection count's key
  const std::size_t max_in_flight_;
  grpc::ByteBuffer request_bytes_;     // the read in progress (one at a time)
  v1::AppendStreamRequest request_;    // request_bytes_ parsed
  v1::AppendStreamResponse response_;  // the write in progress (one at a time)
  grpc::ByteBuffer response_bytes_;    // response_ serialized

  // The answers of a message of several appends until the last of them is answered.
  struct HeldAnswers {
    std::size_t unanswered = 0;
    std::vector<v1::AppendStreamResult> answers;
  };

  std::uint64_t messages_read_ = 0;  // touched by OnReadDone only (one read at a time)
  std::mutex mu_;
  // By message number; only messages of more than one append. Bounded with in_flight_: at most
  // 2 x max_in_flight_ answers held here and in pending_ together.
  std::map<std::uint64_t, HeldAnswers> held_;
  std::vector<v1::AppendStreamResult>
      pending_;                // answers not yet written; bounded by max_in_flight_
  std::size_t in_flight_ = 0;  // requests read and not yet answered on the wire (<= max_in_flight_)
  std::size_t written_ = 0;    // answers in the write in progress
  bool writing_ = false;
  Clock::time_point write_started_;  // of the write in progress
  bool cancelling_ = false;          // end_stalled is cancelling the call: do not Finish yet
  std::optional<grpc::Status> stalled_status_;  // set once end_stalled cancelled the call
  std::uint64_t requests_read_ = 0;             // parsed and handed to the node
  std::uint64_t malformed_request_number_ = 0;  // 1-based; 0 = every request read parsed
  bool read_paused_ = false;  // at the bound: the next read starts when an answer is written
  bool handing_over_ =
      false;  // OnReadDone is passing a request to the node: no read starts meanwhile
  bool reads_done_ = false;
  bool cancelled_ = false;
  bool broken_ = false;  // a write failed
  bool shutting_down_ = false;
  bool finished_ = false;   // Finish was called
  bool registered_ = true;  // in owner_'s registry (false for refused streams)
  // gRPC (dropped in OnDone) plus one per append the Node has not answered yet.
  std::atomic<std::size_t> references_{1};
};

AppendStreams::AppendStreams(Node* node, AppendStreamLimits limits, ClientRequestObserver* observer)
    : node_(node),
      observer_(observer),
      limits_(limits),
      per_connection_(limits.max_streams_per_connection) {
  RAFTLOG_CHECK(limits_.max_streams > 0 && limits_.max_streams_per_connection > 0 &&
                    limits_.max_appends_per_stream > 0 && limits_.stall_timeout.count() > 0,
                "AppendStreams bounds must be positive");
  watchdog_ = std::thread([this] {
    util::name_this_thread("stream-watchdog");
    end_stalled_streams();
  });
}

AppendStreams::~AppendStreams() { shutdown(); }

AppendStreamServerReactor* AppendStreams::open(grpc::CallbackServerContext* context) {
  auto* reactor =
      new AppendStreamReactor(this, node_, observer_, context, limits_.max_appends_per_stream);
  {
    // Registration and shutdown() serialize on mu_: a stream is either refused or registered
    // before shutdown() cancels and waits for every registered one.
    std::lock_guard lock(mu_);
    if (shutting_down_ || node_->stopping()) {
      reactor->refuse(reason_status(context, grpc::StatusCode::UNAVAILABLE, "node shutting down",
                                    std::string(api_errors::reason::kShuttingDown)));
      return reactor;
    }
    if (live_.size() >= limits_.max_streams) {
      reactor->refuse(reason_status(
          context, grpc::StatusCode::RESOURCE_EXHAUSTED,
          "too many AppendStream calls on this node (" + std::to_string(limits_.max_streams) + ")",
          std::string(api_errors::reason::kTooManyPending)));
      return reactor;
    }
    if (!per_connection_.try_add(reactor->connection())) {
      reactor->refuse(reason_status(
          context, grpc::StatusCode::RESOURCE_EXHAUSTED,
          "too many AppendStream calls on this connection (" +
              std::to_string(limits_.max_streams_per_connection) +
              ", --max-append-streams-per-connection); close one or use another connection",
          std::string(api_errors::reason::kTooManyPending)));
      return reactor;
    }
    live_.insert(reactor);
  }
  reactor->start();
  return reactor;
}

void AppendStreams::unregister(AppendStreamReactor* reactor) {
  std::lock_guard lock(mu_);
  live_.erase(reactor);
  per_connection_.remove(reactor->connection());
  drained_.notify_all();
}

void AppendStreams::end_stalled_streams() {
  const auto period = std::clamp<std::chrono::milliseconds>(
      limits_.stall_timeout / 4, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
  std::unique_lock lock(mu_);
  while (!shutting_down_) {
    watchdog_wake_.wait_for(lock, period, [&] { return shutting_down_; });
    if (shutting_down_) return;
    // A registered reactor is alive while mu_ is held; the reference keeps it so afterwards.
    std::vector<AppendStreamReactor*> stalled;
    const Clock::time_point now = Clock::now();
    for (AppendStreamReactor* reactor : live_) {
      if (reactor->write_stalled(now, limits_.stall_timeout)) {
        reactor->retain();
        stalled.push_back(reactor);
      }
    }
    if (stalled.empty()) continue;
    // Outside mu_: cancelling may run reactions inline, and OnDone unregisters.
    lock.unlock();
    for (AppendStreamReactor* reactor : stalled) {
      reactor->end_stalled(limits_.stall_timeout);
      reactor->release();
    }
    lock.lock();
  }
}

std::size_t AppendStreams::open_streams() const {
  std::lock_guard lock(mu_);
  return live_.size();
}

void AppendStreams::shutdown() {
  std::vector<AppendStreamReactor*> streams;
  {
    // A registered reactor is alive while mu_ is held (OnDone unregisters before it releases).
    std::lock_guard lock(mu_);
    if (shutting_down_) return;
    shutting_down_ = true;
    streams.assign(live_.begin(), live_.end());
    for (AppendStreamReactor* reactor : streams) reactor->retain();
  }
  watchdog_wake_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  // Outside mu_: finishing may run OnDone inline, which unregisters.
  for (AppendStreamReactor* reactor : streams) {
    reactor->shut_down();
    reactor->release();
  }
  // A stream whose write waits on a client that stopped reading ends when the gRPC server's
  // shutdown deadline cancels it; the Server keeps this object alive until then.
  std::unique_lock lock(mu_);
  if (!drained_.wait_for(lock, std::chrono::seconds(2), [&] { return live_.empty(); })) {
    spdlog::info(
        "{} AppendStream calls still writing to slow clients at shutdown; the gRPC server's "
        "deadline ends them",
        live_.size());
  }
}

}  // namespace raftlog::server

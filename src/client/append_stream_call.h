// Internal to the client library: Client::append() over raftlog.v1.Log/AppendStream.
//
// One AppendStream call to one endpoint, used either by one Client (Options::share_append_stream
// false: each append one message, its answer awaited before the next, as appends of one Client are
// serialized anyway, see client.h) or by the process's shared stream (shared_append_stream.h: the
// appends of several Clients in one message, all answers awaited before the next exchange). That
// saves the per-call cost of a unary RPC: a new HTTP/2 stream with headers and trailers on both
// sides (docs/benchmarks.md measures the difference).
//
// The call uses gRPC's synchronous stream API, so the appending thread itself polls for the answer
// (no hand-off to a gRPC thread and back). A synchronous Read has no deadline of its own, so a
// CallWatchdog cancels the call when one append's deadline passes; the append then fails with
// DEADLINE_EXCEEDED and the Client retries it, with the same sequence number, on a new call.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "raftlog/v1/client.grpc.pb.h"

namespace raftlog::client::internal {

namespace pb = raftlog::v1;
using Clock = std::chrono::steady_clock;

// The per-Client watchdog thread, started on first use. Two jobs:
//   - cancels the armed call when one append's deadline passes (a synchronous Read has no deadline);
//   - closes the Client's stream once it has been idle for `idle_close` (Options::append_stream_idle_ms), so idle Clients do not
//     hold HTTP/2 stream slots of a connection that every Client of the process shares (gRPC's global
//     subchannel pool; one connection per Client measured 30-45 % slower).
// It sleeps until the earliest of these; a closed loop of appends re-arms with later deadlines
// without waking it, so it wakes about once per call timeout, not once per append.
class CallWatchdog {
 public:
  explicit CallWatchdog(Clock::duration idle_close) : idle_close_(idle_close) {}
  ~CallWatchdog();
  CallWatchdog(const CallWatchdog&) = delete;
  CallWatchdog& operator=(const CallWatchdog&) = delete;

  // At most one call is armed at a time; `context` must stay valid until disarm().
  void arm(grpc::ClientContext* context, Clock::time_point deadline);
  // Returns true when the watchdog cancelled the call armed since the last arm().
  bool disarm();

  // Cancels `context` once it has been idle (no arm()) for `idle_close`. `context` must stay
  // valid until end_idle_watch().
  void watch_idle(grpc::ClientContext* context);
  // Stops watching; returns true when the watchdog closed the stream for idleness (it is unusable).
  bool end_idle_watch();

 private:
  void run();
  void wake_if_later_than(Clock::time_point when);  // with mu_ held

  const Clock::duration idle_close_;
  std::mutex mu_;
  std::condition_variable wake_;
  grpc::ClientContext* armed_ = nullptr;                         // guarded by mu_
  Clock::time_point deadline_;                                   // guarded by mu_
  bool fired_ = false;                                           // guarded by mu_
  grpc::ClientContext* idle_context_ = nullptr;                  // guarded by mu_
  Clock::time_point idle_since_;                                 // guarded by mu_
  bool idle_fired_ = false;                                      // guarded by mu_
  Clock::time_point sleeping_until_ = Clock::time_point::max();  // guarded by mu_
  bool stopping_ = false;                                        // guarded by mu_
  std::thread thread_;                                           // started by the first arm()
};

// What one append over the stream came to.
struct StreamAppendOutcome {
  Status status;               // the append's own answer, or why the stream failed
  bool stream_failed = false;  // the stream is unusable: status is the call's, not the append's
};

// Client-side bounds of one AppendStream request message carrying several appends (the node
// announces its own appends bound, max_appends_per_message, and the smaller one applies).
inline constexpr std::size_t kMaxAppendsPerMessage = 256;
// A message is filled up to this many payload bytes; a larger single append goes alone (bounded by
// Options::max_message_bytes and the node's receive bound, as before).
inline constexpr std::size_t kMaxBytesPerMessage = std::size_t{1} << 20;
// To a node that announced no max_appends_per_message (an older one), several appends go as that
// many one-append messages, at most this many before their answers are read.
inline constexpr std::size_t kMaxOneAppendMessagesInFlight = 64;

// One AppendStream call to one endpoint: one exchange (a message, or a few, then their answers) at
// a time.
class AppendStreamCall {
 public:
  AppendStreamCall(const std::shared_ptr<grpc::Channel>& channel, std::string endpoint,
                   CallWatchdog* watchdog);
  ~AppendStreamCall();  // cancels the call if it is still open
  AppendStreamCall(const AppendStreamCall&) = delete;
  AppendStreamCall& operator=(const AppendStreamCall&) = delete;

  const std::string& endpoint() const { return endpoint_; }
  grpc::ClientContext* context() { return &context_; }
  bool usable() const { return !failed_; }

  // Sends `request` (its request_id is set here) and waits for its answer until `deadline`.
  // A server refusal (NOT_LEADER, INVALID_ARGUMENT, ...) leaves the stream usable. A broken stream
  // reports the call's status: UNAVAILABLE (node gone or shutting down), UNIMPLEMENTED (a node
  // without AppendStream), DEADLINE_EXCEEDED (no answer in time), ...; the call is then unusable.
  StreamAppendOutcome append(pb::AppendStreamRequest* request, Clock::time_point deadline,
                             pb::AppendResponse* response);

  // The same for several appends at once (requests[i] answered in outcomes[i] and, when OK,
  // responses[i]): one message carrying all of them when the node announced that it reads
  // AppendStreamRequest.more (at most appends_per_message() of them, the caller's bound), else one
  // message each. Each append gets its own answer; when the stream breaks, every append not
  // answered yet gets the call's status with stream_failed set. Each request's `append` is
  // borrowed for the write and put back before this returns.
  std::vector<StreamAppendOutcome> append_all(const std::vector<pb::AppendStreamRequest*>& requests,
                                              Clock::time_point deadline,
                                              const std::vector<pb::AppendResponse*>& responses);
  // How many appends one message may carry on this call (1 until the node announced more).
  std::size_t appends_per_message() const { return appends_per_message_; }

 private:
  StreamAppendOutcome fail(bool deadline_passed, std::uint32_t waited_ms);
  bool write_requests(const std::vector<pb::AppendStreamRequest*>& requests);
  // A protocol error of this stream (an answer to no request in flight): it is cancelled.
  StreamAppendOutcome protocol_error(const std::string& what);

  const std::string endpoint_;
  CallWatchdog* watchdog_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<pb::AppendStreamRequest, pb::AppendStreamResponse>>
      stream_;
  pb::AppendStreamResponse answer_;
  pb::AppendStreamRequest message_;  // several appends in one message, borrowed from the callers
  std::uint64_t next_request_id_ = 1;
  std::size_t appends_per_message_ = 1;  // learnt from the node's answers
  bool failed_ = false;
};

}  // namespace raftlog::client::internal

// raftlog.v1.Log/AppendStream on the server: many appends over one long-lived bidirectional stream,
// each answered with exactly one AppendStreamResult (proto/raftlog/v1/client.proto).
//
// Why: a unary Append pays for a new HTTP/2 stream, request headers and trailers on both sides; on
// the 2-core benchmark machine that was half of the leader's CPU per append (docs/benchmarks.md).
// A stream pays for one message each way.
//
// Each stream is one callback reactor; no thread waits per stream or per append:
//   - a read hands the message's appends (one, or several with AppendStreamRequest.more) to the
//     Node in one step (Node::append_all: they leave in one proposal round) and, while fewer than
//     max_appends_per_stream appends of this stream are unanswered, starts the next read at once;
//     at the bound it stops reading, so a fast client is slowed by HTTP/2 flow control instead of
//     growing the node's memory. A message may carry at most max_appends_per_stream appends (each
//     of a larger one is refused, TOO_MANY_APPENDS), so at most 2 x that many are unanswered; every
//     answer message announces the bound (max_appends_per_message);
//   - the Node's completion callback (on its loop thread) queues the answer; the answers of a
//     message of several appends are held until the last of them is answered and then queued
//     together (the node answers them one after another in one loop round; without that the first
//     left in a write of its own); answers that queue up while a write is in flight go out together
//     in the next message (one write at a time, as gRPC requires);
//   - the stream ends OK once the client has half-closed and every answer is written; on
//     cancellation (client gone, node shutting down) it ends at once and answers still to come
//     from the Node are dropped. The reactor is deleted after gRPC's OnDone and the last pending
//     Node callback, whichever comes later;
//   - a request that is not a valid AppendStreamRequest (the stream is registered raw, see
//     raw_messages.h) stops the reading: the requests read before it are answered, then the stream
//     ends INVALID_ARGUMENT (MALFORMED_REQUEST) saying that it and everything after it were not read;
//   - bounds against one client holding the node's slots (stream_limits.h): at most
//     max_streams_per_connection streams per client connection, and a stream whose write has not
//     completed for stall_timeout (its client reads no answers) is ended with RESOURCE_EXHAUSTED
//     by a watchdog thread, one per node, that looks every stall_timeout / 4 (10 ms .. 1 s).
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <set>
#include <thread>

#include "raftlog/v1/client.grpc.pb.h"
#include "server/client_request_observer.h"
#include "server/stream_limits.h"

namespace raftlog::server {

class Node;
class AppendStreamReactor;

// Raw: requests are parsed by the reactor (raw_messages.h).
using AppendStreamServerReactor = grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>;

// Defaults as in NodeConfig (docs/configuration.md).
struct AppendStreamLimits {
  std::size_t max_streams = 4096;                  // on the node
  std::size_t max_streams_per_connection = 1024;   // per client connection
  std::size_t max_appends_per_stream = 256;        // read and not yet answered; and per message
  std::chrono::milliseconds stall_timeout{10000};  // a write not completed by then ends the stream
};

// The open AppendStream calls of one node: bounded in number, all ended by shutdown(). Must
// outlive the gRPC server it serves on (a reactor unregisters itself in OnDone).
class AppendStreams {
 public:
  // `observer` (optional, not owned, must outlive this) hears of every append answered.
  AppendStreams(Node* node, AppendStreamLimits limits, ClientRequestObserver* observer = nullptr);
  ~AppendStreams();  // shutdown()
  AppendStreams(const AppendStreams&) = delete;
  AppendStreams& operator=(const AppendStreams&) = delete;

  // The reactor for a new call: a serving one, or one that has already finished with
  // RESOURCE_EXHAUSTED (max_streams open on the node, or max_streams_per_connection on the
  // caller's connection) or UNAVAILABLE (shutting down).
  AppendStreamServerReactor* open(grpc::CallbackServerContext* context);

  // Refuses new streams and ends the open ones with UNAVAILABLE (SHUTTING_DOWN): their clients
  // retry elsewhere, idempotently. Stops the stall watchdog; waits up to 2 s for the streams to
  // end. Idempotent.
  void shutdown();

  std::size_t open_streams() const;

 private:
  friend class AppendStreamReactor;
  void unregister(AppendStreamReactor* reactor);
  // The watchdog thread: ends streams whose write has stalled, until shutdown().
  void end_stalled_streams();

  Node* node_;
  ClientRequestObserver* observer_;
  const AppendStreamLimits limits_;
  mutable std::mutex mu_;
  std::condition_variable drained_;
  std::condition_variable watchdog_wake_;  // shutdown() wakes the watchdog
  bool shutting_down_ = false;             // guarded by mu_
  std::set<AppendStreamReactor*> live_;    // guarded by mu_; at most limits_.max_streams
  ConnectionStreamCounts per_connection_;  // guarded by mu_
  std::thread watchdog_;                   // last: runs end_stalled_streams over the members above
};

}  // namespace raftlog::server

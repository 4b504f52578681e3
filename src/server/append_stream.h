// raftlog.v1.Log/AppendStream on the server: many appends over one long-lived bidirectional stream,
// each answered with exactly one AppendStreamResult (proto/raftlog/v1/client.proto).
//
// Why: a unary Append pays for a new HTTP/2 stream, request headers and trailers on both sides; on
// the 2-core benchmark machine that was half of the leader's CPU per append (docs/benchmarks.md).
// A stream pays for one message each way.
//
// Each stream is one callback reactor; no thread waits per stream or per append:
//   - a read hands the append to the Node and, while fewer than max_appends_per_stream requests of
//     this stream are unanswered, starts the next read at once; at the bound it stops reading, so a
//     fast client is slowed by HTTP/2 flow control instead of growing the node's memory;
//   - the Node's completion callback (on its loop thread) queues the answer; answers that queue up
//     while a write is in flight go out together in the next message (one write at a time, as
//     gRPC requires);
//   - the stream ends OK once the client has half-closed and every answer is written; on
//     cancellation (client gone, node shutting down) it ends at once and answers still to come
//     from the Node are dropped. The reactor is deleted after gRPC's OnDone and the last pending
//     Node callback, whichever comes later.
#pragma once

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <set>

#include "raftlog/v1/client.grpc.pb.h"
#include "server/client_request_observer.h"

namespace raftlog::server {

class Node;
class AppendStreamReactor;

using AppendStreamServerReactor =
    grpc::ServerBidiReactor<::raftlog::v1::AppendStreamRequest, ::raftlog::v1::AppendStreamResponse>;

// The open AppendStream calls of one node: bounded in number, all ended by shutdown(). Must
// outlive the gRPC server it serves on (a reactor unregisters itself in OnDone).
class AppendStreams {
 public:
  // `observer` (optional, not owned, must outlive this) hears of every append answered.
  AppendStreams(Node* node, std::size_t max_streams, std::size_t max_appends_per_stream,
                ClientRequestObserver* observer = nullptr);
  ~AppendStreams();  // shutdown()
  AppendStreams(const AppendStreams&) = delete;
  AppendStreams& operator=(const AppendStreams&) = delete;

  // The reactor for a new call: a serving one, or one that has already finished with
  // RESOURCE_EXHAUSTED (max_streams open) or UNAVAILABLE (shutting down).
  AppendStreamServerReactor* open(grpc::CallbackServerContext* context);

  // Refuses new streams and ends the open ones with UNAVAILABLE (SHUTTING_DOWN): their clients
  // retry elsewhere, idempotently. Waits up to 2 s for them to end. Idempotent.
  void shutdown();

  std::size_t open_streams() const;

 private:
  friend class AppendStreamReactor;
  void unregister(AppendStreamReactor* reactor);

  Node* node_;
  ClientRequestObserver* observer_;
  const std::size_t max_streams_;
  const std::size_t max_appends_per_stream_;
  mutable std::mutex mu_;
  std::condition_variable drained_;
  bool shutting_down_ = false;           // guarded by mu_
  std::set<AppendStreamReactor*> live_;  // guarded by mu_; at most max_streams_
};

}  // namespace raftlog::server

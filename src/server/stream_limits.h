// Bounds that keep one client from holding the node's long-lived streams (Tail, AppendStream):
//   - ConnectionStreamCounts: how many streams each client connection holds, so one connection
//     cannot take every slot of the node's bound;
//   - end_stalled_stream: ends a stream whose reader has stopped reading, so it does not keep its
//     slot (and a Tail its thread) for as long as its connection stays up.
#pragma once

#include <grpc/grpc.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <unordered_map>

namespace raftlog::server {

// Streams per client connection. A connection is gRPC's peer string ("ipv4:10.0.0.7:53122"): one
// TCP connection, so a client behind one proxy or NAT address still gets a count per connection.
// Not thread-safe: the owning registry's lock guards it. Bounded: one entry per connection that
// holds a stream (at most the registry's own stream bound).
class ConnectionStreamCounts {
 public:
  explicit ConnectionStreamCounts(std::size_t max_per_connection)
      : max_per_connection_(max_per_connection) {}

  // Counts one more stream for `connection`; false (and nothing counted) at the bound.
  bool try_add(const std::string& connection) {
    const auto found = counts_.find(connection);
    const std::size_t held = found == counts_.end() ? 0 : found->second;
    if (held >= max_per_connection_) return false;
    ++counts_[connection];
    return true;
  }
  // Forgets one stream counted by try_add.
  void remove(const std::string& connection) {
    auto found = counts_.find(connection);
    if (found == counts_.end()) return;
    if (--found->second == 0) counts_.erase(found);
  }
  std::size_t max_per_connection() const { return max_per_connection_; }

 private:
  const std::size_t max_per_connection_;
  std::unordered_map<std::string, std::size_t> counts_;  // no zero counts are kept
};

// Ends a stream whose write of one message has not completed within `timeout`: its reader takes
// nothing, so HTTP/2 flow control holds the write back. The call is cancelled with
// RESOURCE_EXHAUSTED and a message naming `stream` and the timeout (the server side of gRPC's
// HTTP/2 transport sends that status to the client in the cancellation's trailers, which flow
// control does not hold back); the write then completes with ok = false. Why RESOURCE_EXHAUSTED:
// the stream is ended for holding a bounded resource (a stream slot, a Tail's thread, buffered
// data) without using it, and clients already treat the code as "retry later, elsewhere" (the
// client library's tail resumes at the next index). DEADLINE_EXCEEDED would claim a deadline the
// client never set.
//
// Returns the status sent, for the stream's own Finish() (which gRPC no longer sends, but
// interceptors see). `context` must still be usable: the caller guarantees Finish() has not been
// called (and so OnDone has not run). Thread-safe; call without holding locks a reaction may take
// (gRPC may run OnCancel or OnWriteDone on this thread).
inline grpc::Status end_stalled_stream(grpc::ServerContextBase* context, const std::string& stream,
                                       std::chrono::milliseconds timeout) {
  const std::string message =
      stream + " ended: its reader is not reading (no message taken for " +
      std::to_string(timeout.count()) +
      " ms, --stream-stall-timeout-ms); read faster or resume where it stopped";
  (void)grpc_call_cancel_with_status(context->c_call(), GRPC_STATUS_RESOURCE_EXHAUSTED,
                                     message.c_str(), nullptr);
  return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, message);
}

}  // namespace raftlog::server

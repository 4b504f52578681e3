// The public gRPC services of a node (raftlog.v1.Log and raftlog.v1.Admin), on gRPC's callback API so
// no thread waits per request: an Append's reactor is finished by the Node's completion callback.
//
// AppendStream calls are reactors too (src/server/append_stream.h). Tail streams are the exception:
// each has its own pump thread that waits for the commit index to move (bounded by
// max_tail_streams on the node and max_tail_streams_per_connection per client connection; one more
// is refused with RESOURCE_EXHAUSTED). A Tail whose reader takes nothing for stall_timeout_ms is
// ended (RESOURCE_EXHAUSTED), which frees its slot and its thread (src/server/stream_limits.h).
//
// Every method is registered raw and parses its own requests, so a request that is not a valid
// protobuf message gets INVALID_ARGUMENT rather than gRPC's UNIMPLEMENTED (src/server/raw_messages.h).
//
// Errors follow proto/raftlog/v1/client.proto: a gRPC status with a readable message plus
// raftlog.v1.ErrorInfo in the trailing metadata (leader hint, reason word).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "server/snapshot_progress.h"

namespace grpc {
class Service;
}  // namespace grpc

namespace raftlog::server {

class Node;
class ClientRequestObserver;

// Defaults as in NodeConfig (docs/configuration.md).
struct ClientServiceLimits {
  std::size_t max_tail_streams = 256;
  std::size_t max_tail_streams_per_connection = 64;
  // A Tail stream waits at most this long for new entries before re-checking for cancellation and
  // shutdown (so a stream ends within this bound after either).
  unsigned tail_poll_ms = 200;
  std::size_t max_append_streams = 4096;
  std::size_t max_append_streams_per_connection = 1024;
  std::size_t max_appends_per_stream = 256;  // read ahead of the answers sent (see append_stream.h)
  // A Tail or AppendStream write not completed for this long ends its stream (RESOURCE_EXHAUSTED).
  unsigned stall_timeout_ms = 10000;
};

class ClientServices {
 public:
  // `observer` (optional, not owned, must outlive this) hears of each append answered on a stream.
  ClientServices(Node* node, ClientServiceLimits limits, ClientRequestObserver* observer = nullptr);
  ~ClientServices();  // shutdown()
  ClientServices(const ClientServices&) = delete;
  ClientServices& operator=(const ClientServices&) = delete;

  // Register every returned service on the server builder; they must outlive the server.
  std::vector<grpc::Service*> services();
  // Where the Status RPC finds the node's snapshot transfers (snapshot_progress.h); without it the
  // Status answer has none. Set before the server starts; it must stay callable while it runs.
  void set_snapshot_transfers_source(std::function<SnapshotTransfers(const NodeStatus&)> source);
  // Ends every Tail stream cleanly (OK status after the entries already sent) and refuses new ones.
  // Call before shutting the gRPC server down.
  void shutdown();
  // Streams holding one of the node's max_tail_streams / max_append_streams slots now.
  std::size_t open_tail_streams() const;
  std::size_t open_append_streams() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace raftlog::server

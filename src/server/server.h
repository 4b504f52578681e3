// Server: one running raftlogd — the Node, its peer transport and its gRPC server on one address.
// Clients and peers share the port: raftlog.v1.Log/Admin for clients, raftlog.peer.v1.Peer for peers,
// plus grpc.health.v1.Health (HealthReporter) and server reflection. With TLS configured the port
// speaks only TLS and peers authenticate with certificates from the cluster CA (docs/security.md).
#pragma once

#include <memory>
#include <string>

#include "server/node_config.h"

namespace raftlog::server {

class Server {
 public:
  // Recovers the node's data, binds the listen address and starts serving. nullptr with `error`
  // set when any step fails (bad config, corrupt data, address in use).
  static std::unique_ptr<Server> start(const NodeConfig& config, std::string* error);
  ~Server();  // shutdown()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Graceful stop (SIGTERM): end Tail streams, fail pending requests with UNAVAILABLE, flush and
  // checkpoint the store and remove its abort marker, stop the gRPC server and the transport.
  // Bounded by config.shutdown_grace_ms plus the store's final flush. Idempotent.
  void shutdown();
  // True once the node hit an unrecoverable error; the process should exit non-zero.
  bool failed() const;
  // The address actually bound (resolves port 0).
  const std::string& bound_address() const;
  // The metrics endpoint's address (resolves port 0); empty without --metrics-addr.
  std::string metrics_address() const;
  // Streams holding one of the node's --max-tail-streams / --max-append-streams slots now.
  std::size_t open_tail_streams() const;
  std::size_t open_append_streams() const;

  class Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  // Part of shutdown(): gRPC's Shutdown within --shutdown-grace-ms, ending as soon as no call is in
  // flight (idle client connections do not hold it up).
  void stop_grpc_server();
  std::unique_ptr<Impl> impl_;
};

}  // namespace raftlog::server

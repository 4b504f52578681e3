// PeerStreamAuth: who a peer stream speaks for, both ways. Outbound, the credentials of a peer
// channel (mutual TLS or plaintext) and the authenticator a stream carries (peer secret, peer_auth.h);
// inbound, which peer a caller proved to be, by its client certificate, its authenticator, or both
// (transport.h, PeerTlsOptions and peer_secret, say what each requires).
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "raft/types.h"
#include "server/transport.h"

namespace raftlog::server {

class PeerStreamAuth {
 public:
  // `options` must outlive this (the transport owns both).
  explicit PeerStreamAuth(const PeerTransportOptions& options) : options_(options) {}

  // Whether streams are authenticated at all (mutual TLS or a peer secret). Without either, any
  // caller may speak for any node, so only configured peers are accepted (peer_admission.h).
  bool authenticates() const { return options_.tls.has_value() || !options_.peer_secret.empty(); }

  // Outbound: the credentials of every peer channel.
  std::shared_ptr<grpc::ChannelCredentials> channel_credentials() const;
  // Outbound: with a peer secret, adds the authenticator a stream to `to` carries.
  void add_stream_metadata(grpc::ClientContext& context, raft::NodeId to) const;

  // Inbound: "" when the caller proved to be a node of this cluster, else why not. Sets
  // *authenticated_from to the node its certificate and/or authenticator names, or kNoNode when
  // neither TLS nor a secret is configured (then any caller may open one). Whether that node may
  // talk to us now is the admission's decision (peer_admission.h), not this one's.
  std::string authenticate(const grpc::ServerContextBase& context,
                           raft::NodeId* authenticated_from) const;

 private:
  // Each: "" and *from set to the peer that the caller's certificate (mutual TLS) or authenticator
  // (peer secret) names, else why not.
  std::string authenticate_by_certificate(const grpc::ServerContextBase& context,
                                          raft::NodeId* from) const;
  std::string authenticate_by_secret(const grpc::ServerContextBase& context,
                                     raft::NodeId* from) const;
  const PeerTransportOptions& options_;
};

}  // namespace raftlog::server

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

  // Outbound: the credentials of every peer channel.
  std::shared_ptr<grpc::ChannelCredentials> channel_credentials() const;
  // Outbound: with a peer secret, adds the authenticator a stream to `to` carries.
  void add_stream_metadata(grpc::ClientContext& context, raft::NodeId to) const;

  // Inbound: "" when the caller may open a peer stream, else why not. Sets *authenticated_from to
  // the peer its certificate and/or authenticator names, or kNoNode when neither TLS nor a secret is
  // configured (then any caller may open one).
  std::string authenticate(const grpc::ServerContextBase& context,
                           raft::NodeId* authenticated_from) const;

 private:
  // Each: "" and *from set to the peer that the caller's certificate (mutual TLS) or authenticator
  // (peer secret) names, else why not.
  std::string authenticate_by_certificate(const grpc::ServerContextBase& context,
                                          raft::NodeId* from) const;
  std::string authenticate_by_secret(const grpc::ServerContextBase& context,
                                     raft::NodeId* from) const;
  bool is_peer(raft::NodeId id) const { return options_.peers.find(id) != options_.peers.end(); }

  const PeerTransportOptions& options_;
};

}  // namespace raftlog::server

// PeerStreamAuth: who a peer stream speaks for, both ways. Outbound, the credentials of a peer
// channel (mutual TLS or plaintext) and the authenticator a stream carries (peer secret, peer_auth.h);
// inbound, which peer a caller proved to be, by its client certificate, its authenticator, or both
// (transport.h, PeerTlsOptions and peer_secret, say what each requires).
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "raft/types.h"
#include "server/transport.h"

namespace raftlog::server {

class PeerStreamAuth {
 public:
  // `options` must outlive this (the transport owns both).
  explicit PeerStreamAuth(const PeerTransportOptions& options)
      : options_(options), peers_(peer_ids(options)) {}

  // Whether `id` is a peer now: one of options.peers, changed since by accept()/forget() (the
  // transport follows the configuration: PeerTransport::set_peers). Any thread.
  bool is_peer(raft::NodeId id) const {
    std::lock_guard lock(peers_mu_);
    return peers_.contains(id);
  }
  void accept(raft::NodeId id) {
    std::lock_guard lock(peers_mu_);
    peers_.insert(id);
  }
  void forget(raft::NodeId id) {
    std::lock_guard lock(peers_mu_);
    peers_.erase(id);
  }

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
  static std::set<raft::NodeId> peer_ids(const PeerTransportOptions& options) {
    std::set<raft::NodeId> ids;
    for (const auto& [id, address] : options.peers) ids.insert(id);
    return ids;
  }

  const PeerTransportOptions& options_;
  mutable std::mutex peers_mu_;
  std::set<raft::NodeId> peers_;  // under peers_mu_
};

}  // namespace raftlog::server

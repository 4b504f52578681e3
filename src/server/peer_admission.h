// PeerAdmission: which nodes may talk to this one over the peer transport, and the outbound links
// that follow from it (transport.h describes the behaviour; peer_stream_auth.h proves who a caller
// is, this decides whether that node is let in).
//
// Two kinds of peers are admitted:
//   - configured peers: the members of the configurations in this node's log (set_peers), dialled
//     at the address the configuration names;
//   - unconfigured peers: any other node that authenticated for this cluster (the peer secret's
//     authenticator or a cluster-CA certificate, for this cluster id) and advertised the address
//     it is reached at (client metadata kPeerAddressKey, validated like any member address). A node
//     whose log lags behind the configuration changes would otherwise refuse the current leader
//     forever (a joiner replaying from index 1 of a cluster whose leader was added later, a member
//     that was down while leadership moved to a new member). Raft's safety does not depend on who
//     may talk: the core judges every vote and append, counts votes only from voters of its own
//     configuration and tracks only its members (raft_election.cpp, Raft::Impl::step). At most
//     PeerTransportOptions::kMaxUnconfiguredPeers at once; one not heard from for
//     kUnconfiguredPeerIdle is forgotten (its link freed), and a new one beyond the bound is
//     refused (counted, logged at most once per kRefusalLogInterval) unless an idle one can go.
// Without authentication (neither TLS nor a peer secret) only configured peers are admitted.
//
// Links that cannot be added at once (the outbound side's bounds, peer_outbound.h) are retried
// every kRetryInterval until they are, or until the peer is no longer wanted.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "raft/types.h"
#include "server/peer_outbound.h"
#include "server/peer_stream_auth.h"
#include "server/timer_thread.h"
#include "server/transport.h"
#include "util/rate_limit.h"

namespace raftlog::server {

class PeerAdmission {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kRetryInterval{250};
  static constexpr std::chrono::seconds kRefusalLogInterval{30};

  // `options`, `auth` and `outbound` must outlive this (the transport owns all of them).
  PeerAdmission(const PeerTransportOptions& options, const PeerStreamAuth& auth,
                PeerOutbound& outbound);
  PeerAdmission(const PeerAdmission&) = delete;
  PeerAdmission& operator=(const PeerAdmission&) = delete;

  void start();  // starts the retry timer
  void stop();   // stops it; admits nobody new afterwards. Before the outbound side stops.

  // PeerTransport::set_peers (serialized with everything else here).
  void set_peers(const std::map<raft::NodeId, std::string>& peers);

  // An inbound stream authenticated as `from` (kNoNode: the transport authenticates nobody) that
  // advertised `advertised` ("" when it sent none): "" when it may go on, else why not (*code set).
  std::string admit_stream(raft::NodeId from, std::string_view advertised, grpc::StatusCode* code);
  // Whether a message from `from`, on a stream authenticated as `authenticated`, may be delivered:
  // `from` is a configured peer, or an admitted unconfigured peer whose own stream this is.
  bool may_deliver(raft::NodeId from, raft::NodeId authenticated);

  std::size_t unconfigured_peers() const;
  std::uint64_t refused_unconfigured() const;
  std::uint64_t admitted_unconfigured() const;   // newly admitted, in total
  std::uint64_t forgotten_unconfigured() const;  // forgotten after kUnconfiguredPeerIdle, in total

 private:
  struct Unconfigured {
    std::string address;  // advertised
    Clock::time_point last_heard;
  };

  // Under mu_. Dials `id` at `address` (or keeps the link there); false when it must be retried.
  bool link_locked(raft::NodeId id, const std::string& address);
  void unlink_locked(raft::NodeId id);
  // Under mu_: forgets unconfigured peers idle since `now - kUnconfiguredPeerIdle`; returns how many.
  std::size_t forget_idle_locked(Clock::time_point now);
  // Under mu_: links every wanted peer that is not linked at its address yet.
  void retry_links_locked();
  // Under mu_: a periodic pass while unconfigured peers or unlinked peers exist.
  void schedule_maintenance_locked();
  void maintain();
  std::string refuse_locked(raft::NodeId from, const std::string& why);

  const PeerTransportOptions& options_;
  const PeerStreamAuth& auth_;
  PeerOutbound& outbound_;

  mutable std::mutex mu_;
  std::map<raft::NodeId, std::string> configured_;  // the last set_peers, within its bounds
  std::map<raft::NodeId, Unconfigured> unconfigured_;
  std::map<raft::NodeId, std::string> linked_;  // outbound links added, at these addresses
  bool maintenance_scheduled_ = false;
  bool stopped_ = false;
  std::uint64_t refused_unconfigured_ = 0;
  std::uint64_t admitted_unconfigured_ = 0;
  std::uint64_t forgotten_unconfigured_ = 0;
  util::RateLimit refusal_log_{kRefusalLogInterval};
  TimerThread maintenance_timer_{"peer-admission", 1};
};

}  // namespace raftlog::server

#include "server/peer_admission.h"

#include <spdlog/spdlog.h>

#include <utility>
#include <vector>

namespace raftlog::server {

PeerAdmission::PeerAdmission(const PeerTransportOptions& options, const PeerStreamAuth& auth,
                             PeerOutbound& outbound)
    : options_(options), auth_(auth), outbound_(outbound) {
  // The outbound side was built with options.peers already linked.
  configured_ = options_.peers;
  linked_ = options_.peers;
}

void PeerAdmission::start() {
  maintenance_timer_.start();
  std::lock_guard lock(mu_);
  schedule_maintenance_locked();
}

void PeerAdmission::stop() {
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
  }
  maintenance_timer_.stop();  // not under mu_: a running pass takes it
}

void PeerAdmission::set_peers(const std::map<raft::NodeId, std::string>& peers) {
  std::lock_guard lock(mu_);
  if (stopped_) return;
  std::map<raft::NodeId, std::string> wanted;
  for (const auto& [id, address] : peers) {
    if (id == raft::kNoNode || id == options_.self_id || address.empty()) {
      spdlog::warn("node {}: peer {} at '{}' left out (not a peer address)", options_.self_id, id,
                   address);
      continue;
    }
    if (wanted.size() >= PeerTransportOptions::kMaxPeers) {
      spdlog::warn("node {}: peer {} left out: {} peers already", options_.self_id, id,
                   wanted.size());
      continue;
    }
    wanted.emplace(id, address);
  }
  // A configured peer is no longer an unconfigured one (its configured address wins); one left out
  // of the configuration is unlinked, and admitted again only as an unconfigured peer.
  for (const auto& [id, address] : configured_) {
    if (!wanted.contains(id)) unlink_locked(id);
  }
  for (const auto& [id, address] : wanted) unconfigured_.erase(id);
  configured_ = std::move(wanted);
  retry_links_locked();
  schedule_maintenance_locked();
}

std::string PeerAdmission::admit_stream(raft::NodeId from, std::string_view advertised,
                                        grpc::StatusCode* code) {
  *code = grpc::StatusCode::FAILED_PRECONDITION;
  // Unauthenticated: every message is checked against the configured peers (may_deliver).
  if (from == raft::kNoNode || !auth_.authenticates()) return "";
  std::lock_guard lock(mu_);
  if (stopped_) {
    *code = grpc::StatusCode::UNAVAILABLE;
    return "peer transport is stopped";
  }
  if (configured_.contains(from)) return "";
  if (from == options_.self_id) {
    // Our own credential from outside: a copied key or secret, never a peer.
    *code = grpc::StatusCode::UNAUTHENTICATED;
    return refuse_locked(from, "its credential names this node itself");
  }
  if (advertised.empty()) {
    return refuse_locked(from,
                         "it advertised no address to answer it at (a raftlogd from before "
                         "unconfigured peers were admitted?)");
  }
  if (advertised.size() > raft::kMaxMemberAddressBytes) {
    return refuse_locked(from, "its advertised address is longer than " +
                                   std::to_string(raft::kMaxMemberAddressBytes) + " bytes");
  }
  const std::string address(advertised);
  if (std::string problem = raft::check_member_address(address); !problem.empty()) {
    return refuse_locked(from, "its advertised address '" + address + "' " + problem);
  }
  const Clock::time_point now = Clock::now();
  auto found = unconfigured_.find(from);
  if (found == unconfigured_.end()) {
    if (unconfigured_.size() >= PeerTransportOptions::kMaxUnconfiguredPeers &&
        forget_idle_locked(now) == 0) {
      *code = grpc::StatusCode::RESOURCE_EXHAUSTED;
      return refuse_locked(from, std::to_string(unconfigured_.size()) +
                                     " unconfigured peers are admitted already (the bound)");
    }
    found = unconfigured_.emplace(from, Unconfigured{address, now}).first;
    ++admitted_unconfigured_;
    spdlog::info(
        "node {}: node {} ({}) is in none of this node's configurations but authenticated for "
        "this cluster: accepted, answered at its advertised address",
        options_.self_id, from, address);
  } else {
    found->second.address = address;
    found->second.last_heard = now;
  }
  link_locked(from, address);
  schedule_maintenance_locked();
  return "";
}

bool PeerAdmission::may_deliver(raft::NodeId from, raft::NodeId authenticated) {
  std::lock_guard lock(mu_);
  if (configured_.contains(from)) return true;
  if (authenticated == raft::kNoNode || from != authenticated || !auth_.authenticates()) {
    return false;
  }
  const auto found = unconfigured_.find(from);
  if (found == unconfigured_.end()) return false;
  found->second.last_heard = Clock::now();
  return true;
}

std::size_t PeerAdmission::unconfigured_peers() const {
  std::lock_guard lock(mu_);
  return unconfigured_.size();
}

std::uint64_t PeerAdmission::refused_unconfigured() const {
  std::lock_guard lock(mu_);
  return refused_unconfigured_;
}

std::uint64_t PeerAdmission::admitted_unconfigured() const {
  std::lock_guard lock(mu_);
  return admitted_unconfigured_;
}

std::uint64_t PeerAdmission::forgotten_unconfigured() const {
  std::lock_guard lock(mu_);
  return forgotten_unconfigured_;
}

bool PeerAdmission::link_locked(raft::NodeId id, const std::string& address) {
  const auto found = linked_.find(id);
  if (found != linked_.end() && found->second == address) return true;
  if (!outbound_.add_peer(id, address)) {
    // Not linked (at this address): the maintenance pass retries.
    return false;
  }
  linked_[id] = address;
  return true;
}

void PeerAdmission::unlink_locked(raft::NodeId id) {
  outbound_.remove_peer(id);
  linked_.erase(id);
}

std::size_t PeerAdmission::forget_idle_locked(Clock::time_point now) {
  std::vector<raft::NodeId> idle;
  for (const auto& [id, peer] : unconfigured_) {
    if (now - peer.last_heard >= PeerTransportOptions::kUnconfiguredPeerIdle) idle.push_back(id);
  }
  for (raft::NodeId id : idle) {
    unconfigured_.erase(id);
    unlink_locked(id);
    ++forgotten_unconfigured_;
    spdlog::info("node {}: unconfigured peer {} not heard from for {} s: forgotten",
                 options_.self_id, id,
                 std::chrono::duration_cast<std::chrono::seconds>(
                     PeerTransportOptions::kUnconfiguredPeerIdle)
                     .count());
  }
  return idle.size();
}

void PeerAdmission::retry_links_locked() {
  for (const auto& [id, address] : configured_) link_locked(id, address);
  for (const auto& [id, peer] : unconfigured_) link_locked(id, peer.address);
}

void PeerAdmission::schedule_maintenance_locked() {
  if (stopped_ || maintenance_scheduled_) return;
  bool unlinked = false;
  for (const auto& [id, address] : configured_) {
    const auto found = linked_.find(id);
    unlinked = unlinked || found == linked_.end() || found->second != address;
  }
  if (!unlinked && unconfigured_.empty()) return;
  maintenance_scheduled_ =
      maintenance_timer_.schedule(Clock::now() + kRetryInterval, [this] { maintain(); });
}

void PeerAdmission::maintain() {
  std::lock_guard lock(mu_);
  maintenance_scheduled_ = false;
  if (stopped_) return;
  forget_idle_locked(Clock::now());
  retry_links_locked();
  schedule_maintenance_locked();
}

std::string PeerAdmission::refuse_locked(raft::NodeId from, const std::string& why) {
  ++refused_unconfigured_;
  std::string message = "node " + std::to_string(from) + " is not a peer of node " +
                        std::to_string(options_.self_id) + " and was not admitted: " + why;
  if (const std::optional<std::uint64_t> held_back = refusal_log_.admit(Clock::now())) {
    spdlog::warn(
        "node {}: refused peer stream: {} ({} more refusal(s) in the last {} s not logged)",
        options_.self_id, message, *held_back, kRefusalLogInterval.count());
  }
  return message;
}

}  // namespace raftlog::server

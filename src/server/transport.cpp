#include "server/transport.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <mutex>
#include <utility>

#include "server/check.h"
#include "server/peer_admission.h"
#include "server/peer_auth.h"
#include "server/peer_inbound.h"
#include "server/peer_outbound.h"
#include "server/peer_protocol.h"
#include "server/peer_stream_auth.h"

namespace raftlog::server {

namespace {

constexpr std::size_t kMaxClusterIdBytes = 256;
constexpr std::size_t kMaxQueuedMessagesBound = 1u << 20;
// gRPC sizes are ints.
constexpr std::size_t kMaxMessageBytesBound = (1u << 30);

}  // namespace

std::string validate_options(const PeerTransportOptions& options) {
  if (options.cluster_id.empty()) return "cluster_id must not be empty";
  if (options.cluster_id.size() > kMaxClusterIdBytes) {
    return "cluster_id is longer than " + std::to_string(kMaxClusterIdBytes) + " bytes";
  }
  if (options.self_id == raft::kNoNode) return "self_id must not be 0";
  if (options.peers.size() > PeerTransportOptions::kMaxPeers) {
    return "more than " + std::to_string(PeerTransportOptions::kMaxPeers) + " peers";
  }
  for (const auto& [id, address] : options.peers) {
    if (id == raft::kNoNode) return "peer id 0 is not allowed";
    if (id == options.self_id)
      return "the peer list contains this node's own id " + std::to_string(id);
    if (address.empty()) return "peer " + std::to_string(id) + " has an empty address";
  }
  if (!options.advertise_address.empty()) {
    if (std::string problem = raft::check_member_address(options.advertise_address);
        !problem.empty()) {
      return "this node's own address '" + options.advertise_address + "' " + problem;
    }
  }
  if (options.max_queued_messages == 0 || options.max_queued_messages > kMaxQueuedMessagesBound) {
    return "max_queued_messages must be in [1, " + std::to_string(kMaxQueuedMessagesBound) + "]";
  }
  if (options.max_queued_bytes == 0) return "max_queued_bytes must be positive";
  if (options.max_queued_control_messages == 0 ||
      options.max_queued_control_messages > kMaxQueuedMessagesBound) {
    return "max_queued_control_messages must be in [1, " + std::to_string(kMaxQueuedMessagesBound) +
           "]";
  }
  if (options.max_message_age_ms == 0) return "max_message_age_ms must be positive";
  if (options.snapshot_partial_idle_timeout <= std::chrono::milliseconds::zero()) {
    return "snapshot_partial_idle_timeout must be positive";
  }
  if (options.limits.max_message_bytes < 1024 ||
      options.limits.max_message_bytes > kMaxMessageBytesBound) {
    return "limits.max_message_bytes must be in [1024, " + std::to_string(kMaxMessageBytesBound) +
           "]";
  }
  if (options.limits.max_entries_per_message == 0)
    return "limits.max_entries_per_message must be positive";
  if (options.reconnect_backoff_min_ms == 0) return "reconnect_backoff_min_ms must be positive";
  if (options.reconnect_backoff_min_ms > options.reconnect_backoff_max_ms) {
    return "reconnect_backoff_min_ms must not exceed reconnect_backoff_max_ms";
  }
  if (options.connect_timeout_ms == 0) return "connect_timeout_ms must be positive";
  if (options.stop_timeout_ms == 0) return "stop_timeout_ms must be positive";
  if (!options.peer_secret.empty() && (options.peer_secret.size() < kMinPeerSecretBytes ||
                                       options.peer_secret.size() > kMaxPeerSecretBytes)) {
    return "peer_secret must be " + std::to_string(kMinPeerSecretBytes) + " to " +
           std::to_string(kMaxPeerSecretBytes) + " bytes";
  }
  return {};
}

// The transport is its four parts (peer_stream_auth.h, peer_admission.h, peer_inbound.h,
// peer_outbound.h), the snapshot receipts the inbound and outbound sides share (snapshot_chunks.h),
// and the order in which they start and stop.
class PeerTransport::Impl {
 public:
  Impl(PeerTransportOptions options, MessageHandler on_message)
      : options_(checked(std::move(options))),
        auth_(options_),
        outbound_(options_, auth_, receipts_),
        admission_(options_, auth_, outbound_),
        inbound_(options_, auth_, admission_, receipts_, std::move(on_message)) {}
  ~Impl() { stop(); }

  grpc::Service* service() { return inbound_.service(); }
  std::size_t max_receive_message_bytes() const {
    return options_.limits.max_message_bytes + kGrpcHeadroomBytes;
  }

  void start() {
    RAFTLOG_CHECK(!started_.exchange(true), "PeerTransport::start called twice");
    std::lock_guard lock(stop_mu_);
    if (stopped_) return;
    outbound_.start();
    admission_.start();
  }

  bool stop() {
    std::lock_guard lock(stop_mu_);
    if (stopped_) return stop_result_;
    stopped_ = true;
    // Inbound first, so on_message stops as early as possible; then outbound, whose reactors point
    // into this transport until gRPC has ended them.
    stop_result_ = inbound_.stop();
    admission_.stop();
    outbound_.stop();
    return stop_result_;
  }

  bool send(raft::Message message) {
    // Review L3 of the format: chunks below this node's own term are stale too.
    if (message.type != raft::MessageType::kPreVote &&
        message.type != raft::MessageType::kPreVoteResponse) {
      inbound_.note_own_term(message.term);
    }
    return outbound_.send(std::move(message));
  }

  void set_peers(const std::map<raft::NodeId, std::string>& peers) { admission_.set_peers(peers); }
  std::vector<PeerStats> peer_stats() const { return outbound_.peer_stats(); }
  InboundStats inbound_stats() const {
    InboundStats stats = inbound_.stats();
    stats.unconfigured_peers = admission_.unconfigured_peers();
    stats.refused_unconfigured_streams = admission_.refused_unconfigured();
    stats.admitted_unconfigured_peers = admission_.admitted_unconfigured();
    stats.forgotten_unconfigured_peers = admission_.forgotten_unconfigured();
    return stats;
  }
  SnapshotReceiveStatus snapshot_receive_status() const { return inbound_.snapshot_status(); }
  void drop_snapshot_partials_through(raft::Index index) {
    inbound_.drop_snapshot_partials_through(index);
  }
  std::uint32_t peer_snapshot_formats(raft::NodeId peer) const {
    return receipts_.formats_of(peer);
  }
  std::uint64_t dropped_unknown_peer() const { return outbound_.dropped_unknown_peer(); }
  OutboundTotals outbound_totals() const { return outbound_.totals(); }
  std::size_t retired_links() const { return outbound_.retired_links(); }

 private:
  static PeerTransportOptions checked(PeerTransportOptions options) {
    const std::string problem = validate_options(options);
    RAFTLOG_CHECK(problem.empty(), problem.c_str());
    return options;
  }

  // Declared in the order they depend on each other; destroyed the other way round.
  const PeerTransportOptions options_;
  PeerStreamAuth auth_;
  // The inbound side fills them, the outbound side sends and reads them.
  SnapshotReceipts receipts_;
  PeerOutbound outbound_;
  PeerAdmission admission_;
  PeerInbound inbound_;
  std::atomic<bool> started_{false};
  std::mutex stop_mu_;  // serializes start() and stop()
  bool stopped_ = false;
  bool stop_result_ = true;
};

PeerTransport::PeerTransport(PeerTransportOptions options, MessageHandler on_message)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(on_message))) {}
PeerTransport::~PeerTransport() = default;
grpc::Service* PeerTransport::service() { return impl_->service(); }
std::size_t PeerTransport::max_receive_message_bytes() const {
  return impl_->max_receive_message_bytes();
}
void PeerTransport::start() { impl_->start(); }
void PeerTransport::set_peers(const std::map<raft::NodeId, std::string>& peers) {
  impl_->set_peers(peers);
}
bool PeerTransport::stop() { return impl_->stop(); }
bool PeerTransport::send(raft::Message message) { return impl_->send(std::move(message)); }
std::vector<PeerStats> PeerTransport::peer_stats() const { return impl_->peer_stats(); }
InboundStats PeerTransport::inbound_stats() const { return impl_->inbound_stats(); }
void PeerTransport::drop_snapshot_partials_through(raft::Index index) {
  impl_->drop_snapshot_partials_through(index);
}

SnapshotReceiveStatus PeerTransport::snapshot_receive_status() const {
  return impl_->snapshot_receive_status();
}
std::uint64_t PeerTransport::dropped_unknown_peer() const { return impl_->dropped_unknown_peer(); }
std::uint32_t PeerTransport::peer_snapshot_formats(raft::NodeId peer) const {
  return impl_->peer_snapshot_formats(peer);
}
std::size_t PeerTransport::retired_links() const { return impl_->retired_links(); }
OutboundTotals PeerTransport::outbound_totals() const { return impl_->outbound_totals(); }

}  // namespace raftlog::server

// PeerInbound: the receiving side of the peer transport — the Peer service (a callback service, one
// grpc::ServerReadReactor per stream, no thread of its own; it serves StreamBatches and the older
// one-message Stream), the checks every inbound message passes before on_message sees it, and the
// shutdown of inbound streams (transport.h describes the contract).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "raftlog/peer/v1/peer.grpc.pb.h"
#include "server/peer_admission.h"
#include "server/peer_stream_auth.h"
#include "server/snapshot_chunks.h"
#include "server/snapshot_partial_file.h"
#include "server/transport.h"
#include "util/rate_limit.h"

namespace raftlog::server {

// How often a refused peer stream is logged at most (the rest are counted in the next line).
inline constexpr std::chrono::seconds kStreamRefusalLogInterval{10};

class PeerInbound {
 public:
  // `options`, `auth`, `admission` and `receipts` must outlive this (the transport owns them all).
  // `receipts`: what peers acknowledge of the snapshots this node sends them (recorded from every
  // delivered message), and this node's own, kept up to date with its reassembly.
  PeerInbound(const PeerTransportOptions& options, const PeerStreamAuth& auth,
              PeerAdmission& admission, SnapshotReceipts& receipts,
              PeerTransport::MessageHandler on_message);
  PeerInbound(const PeerInbound&) = delete;
  PeerInbound& operator=(const PeerInbound&) = delete;

  grpc::Service* service() { return &service_; }
  // Cancels every stream, waits until no on_message call runs (none starts afterwards) and then up
  // to stop_timeout_ms for the streams to end. Returns false if one did not end in time. Once.
  bool stop();
  InboundStats stats() const {
    std::lock_guard lock(mu_);
    return stats_;
  }
  // The reassembly of snapshots sent in chunks (snapshot_chunks.h); idle partials expire here too.
  SnapshotReceiveStatus snapshot_status() const;
  // This node sent a message of `term` (its own current term; the transport passes every message
  // but a pre-vote's and its answer's, which name a term not taken): a chunk of a lower term is
  // stale as well, whatever leader was heard (its core would ignore the whole snapshot).
  void note_own_term(raft::Term term);
  // PeerTransport::drop_snapshot_partials_through.
  void drop_snapshot_partials_through(raft::Index index);

 private:
  class InboundStream;
  template <typename Element>
  class InboundReactor;

  class PeerService final : public raftlog::peer::v1::Peer::CallbackService {
   public:
    explicit PeerService(PeerInbound* inbound) : inbound_(inbound) {}
    grpc::ServerReadReactor<raftlog::peer::v1::RaftMessage>* Stream(
        grpc::CallbackServerContext* context, raftlog::peer::v1::StreamSummary* summary) override;
    grpc::ServerReadReactor<raftlog::peer::v1::RaftMessageBatch>* StreamBatches(
        grpc::CallbackServerContext* context, raftlog::peer::v1::StreamSummary* summary) override;

   private:
    PeerInbound* inbound_;
  };

  // "" when `wire` may be delivered on a stream authenticated as `authenticated_from` (kNoNode: not
  // authenticated) that so far carried messages from *stream_from (kNoNode before the first one),
  // else why not; sets *code for the refusal.
  std::string check(const raftlog::peer::v1::RaftMessage& wire, raft::NodeId authenticated_from,
                    raft::NodeId* stream_from, grpc::StatusCode* code) const;

  // Stream bookkeeping: register/unregister a stream, and run the callback unless stopping.
  std::uint64_t register_stream(InboundStream* stream);  // 0 when stopping
  void unregister_stream(std::uint64_t stream_id);
  bool deliver(raft::Message message);
  void count_rejected();
  // A checked chunk: the whole snapshot once it is complete (logs a refused chunk).
  std::optional<raft::Message> reassemble(SnapshotChunk chunk);
  void record_whole_snapshot(const raft::Message& message);
  // A message only a leader sends (an append, a heartbeat, a snapshot) arrived at `term`: a partial
  // restored at start starts its idle clock now (snapshot_chunks.h), and a chunk of a lower term
  // is a deposed leader's (SnapshotReassembler::note_leader_term). Cheap after the first.
  void note_leader_heard(raft::Term term);
  // A checked message's receipt (or its absence) becomes its sender's latest; a malformed one is
  // ignored (logged at most once per 30 s).
  void record_receipt(const raftlog::peer::v1::RaftMessage& wire);
  // Under snapshot_mu_: this node's receipt follows its reassembly, valid only until the partial it
  // names would expire (so a partial dropped by the idle timeout is not acknowledged any more).
  void publish_receipt_locked() const;
  // Under snapshot_mu_: the file follows the reassembly (a chunk from `sender`, or expiry); a write
  // that failed is logged.
  void follow_partial_file_locked(std::optional<raft::NodeId> sender) const;

  const PeerTransportOptions& options_;
  const PeerStreamAuth& auth_;
  PeerAdmission& admission_;
  SnapshotReceipts& receipts_;
  const PeerTransport::MessageHandler on_message_;
  PeerService service_{this};

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::map<std::uint64_t, InboundStream*> streams_;  // registered and not yet past OnDone
  std::uint64_t next_stream_id_ = 1;
  std::size_t callbacks_running_ = 0;
  InboundStats stats_;
  // Refused streams (a node with another cluster's secret redials every ~50 ms, on both lanes):
  // one line per interval for all remotes together, with the count held back (under mu_). One
  // limit, not one per remote: remotes are untrusted addresses, a map of them would be unbounded.
  util::RateLimit stream_refusal_log_{kStreamRefusalLogInterval};

  // Every stream's chunks, so a transfer continues on a peer's new stream after a reconnect.
  // receipts_.own() follows it under the same lock.
  mutable std::mutex snapshot_mu_;
  mutable SnapshotReassembler reassembler_;
  // The partial on disk (options_.snapshot_partial_path), following reassembler_ under snapshot_mu_.
  mutable SnapshotPartialFile partial_file_;
  // A restored partial waits for a leader's first message before it starts idling.
  std::atomic<bool> restored_partial_idle_clock_waiting_{false};
  // The highest term of a leader's message received (note_leader_heard): handed to the reassembler
  // with each chunk, under snapshot_mu_.
  std::atomic<raft::Term> leader_term_heard_{0};
  std::atomic<raft::Term> own_term_{0};  // note_own_term
  util::RateLimit receipt_log_{std::chrono::seconds(30)};  // under snapshot_mu_
  // Refused chunks: after a gap every later chunk of the transfer is refused (under snapshot_mu_).
  util::RateLimit refusal_log_{std::chrono::seconds(5)};
};

}  // namespace raftlog::server

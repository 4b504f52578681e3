// PeerOutbound::OutboundStream: the reactor of one outbound stream, shared by the two halves of
// PeerOutbound (peer_outbound.cpp: the links, send() and the writes; peer_outbound_stream.cpp: a
// stream's opening, handshake, cancel, end and reconnect). Internal to those two files.
#pragma once

#include <grpcpp/grpcpp.h>

#include "raftlog/peer/v1/peer.grpc.pb.h"
#include "server/peer_outbound.h"

namespace raftlog::server {

// One outbound client-streaming call (raftlog.peer.v1.Peer/StreamBatches) to a peer. Writes are
// started by whoever finds the stream idle with a message queued: send() on the Raft loop, or the
// reaction to the previous write, so no thread waits for messages. One write is in flight at a time.
//
// Lifetime: the reactor holds one hold (AddHold before StartCall), so gRPC cannot call OnDone, which
// deletes it, before the hold is removed. The hold is removed exactly once, by whoever makes
// release_due_locked() true: the stream is closing (a write failed, the peer refused the stream, or
// stop()), no write is claimed, and stop() is not cancelling it. A thread other than a reaction of
// this stream touches it only while link.stream points to it (under link.mu) or while it owns the
// write claim or the cancel, since both keep the hold.
//
// A call is never cancelled before its StartCall has returned: with gRPC 1.51 a TryCancel that ran
// while StartCall was running (a reconnect opening the stream while set_peers removed its peer)
// left the call's start and finish operations never completed, so OnDone never came and stop()
// waited forever. A cancel() that finds the stream not started only marks it
// (cancel_after_start); open_stream calls TryCancel once StartCall has returned.
class PeerOutbound::OutboundStream final : public grpc::ClientWriteReactor<raftlog::peer::v1::RaftMessageBatch> {
 public:
  OutboundStream(PeerOutbound* outbound, PeerLink* link)
      : keep_alive(link->owner->shared_from_this()), outbound_(outbound), link_(link) {}

  void OnWriteDone(bool ok) override { outbound_->on_write_done(*link_, this, ok); }
  void OnReadInitialMetadataDone(bool ok) override {
    outbound_->on_initial_metadata(*link_, this, ok);
  }
  void OnDone(const grpc::Status& status) override {
    outbound_->on_stream_done(*link_, this, status);
  }

  // Under link->mu: whether a write may start now (until the peer accepts the stream, only its first
  // batch is written: the handshake).
  bool can_take_write() const {
    return started && !closing && !write_claimed && (accepted || !handshake_written);
  }

  // The stream's lanes live at least as long as the stream (a retired link is freed after this).
  const LanesRef keep_alive;
  grpc::ClientContext context;
  raftlog::peer::v1::StreamSummary summary;
  raftlog::peer::v1::RaftMessageBatch batch;  // the batch being written; only the write claimant touches it

  // Under link->mu.
  bool started = false;       // StartCall returned
  bool accepted = false;      // the peer checked our first message and said so (kPeerAcceptedKey)
  bool reached_peer = false;  // the peer answered the call (initial metadata, accepting or not)
  bool handshake_written = false;  // a first batch was written before acceptance: wait for it
  bool write_claimed = false;      // a write is being prepared or is in flight
  bool closing = false;  // no new writes; the hold goes once nothing else needs the stream
  bool hold_released = false;
  bool cancel_in_progress = false;  // cancel() or open_stream is calling TryCancel
  bool cancel_after_start = false;  // cancelled before StartCall: open_stream calls TryCancel

 private:
  PeerOutbound* outbound_;
  PeerLink* link_;
};

}  // namespace raftlog::server

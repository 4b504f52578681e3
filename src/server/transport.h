// PeerTransport: carries Raft messages between the nodes of one cluster over gRPC.
//
// Outbound, each peer has two lanes, and each lane its own bounded queue, its own gRPC channel (so its
// own TCP connection) and one long-lived client-streaming RPC (raftlog.peer.v1.Peer/StreamBatches)
// driven by gRPC's callback API (a grpc::ClientWriteReactor):
//   - the append lane carries APPEND (and any message with entries): batches of up to
//     limits.max_message_bytes, bounded by max_queued_messages and max_queued_bytes;
//   - the control lane carries everything else, which is small and entry-less: heartbeats, (pre-)votes,
//     their responses, append responses and TimeoutNow, bounded by max_queued_control_messages (and so
//     by that many times the 64 bytes each is accounted).
// A heartbeat or a vote therefore never waits behind a multi-MiB batch — neither in the queue, nor in
// gRPC's write of the batch, nor in HTTP/2 flow control or the TCP connection, nor on the receiver,
// which reads each stream with its own reactor — and a full append queue never drops one (issue 13:
// heartbeats queued behind 4-8 MiB appends cost leadership on a loaded machine). The price: the two
// lanes are not ordered with respect to each other (Raft needs no order across messages, and a
// heartbeat's commit index never exceeds what the follower is known to hold).
//
// Within a lane appends are pipelined without a round trip per batch and without a thread per peer:
// send() queues the message and, when the lane's stream is idle, starts the write itself (on the
// caller's thread, the node's Raft loop); each completed write starts the next one from gRPC's
// callback thread while the queue is not empty. One write is in flight per lane, and it carries
// everything queued up to 64 messages and limits.max_message_bytes (one RaftMessageBatch), so gRPC's
// cost per write is shared by the messages that piled up while the previous write was in flight.
// A batch of more than 256 KiB (as accounted in the queue) is encoded and started by the encoder
// thread instead: copying MiBs into protobuf and gRPC's buffers took the Raft loop hundreds of
// milliseconds on a loaded machine, ticks and heartbeats included, and would hold a gRPC callback
// thread that inbound messages need as long. Below that size the hand-off would cost more than the
// encoding it moves.
// send() never blocks: when a lane's queue is full the message is dropped and counted (Raft
// retransmits whatever matters), so a slow or dead peer never stalls the raft loop or the other peers.
// A broken stream is reopened with exponential backoff, timed by one timer thread shared by all lanes
// (TimerThread); while a peer is unreachable its queued messages age, and any message older than
// max_message_age_ms is dropped before it is sent, so a vote request or an append from long ago is
// not delivered seconds later.
//
// Inbound, service() is the Peer service (a callback service: one grpc::ServerReadReactor per stream,
// no thread of its own; it serves StreamBatches and the older one-message Stream) the node registers
// on its gRPC server. Every message is
// checked (cluster id, sender, recipient, size, structure: see message_codec.h) before on_message
// sees it; a stream that fails a check ends with FAILED_PRECONDITION (wrong cluster or node ids) or
// INVALID_ARGUMENT (malformed or oversized message). Before any message is read, the caller is
// authenticated (client certificate with mutual TLS, the authenticator of the shared peer secret
// otherwise or as well) as one peer: UNAUTHENTICATED when it cannot be, PERMISSION_DENIED for a
// message from any other node than that one.
//
// Each stream starts with a handshake: the receiver answers the first message with initial metadata
// once it passed the checks, so a refused stream is noticed at once; until then only the stream's
// first batch is written (a lane that has sent nothing yet has an open, unconfirmed stream). Messages
// a broken or refused stream did not take go back to the front of their lane's queue (still bounded
// and aged) for the next stream; the bounds count a message while it is being written, so it always
// fits back. Outbound streams name their lane in client metadata "raftlog-peer-lane" (control or
// append), for the receiver's logs; the receiver treats both alike.
// "sent" counts messages gRPC accepted for writing on an accepted stream; delivery is not confirmed
// (Raft's own acknowledgements do that), and a message can be lost when a connection dies.
//
// Threads: one reconnect timer thread and one encoder thread (both TimerThreads, started by start(),
// joined by stop(); at most one pending job per lane each); everything else runs on the caller of
// send() or on gRPC's callback threads. on_message runs on gRPC's callback threads,
// concurrently for different senders, in order for one sender's stream (the next read of a stream
// starts only after on_message returned).
//
// Using it from the node:
//   1. construct with validated options and a cheap on_message (push into the node's bounded queue);
//   2. builder.RegisterService(transport.service()) and SetMaxReceiveMessageSize(at least
//      max_receive_message_bytes()) on the node's grpc::ServerBuilder; BuildAndStart(); start();
//   3. shutting down: transport.stop() BEFORE grpc::Server::Shutdown(). Inbound peer streams never
//      end on their own, so a Shutdown() that comes first waits its whole deadline for them; stop()
//      cancels them at once and guarantees on_message is not called afterwards. Destroy the transport
//      only after the server has shut down (its service object lives in the transport).
//
// Inside, the transport is its parts (docs/design.md, "Where the code lives"): peer_queue.h, the
// queueing policy without gRPC (lanes, bounds, drops, batches); peer_outbound.h, which drives those
// queues over gRPC streams; peer_inbound.h, the Peer service; peer_stream_auth.h, who a stream
// speaks for.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "raft/types.h"
#include "server/message_codec.h"
#include "server/peer_queue.h"
#include "server/snapshot_chunks.h"

namespace grpc {
class Service;
}  // namespace grpc

namespace raftlog::server {

// Mutual TLS between peers (PEM contents, already checked by load_node_tls). Outgoing streams present
// cert/key and accept only a peer whose certificate chains to ca and names the dialled host; an
// inbound stream whose caller did not present a certificate chaining to ca, or whose certificate
// names no peer (CN=raftlog-node-<id>, tls_files.h), ends with UNAUTHENTICATED (the gRPC server's
// TLS handshake does the cryptography; this check makes sure a client certificate from another CA
// trusted on the shared port cannot open a peer stream), and one whose messages come from another
// node than the certificate names with PERMISSION_DENIED.
struct PeerTlsOptions {
  std::string cert_pem;
  std::string key_pem;
  std::string ca_pem;
};

struct PeerTransportOptions {
  std::string cluster_id;  // non-empty; stamped on every message and checked on every inbound one
  raft::NodeId self_id = raft::kNoNode;
  // The peers at start: id -> "host:port". Must not contain self_id. Bound: kMaxPeers. Changed at
  // runtime by set_peers().
  std::map<raft::NodeId, std::string> peers;
  // This node's own address as its peers dial it ("host:port", raft::check_member_address), sent on
  // every outbound stream (metadata "raftlog-peer-address") so that a node whose configurations do
  // not list this one yet can answer it. Empty: none is sent, and such a node refuses our streams.
  std::string advertise_address;

  // Outbound queue bounds of each peer's append lane (APPEND messages). Whichever is hit first drops
  // the new message.
  std::size_t max_queued_messages = 4096;
  std::size_t max_queued_bytes = 64u << 20;
  // The bound of each peer's control lane (every other message: heartbeats, votes, responses,
  // TimeoutNow; none carries entries, so each is accounted 64 bytes). Small: a leader sends a peer a
  // heartbeat per heartbeat interval and a reply per message received, and what waits longer than
  // max_message_age_ms is dropped anyway.
  std::size_t max_queued_control_messages = 1024;
  // A queued message older than this is dropped instead of sent (stale votes/appends are useless and
  // only confuse a peer that just came back). Several election timeouts.
  std::uint32_t max_message_age_ms = 2000;

  // Inbound and outbound size and entry-count bounds for one message.
  MessageLimits limits;
  // The largest snapshot data this node reassembles from chunks (snapshot_chunks.h): what its
  // replica decodes at most (raftlogd: replica::kMaxSnapshotDataBytes, 64 MiB). A chunk announcing
  // a larger total is refused before any byte of it is kept. At most kMaxSnapshotBytes.
  std::uint64_t max_snapshot_receive_bytes = kMaxSnapshotBytes;
  // Where the partial snapshot being received is kept on disk (snapshot_partial_file.h; raftlogd:
  // `<data_dir>/SNAPSHOT.partial`), so that a restart resumes its transfer; empty: memory only.
  // The transport reads it when it is built: a partial of a snapshot at or below
  // snapshot_partial_stale_through (the log's first index - 1 or its commit index: installed or
  // replicated already) is removed.
  std::string snapshot_partial_path;
  raft::Index snapshot_partial_stale_through = 0;
  // The disk's high watermark (raftlogd: --disk-high-watermark; 1: none): the partial is not kept
  // on disk when it would take the file system to it, nor restored when the disk is past it.
  double snapshot_partial_max_disk_used = 1.0;
  // A partial snapshot that received no chunk for this long is dropped (snapshot_chunks.h); a
  // restored one's clock starts at the first message from a leader (an append, a heartbeat or a
  // snapshot chunk), not when the transport is built. Positive; raftlogd keeps the default.
  std::chrono::milliseconds snapshot_partial_idle_timeout = kSnapshotPartialIdleTimeout;

  // Plaintext when empty. With TLS the node's gRPC server must use TLS server credentials that
  // request client certificates (server.cpp does).
  std::optional<PeerTlsOptions> tls;
  // The cluster's shared peer secret (peer_auth.h), or empty. With it, every outgoing stream carries
  // an authenticator, and an inbound stream without a valid one for this node from a peer ends with
  // UNAUTHENTICATED; its messages must then come from the node the authenticator names
  // (PERMISSION_DENIED otherwise). Without TLS and without a secret any caller may speak for any
  // peer: the node never runs a multi-node cluster so (load_peer_secret, node_tls.h).
  std::string peer_secret;

  // Reconnect backoff. The gRPC channel spaces its connection attempts by these bounds (doubling from
  // min to max); a stream whose call could not connect is retried after min (+ up to 25% jitter),
  // which fails locally until the channel is up again. A stream the peer refused or ended is retried
  // after a delay that doubles from min to max, with up to 25% jitter, and resets to min once a
  // stream has been accepted.
  std::uint32_t reconnect_backoff_min_ms = 50;
  std::uint32_t reconnect_backoff_max_ms = 1000;
  // How long one connection attempt may take before it counts as failed (a paused or firewalled
  // peer otherwise leaves the attempt pending for gRPC's 20 s default).
  std::uint32_t connect_timeout_ms = 1000;

  // stop() waits at most this long for inbound streams to end (outbound streams are cancelled, and
  // stop() waits for gRPC to end them, logging every stop_timeout_ms while it waits).
  std::uint32_t stop_timeout_ms = 2000;

  static constexpr std::size_t kMaxPeers = 64;
  // Nodes in none of this node's configurations that authenticated for this cluster and are let in
  // at once (peer_admission.h), and how long one may stay silent before it is forgotten.
  static constexpr std::size_t kMaxUnconfiguredPeers = 8;
  static constexpr std::chrono::seconds kUnconfiguredPeerIdle{5};
};

// Returns an empty string when `options` is usable, otherwise a sentence naming the first problem.
std::string validate_options(const PeerTransportOptions& options);

// One lane's counters, as seen by the local node. Times are std::chrono::steady_clock.
struct LaneStats {
  std::size_t queued_messages = 0;  // queued, plus those being written or awaiting the handshake
  std::size_t queued_bytes = 0;
  std::uint64_t sent_messages = 0;
  std::uint64_t dropped_queue_full = 0;   // send() found the queue at a bound
  std::uint64_t dropped_expired = 0;      // older than max_message_age_ms when its turn came
  std::uint64_t dropped_oversize = 0;     // encoded larger than limits.max_message_bytes
  std::uint64_t dropped_send_failed = 0;  // the stream broke while writing it
  std::uint64_t connects = 0;             // streams opened (accepted or not)
  std::uint64_t connect_failures = 0;     // attempts that failed or whose stream broke
  bool connected = false;                 // a stream is open and the peer accepted it
  std::chrono::steady_clock::time_point last_send_ok{};  // epoch (zero) if never
  std::string last_error;                                // last connect/stream error ("" if none)
  std::chrono::steady_clock::time_point last_error_at{};
  // The latest snapshot sent, whole or in chunks (append lane; snapshot_chunks.h), and the counts of those
  // started, wholly sent and abandoned.
  std::optional<SnapshotSendProgress> snapshot;
  std::uint64_t snapshots_started = 0;
  std::uint64_t snapshots_sent = 0;
  std::uint64_t snapshots_abandoned = 0;
  // Chunked snapshots that started at the peer's receipt, and the data bytes they did not resend.
  std::uint64_t snapshots_resumed = 0;
  std::uint64_t snapshot_bytes_skipped = 0;
  // Chunked snapshots started at 0 although the peer's receipt named a partial, by reason.
  ResumeMissCounts snapshot_resume_missed;
  // Continuations sent (the data after the peer's splice point) and the bytes they did not send.
  std::uint64_t snapshots_continued = 0;
  std::uint64_t snapshot_resume_saved_bytes = 0;
};

// One peer: the inherited fields are the sums over its two lanes, except `connected` (either lane
// is), last_send_ok and last_error (the latest of the two).
struct PeerStats : LaneStats {
  raft::NodeId id = raft::kNoNode;
  std::string address;
  LaneStats control;  // heartbeats, votes, responses, TimeoutNow
  LaneStats append;   // APPEND
};

// The outbound side's totals since the transport was built, over every peer it sent to (removed
// ones included, unlike peer_stats()): they only grow.
struct OutboundTotals {
  // Messages send() dropped because their lane's queue was at a bound (LaneStats::dropped_queue_full),
  // by lane: a full append lane means a follower that does not keep up (or a window too large for
  // the lane); a full control lane, a peer that is unreachable or far too slow.
  std::uint64_t dropped_queue_full_control = 0;
  std::uint64_t dropped_queue_full_append = 0;
};

struct InboundStats {
  std::uint64_t received_messages = 0;  // delivered to on_message
  std::uint64_t rejected_streams = 0;   // ended because a message failed a check
  std::uint64_t open_streams = 0;
  // Nodes in none of our configurations admitted now (authenticated for this cluster), and the
  // streams of such nodes refused (no or a bad advertised address, the bound full).
  std::uint64_t unconfigured_peers = 0;
  std::uint64_t refused_unconfigured_streams = 0;
  std::uint64_t admitted_unconfigured_peers = 0;   // in total (each newly admitted node)
  std::uint64_t forgotten_unconfigured_peers = 0;  // in total (idle for kUnconfiguredPeerIdle)
};


class PeerTransport {
 public:
  // Called for every valid inbound message, from gRPC threads. Must be cheap and must not block for
  // long (push into a bounded queue; drop when full): it holds up that sender's stream.
  using MessageHandler = std::function<void(raft::Message)>;

  // Asserts validate_options(options).empty(): the node validates its configuration first.
  PeerTransport(PeerTransportOptions options, MessageHandler on_message);
  ~PeerTransport();  // calls stop()
  PeerTransport(const PeerTransport&) = delete;
  PeerTransport& operator=(const PeerTransport&) = delete;

  // The inbound Peer service. Register it on the node's grpc::ServerBuilder before BuildAndStart();
  // the transport must outlive the server (shut the server down before destroying the transport).
  grpc::Service* service();
  // The node's grpc::ServerBuilder::SetMaxReceiveMessageSize must be at least this (the server-wide
  // setting also covers the client API, so the node takes the larger of the two bounds).
  std::size_t max_receive_message_bytes() const;

  // Starts the reconnect timer thread and opens one stream per lane of every peer. Call once.
  void start();
  // Cancels every outbound and inbound stream, joins the timer thread and waits (up to
  // stop_timeout_ms) until no on_message call is running. After stop() returns on_message is never
  // called again and send() drops everything. Idempotent. Returns false if an inbound stream did not
  // end in time (on_message will still not be called again).
  bool stop();

  // Queues `message` for message.to on its lane (APPEND or any message with entries: the append
  // lane; anything else: the control lane). Never blocks. Returns false (and counts it) when the
  // message is dropped: unknown recipient, its lane's queue at a bound, oversize, or stopped.
  bool send(raft::Message message);

  // Makes `peers` (id -> "host:port", not this node) the configured peers from now on: new ones are
  // dialled (at once when started; a link the outbound bounds refuse is retried every 250 ms) and
  // accepted inbound, one at a new address is re-dialled there, and the ones left out are no longer
  // sent to (what they queued may still be written for up to 500 ms: a removed node's last
  // heartbeat) nor accepted as configured peers (their open inbound streams are refused at their
  // next message; with authentication they may come back as unconfigured peers, peer_admission.h).
  // The node calls it whenever the configurations in its log change. Bounded: at most kMaxPeers;
  // the excess (and invalid entries: id 0, this node, an empty address) are left out and logged.
  // Any thread; calls are serialized.
  void set_peers(const std::map<raft::NodeId, std::string>& peers);

  std::vector<PeerStats> peer_stats() const;
  InboundStats inbound_stats() const;
  // Snapshots being received in chunks (one partial per sending peer), the last one handed to
  // on_message, and the reassembly's counters (snapshot_chunks.h).
  SnapshotReceiveStatus snapshot_receive_status() const;
  // Drops the partials of snapshots of an index at or below `index` (the node's commit index:
  // of no use any more) and the file that keeps one; cheap when there are none. Any thread.
  void drop_snapshot_partials_through(raft::Index index);
  std::uint64_t dropped_unknown_peer() const;
  // The snapshot data formats `peer` says it decodes on its latest message (kSnapshotFormat*,
  // snapshot_chunks.h; 0 before any message or from a node from before the field). Any thread.
  std::uint32_t peer_snapshot_formats(raft::NodeId peer) const;
  OutboundTotals outbound_totals() const;
  // Retired outbound links not freed yet (peer_outbound.h, kMaxRetiredPeers).
  std::size_t retired_links() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace raftlog::server

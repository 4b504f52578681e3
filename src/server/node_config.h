// Everything a raftlogd node is configured with. Every field has a default; docs/configuration.md
// and `raftlogd --help` describe each one. Defaults aim at fast failover (a leader killed with
// `kill -9` is replaced well under a second) without spurious elections on a busy 2-core machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "replica/catch_up_rule.h"
#include "server/tls_files.h"
#include "store/options.h"

namespace raftlog::raft {
struct Config;
}  // namespace raftlog::raft

namespace raftlog::replica {
struct ReplicaConfig;
}  // namespace raftlog::replica

namespace raftlog::server {

struct PeerTransportOptions;

// Bounds validate() enforces on single fields. raftlogd's flags take the same ones, so that a value
// out of range is refused naming the flag; docs/configuration.md lists them. Rules between fields
// (election_ticks > heartbeat_ticks, max_append_bytes >= max entry size, ...) are validate()'s alone.
namespace config_limits {
inline constexpr std::uint32_t kMaxTickMs = 10000;
inline constexpr std::uint32_t kMaxElectionTicks = 1U << 20;  // the Raft core's bound
// One Append becomes one store append (store::Options::max_batch_entries, 65536 by default).
inline constexpr std::uint32_t kMaxEntriesPerAppend = 65536;
// Payload bytes of the appends waiting in a node's input queue for the Raft loop (node.cpp).
inline constexpr std::uint64_t kMaxQueuedAppendBytes = 256ULL << 20;
// One Append must fit that queue when it is empty: a larger one would be refused TOO_MANY_PENDING
// every time, and clients retry that until their deadline. (It must also fit one peer message with
// the Raft core's per-entry overhead, whose bound is 1 GiB: this leaves room for every entry count.)
inline constexpr std::uint64_t kMaxAppendBytes = kMaxQueuedAppendBytes;
inline constexpr std::uint64_t kMaxReadBytes = 1ULL << 30;
// Entry bytes a leader keeps in flight to one follower (raft::Config::max_inflight_bytes): what one
// loop round reads from the store and queues for it at most (plus one entry) during a catch-up.
inline constexpr std::size_t kMaxInflightAppendBytes = 16U << 20;
// A Read response may exceed max_read_bytes by protobuf framing (about 55 bytes per entry) within
// the 1 MiB of slack the node's gRPC send limit has.
inline constexpr std::uint32_t kMaxReadEntries = 16384;
inline constexpr std::uint32_t kMaxStreams =
    65536;  // Tail streams, AppendStreams, appends per stream
inline constexpr std::uint32_t kMinStreamsPerConnection =
    16;  // a node's peers need one stream each
inline constexpr std::uint32_t kMaxStreamsPerConnection = 2147483647;  // gRPC takes an int
inline constexpr std::uint32_t kMinRetentionCheckIntervalMs = 10;
inline constexpr std::uint32_t kMaxRetentionCheckIntervalMs = 3600000;
// 100 years: "now - max age" must stay representable in the file clock's 64-bit nanoseconds.
inline constexpr std::uint64_t kMaxRetentionMaxAgeS = 100ULL * 365 * 24 * 3600;
// The start-up dedup rebuild reads this many entries at most (a bound on start-up time).
inline constexpr std::uint64_t kMaxDedupRebuildEntries = 100000000;
// Scrub rate: above a few GiB/s it would only compete with the node's own I/O.
inline constexpr std::uint64_t kMaxScrubBytesPerSecond = 4ULL << 30;
// The slow-round log threshold (NodeConfig::slow_round_log_ms): ten minutes, past any election
// timeout this node can run with a tick of 10 s.
inline constexpr std::uint32_t kMaxSlowRoundLogMs = 600000;
// The dispatcher's persist slice (NodeConfig::derived_persist_slice_ms): a second; longer slices
// only delay the indexes as the unsliced persist did.
inline constexpr std::uint32_t kMaxDerivedPersistSliceMs = 1000;
}  // namespace config_limits

struct NodeConfig {
  std::uint64_t node_id = 0;  // required, non-zero, a key of `members`
  // Members of the (static) cluster: node id -> advertised peer/client address "host:port".
  std::map<std::uint64_t, std::string> members;
  // Names the cluster: stamped on every peer message (peers refuse another cluster's) and recorded
  // in the data directory at its first start (DIR/IDENTITY, node_identity.h), after which the node
  // refuses a directory of another cluster. It must be unique to the cluster: a multi-node cluster
  // may not keep this default, which every cluster would share (validate()). 1..256 printable
  // ASCII characters without spaces.
  static constexpr std::string_view kSingleNodeDefaultClusterId = "raftlog";
  std::string cluster_id = std::string(kSingleNodeDefaultClusterId);
  // The bootstrap configuration's voters when they are not the members' ids: a node that joined a
  // running cluster (raftlogd --join, server/join.h) starts from the cluster's. Empty: the members.
  std::vector<std::uint64_t> bootstrap_voters;
  // An operator's way out of the unvouched wedge (raftlogd --unvouched-may-elect; docs/operations.md,
  // "Unvouched nodes"): while this node is unvouched it grants this candidate by the ordinary
  // up-to-date rule (raft::Config::unvouched_may_elect). 0: none.
  std::uint64_t unvouched_may_elect = 0;
  std::string listen_address;  // defaults to members[node_id]
  std::string data_dir;        // required

  // Raft timing. One tick every tick_ms; election timeout randomized in
  // [election_ticks, 2 * election_ticks) ticks; heartbeats every heartbeat_ticks.
  // Defaults: 20 ms ticks, 200-400 ms election timeout, 40 ms heartbeats.
  std::uint32_t tick_ms = 20;
  std::uint32_t election_ticks = 10;
  std::uint32_t heartbeat_ticks = 2;
  // A Raft loop round that holds the loop at least this long logs one warning naming its parts and
  // their milliseconds (at most one line per 10 s: Replica::end_round). 0: half the shortest
  // election timeout (election_ticks * tick_ms / 2, 100 ms with the default timing), long enough
  // to be rare and short enough to be seen before a round costs leadership.
  std::uint32_t slow_round_log_ms = 0;
  // The derived indexes' dispatcher syncs a persist's files for at most this long at a time, and
  // indexes the committed entries that came meanwhile between two such slices (Dispatcher,
  // docs/design.md "Topics, keys and time"). 0: each persist runs to its cursor before dispatch
  // goes on (the behaviour before 2026-12-07; for comparisons: raftlog-bench topics --phases live).
  std::uint32_t derived_persist_slice_ms = 20;

  store::Options store;  // segment size, flush mode and interval, max entry size

  // Client-facing bounds.
  std::uint32_t max_entries_per_append = 1024;  // entries in one Append call
  std::uint64_t max_append_bytes = 8ULL
                                   << 20;  // payload bytes in one Append call (>= max entry size)
  std::uint32_t max_read_entries = 1024;   // entries in one Read response
  std::uint64_t max_read_bytes = 4ULL << 20;  // payload bytes in one Read/Tail response
  std::uint32_t max_pending_appends = 16384;  // Append calls waiting for commit on this node
  std::uint32_t append_timeout_ms =
      5000;                               // an Append not committed by then fails (unknown outcome)
  std::uint32_t max_input_queue = 65536;  // bounded queue into the Raft loop thread
  std::uint32_t max_tail_streams = 256;   // concurrent Tail streams on this node (one thread each)
  std::uint32_t max_append_streams =
      4096;  // concurrent AppendStream calls on this node (no thread each)
  // Requests one AppendStream may have read but not yet answered; the node stops reading that
  // stream until answers go out, so a fast sender is slowed by HTTP/2 flow control, not refused.
  std::uint32_t max_appends_per_stream = 256;
  // HTTP/2 streams (concurrent RPCs) one client connection may have open; more wait for a free slot.
  std::uint32_t max_concurrent_streams_per_connection = 1024;
  // Tail streams and AppendStream calls one client connection (gRPC's peer address:port) may hold;
  // one more is refused with RESOURCE_EXHAUSTED. A quarter of the node's bound each, so a single
  // connection cannot take every slot (a client that needs more opens more connections).
  std::uint32_t max_tail_streams_per_connection = 64;
  std::uint32_t max_append_streams_per_connection = 1024;
  // A Tail or AppendStream write (one message) that has not completed for this long ends the stream
  // with RESOURCE_EXHAUSTED: its reader stopped reading, HTTP/2 flow control holds the write back,
  // and the stream would otherwise keep its slot (and a Tail its thread) while the connection lives
  // (keepalive cannot tell: the client still answers pings).
  std::uint32_t stream_stall_timeout_ms = 10000;

  // Idempotent appends: per client, the most recent `dedup_sequences_per_client` appends are
  // remembered, for at most `dedup_max_clients` clients (least recently used evicted). On restart the
  // table is rebuilt from the last `dedup_rebuild_entries` entries of the log. A retry older than that
  // window is not recognised (documented in docs/durability.md).
  std::uint32_t dedup_sequences_per_client = 64;
  std::uint32_t dedup_max_clients = 100000;
  std::uint64_t dedup_rebuild_entries = 1000000;

  // Readiness of a follower (replica/catch_up_rule.h, docs/operations.md "Health, readiness and
  // watching a cluster"): a caught-up follower whose log falls more than this many entries behind
  // the commit index its leader named is NOT_SERVING until it reaches that index again.
  std::uint64_t serving_lag_entries = replica::kDefaultServingLagEntries;

  // Graceful shutdown (SIGTERM): longest time spent finishing in-flight work before closing.
  std::uint32_t shutdown_grace_ms = 3000;

  // Retention (docs/operations.md, "Retention"): whole sealed segments are deleted, oldest first,
  // once every entry in them is committed and they are older than retention_max_age_s (by the
  // segment file's modification time, i.e. when its last entry was written) or the log takes more
  // than retention_max_bytes on disk. 0 = no limit (keep everything). Checked every
  // retention_check_interval_ms. The leader never deletes entries a follower still needs, unless it
  // has not heard from that follower for retention_follower_grace_ms; such a follower can then no
  // longer catch up and must be rebuilt from a copy of a healthy node (docs/operations.md).
  std::uint64_t retention_max_age_s = 0;
  std::uint64_t retention_max_bytes = 0;
  std::uint32_t retention_check_interval_ms = 10000;
  std::uint32_t retention_follower_grace_ms = 600000;

  // Background scrub (docs/operations.md, "Storage faults"): durable entries are re-read and their
  // CRCs verified at this rate, from the first index to the durable end and over again; 0 = off.
  std::uint64_t scrub_bytes_per_second = 8ULL << 20;

  // Prometheus endpoint "host:port" (docs/metrics.md); empty = no metrics endpoint.
  std::string metrics_address;

  // Disk watermarks, as fractions of the data directory's file system in use. At or above the high
  // watermark the leader refuses appends (RESOURCE_EXHAUSTED, reason DISK_WATERMARK) while reads go
  // on; it accepts them again once use falls to the low watermark or below. 0 < low < high <= 1;
  // high = 1 turns the watermark off (appends then stop only when the disk is actually full).
  double disk_high_watermark = 0.90;
  double disk_low_watermark = 0.80;

  // TLS (docs/security.md). Clients and peers share the listen port, so TLS is all or nothing on it.
  // client_tls: the certificate and key the port presents; with ca_path, every caller must present
  // a certificate signed by that CA (mutual TLS for clients too). peer_tls: all three files; the
  // node's certificate for outgoing peer streams, and the cluster CA that a peer's certificate (in
  // both directions) must chain to. A multi-node cluster needs both or neither.
  TlsFiles client_tls;
  TlsFiles peer_tls;
  // The cluster's shared peer secret (docs/security.md, src/server/peer_auth.h): required by a
  // multi-node cluster without peer TLS (load_peer_secret), optional with it (then checked too).
  std::string peer_secret_path;
  bool tls_enabled() const { return client_tls.any(); }
};

// Empty when valid; otherwise a message naming the offending field. Covers everything Node::open and
// Server::start would refuse for configuration reasons (the store options, the derived Raft and
// peer transport configurations), so a caller can refuse a configuration before touching the disk.
// What it cannot know (a port in use, a TLS file's contents) is checked where it is used.
std::string validate(const NodeConfig& config);

// The Raft core's configuration for this node, except random_seed (Node::open adds it), and the
// peer transport's options, except TLS (Server::start adds it). One place derives them, so that
// validate() checks exactly what the node will run with.
raft::Config raft_config_for(const NodeConfig& config);
PeerTransportOptions peer_transport_options_for(const NodeConfig& config);
// The replica's settings (src/replica/replica.h), except what Node::open adds: the Raft core's
// random seed and whether the machine restarted since the last open.
replica::ReplicaConfig replica_config_for(const NodeConfig& config);

// The Raft core's bound on one AppendEntries message (and one proposal), derived so that the largest
// Append the node accepts fits in one: payloads plus the core's per-entry overhead, plus slack. The
// peer transport's message limit is derived from it in turn.
std::size_t max_raft_message_bytes(const NodeConfig& config);

}  // namespace raftlog::server

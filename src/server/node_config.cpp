#include "server/node_config.h"

#include "replica/snapshot_data.h"
#include "server/snapshot_chunks.h"
#include "server/snapshot_partial_file.h"

#include <algorithm>
#include <filesystem>
#include <limits>

#include "raft/raft.h"
#include "raft/types.h"
#include "replica/replica.h"
#include "server/transport.h"
#include "util/host_port.h"

namespace raftlog::server {

namespace {

// Which TLS flags go together (the files themselves are checked by load_tls_material at start-up).
std::string validate_tls(const NodeConfig& config) {
  const TlsFiles& client = config.client_tls;
  const TlsFiles& peer = config.peer_tls;
  if (client.any() && (client.cert_path.empty() || client.key_path.empty())) {
    return "--tls-cert and --tls-key must be given together (--tls-ca is optional: it makes "
           "clients present certificates)";
  }
  if (peer.any() && (peer.cert_path.empty() || peer.key_path.empty() || peer.ca_path.empty())) {
    return "mutual TLS between peers needs all of --peer-tls-cert, --peer-tls-key and "
           "--peer-tls-ca";
  }
  if (peer.any() && !client.any()) {
    return "--peer-tls-* needs --tls-cert and --tls-key too: clients and peers share one port, "
           "which then "
           "speaks only TLS (the same certificate may be given to both)";
  }
  if (client.any() && !peer.any() && config.members.size() > 1) {
    return "--tls-cert on a multi-node cluster needs --peer-tls-cert, --peer-tls-key and "
           "--peer-tls-ca: peers "
           "dial the same TLS port";
  }
  return "";
}

// The cluster id is written to IDENTITY files, logs and every peer message.
constexpr std::size_t kMaxClusterIdBytes = 256;

std::string validate_cluster_id(const NodeConfig& config) {
  const std::string& id = config.cluster_id;
  if (id.empty()) return "cluster id must not be empty";
  if (id.size() > kMaxClusterIdBytes) {
    return "--cluster-id is longer than " + std::to_string(kMaxClusterIdBytes) + " characters";
  }
  for (const char c : id) {
    if (c < 0x21 || c > 0x7e)
      return "--cluster-id may hold only printable ASCII characters without spaces";
  }
  if (config.members.size() > 1 && id == NodeConfig::kSingleNodeDefaultClusterId) {
    return "a multi-node cluster needs --cluster-id set to a token unique to it (e.g. the output "
           "of "
           "`openssl rand -hex 16`): the default \"" +
           std::string(NodeConfig::kSingleNodeDefaultClusterId) +
           "\" would be every cluster's, so nodes and data directories of different clusters could "
           "not be told "
           "apart (docs/security.md)";
  }
  return "";
}

// Member ids and addresses, the listen and metrics addresses.
std::string validate_addresses(const NodeConfig& config) {
  if (config.node_id == 0) return "node id must be non-zero";
  if (!config.members.contains(config.node_id)) {
    return "node id " + std::to_string(config.node_id) + " is not among the members";
  }
  // --members names a cluster's first voters; more join later through the membership API. A joined
  // node's members are the seed it was given (up to raft::kMaxMembers).
  if (config.bootstrap_voters.empty() && config.members.size() > 7)
    return "at most 7 members are supported";
  if (config.members.size() > raft::kMaxMembers) {
    return "at most " + std::to_string(raft::kMaxMembers) + " members are supported";
  }
  std::map<std::string, std::uint64_t> ids_by_address;
  for (const auto& [id, address] : config.members) {
    if (id == 0) return "member ids must be non-zero";
    if (address.empty())
      return "member " + std::to_string(id) + " needs an address of the form host:port";
    if (std::string problem = util::parse_host_port(address, util::PortZero::kRefused, nullptr);
        !problem.empty()) {
      return "member " + std::to_string(id) + " address '" + address + "' " + problem;
    }
    // Configurations record addresses of at most this length (raft::check_member_address): a
    // longer one would be left out of them, and the node then dialled by --members alone.
    if (address.size() > raft::kMaxMemberAddressBytes) {
      return "member " + std::to_string(id) + " address is " + std::to_string(address.size()) +
             " bytes long (at most " + std::to_string(raft::kMaxMemberAddressBytes) + ")";
    }
    // Exact text: two spellings of one host ("localhost", "127.0.0.1") are not recognised.
    if (const auto [it, inserted] = ids_by_address.emplace(address, id); !inserted) {
      return "members " + std::to_string(it->second) + " and " + std::to_string(id) +
             " have the same address " + address;
    }
  }
  util::HostPort listen;
  const std::string& listen_address =
      config.listen_address.empty() ? config.members.at(config.node_id) : config.listen_address;
  if (std::string problem =
          util::parse_host_port(listen_address, util::PortZero::kRefused, &listen);
      !problem.empty()) {
    return "listen address '" + listen_address + "' " + problem;
  }
  if (!config.metrics_address.empty()) {
    util::HostPort metrics;
    if (std::string problem =
            util::parse_host_port(config.metrics_address, util::PortZero::kAllowed, &metrics);
        !problem.empty()) {
      return "metrics address '" + config.metrics_address + "' " + problem;
    }
    const bool same_host = metrics.host == listen.host || util::is_wildcard_host(metrics.host) ||
                           util::is_wildcard_host(listen.host);
    if (metrics.port == listen.port && same_host) {
      return "metrics address '" + config.metrics_address +
             "' takes the port of the listen address '" + listen_address + "'";
    }
  }
  return "";
}

// Raft timing and every client-facing bound.
std::string validate_bounds(const NodeConfig& config) {
  using namespace config_limits;
  if (config.tick_ms == 0 || config.tick_ms > kMaxTickMs) return "tick_ms must be in [1, 10000]";
  if (config.heartbeat_ticks == 0) return "heartbeat_ticks must be positive";
  if (config.election_ticks <= config.heartbeat_ticks)
    return "election_ticks must exceed heartbeat_ticks";
  if (config.election_ticks > kMaxElectionTicks) {
    return "election_ticks must be at most " + std::to_string(kMaxElectionTicks);
  }
  if (config.slow_round_log_ms > kMaxSlowRoundLogMs) {
    return "slow_round_log_ms must be at most " + std::to_string(kMaxSlowRoundLogMs);
  }
  if (config.derived_persist_slice_ms > kMaxDerivedPersistSliceMs) {
    return "derived_persist_slice_ms must be at most " + std::to_string(kMaxDerivedPersistSliceMs);
  }
  if (config.max_entries_per_append == 0 || config.max_entries_per_append > kMaxEntriesPerAppend ||
      config.max_entries_per_append > config.store.max_batch_entries) {
    return "max_entries_per_append must be in [1, " + std::to_string(kMaxEntriesPerAppend) +
           "] and at most the store's max_batch_entries";
  }
  if (config.serving_lag_entries < replica::kMinServingLagEntries ||
      config.serving_lag_entries > replica::kMaxServingLagEntries) {
    return "serving_lag_entries must be in " + std::to_string(replica::kMinServingLagEntries) +
           ".." + std::to_string(replica::kMaxServingLagEntries);
  }
  if (config.dedup_rebuild_entries > kMaxDedupRebuildEntries) {
    return "dedup_rebuild_entries must be at most " + std::to_string(kMaxDedupRebuildEntries);
  }
  if (config.scrub_bytes_per_second > kMaxScrubBytesPerSecond)
    return "scrub_bytes_per_second must be at most 4 GiB";
  if (config.store.max_entry_size_bytes == 0) return "the maximum entry size must be positive";
  if (config.max_append_bytes < config.store.max_entry_size_bytes) {
    return "max_append_bytes must be at least the maximum entry size";
  }
  if (config.max_append_bytes > kMaxAppendBytes) {
    return "max_append_bytes must be at most 256 MiB, the node's bound on queued append bytes (a "
           "larger append "
           "would be refused TOO_MANY_PENDING even on an idle node)";
  }
  if (config.max_read_entries == 0 || config.max_read_bytes == 0)
    return "read limits must be positive";
  if (config.max_read_entries > kMaxReadEntries) {
    return "max_read_entries must be at most " + std::to_string(kMaxReadEntries);
  }
  // gRPC message sizes are ints, and the node's message bounds are derived from these two.
  if (config.max_read_bytes > kMaxReadBytes) return "max_read_bytes must be at most 1 GiB";
  if (config.append_timeout_ms == 0) return "append_timeout_ms must be positive";
  if (config.max_pending_appends == 0 || config.max_input_queue == 0)
    return "queue bounds must be positive";
  if (config.max_tail_streams == 0 || config.max_tail_streams > kMaxStreams) {
    return "max_tail_streams must be in [1, 65536]";
  }
  if (config.max_append_streams == 0 || config.max_append_streams > kMaxStreams) {
    return "max_append_streams must be in [1, 65536]";
  }
  if (config.max_appends_per_stream == 0 || config.max_appends_per_stream > kMaxStreams) {
    return "max_appends_per_stream must be in [1, 65536]";
  }
  if (config.max_tail_streams_per_connection == 0 ||
      config.max_tail_streams_per_connection > 65536 ||
      config.max_append_streams_per_connection == 0 ||
      config.max_append_streams_per_connection > 65536) {
    return "max_tail_streams_per_connection and max_append_streams_per_connection must be in [1, "
           "65536]";
  }
  if (config.stream_stall_timeout_ms < 100 || config.stream_stall_timeout_ms > 3600000) {
    return "stream_stall_timeout_ms must be in [100, 3600000]";
  }
  if (config.retention_check_interval_ms < kMinRetentionCheckIntervalMs ||
      config.retention_check_interval_ms > kMaxRetentionCheckIntervalMs) {
    return "retention_check_interval_ms must be in [10, 3600000]";
  }
  if (config.retention_max_age_s > kMaxRetentionMaxAgeS) {
    return "retention_max_age_s must be at most " + std::to_string(kMaxRetentionMaxAgeS) +
           " (100 years)";
  }
  if (!(config.disk_high_watermark > 0.0 && config.disk_high_watermark <= 1.0)) {
    return "disk_high_watermark must be in (0, 1]";
  }
  if (!(config.disk_low_watermark > 0.0 &&
        config.disk_low_watermark < config.disk_high_watermark)) {
    return "disk_low_watermark must be in (0, disk_high_watermark)";
  }
  if (config.max_concurrent_streams_per_connection < kMinStreamsPerConnection ||
      config.max_concurrent_streams_per_connection > kMaxStreamsPerConnection) {
    return "max_concurrent_streams_per_connection must be in [16, 2147483647] (a node's peers need "
           "one stream each)";
  }
  if (config.dedup_sequences_per_client == 0 || config.dedup_max_clients == 0) {
    return "dedup bounds must be positive";
  }
  return "";
}

}  // namespace

std::string validate(const NodeConfig& config) {
  if (std::string problem = validate_addresses(config); !problem.empty()) return problem;
  if (config.data_dir.empty()) return "a data directory is required";
  if (std::string problem = validate_cluster_id(config); !problem.empty()) return problem;
  if (std::string problem = validate_bounds(config); !problem.empty()) return problem;
  if (std::string problem = store::validate_options(config.store); !problem.empty())
    return "store: " + problem;
  if (std::string problem = validate_tls(config); !problem.empty()) return problem;
  // The rules above imply these; checking what the node will actually run with keeps a future rule
  // of the core or the transport from surfacing only after the data directory was opened.
  if (std::string problem = raft::validate_config(raft_config_for(config)); !problem.empty()) {
    return "Raft configuration: " + problem;
  }
  if (std::string problem = validate_options(peer_transport_options_for(config));
      !problem.empty()) {
    return "peer transport: " + problem;
  }
  return "";
}

raft::Config raft_config_for(const NodeConfig& config) {
  raft::Config raft_config;
  raft_config.id = config.node_id;
  if (!config.bootstrap_voters.empty()) {
    raft_config.initial_conf.voters = config.bootstrap_voters;  // a joined node: sorted, unique
  } else {
    for (const auto& [id, address] : config.members) raft_config.initial_conf.voters.push_back(id);
  }
  // The bootstrap configuration; the replica takes the current one from its CONFSTATE record
  // (replica/conf_state_file.h), so the core never scans the log for it.
  // Capped, not wrapped: a value above the core's bound stays above it for raft::validate_config.
  constexpr std::uint32_t kIntMax = std::numeric_limits<int>::max();
  raft_config.election_ticks = static_cast<int>(std::min(config.election_ticks, kIntMax));
  raft_config.heartbeat_ticks = static_cast<int>(std::min(config.heartbeat_ticks, kIntMax));
  // One Append must fit one proposal and one AppendEntries message (the transport's limit follows),
  // and the leader's bound on uncommitted proposals must hold at least one such proposal.
  raft_config.max_entries_per_message =
      std::max<std::size_t>(raft_config.max_entries_per_message, config.max_entries_per_append);
  raft_config.max_bytes_per_message = max_raft_message_bytes(config);
  raft_config.max_uncommitted_entries =
      std::max(raft_config.max_uncommitted_entries, raft_config.max_entries_per_message);
  raft_config.max_uncommitted_bytes =
      std::max(raft_config.max_uncommitted_bytes, raft_config.max_bytes_per_message);
  // A follower far behind (a new member, one back after a long absence) is sent at most this many
  // entry bytes beyond its acknowledgements: each loop round reads and hands the transport at most
  // that plus one entry for it, not max_inflight_messages full appends (64 x 8 MiB), and the window
  // fits the append lane's queue (docs/design.md, "Catching up by replication").
  raft_config.max_inflight_bytes = config_limits::kMaxInflightAppendBytes;
  // A follower behind the leader's retention is caught up by a snapshot (docs/raft.md,
  // "Snapshots"): the replica installs it and fills in its data, the transport carries it in chunks.
  raft_config.snapshots = true;
  raft_config.unvouched_may_elect = config.unvouched_may_elect;
  return raft_config;
}

replica::ReplicaConfig replica_config_for(const NodeConfig& config) {
  replica::ReplicaConfig out;
  out.node_id = config.node_id;
  out.members = config.members;
  out.data_dir = config.data_dir;
  out.tick_ms = config.tick_ms;
  out.election_ticks = config.election_ticks;
  out.store = config.store;
  out.max_pending_appends = config.max_pending_appends;
  out.append_timeout_ms = config.append_timeout_ms;
  out.dedup_sequences_per_client = config.dedup_sequences_per_client;
  out.dedup_max_clients = config.dedup_max_clients;
  out.dedup_rebuild_entries = config.dedup_rebuild_entries;
  out.serving_lag_entries = config.serving_lag_entries;
  out.retention_max_age_s = config.retention_max_age_s;
  out.retention_max_bytes = config.retention_max_bytes;
  out.retention_check_interval_ms = config.retention_check_interval_ms;
  out.retention_follower_grace_ms = config.retention_follower_grace_ms;
  out.disk_high_watermark = config.disk_high_watermark;
  out.disk_low_watermark = config.disk_low_watermark;
  // The transport carries snapshot data in chunks (snapshot_chunks.h), so the replica's budget is
  // the largest data any node decodes, not one peer message.
  static_assert(replica::kMaxSnapshotDataBytes <= kMaxSnapshotBytes);
  out.max_snapshot_data_bytes = replica::kMaxSnapshotDataBytes;
  out.raft = raft_config_for(config);
  return out;
}

PeerTransportOptions peer_transport_options_for(const NodeConfig& config) {
  PeerTransportOptions options;
  options.cluster_id = config.cluster_id;
  options.self_id = config.node_id;
  for (const auto& [id, address] : config.members) {
    if (id != config.node_id) {
      options.peers.emplace(id, address);
    } else {
      options.advertise_address = address;  // what a node that does not know us yet answers
    }
  }
  // One AppendEntries carries at most the core's message bound (derived from the largest Append),
  // plus protobuf framing per entry.
  const std::uint64_t max_entries = std::max<std::uint64_t>(config.max_entries_per_append, 256);
  options.limits.max_entries_per_message =
      std::max<std::size_t>(options.limits.max_entries_per_message, max_entries);
  options.limits.max_message_bytes = std::max<std::size_t>(
      options.limits.max_message_bytes, max_raft_message_bytes(config) + max_entries * 64);
  // The append lane holds a follower's whole in-flight window (raft_config_for: at most
  // kMaxInflightAppendBytes plus one entry) with room to spare, also with entries larger than the
  // default, so nothing the leader read for a catch-up is dropped for a full queue.
  options.max_queued_bytes = std::max<std::size_t>(
      options.max_queued_bytes, config_limits::kMaxInflightAppendBytes +
                                    config.store.max_entry_size_bytes + (1U << 20));
  // Reassemble no more snapshot data than the replica decodes (replica_config_for).
  options.max_snapshot_receive_bytes = replica::kMaxSnapshotDataBytes;
  // A restart resumes a snapshot transfer from the partial kept here (snapshot_partial_file.h).
  options.snapshot_partial_path =
      (std::filesystem::path(config.data_dir) / std::string(kSnapshotPartialFileName)).string();
  options.snapshot_partial_max_disk_used = config.disk_high_watermark;
  // Stale messages are useless after a few election timeouts. 64-bit arithmetic, capped: the ticks
  // and the tick length are each bounded, their product is not.
  const std::uint64_t two_election_timeouts_ms = 2ULL * config.election_ticks * config.tick_ms;
  options.max_message_age_ms = static_cast<std::uint32_t>(std::clamp<std::uint64_t>(
      two_election_timeouts_ms, 500, std::numeric_limits<std::uint32_t>::max()));
  return options;
}

std::size_t max_raft_message_bytes(const NodeConfig& config) {
  const std::uint64_t entries = std::max<std::uint64_t>(config.max_entries_per_append, 256);
  return static_cast<std::size_t>(std::max<std::uint64_t>(config.max_append_bytes, 1ULL << 20) +
                                  entries * raft::Entry::kEntryOverheadBytes + (64ULL << 10));
}

}  // namespace raftlog::server

#include "server/node_config.h"

#include <algorithm>

#include "raft/types.h"

namespace raftlog::server {

namespace {

// Which TLS flags go together (the files themselves are checked by load_tls_material at start-up).
std::string validate_tls(const NodeConfig& config) {
  const TlsFiles& client = config.client_tls;
  const TlsFiles& peer = config.peer_tls;
  if (client.any() && (client.cert_path.empty() || client.key_path.empty())) {
    return "--tls-cert and --tls-key must be given together (--tls-ca is optional: it makes clients present certificates)";
  }
  if (peer.any() && (peer.cert_path.empty() || peer.key_path.empty() || peer.ca_path.empty())) {
    return "mutual TLS between peers needs all of --peer-tls-cert, --peer-tls-key and --peer-tls-ca";
  }
  if (peer.any() && !client.any()) {
    return "--peer-tls-* needs --tls-cert and --tls-key too: clients and peers share one port, which then "
           "speaks only TLS (the same certificate may be given to both)";
  }
  if (client.any() && !peer.any() && config.members.size() > 1) {
    return "--tls-cert on a multi-node cluster needs --peer-tls-cert, --peer-tls-key and --peer-tls-ca: peers "
           "dial the same TLS port";
  }
  return "";
}

}  // namespace

std::string validate(const NodeConfig& config) {
  if (config.node_id == 0) return "node id must be non-zero";
  if (!config.members.contains(config.node_id)) {
    return "node id " + std::to_string(config.node_id) + " is not among the members";
  }
  if (config.members.size() > 7) return "at most 7 members are supported";
  for (const auto& [id, address] : config.members) {
    if (id == 0) return "member ids must be non-zero";
    if (address.empty() || address.find(':') == std::string::npos) {
      return "member " + std::to_string(id) + " needs an address of the form host:port";
    }
  }
  if (config.data_dir.empty()) return "a data directory is required";
  if (config.cluster_id.empty()) return "cluster id must not be empty";
  if (config.tick_ms == 0 || config.tick_ms > 10000) return "tick_ms must be in [1, 10000]";
  if (config.heartbeat_ticks == 0) return "heartbeat_ticks must be positive";
  if (config.election_ticks <= config.heartbeat_ticks) return "election_ticks must exceed heartbeat_ticks";
  if (config.max_entries_per_append == 0) return "max_entries_per_append must be positive";
  if (config.max_append_bytes < config.store.max_entry_size_bytes) {
    return "max_append_bytes must be at least the maximum entry size";
  }
  if (config.max_read_entries == 0 || config.max_read_bytes == 0) return "read limits must be positive";
  // gRPC message sizes are ints, and the node's message bounds are derived from these two.
  if (config.max_append_bytes > (1ULL << 30) || config.max_read_bytes > (1ULL << 30)) {
    return "max_append_bytes and max_read_bytes must be at most 1 GiB";
  }
  if (config.max_pending_appends == 0 || config.max_input_queue == 0) return "queue bounds must be positive";
  if (config.max_tail_streams == 0 || config.max_tail_streams > 65536) return "max_tail_streams must be in [1, 65536]";
  if (config.max_append_streams == 0 || config.max_append_streams > 65536) {
    return "max_append_streams must be in [1, 65536]";
  }
  if (config.max_appends_per_stream == 0 || config.max_appends_per_stream > 65536) {
    return "max_appends_per_stream must be in [1, 65536]";
  }
  if (config.max_tail_streams_per_connection == 0 || config.max_tail_streams_per_connection > 65536 ||
      config.max_append_streams_per_connection == 0 || config.max_append_streams_per_connection > 65536) {
    return "max_tail_streams_per_connection and max_append_streams_per_connection must be in [1, 65536]";
  }
  if (config.stream_stall_timeout_ms < 100 || config.stream_stall_timeout_ms > 3600000) {
    return "stream_stall_timeout_ms must be in [100, 3600000]";
  }
  if (config.retention_check_interval_ms < 10 || config.retention_check_interval_ms > 3600000) {
    return "retention_check_interval_ms must be in [10, 3600000]";
  }
  if (!(config.disk_high_watermark > 0.0 && config.disk_high_watermark <= 1.0)) {
    return "disk_high_watermark must be in (0, 1]";
  }
  if (!(config.disk_low_watermark > 0.0 && config.disk_low_watermark < config.disk_high_watermark)) {
    return "disk_low_watermark must be in (0, disk_high_watermark)";
  }
  if (config.max_concurrent_streams_per_connection < 16) {
    return "max_concurrent_streams_per_connection must be at least 16 (a node's peers need one stream each)";
  }
  if (config.dedup_sequences_per_client == 0 || config.dedup_max_clients == 0) {
    return "dedup bounds must be positive";
  }
  return validate_tls(config);
}

std::size_t max_raft_message_bytes(const NodeConfig& config) {
  const std::uint64_t entries = std::max<std::uint64_t>(config.max_entries_per_append, 256);
  return static_cast<std::size_t>(std::max<std::uint64_t>(config.max_append_bytes, 1ULL << 20) +
                                  entries * raft::Entry::kEntryOverheadBytes + (64ULL << 10));
}

}  // namespace raftlog::server

#include "server/node_config.h"

#include <algorithm>

#include "raft/types.h"

namespace raftlog::server {

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
  if (config.max_pending_appends == 0 || config.max_input_queue == 0) return "queue bounds must be positive";
  if (config.dedup_sequences_per_client == 0 || config.dedup_max_clients == 0) {
    return "dedup bounds must be positive";
  }
  return "";
}

std::size_t max_raft_message_bytes(const NodeConfig& config) {
  const std::uint64_t entries = std::max<std::uint64_t>(config.max_entries_per_append, 256);
  return static_cast<std::size_t>(std::max<std::uint64_t>(config.max_append_bytes, 1ULL << 20) +
                                  entries * raft::Entry::kEntryOverheadBytes + (64ULL << 10));
}

}  // namespace raftlog::server

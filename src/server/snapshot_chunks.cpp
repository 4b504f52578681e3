#include "server/snapshot_chunks.h"

#include <utility>

#include "util/crc32c.h"

namespace raftlog::server {

std::string SnapshotReassembler::mismatch(const Partial& partial, const SnapshotChunk& chunk) {
  const raft::Snapshot& have = *partial.message.snapshot;
  const raft::Snapshot& got = *chunk.message.snapshot;
  if (chunk.message.term != partial.message.term) {
    return "term " + std::to_string(chunk.message.term) + ", the partial snapshot's is " +
           std::to_string(partial.message.term);
  }
  if (got.index != have.index || got.term != have.term) {
    return "snapshot " + std::to_string(got.index) + "/t" + std::to_string(got.term) +
           ", the partial one is " + std::to_string(have.index) + "/t" + std::to_string(have.term);
  }
  if (chunk.place.total_bytes != partial.place.total_bytes ||
      chunk.place.data_crc32c != partial.place.data_crc32c) {
    return "a different total size or checksum than the partial snapshot's";
  }
  if (!(got.conf == have.conf)) return "a different configuration than the partial snapshot's";
  if (chunk.place.offset != partial.data.size()) {
    return "offset " + std::to_string(chunk.place.offset) + ", expected " +
           std::to_string(partial.data.size());
  }
  return {};
}

std::optional<raft::Message> SnapshotReassembler::add(SnapshotChunk chunk, Clock::time_point now,
                                                      std::string* problem) {
  problem->clear();
  ++counters_.chunks_received;
  expire(now);
  const raft::NodeId from = chunk.message.from;
  const raft::Term term = chunk.message.term;

  // More than this node's replica decodes: refused before a byte of it is kept.
  if (chunk.place.total_bytes > max_total_bytes_) {
    ++counters_.chunks_refused;
    partials_.erase(from);
    *problem = "a snapshot chunk from node " + std::to_string(from) + " announces " +
               std::to_string(chunk.place.total_bytes) + " bytes, more than the " +
               std::to_string(max_total_bytes_) + " this node accepts";
    return std::nullopt;
  }

  // Another peer's partial of a higher term: this chunk is a deposed leader's.
  for (const auto& [peer, partial] : partials_) {
    if (peer != from && partial.message.term > term) {
      ++counters_.chunks_refused;
      partials_.erase(from);
      *problem = "a snapshot chunk from node " + std::to_string(from) + " at term " +
                 std::to_string(term) + " is stale: node " + std::to_string(peer) +
                 " sends one at term " + std::to_string(partial.message.term);
      return std::nullopt;
    }
  }
  // A higher term's chunk: the partials of lower terms are a deposed leader's.
  for (auto it = partials_.begin(); it != partials_.end();) {
    if (it->first != from && it->second.message.term < term) {
      ++counters_.partials_replaced;
      it = partials_.erase(it);
    } else {
      ++it;
    }
  }

  const auto found = partials_.find(from);
  if (chunk.place.offset == 0) {
    if (found != partials_.end()) {
      ++counters_.partials_replaced;
      partials_.erase(found);
    }
    Partial& partial = partials_[from];
    partial.message = std::move(chunk.message);
    partial.message.snapshot->data = raft::Payload();
    partial.place = chunk.place;
    partial.data = std::move(chunk.data);
    partial.last_chunk_at = now;
  } else {
    std::string wrong = found == partials_.end() ? "no snapshot in progress from this node"
                                                 : mismatch(found->second, chunk);
    if (!wrong.empty()) {
      ++counters_.chunks_refused;
      if (found != partials_.end()) partials_.erase(found);
      *problem = "snapshot chunk from node " + std::to_string(from) + " at offset " +
                 std::to_string(chunk.place.offset) + " refused: " + wrong;
      return std::nullopt;
    }
    found->second.data.append(chunk.data);
    found->second.last_chunk_at = now;
  }
  const Partial& partial = partials_.at(from);
  if (partial.data.size() < partial.place.total_bytes) return std::nullopt;
  return complete(from, now, problem);
}

std::optional<raft::Message> SnapshotReassembler::complete(raft::NodeId from, Clock::time_point now,
                                                           std::string* problem) {
  auto node = partials_.extract(from);
  Partial& partial = node.mapped();
  const std::uint32_t crc = util::crc32c::value(partial.data);
  if (crc != partial.place.data_crc32c) {
    ++counters_.checksum_mismatches;
    *problem = "snapshot " + std::to_string(partial.message.snapshot->index) + " from node " +
               std::to_string(from) + ": the reassembled " + std::to_string(partial.data.size()) +
               " bytes do not match their CRC-32C; dropped";
    return std::nullopt;
  }
  raft::Message message = std::move(partial.message);
  message.snapshot->data = raft::Payload(std::move(partial.data));
  record_delivered(message, now);
  return message;
}

void SnapshotReassembler::record_delivered(const raft::Message& snapshot, Clock::time_point now) {
  ++counters_.snapshots_delivered;
  last_delivered_ = SnapshotDelivery{snapshot.from, snapshot.term, snapshot.snapshot->index,
                                     snapshot.snapshot->data.size(), now};
}

void SnapshotReassembler::expire(Clock::time_point now) {
  for (auto it = partials_.begin(); it != partials_.end();) {
    if (now - it->second.last_chunk_at > idle_timeout_) {
      ++counters_.partials_expired;
      it = partials_.erase(it);
    } else {
      ++it;
    }
  }
}

SnapshotReceiveStatus SnapshotReassembler::status() const {
  SnapshotReceiveStatus status;
  for (const auto& [from, partial] : partials_) {
    status.partials.push_back(
        SnapshotReceiveProgress{from, partial.message.term, partial.message.snapshot->index,
                                partial.data.size(), partial.place.total_bytes});
  }
  status.last_delivered = last_delivered_;
  status.counters = counters_;
  return status;
}

}  // namespace raftlog::server

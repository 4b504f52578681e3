// NodeEvents: what a Node reports while it works, for metrics (server/metrics.h implements it with
// Prometheus). Kept as a plain interface so that node.cpp needs no metrics library and tests can
// count events directly.
//
// Calls come from the Raft loop thread, except store_flushed() (the store's flusher thread, with a
// store lock held): implementations must be thread-safe, quick and must not call into the Node.
#pragma once

#include <chrono>
#include <cstdint>

#include "store/commit_log.h"

namespace raftlog::replica {

class NodeEvents {
 public:
  virtual ~NodeEvents() = default;
  // The leader accepted an Append into Raft (one call, any number of entries).
  virtual void append_proposed() = 0;
  // The leader acknowledged an Append as committed, `latency` after it was proposed.
  virtual void append_committed(std::uint64_t entries, std::uint64_t payload_bytes,
                                std::chrono::steady_clock::duration latency) = 0;
  // The leader this node knows changed (including to "none").
  virtual void leader_changed() = 0;
  // An election this node ran as a candidate ended: won (it became leader) or lost (it became a
  // follower, or timed out into a new election).
  virtual void election_finished(bool won) = 0;
  // Retention or a trim deleted `count` segments.
  virtual void segments_deleted(std::uint64_t count) = 0;
  // The store finished a flush cycle.
  virtual void store_flushed(const store::CommitLog::FlushCycle& cycle) = 0;
  // One round of the node's Raft loop (its inputs, the replica's process(), retention) took
  // `duration`: the time ticks and heartbeats waited behind it. Default: ignored.
  virtual void loop_round_finished(std::chrono::steady_clock::duration /*duration*/) {}
};

}  // namespace raftlog::replica

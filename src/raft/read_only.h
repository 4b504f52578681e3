// ReadIndex bookkeeping on a leader (etcd's "safe" read-only mode).
//
// A read is answered with the commit index at the time it started, once a majority has acknowledged a
// heartbeat sent after that moment (so the leader was still the leader then). Heartbeats carry a round
// `context`, increasing per leader: an acknowledgement of context c also vouches for every earlier round.
// Reads arriving before the leader committed an entry of its own term are deferred: until then its
// commit index may lag behind entries committed by earlier leaders.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <vector>

#include "raft/types.h"

namespace raftlog::raft {

class ReadOnly {
 public:
  explicit ReadOnly(std::size_t max_pending_reads);

  std::size_t pending() const { return pending_; }
  bool full() const { return pending_ >= max_pending_reads_; }

  // Holds a read until the leader commits an entry of its term. Precondition: !full().
  void defer(std::uint64_t request_id);
  bool has_deferred() const { return !deferred_.empty(); }
  // Starts one round for every deferred read; returns its context.
  std::uint64_t start_deferred_round(Index commit_index);
  // Starts a round for one read at `commit_index`; returns the context heartbeats must carry.
  // Precondition: !full().
  std::uint64_t start_round(std::uint64_t request_id, Index commit_index);
  // Context of the newest unreleased round, 0 if none (regular heartbeats carry it, so a round whose
  // own heartbeats were lost still completes).
  std::uint64_t latest_context() const;

  // `peer` answered a heartbeat carrying `context`.
  void record_ack(NodeId peer, std::uint64_t context);
  // Releases every round acknowledged by a majority of `voters` (the leader `self` always counts).
  std::vector<ReadState> release(const std::vector<NodeId>& voters, NodeId self);
  // Releases every pending round at once (single-voter cluster: the leader alone is the majority).
  std::vector<ReadState> release_all();
  // Drops every pending read (leadership lost); returns their request ids.
  std::vector<std::uint64_t> abort_all();

 private:
  struct Round {
    std::uint64_t context = 0;
    Index index = 0;
    std::vector<std::uint64_t> request_ids;
  };

  std::size_t max_pending_reads_;
  std::size_t pending_ = 0;  // deferred + in rounds; <= max_pending_reads_
  std::vector<std::uint64_t> deferred_;
  std::deque<Round> rounds_;  // increasing context
  std::map<NodeId, std::uint64_t> acked_context_;
  std::uint64_t next_context_ = 1;
};

}  // namespace raftlog::raft

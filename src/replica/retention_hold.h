// The leader's retention hold and its follower-side copy (docs/operations.md, "Retention").
//
// A leader trims no further than `match + 1` of every follower it heard from within
// --retention-follower-grace-ms (Replica::trim_limit). It sends that follower part of its limit
// on its appends and heartbeats (raft::Message::retention_hold), and its followers trim no further
// either: a follower that becomes leader then still holds what a lagging third node needs (no
// snapshot for it), and the nodes' trim points (their first index - 1) stay alike.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "raft/raft.h"

namespace raftlog::replica {

// The follower part of a leader's trim limit: the lowest `match + 1` of the peers in `progress`
// other than `self` and `recipient` (kNoNode: every peer) silent for less than `grace_ms`
// (ticks_since_contact * tick_ms); 0 when there is none (no hold). A follower's hold leaves out its
// own progress: what it holds itself is not something it must keep for another node.
std::uint64_t leader_retention_hold(const std::vector<raft::PeerProgress>& progress,
                                    raft::NodeId self, raft::NodeId recipient,
                                    std::uint32_t tick_ms, std::uint32_t grace_ms);

// A follower's copy of its leader's hold: the newest one heard, with who sent it in which term and
// when. From the network, so it is only ever used to restrict (min with the follower's own limit),
// and only while that leader was heard within the grace period (a dead leader's hold does not keep
// the log forever). It is taken only from the node the core took for leader of its current term;
// across an election (a newer term, no leader known yet) the last leader's hold stays, still within
// the grace period, until a leader is known again: the new leader's own hold (or none) replaces it.
class FollowerRetentionHold {
 public:
  using Clock = std::chrono::steady_clock;

  // A kAppend or kHeartbeat from `leader` of `term` (the follower's current leader and term, as its
  // core saw them after stepping it), carrying `hold` (0: none), that arrived at `now`.
  void note(raft::NodeId leader, raft::Term term, std::uint64_t hold, Clock::time_point now);
  // The index the follower must keep from, if a valid hold applies at `now` for a follower whose
  // core is at `term` following `leader` (kNoNode: none known, during an election, even of a newer
  // term: the last leader's hold still applies).
  std::optional<std::uint64_t> limit(raft::NodeId leader, raft::Term term, Clock::time_point now,
                                     std::chrono::milliseconds grace) const;

 private:
  raft::NodeId leader_ = raft::kNoNode;
  raft::Term term_ = 0;
  std::uint64_t hold_ = 0;
  Clock::time_point heard_at_{};
};

}  // namespace raftlog::replica

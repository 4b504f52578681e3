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
// A peer this leader has not heard from at all in its term (no answer of any kind: a new leader's
// view of a peer that is down, perhaps) counts for `unheard_hold`, the
// hold this node inherited from the previous leader (FollowerRetentionHold::inherited: what that
// leader kept for the peers it had heard from within the grace period), and for nothing when that
// is 0. A new leader counts every peer as just heard (ticks_since_contact starts at 0), so taking
// such a peer's need as index 1 held the whole log for a grace period after every leader change
// while a node stayed dead (review of the retention hold). A peer heard (its heartbeat answers
// arrive) but whose need is not known yet (no append answered) still counts as match + 1: alive,
// it is not left to a snapshot because its first append answer is late.
std::uint64_t leader_retention_hold(const std::vector<raft::PeerProgress>& progress,
                                    raft::NodeId self, raft::NodeId recipient,
                                    std::uint32_t tick_ms, std::uint32_t grace_ms,
                                    std::uint64_t unheard_hold);

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
  // The last hold noted, whoever sent it, while within the grace period of its leader's last
  // message; 0 otherwise (or when it held nothing). What this node, become leader, keeps for the
  // peers that have not answered it yet (leader_retention_hold's `unheard_hold`).
  std::uint64_t inherited(Clock::time_point now, std::chrono::milliseconds grace) const;

 private:
  raft::NodeId leader_ = raft::kNoNode;
  raft::Term term_ = 0;
  std::uint64_t hold_ = 0;
  Clock::time_point heard_at_{};
};

}  // namespace raftlog::replica

// CatchUpRule: whether a follower (voter or learner) is too far behind its leader to be ready for
// reads, the one place this is decided (docs/operations.md, "Health, readiness and watching a
// cluster"). Health is NOT_SERVING while catching_up_to() is non-zero.
//
// The rule, with hysteresis so that a healthy loaded follower never flaps:
//   - a follower that has no leader (it just started, or its election timer fired: cut off, an
//     election) has not shown that it holds what its next leader committed; it is "catching up"
//     from then on;
//   - a caught-up follower becomes "catching up" only when its log falls more than
//     `max_lag_entries` behind the commit index its leader last named (a healthy follower is a few
//     batches behind at most: what the leader pipelines to it);
//   - a catching-up follower is caught up again once its log reaches the commit index its leader
//     last named (gap 0), which a healthy follower's log does with every append that carries the
//     leader's newest entries (each append names a commit no higher than its own last entry).
// A leader is caught up by definition (its log holds its commit). Before 2026-12-07 only learners
// had a rule (any gap at all: NOT_SERVING), and a voter restarted 15,000 entries behind reported
// SERVING as soon as it knew the leader (drills7 L1).
//
// Pure and single-threaded: the replica observes the core after each message, tick and status.
#pragma once

#include <cstdint>

namespace raftlog::replica {

// --serving-lag-entries (docs/configuration.md): 16384 is a quarter of the entries raftlogd's
// leader may have in flight to one follower (64 appends x 1024 entries, --max-entries-per-append's
// default; the 16 MiB byte window binds first for entries above about 200 bytes). A healthy
// follower on a LAN stays far below it (the loaded real-process test sees gap 0); one further
// behind is slower than the cluster. A remote follower with small entries can have more in flight
// (rate x round trip): raise it there. It only governs a follower that was caught up: one that
// restarts or reconnects is NOT_SERVING until it reaches the commit index, whatever the value.
inline constexpr std::uint64_t kDefaultServingLagEntries = 16384;
// 1: the strictest (any gap after a caught-up moment), which flaps under load; the upper bound
// (2^32) is far beyond any useful value and keeps the sum with an index from overflowing.
inline constexpr std::uint64_t kMinServingLagEntries = 1;
inline constexpr std::uint64_t kMaxServingLagEntries = 1ULL << 32;

class CatchUpRule {
 public:
  enum class Seat {
    kLeader,            // this node leads: caught up
    kFollowerOfLeader,  // a follower that knows its leader of the current term
    kNoLeader,          // any other role or state: no leader's commit to compare with
  };

  explicit CatchUpRule(std::uint64_t max_lag_entries) : max_lag_entries_(max_lag_entries) {}

  // `behind_leader_commit`: the commit index the leader last named when this node's log does not
  // reach it (raft::Raft::behind_leader_commit), 0 when it does; `last_index`: this node's log.
  // What changed, for a log line: a follower with a leader started catching up (it fell behind, or
  // it learned a leader while behind), or one that was catching up reached the commit index.
  enum class Change { kNone, kBehind, kCaughtUp };
  Change observe(Seat seat, std::uint64_t behind_leader_commit, std::uint64_t last_index);

  // The commit index its leader last named, while this follower is catching up to it (health
  // NOT_SERVING); 0 when it is caught up, leads, or knows no leader (health says "no leader known").
  std::uint64_t catching_up_to() const { return catching_up_to_; }
  // Entries this follower's log lacks of the commit index its leader last named (whether or not it
  // is catching up: a caught-up follower may be a few batches behind); 0 when none or no leader.
  std::uint64_t gap() const { return gap_; }
  std::uint64_t max_lag_entries() const { return max_lag_entries_; }

 private:
  const std::uint64_t max_lag_entries_;
  bool caught_up_ = false;  // a node starts without having shown it holds its leader's commit
  std::uint64_t catching_up_to_ = 0;
  std::uint64_t gap_ = 0;
};

}  // namespace raftlog::replica

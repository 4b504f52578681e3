// The leader's retention hold and its follower-side copy (retention_hold.h).
#include "replica/retention_hold.h"

#include <algorithm>

namespace raftlog::replica {

std::uint64_t leader_retention_hold(const std::vector<raft::PeerProgress>& progress,
                                    raft::NodeId self, raft::NodeId recipient,
                                    std::uint32_t tick_ms, std::uint32_t grace_ms,
                                    std::uint64_t unheard_hold) {
  std::uint64_t hold = 0;
  for (const raft::PeerProgress& peer : progress) {
    if (peer.id == self || peer.id == recipient) continue;
    if (peer.ticks_since_contact * tick_ms >= grace_ms) continue;  // gone too long to wait for
    // Its need is known once it answered an append (or acknowledged one). One that answers this
    // leader's heartbeats but no append yet is alive and will tell soon: match + 1 (1: the whole
    // log) meanwhile, as before. Only one not heard at all this term (down, perhaps) takes the
    // inherited hold, and is not held for when the last leader kept nothing.
    const bool need_known = peer.answered_append || peer.match_index != 0;
    const bool inherits = !need_known && !peer.heard_this_term;
    if (inherits && unheard_hold == 0) continue;  // the last leader kept nothing for it either
    const std::uint64_t needs = inherits ? unheard_hold : peer.match_index + 1;
    hold = hold == 0 ? needs : std::min(hold, needs);
  }
  return hold;
}

void FollowerRetentionHold::note(raft::NodeId leader, raft::Term term, std::uint64_t hold,
                                 Clock::time_point now) {
  if (leader == raft::kNoNode) return;
  // A message from an older term than the one held is stale (the core refused it anyway).
  if (term < term_) return;
  leader_ = leader;
  term_ = term;
  hold_ = hold;
  heard_at_ = now;
}

std::optional<std::uint64_t> FollowerRetentionHold::limit(raft::NodeId leader, raft::Term term,
                                                          Clock::time_point now,
                                                          std::chrono::milliseconds grace) const {
  // Another leader known (of this term or a newer one): its own hold applies, from its first
  // append or heartbeat, or none. No leader known (an election is running, even in a newer term):
  // the last leader's hold still applies within the grace period, so a trim in the election window
  // does not delete what that leader kept for a lagging node (a hold can only restrict).
  if (hold_ == 0 || term < term_ ||
      (leader != raft::kNoNode && (leader != leader_ || term != term_))) {
    return std::nullopt;
  }
  if (now - heard_at_ >= grace) return std::nullopt;  // the leader went silent: it holds no more
  return hold_;
}

std::uint64_t FollowerRetentionHold::inherited(Clock::time_point now,
                                               std::chrono::milliseconds grace) const {
  if (hold_ == 0 || now - heard_at_ >= grace) return 0;
  return hold_;
}

}  // namespace raftlog::replica

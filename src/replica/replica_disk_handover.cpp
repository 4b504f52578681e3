// Disk-aware leadership (docs/raft.md, "Disk-aware leadership"). A leader whose disk passed the high
// watermark refuses every append (DiskWatermark), so while it leads the cluster takes no writes even
// when its followers have room. It hands leadership to the follower with room that holds the most of
// the log (among those whose match it knows from an acknowledged append), which then takes the
// writes; the old leader keeps following (and refusing nothing: a follower cannot refuse what its
// leader sends, docs/operations.md). Bounded: at most one handover
// per kDiskHandoverInterval, and none when no follower reports room, so disks that all fill leave
// leadership where it is instead of bouncing it around. A follower's room is what its last answer
// said: one whose disk filled since may still be chosen, and hands leadership on (or keeps it) the
// same way.
#include <spdlog/spdlog.h>

#include "replica/replica.h"

namespace raftlog::replica {

std::uint64_t Replica::choose_disk_handover_target() const {
  std::uint64_t target = raft::kNoNode;
  raft::Index best_match = 0;
  const std::uint64_t first_index = log_->first_index();
  for (const raft::PeerProgress& peer : raft_->progress()) {
    if (peer.id == config_.node_id || peer.disk_over_watermark) continue;
    // Only a voter can be handed leadership; one catching up after a storage fault cannot campaign,
    // and one that needs entries this leader trimmed can never catch up to take over.
    if (!peer.voter || peer.catching_up || peer.needs_trimmed_entries(first_index)) continue;
    // Room is only known from an answer to this leader: a new leader's view starts empty.
    if (!peer.heard_this_term) continue;
    // Its match is only known once it acknowledged an append of this leader (replicate state): one
    // heard from through heartbeats alone may be far behind, and a transfer to it (the core first
    // catches it up) would hold appends back for an election timeout and then fail, spending the
    // one handover per kDiskHandoverInterval (review of failover, L-5).
    if (peer.probing) continue;
    // A follower not heard from within an election timeout may be down: its room is old news.
    if (peer.ticks_since_contact >= config_.election_ticks) continue;
    // The most caught-up: one at our last index takes TimeoutNow at once.
    if (target == raft::kNoNode || peer.match_index > best_match) {
      target = peer.id;
      best_match = peer.match_index;
    }
  }
  return target;
}

std::uint64_t Replica::disk_handover_wait_ms(Clock::time_point now) const {
  if (raft_->role() != raft::Role::kLeader || !disk_.exceeded() || now >= next_disk_handover_) {
    return 0;
  }
  if (raft_->transfer_target() != raft::kNoNode || pending_transfer_) return 0;  // one under way
  if (choose_disk_handover_target() == raft::kNoNode) return 0;  // keeping leadership: no room
  // Rounded up: a wait of less than a millisecond still reads as waiting.
  return static_cast<std::uint64_t>(
      std::chrono::ceil<std::chrono::milliseconds>(next_disk_handover_ - now).count());
}

void Replica::hand_over_leadership_for_disk(Clock::time_point now) {
  if (failed_ || raft_->role() != raft::Role::kLeader || !disk_.exceeded()) return;
  if (raft_->transfer_target() != raft::kNoNode || pending_transfer_) return;
  if (now < next_disk_handover_) {
    // Appends are refused meanwhile although a follower may have room: say why (drills4 L1).
    if (choose_disk_handover_target() != raft::kNoNode) {
      if (const auto held_back = no_disk_handover_log_.admit(now)) {
        spdlog::warn(
            "node {}: disk past its high watermark and a follower reports room: waiting {} ms "
            "before handing leadership on (at most one handover per {} s), appends are refused "
            "meanwhile ({} more such checks since the last line)",
            config_.node_id,
            std::chrono::duration_cast<std::chrono::milliseconds>(next_disk_handover_ - now).count(),
            std::chrono::duration_cast<std::chrono::seconds>(kDiskHandoverInterval).count(),
            *held_back);
      }
    }
    return;
  }
  const std::uint64_t target = choose_disk_handover_target();
  if (target == raft::kNoNode) {
    if (const auto held_back = no_disk_handover_log_.admit(now)) {
      spdlog::warn(
          "node {}: disk past its high watermark and no follower with room acknowledges this "
          "leader's appends (none reports room, or one that does answers heartbeats only): "
          "keeping leadership, appends are refused ({} more such checks since the last line)",
          config_.node_id, *held_back);
    }
    return;
  }
  raft::TransferStatus status = raft::TransferStatus::kNotLeader;
  if (!guard_core([&] { status = raft_->transfer_leadership(target); })) return;
  if (status != raft::TransferStatus::kOk) {
    // The candidates above are ones the core accepts; anything else is worth a line, not a retry
    // storm (the check runs every tick).
    if (const auto held_back = no_disk_handover_log_.admit(now)) {
      spdlog::warn(
          "node {}: disk past its high watermark: handing leadership to node {} failed ({}; "
          "{} more such checks since the last line)",
          config_.node_id, target, raft::to_string(status), *held_back);
    }
    return;
  }
  // Only a started handover counts against the interval that bounds bouncing.
  next_disk_handover_ = now + kDiskHandoverInterval;
  spdlog::warn(
      "node {}: disk past its high watermark: handing leadership to node {}, whose disk has room",
      config_.node_id, target);
}

}  // namespace raftlog::replica

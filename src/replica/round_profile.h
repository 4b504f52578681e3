// RoundProfile: where one round of the node's Raft loop spent its time, by part (stepping messages,
// the core's Ready, the log append, sending, the trim's steps, ...), so that a round long enough to
// cost leadership (a leader that holds its loop for half a second misses heartbeats and check
// quorum) says what it did. The caller's loop starts a round (begin), the code marks what it runs
// with a Scope, and end() gives the total; a slow round's parts go into one log line
// (Replica::end_round, docs/operations.md "A slow loop round").
//
// Exclusive time: a Scope's time is charged to its part minus the time of the scopes nested in it,
// and the time outside every scope to kOther, so the parts add up to the round. Cheap: a fixed table
// of durations, two clock reads per scope, no allocation; outside a round (begin() not called: the
// simulator, most tests) a Scope reads no clock at all. One thread (the loop's).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace raftlog::replica {

enum class RoundPart : std::uint8_t {
  kOther,             // between the marked parts: the loop's own bookkeeping
  kTicks,             // the core's ticks and the expiry of pending requests
  kStepMessages,      // peer messages stepped into the core (a snapshot's receipt included)
  kClientRequests,    // appends, reads, transfers and membership changes proposed
  kOffLoopResults,    // results of off-loop work handed back (a snapshot encoding, a preparation)
  kSnapshotGather,    // a leader's snapshot gathered (one slice) and handed to its encoding
  kCoreReady,         // the core's Ready built (raft::Raft::ready)
  kHardState,         // HARDSTATE written and synced
  kSnapshotInstall,   // a follower's install (its on-loop part)
  kLogTruncate,       // a conflicting tail cut (truncate_suffix)
  kConfState,         // CONFSTATE tracked and rewritten (persist_conf, settle_conf_records)
  kSend,              // messages handed to the transport (a snapshot's send or hold included)
  kLogAppend,         // entries appended to the store and recorded in the dedup and topic tables
  kDurability,        // the flushed index read, acknowledgements released
  kApplyCommit,       // commit delivered: waiters answered, reads released
  kTopicState,        // the topic table copied for TOPICSTATE (periodic, a trim's, an install's),
                      // which the off-loop worker writes and syncs (on the loop without one)
  kSnapshotPrepare,   // a received snapshot handed off or dropped
  kRetentionCheck,    // retention's segment listing and file times
  kTrimFlush,         // a trim's log flush and its truncation's checkpoint, asked of the flusher
  kTrimScan,          // a trim's topic-scan slice (reading the entries it deletes)
  kTrimSnapshotNext,  // a trim's SNAPSHOT.next gathered (the dedup and topic tables), encoded,
                      // written and synced by the off-loop worker (on the loop without one)
  kTrimUnlink,        // a trim's prefix truncation: the segments' unlinks and the directory sync
  kTrimSnapshot,      // a trim's SNAPSHOT.next renamed over SNAPSHOT, directory synced
  kStatus,            // the node's status published and its peers updated
  kCount,
};

// The name a log line gives each part ("trim.unlink").
const char* round_part_name(RoundPart part);

class RoundProfile {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::size_t kParts = static_cast<std::size_t>(RoundPart::kCount);

  // `clock` must outlive the profile (the replica's ReplicaDeps::clock).
  explicit RoundProfile(const std::function<Clock::time_point()>* clock) : clock_(clock) {}

  // Starts a round: every part at zero, the time from now on charged to kOther.
  void begin();
  // Ends the round: its total since begin(). The parts stay readable until the next begin().
  Clock::duration end();
  bool in_round() const { return in_round_; }
  Clock::duration spent(RoundPart part) const { return spent_[index(part)]; }
  std::uint32_t entered(RoundPart part) const { return entered_[index(part)]; }
  Clock::duration total() const { return total_; }
  // "trim.unlink 412 ms (1), step 31 ms (240), ..." for the parts of at least `min_part` (at
  // least one part is named), longest first; only for a slow round's log line (it allocates).
  std::string describe(Clock::duration min_part) const;

  // Charges the time since the last switch to the current part and makes `part` current; returns
  // the part that was current. Use Scope.
  RoundPart enter(RoundPart part);
  void leave(RoundPart previous);

  class Scope {
   public:
    Scope(RoundProfile& profile, RoundPart part)
        : profile_(profile.in_round_ ? &profile : nullptr),
          previous_(profile_ != nullptr ? profile_->enter(part) : RoundPart::kOther) {}
    ~Scope() {
      if (profile_ != nullptr) profile_->leave(previous_);
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    RoundProfile* profile_;
    RoundPart previous_;
  };

 private:
  static std::size_t index(RoundPart part) { return static_cast<std::size_t>(part); }
  void charge(Clock::time_point now);

  const std::function<Clock::time_point()>* clock_;
  bool in_round_ = false;
  RoundPart current_ = RoundPart::kOther;
  Clock::time_point started_{};
  Clock::time_point switched_{};
  Clock::duration total_{};
  std::array<Clock::duration, kParts> spent_{};
  std::array<std::uint32_t, kParts> entered_{};
};

}  // namespace raftlog::replica

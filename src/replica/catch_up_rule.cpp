#include "replica/catch_up_rule.h"

namespace raftlog::replica {

CatchUpRule::Change CatchUpRule::observe(Seat seat, std::uint64_t behind_leader_commit, std::uint64_t last_index) {
  const bool was_counted = catching_up_to_ != 0;
  switch (seat) {
    case Seat::kLeader:
      caught_up_ = true;
      gap_ = 0;
      break;
    case Seat::kNoLeader:
      // Whatever it held before, its next leader may have committed more meanwhile.
      caught_up_ = false;
      gap_ = 0;
      break;
    case Seat::kFollowerOfLeader:
      gap_ = behind_leader_commit > last_index ? behind_leader_commit - last_index : 0;
      if (caught_up_ && gap_ > max_lag_entries_) caught_up_ = false;
      if (!caught_up_ && gap_ == 0) caught_up_ = true;
      break;
  }
  catching_up_to_ = seat == Seat::kFollowerOfLeader && !caught_up_ ? behind_leader_commit : 0;
  // Not every election's passage through "no leader" (health reports that on its own): only a
  // catch-up a follower of a leader had to do.
  if (!was_counted && catching_up_to_ != 0) return Change::kBehind;
  if (was_counted && seat == Seat::kFollowerOfLeader && caught_up_) return Change::kCaughtUp;
  return Change::kNone;
}

}  // namespace raftlog::replica

// Production rule (see durability_rules.h for the seam): a follower keeps what its leader holds.
#include <algorithm>

#include "replica/durability_rules.h"

namespace raftlog::replica::rules {

std::uint64_t follower_trim_limit(std::uint64_t own_limit, std::uint64_t leader_hold) {
  return leader_hold == 0 ? own_limit : std::min(own_limit, leader_hold);
}

}  // namespace raftlog::replica::rules

#include "raft/quorum.h"

#include <algorithm>
#include <functional>

#include "raft/assert.h"

namespace raftlog::raft {

std::size_t quorum_size(std::size_t voter_count) {
  RAFT_ASSERT(voter_count > 0, "a voter set is never empty");
  return voter_count / 2 + 1;
}

std::uint64_t quorum_value(std::vector<std::uint64_t> values) {
  const std::size_t quorum = quorum_size(values.size());
  std::sort(values.begin(), values.end(), std::greater<>());
  return values[quorum - 1];
}

VoteOutcome tally_votes(std::size_t voter_count, std::size_t granted, std::size_t rejected) {
  RAFT_ASSERT(granted + rejected <= voter_count, "more votes than voters");
  const std::size_t quorum = quorum_size(voter_count);
  if (granted >= quorum) return VoteOutcome::kWon;
  if (voter_count - rejected < quorum) return VoteOutcome::kLost;  // not enough voters left to win
  return VoteOutcome::kPending;
}

}  // namespace raftlog::raft

// Majority arithmetic, shared by commit (match indexes), ReadIndex (acknowledged rounds), elections
// (votes) and check-quorum (recently active peers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace raftlog::raft {

// Smallest number of voters that forms a majority of `voter_count` (> 0).
std::size_t quorum_size(std::size_t voter_count);

// The largest value v such that at least a majority of `values` (one per voter) are >= v.
// E.g. match indexes {5, 3, 9} give 5: two of three voters hold index 5.
std::uint64_t quorum_value(std::vector<std::uint64_t> values);

enum class VoteOutcome : std::uint8_t { kPending, kWon, kLost };

// Outcome of an election with `voter_count` voters of whom `granted` granted and `rejected` rejected.
VoteOutcome tally_votes(std::size_t voter_count, std::size_t granted, std::size_t rejected);

}  // namespace raftlog::raft

#include "raft/read_only.h"

#include <algorithm>
#include <limits>

#include "raft/assert.h"
#include "raft/quorum.h"

namespace raftlog::raft {

ReadOnly::ReadOnly(std::size_t max_pending_reads) : max_pending_reads_(max_pending_reads) {
  RAFT_ASSERT(max_pending_reads_ > 0, "max_pending_reads must be positive");
}

void ReadOnly::defer(std::uint64_t request_id) {
  RAFT_ASSERT(!full(), "pending reads exceed max_pending_reads");
  deferred_.push_back(request_id);
  ++pending_;
}

std::uint64_t ReadOnly::start_deferred_round(Index commit_index) {
  RAFT_ASSERT(!deferred_.empty(), "no deferred reads to start");
  Round round;
  round.context = next_context_++;
  round.index = commit_index;
  round.request_ids = std::move(deferred_);
  deferred_.clear();
  rounds_.push_back(std::move(round));
  return rounds_.back().context;
}

std::uint64_t ReadOnly::start_round(std::uint64_t request_id, Index commit_index) {
  RAFT_ASSERT(!full(), "pending reads exceed max_pending_reads");
  Round round;
  round.context = next_context_++;
  round.index = commit_index;
  round.request_ids.push_back(request_id);
  rounds_.push_back(std::move(round));
  ++pending_;
  return rounds_.back().context;
}

std::uint64_t ReadOnly::latest_context() const {
  return rounds_.empty() ? 0 : rounds_.back().context;
}

void ReadOnly::record_ack(NodeId peer, std::uint64_t context) {
  // A context we never issued (forged or corrupted) must not confirm a round that has not happened.
  if (context == 0 || context >= next_context_) return;
  std::uint64_t& acked = acked_context_[peer];
  acked = std::max(acked, context);
}

std::vector<ReadState> ReadOnly::release(const std::vector<NodeId>& voters, NodeId self) {
  std::vector<ReadState> released;
  if (rounds_.empty()) return released;
  std::vector<std::uint64_t> acked;
  acked.reserve(voters.size());
  for (NodeId voter : voters) {
    if (voter == self) {
      acked.push_back(std::numeric_limits<std::uint64_t>::max());
    } else {
      const auto it = acked_context_.find(voter);
      acked.push_back(it == acked_context_.end() ? 0 : it->second);
    }
  }
  const std::uint64_t confirmed = quorum_value(std::move(acked));
  while (!rounds_.empty() && rounds_.front().context <= confirmed) {
    for (std::uint64_t id : rounds_.front().request_ids)
      released.push_back(ReadState{id, rounds_.front().index});
    pending_ -= rounds_.front().request_ids.size();
    rounds_.pop_front();
  }
  return released;
}

std::vector<ReadState> ReadOnly::release_all() {
  std::vector<ReadState> released;
  for (const Round& round : rounds_) {
    for (std::uint64_t id : round.request_ids) released.push_back(ReadState{id, round.index});
    pending_ -= round.request_ids.size();
  }
  rounds_.clear();
  return released;
}

std::vector<std::uint64_t> ReadOnly::abort_all() {
  std::vector<std::uint64_t> aborted = std::move(deferred_);
  deferred_.clear();
  for (const Round& round : rounds_)
    aborted.insert(aborted.end(), round.request_ids.begin(), round.request_ids.end());
  rounds_.clear();
  acked_context_.clear();
  pending_ = 0;
  return aborted;
}

}  // namespace raftlog::raft

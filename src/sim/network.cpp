#include "sim/network.h"

#include <algorithm>
#include <cassert>

namespace raftlog::sim {

Network::Network(std::size_t node_count)
    : node_count_(node_count), links_up_(node_count * node_count, true) {
  assert(node_count > 0);
}

std::size_t Network::slot(raft::NodeId from, raft::NodeId to) const {
  assert(from >= 1 && from <= node_count_ && to >= 1 && to <= node_count_);
  return static_cast<std::size_t>((from - 1) * node_count_ + (to - 1));
}

void Network::enqueue(const raft::Message& message, std::uint64_t due_step) {
  if (queue_.size() >= kMaxInFlight) {
    ++overflow_drops_;
    return;
  }
  queue_.emplace(std::make_pair(due_step, next_sequence_++), message);
}

int Network::send(const raft::Message& message, std::uint64_t now_step, util::Prng& prng) {
  if (prng.chance_per_million(conditions_.drop_per_million)) return 0;
  const int copies = prng.chance_per_million(conditions_.duplicate_per_million) ? 2 : 1;
  for (int copy = 0; copy < copies; ++copy) {
    std::uint64_t delay = prng.between(conditions_.min_delay_steps, conditions_.max_delay_steps);
    if (conditions_.long_delay_max_steps > 0 &&
        prng.chance_per_million(conditions_.long_delay_per_million)) {
      delay += prng.between(1, conditions_.long_delay_max_steps);
    }
    enqueue(message, now_step + std::max<std::uint64_t>(delay, 1));
  }
  return copies;
}

void Network::hold_until(const raft::Message& message, std::uint64_t step) {
  enqueue(message, step);
}

std::optional<raft::Message> Network::pop_due(std::uint64_t step, bool& dropped_by_partition) {
  dropped_by_partition = false;
  if (queue_.empty() || queue_.begin()->first.first > step) return std::nullopt;
  auto first = queue_.begin();
  raft::Message message = std::move(first->second);
  queue_.erase(first);
  dropped_by_partition = !link_up(message.from, message.to);
  return message;
}

std::size_t Network::drop_in_flight_from(raft::NodeId from, std::uint32_t per_million,
                                         util::Prng& prng) {
  std::size_t dropped = 0;
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (it->second.from == from && prng.chance_per_million(per_million)) {
      it = queue_.erase(it);
      ++dropped;
    } else {
      ++it;
    }
  }
  return dropped;
}

void Network::set_conditions(const NetworkConditions& conditions) {
  assert(conditions.min_delay_steps >= 1 &&
         conditions.min_delay_steps <= conditions.max_delay_steps);
  conditions_ = conditions;
}

bool Network::link_up(raft::NodeId from, raft::NodeId to) const {
  if (from == to) return true;
  return links_up_[slot(from, to)];
}

void Network::set_link(raft::NodeId from, raft::NodeId to, bool up) {
  links_up_[slot(from, to)] = up;
}

void Network::heal_all() { std::fill(links_up_.begin(), links_up_.end(), true); }

void Network::split(const std::vector<raft::NodeId>& group) {
  std::vector<bool> inside(node_count_ + 1, false);
  for (raft::NodeId id : group) inside[id] = true;
  for (raft::NodeId from = 1; from <= node_count_; ++from) {
    for (raft::NodeId to = 1; to <= node_count_; ++to) {
      if (inside[from] != inside[to]) set_link(from, to, false);
    }
  }
}

void Network::bridge(const std::vector<raft::NodeId>& side_a,
                     const std::vector<raft::NodeId>& side_b) {
  for (raft::NodeId a : side_a) {
    for (raft::NodeId b : side_b) {
      set_link(a, b, false);
      set_link(b, a, false);
    }
  }
}

bool Network::fully_connected() const {
  return std::all_of(links_up_.begin(), links_up_.end(), [](bool up) { return up; });
}

}  // namespace raftlog::sim

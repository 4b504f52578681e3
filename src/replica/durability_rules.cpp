// The production durability rules (durability_rules.h).
#include "replica/durability_rules.h"

#include <algorithm>

namespace raftlog::replica::rules {

std::uint64_t persisted_index_for_core(std::uint64_t written_index, std::uint64_t flushed_index,
                                       bool async) {
  return async ? written_index : std::min(flushed_index, written_index);
}

bool may_release_held(std::uint64_t required_index, std::uint64_t durable_index) {
  return required_index <= durable_index;
}

bool install_rewrites_conf_state() { return true; }

}  // namespace raftlog::replica::rules

// Production rule (see durability_rules.h for the seam): this node's own entries count toward a
// commit once they are as durable as the flush mode promises.
#include "replica/durability_rules.h"

#include <algorithm>

namespace raftlog::replica::rules {

std::uint64_t persisted_index_for_core(std::uint64_t written_index, std::uint64_t flushed_index,
                                       bool async) {
  return async ? written_index : std::min(flushed_index, written_index);
}

}  // namespace raftlog::replica::rules

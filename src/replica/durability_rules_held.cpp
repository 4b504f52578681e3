// Production rule (see durability_rules.h for the seam): acknowledgements and votes wait for the
// flush that makes what they vouch for durable.
#include "replica/durability_rules.h"

namespace raftlog::replica::rules {

bool may_release_held(std::uint64_t required_index, std::uint64_t durable_index) {
  return required_index <= durable_index;
}

}  // namespace raftlog::replica::rules

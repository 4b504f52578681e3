// Production rule (see rules.h for the seam): a configuration is in force once appended.
#include "raft/rules.h"

namespace raftlog::raft::rules {

std::size_t conf_in_force(const std::vector<ConfRecord>& history, Index) {
  return history.size() - 1;
}

}  // namespace raftlog::raft::rules

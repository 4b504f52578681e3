// TEST-ONLY (target raftlog_raft_broken_conf_effect): a configuration takes effect when its entry
// commits instead of when it is appended (the newest committed one is in force), which lets the old
// and the new configuration elect leaders independently. Exists to prove the simulator catches it.
// Never linked into production.
#include "raft/rules.h"

namespace raftlog::raft::rules {

std::size_t conf_in_force(const std::vector<ConfRecord>& history, Index commit_index) {
  std::size_t in_force = 0;
  for (std::size_t i = 0; i < history.size(); ++i) {
    if (history[i].index <= commit_index) in_force = i;
  }
  return in_force;
}

}  // namespace raftlog::raft::rules

// Production rule (see rules.h for the seam): one membership change at a time.
#include "raft/rules.h"

namespace raftlog::raft::rules {

bool conf_change_may_start(Index newest_conf_index, Index commit_index) {
  return newest_conf_index <= commit_index;
}

}  // namespace raftlog::raft::rules

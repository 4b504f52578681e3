// `raftlogctl topic list|read|tail` and `raftlogctl key get`: queries over the nodes' derived
// indexes (proto raftlog.v1.Topics), with the cluster commands' flags (cluster_commands.h).
#pragma once

#include "cli/commands.h"

namespace raftlog::ctl {

extern const cli::CommandTable kTopicCommands;
extern const cli::CommandTable kKeyCommands;

}  // namespace raftlog::ctl

// `raftlogctl group list|show|commit`: consumer groups' committed offsets (proto
// raftlog.v1.Groups), with the cluster commands' flags (cluster_commands.h).
#pragma once

#include "cli/commands.h"

namespace raftlog::ctl {

extern const cli::CommandTable kGroupCommands;

}  // namespace raftlog::ctl

// `raftlogctl log ...`: offline inspection of a CommitLog data directory. Both commands are strictly
// read-only (store::verify_log_directory): no recovery, no abort marker, no file is created or changed,
// so they are safe on the directory of a crashed node before anyone restarts it.
#pragma once

#include "cli/commands.h"

namespace raftlog::ctl {

extern const cli::CommandTable kLogCommands;

}  // namespace raftlog::ctl

// `raftlogctl members list|add|promote|remove|replace`: the cluster's membership through the
// Membership admin API (client/admin.h). Each change waits until its configuration entry is
// committed (and `add` without --learner, and `replace`, until the new node caught up: the learner-
// first rule, docs/operations.md "Membership"), prints what it did, and exits 1 with the refusal's
// reason word on failure, 2 on bad arguments.
#pragma once

#include "cli/commands.h"

namespace raftlog::ctl {

extern const cli::CommandTable kMembersCommands;

}  // namespace raftlog::ctl

// `raftlog-bench leader-stability`: large appends against a local cluster while busy threads hold the
// CPUs, counting the leader changes (issue 13, "Large entries never cost leadership"). A soak that
// prints a count, not a timed test.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "cli/commands.h"

namespace raftlog::bench {

int run_leader_stability_command(std::string_view command_path, std::span<const std::string> args,
                                 const cli::Io& io);

}  // namespace raftlog::bench

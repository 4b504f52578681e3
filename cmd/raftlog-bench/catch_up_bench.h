// `raftlog-bench catch-up`: a new member catches up by replication from a leader holding hundreds of
// MiB of retained entries; prints the catch-up time, the elections meanwhile and how long the
// leader's Raft loop rounds took (issue 15, drills F6: a catch-up must not stall the leader).
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "cli/commands.h"

namespace raftlog::bench {

int run_catch_up_command(std::string_view command_path, std::span<const std::string> args,
                         const cli::Io& io);

}  // namespace raftlog::bench

// `raftlog-bench store` and `raftlog-bench raw`: flag parsing, the run plan and the summary table.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "cli/commands.h"

namespace raftlog::bench {

int run_store_command(std::string_view command_path, std::span<const std::string> args,
                      const cli::Io& io);
int run_raw_command(std::string_view command_path, std::span<const std::string> args,
                    const cli::Io& io);

}  // namespace raftlog::bench

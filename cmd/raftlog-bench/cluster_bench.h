// `raftlog-bench cluster`: closed-loop append throughput and latency against a cluster (its own local
// one when no --endpoints are given). `raftlog-bench failover`: leader kill -9 -> writes resume time.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "cli/commands.h"

namespace raftlog::bench {

// raftlogd lives next to raftlog-bench in <build>/bin: its path, or "raftlogd" if unknown.
std::string sibling_raftlogd();

int run_cluster_command(std::string_view command_path, std::span<const std::string> args, const cli::Io& io);
int run_failover_command(std::string_view command_path, std::span<const std::string> args, const cli::Io& io);

}  // namespace raftlog::bench

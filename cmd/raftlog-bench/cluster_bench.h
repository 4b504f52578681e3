// `raftlog-bench cluster`: closed-loop append throughput and latency against a cluster (its own local
// one when no --endpoints are given). `raftlog-bench failover`: leader kill -9 -> writes resume time.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "cli/commands.h"
#include "client/client.h"
#include "closed_loop.h"

namespace raftlog::bench {

// raftlogd lives next to raftlog-bench in <build>/bin: its path, or "raftlogd" if unknown.
std::string sibling_raftlogd();

// One closed-loop client's call: a client of its own built from `options`, appending `batch` entries
// of `entry_size` bytes per call (filled with a letter that depends on `client_index`). An empty call
// when the client cannot be created.
ClientCall append_call(const client::Options& options, std::size_t batch, std::size_t entry_size,
                       std::uint64_t client_index);

int run_cluster_command(std::string_view command_path, std::span<const std::string> args,
                        const cli::Io& io);
int run_failover_command(std::string_view command_path, std::span<const std::string> args,
                         const cli::Io& io);

}  // namespace raftlog::bench

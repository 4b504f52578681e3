// `raftlog-bench etcd`: the same closed-loop load as `raftlog-bench cluster`, as etcd v3 KV.Put calls
// over gRPC, so raftlog and etcd are compared with one load generator (bench/compare-etcd.sh).
// `raftlog-bench etcd-failover`: one leader kill -9 under a Put load; time until a Put is acknowledged
// in a newer Raft term. The caller (the compare script) starts etcd and restarts the killed member.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "cli/commands.h"

namespace raftlog::bench {

int run_etcd_command(std::string_view command_path, std::span<const std::string> args,
                     const cli::Io& io);
int run_etcd_failover_command(std::string_view command_path, std::span<const std::string> args,
                              const cli::Io& io);

}  // namespace raftlog::bench

// `raftlog-bench nats`: the same closed-loop load as `raftlog-bench cluster`, as JetStream publishes
// (PUB with a reply inbox, wait for the stream's {"seq":N} acknowledgement) to a NATS cluster, so the
// issue-7 comparison can measure NATS JetStream on this machine too (bench/compare-etcd.sh --nats).
// It creates the stream (file storage, R replicas) first; an existing stream of that name is reused.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "cli/commands.h"

namespace raftlog::bench {

int run_nats_command(std::string_view command_path, std::span<const std::string> args,
                     const cli::Io& io);

}  // namespace raftlog::bench

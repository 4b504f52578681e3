// `raftlog-bench snapshot-loop`: how long a snapshot catch-up holds the Raft loop (docs/benchmarks.md,
// "Snapshot work and the Raft loop"). In one process, over real files, without gRPC: a leader
// replica (the only voter) with a large dedup table (many clients, each with many remembered
// appends), a large topic table and a node section, two learners stranded behind its trim. Every
// call into a replica (a message stepped, a tick, the process() after it) is timed as the loop
// round it is in raftlogd, and the bench prints the longest round of each part of the catch-up:
// the leader's first send (gathering, encoding and CRC), its send to the second learner at the same
// point (the encoding reused), the follower's step (the admission's decode) and its process (the
// install), plus the encoding, CRC and decode of the same data timed alone.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "cli/commands.h"

namespace raftlog::bench {

int run_snapshot_loop_command(std::string_view command_path, std::span<const std::string> args,
                              const cli::Io& io);

}  // namespace raftlog::bench

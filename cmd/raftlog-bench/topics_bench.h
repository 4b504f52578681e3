// `raftlog-bench topics`: what topics and keys (issue 16) cost. Three figures, each on clusters of
// its own that the command starts (docs/benchmarks.md, "Topics and keys"):
//   append cost  closed-loop appends/s of one 3-node cluster without and with a topic and a key per
//                entry, the two variants alternating round by round in one run (ABBA...), reported
//                per round and as the median of the per-round ratios;
//   dispatch     a 1-node cluster holding many small entries with topics and keys is restarted
//                without its derived indexes: entries indexed per second while it rebuilds them;
//   rebuild      the same with large entries: GiB of log payload indexed per second.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "cli/commands.h"

namespace raftlog::bench {

int run_topics_command(std::string_view command_path, std::span<const std::string> args,
                       const cli::Io& io);

}  // namespace raftlog::bench

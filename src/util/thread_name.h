// Names the calling thread (as `top -H`, `ps -L`, perf and /proc/PID/task/*/comm show it), so an
// operator can tell which of a node's threads uses the CPU. Linux keeps at most 15 characters; a
// longer name is cut. Best effort: a failure changes nothing else.
#pragma once

namespace raftlog::util {

void name_this_thread(const char* name);

}  // namespace raftlog::util

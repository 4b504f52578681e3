#include "server/metrics_process.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

namespace raftlog::server::metrics {

ProcessSample sample_process() {
  ProcessSample sample;
  std::ifstream stat("/proc/self/stat");
  std::string line;
  if (std::getline(stat, line)) {
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    const auto close = line.rfind(')');
    if (close != std::string::npos) {
      std::istringstream rest(line.substr(close + 2));
      std::string field;
      double utime = 0, stime = 0;
      for (int i = 3; i <= 15 && rest >> field; ++i) {
        if (i == 14) utime = std::stod(field);
        if (i == 15) stime = std::stod(field);
      }
      sample.cpu_seconds = (utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
    }
  }
  std::ifstream statm("/proc/self/statm");
  double size_pages = 0, resident_pages = 0, shared_pages = 0;
  if (statm >> size_pages >> resident_pages >> shared_pages) {
    const auto page_bytes = static_cast<double>(::sysconf(_SC_PAGESIZE));
    sample.resident_bytes = resident_pages * page_bytes;
    sample.anonymous_bytes = std::max(0.0, resident_pages - shared_pages) * page_bytes;
  }
  // glibc's view of the heap: what the program holds (small chunks in the arenas plus chunks it
  // mmapped on its own), and what the arenas keep free for reuse. Growing anonymous memory with a
  // flat in-use figure is the allocator keeping memory, not a leak (docs/operations.md). mallinfo2()
  // walks every arena under its lock; a scrape every few seconds costs microseconds.
  const struct mallinfo2 heap = ::mallinfo2();
  sample.heap_in_use_bytes = static_cast<double>(heap.uordblks + heap.hblkhd);
  sample.heap_free_bytes = static_cast<double>(heap.fordblks);
  return sample;
}

}  // namespace raftlog::server::metrics

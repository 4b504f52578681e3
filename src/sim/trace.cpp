#include "sim/trace.h"

#include <cassert>

namespace raftlog::sim {

Trace::Trace(std::size_t tail_capacity, bool keep_all) : ring_(tail_capacity), keep_all_(keep_all) {
  assert(tail_capacity > 0 && tail_capacity <= kMaxTailEvents);
}

std::string& Trace::next_line() {
  std::string& line = ring_[next_slot_];
  line.clear();  // keeps its capacity: after warm-up, tracing allocates nothing
  return line;
}

void Trace::finish_line(std::string& line) {
  if (line.size() > kMaxLineBytes) {
    line.resize(kMaxLineBytes - 3);
    line += "...";
  }
  if (keep_all_) {
    full_ += line;
    full_ += '\n';
  }
  next_slot_ = (next_slot_ + 1) % ring_.size();
  ++event_count_;
}

std::vector<std::string> Trace::tail() const {
  if (!enabled()) return {};
  std::vector<std::string> lines;
  const std::size_t count =
      event_count_ < ring_.size() ? static_cast<std::size_t>(event_count_) : ring_.size();
  lines.reserve(count);
  const std::size_t start = (next_slot_ + ring_.size() - count) % ring_.size();
  for (std::size_t offset = 0; offset < count; ++offset)
    lines.push_back(ring_[(start + offset) % ring_.size()]);
  return lines;
}

}  // namespace raftlog::sim

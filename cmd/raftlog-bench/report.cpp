#include "report.h"

#include <cassert>
#include <cmath>
#include <ostream>
#include <sstream>

namespace raftlog::bench {

ResultLine::ResultLine(std::string_view bench_name) : text_("RESULT bench=") {
  text_ += bench_name;
}

ResultLine& ResultLine::add(std::string_view key, std::string_view value) {
  // Values are single tokens so that `key=value` pairs split on whitespace.
  assert(value.find_first_of(" \t\n") == std::string_view::npos);
  assert(key.find_first_of(" \t\n=") == std::string_view::npos);
  text_ += ' ';
  text_ += key;
  text_ += '=';
  text_ += value;
  return *this;
}

ResultLine& ResultLine::add(std::string_view key, std::uint64_t value) {
  return add(key, std::to_string(value));
}

ResultLine& ResultLine::add(std::string_view key, double value, int decimals) {
  return add(key, fixed(value, decimals));
}

std::string fixed(double value, int decimals) {
  if (!std::isfinite(value)) return "nan";
  std::ostringstream text;
  text.precision(decimals);
  text << std::fixed << value;
  return text.str();
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

ProgressTicker::ProgressTicker(std::ostream& out, std::chrono::milliseconds interval,
                               std::function<std::string()> make_line)
    : out_(out), interval_(interval), make_line_(std::move(make_line)), thread_([this] { run(); }) {
  assert(interval_.count() > 0);
}

ProgressTicker::~ProgressTicker() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void ProgressTicker::run() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (wake_.wait_for(lock, interval_, [this] { return stopping_; })) break;
    out_ << make_line_() << std::endl;  // flush: progress must show up while the run is going
  }
}

}  // namespace raftlog::bench

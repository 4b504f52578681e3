#include "proc_usage.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <string_view>

namespace raftlog::bench {
namespace {

// Fields of /proc/<pid>/stat after the ")" that closes the command name (which may contain spaces):
// the first is field 3 (state), so utime (field 14) and stime (field 15) are the 12th and 13th.
constexpr std::size_t kUtimeAfterComm = 11;
constexpr std::size_t kStimeAfterComm = 12;

std::optional<double> cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  const auto close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(line.substr(close + 1));
  std::string field;
  std::uint64_t utime = 0;
  std::uint64_t stime = 0;
  for (std::size_t i = 0; i <= kStimeAfterComm && fields >> field; ++i) {
    if (i == kUtimeAfterComm) utime = std::stoull(field);
    if (i == kStimeAfterComm) stime = std::stoull(field);
  }
  if (!fields) return std::nullopt;
  const long ticks_per_s = ::sysconf(_SC_CLK_TCK);
  if (ticks_per_s <= 0) return std::nullopt;
  return static_cast<double>(utime + stime) / static_cast<double>(ticks_per_s);
}

// One "Name:   123 kB" field of /proc/<pid>/status.
std::optional<std::uint64_t> status_kib(pid_t pid, std::string_view field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  // Bounded: /proc/<pid>/status has about 60 lines.
  for (int i = 0; i < 200 && std::getline(in, line); ++i) {
    if (line.size() > field.size() && line.compare(0, field.size(), field) == 0 &&
        line[field.size()] == ':') {
      std::istringstream value(line.substr(field.size() + 1));
      std::uint64_t kib = 0;
      if (value >> kib) return kib;
      return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<ProcessUsage> read_process_usage(pid_t pid) {
  const auto cpu = cpu_seconds(pid);
  const auto rss = status_kib(pid, "VmRSS");
  const auto anon = status_kib(pid, "RssAnon");
  if (!cpu || !rss || !anon) return std::nullopt;
  return ProcessUsage{*cpu, *rss, *anon};
}

std::optional<std::vector<pid_t>> parse_pid_list(const std::string& text, std::string* error) {
  std::vector<pid_t> pids;
  std::size_t begin = 0;
  while (begin <= text.size() && pids.size() <= kMaxServerPids) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    const std::string_view item(text.data() + begin, end - begin);
    pid_t pid = 0;
    const auto [next, ec] = std::from_chars(item.data(), item.data() + item.size(), pid);
    if (item.empty() || ec != std::errc() || next != item.data() + item.size() || pid <= 0) {
      *error = "not a process id: '" + std::string(item) + "'";
      return std::nullopt;
    }
    pids.push_back(pid);
    begin = end + 1;
  }
  if (pids.size() > kMaxServerPids) {
    *error = "more than " + std::to_string(kMaxServerPids) + " process ids";
    return std::nullopt;
  }
  return pids;
}

ServerUsageWindow::ServerUsageWindow(std::vector<pid_t> pids) : pids_(std::move(pids)) {
  start_.reserve(pids_.size());
  for (const pid_t pid : pids_) start_.push_back(read_process_usage(pid));
}

ServerUsageWindow::Totals ServerUsageWindow::finish() const {
  Totals totals;
  totals.complete = true;
  for (std::size_t i = 0; i < pids_.size(); ++i) {
    const auto now = read_process_usage(pids_[i]);
    if (!now || !start_[i]) {
      totals.complete = false;
      continue;
    }
    totals.cpu_s += now->cpu_s - start_[i]->cpu_s;
    totals.rss_total_kib += now->rss_kib;
    totals.rss_max_kib = std::max(totals.rss_max_kib, now->rss_kib);
    totals.rss_anon_total_kib += now->rss_anon_kib;
  }
  return totals;
}

}  // namespace raftlog::bench

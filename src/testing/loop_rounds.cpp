#include "testing/loop_rounds.h"

#include <chrono>
#include <cstdlib>
#include <sstream>

#include "testing/http_get.h"

namespace raftlog::testing {

double LoopRounds::over(double seconds) const {
  for (const auto& [le, cumulative] : buckets) {
    if (le >= seconds) return count - cumulative;
  }
  return 0;
}

double LoopRounds::longest_bound() const {
  double previous = 0;
  double bound = 0;
  for (const auto& [le, cumulative] : buckets) {
    if (cumulative > previous) bound = le;
    previous = cumulative;
  }
  return bound;
}

LoopRounds LoopRounds::minus(const LoopRounds& earlier) const {
  LoopRounds during;
  during.count = count - earlier.count;
  for (std::size_t i = 0; i < buckets.size() && i < earlier.buckets.size(); ++i) {
    during.buckets.emplace_back(buckets[i].first, buckets[i].second - earlier.buckets[i].second);
  }
  return during;
}

std::optional<LoopRounds> scrape_loop_rounds(const std::string& metrics_address) {
  const std::optional<std::string> body =
      http_get(metrics_address, "/metrics", std::chrono::seconds(2));
  if (!body) return std::nullopt;
  LoopRounds rounds;
  std::istringstream lines(*body);
  // Bounded by the scraped body (at most 16 MiB).
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("raftlog_raft_loop_round_seconds_", 0) != 0) continue;
    const std::size_t space = line.rfind(' ');
    if (space == std::string::npos) continue;
    const double value = std::strtod(line.c_str() + space + 1, nullptr);
    if (line.rfind("raftlog_raft_loop_round_seconds_count", 0) == 0) {
      rounds.count = value;
      continue;
    }
    const std::size_t le = line.find("le=\"");
    if (line.rfind("raftlog_raft_loop_round_seconds_bucket", 0) != 0 || le == std::string::npos)
      continue;
    const std::string bound = line.substr(le + 4, line.find('"', le + 4) - le - 4);
    rounds.buckets.emplace_back(bound == "+Inf" ? 1e9 : std::strtod(bound.c_str(), nullptr), value);
  }
  return rounds;
}

std::optional<double> metric_sample(const std::string& page, const std::string& series) {
  std::istringstream lines(page);
  // Bounded by the page.
  for (std::string line; std::getline(lines, line);) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ') {
      return std::strtod(line.c_str() + series.size() + 1, nullptr);
    }
  }
  return std::nullopt;
}

}  // namespace raftlog::testing

// A node's raftlog_raft_loop_round_seconds histogram read from its /metrics page, for tests and
// benchmarks that bound how long its Raft loop rounds took over some interval (a scrape before it,
// one after, minus()).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace raftlog::testing {

struct LoopRounds {
  std::vector<std::pair<double, double>> buckets;  // (le in seconds, cumulative count), as scraped
  double count = 0;
  // Rounds longer than the smallest bucket bound at or above `seconds` (a bucket bound: exact).
  double over(double seconds) const;
  // The upper bound of the bucket holding the longest round (+Inf as 1e9; 0 without rounds).
  double longest_bound() const;
  // The rounds since `earlier` (a scrape of the same node before this one).
  LoopRounds minus(const LoopRounds& earlier) const;
};

// Scrapes http://<metrics_address>/metrics; nullopt when the page cannot be read.
std::optional<LoopRounds> scrape_loop_rounds(const std::string& metrics_address);

// The value of one sample of a page, `series` as the page prints it (name{labels}); nullopt when
// the page does not hold it.
std::optional<double> metric_sample(const std::string& page, const std::string& series);

}  // namespace raftlog::testing

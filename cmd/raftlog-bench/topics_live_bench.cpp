// `raftlog-bench topics --phases live` (topics_live_bench.h): a live dispatcher under a steady
// append load with many topics, keys on or off, and each node's persist slice as given.
#include "topics_live_bench.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "client/groups.h"
#include "cluster_bench.h"
#include "local_cluster_run.h"
#include "report.h"
#include "testing/http_get.h"
#include "testing/local_cluster.h"
#include "testing/loop_rounds.h"

namespace raftlog::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::uint64_t kLoadThreads = 4;
constexpr auto kDrainTimeout = std::chrono::seconds(60);  // the lag must drain within this after
// The lag is sampled 10 times a second (a sample is one Status call per node): a once-a-second
// sample missed the peaks between two (review L5). At most 6,000 samples (--live-seconds <= 600);
// the result line keeps the largest sample of each wall second since the load began (a second
// whose Status calls ran late holds fewer samples, one they all missed shows as "-": review of
// dispatch3, L5, counted 10 samples as a second whatever they spanned).
constexpr auto kSampleInterval = std::chrono::milliseconds(100);
// The group commit probe: one commit every 200 ms during the load (at most 3,000), each allowed
// 2 s of client retries. A commit waits for the indexes to reach the leader's read index (1.5 s
// at most, then GROUPS_BEHIND), so indexes that fall behind under the load show as slow or failed
// commits (outside test drills6 M2).
constexpr auto kProbeInterval = std::chrono::milliseconds(200);
constexpr std::uint32_t kProbeRetryMs = 2000;

// One node's dispatcher totals from its /metrics page (DispatchStats).
struct DispatchTotals {
  double persists = 0, syncs = 0, persist_s = 0, apply_s = 0, last_persist_s = 0;
  DispatchTotals minus(const DispatchTotals& earlier) const {
    return {persists - earlier.persists, syncs - earlier.syncs, persist_s - earlier.persist_s,
            apply_s - earlier.apply_s, last_persist_s};
  }
};

std::optional<DispatchTotals> scrape_dispatch(testing::LocalCluster& cluster, int id) {
  const std::optional<std::string> page = testing::http_get(cluster.metrics_address(id), "/metrics");
  if (!page) return std::nullopt;
  const std::string labels = "{node_id=\"" + std::to_string(id) + "\"}";
  DispatchTotals totals;
  const std::pair<const char*, double*> series[] = {
      {"raftlog_derived_persists_total", &totals.persists},
      {"raftlog_derived_persist_syncs_total", &totals.syncs},
      {"raftlog_derived_persist_seconds_total", &totals.persist_s},
      {"raftlog_derived_apply_seconds_total", &totals.apply_s},
      {"raftlog_derived_last_persist_seconds", &totals.last_persist_s}};
  for (const auto& [name, value] : series) {
    const std::optional<double> sample = testing::metric_sample(*page, name + labels);
    if (!sample) return std::nullopt;
    *value = *sample;
  }
  return totals;
}

// Paced appends of `batch` entries each from kLoadThreads clients: entry n goes to topic
// "t<n % topics>" and, with keys, carries the key "k<n>" (unique, as an order id). Bounded by
// the duration (each thread stops at its deadline) and so by rate * duration appends.
class PacedLoad {
 public:
  PacedLoad(const std::vector<std::string>& endpoints, const LiveSettings& settings)
      : settings_(settings) {
    const auto deadline = Clock::now() + std::chrono::seconds(settings.seconds);
    for (std::uint64_t t = 0; t < kLoadThreads; ++t) {
      threads_.emplace_back([this, endpoints, deadline] { run(endpoints, deadline); });
    }
  }
  ~PacedLoad() { join(); }
  void join() {
    for (std::thread& thread : threads_) {
      if (thread.joinable()) thread.join();
    }
  }
  std::uint64_t appends() const { return appends_.load(); }
  std::uint64_t failures() const { return failures_.load(); }

 private:
  void run(const std::vector<std::string>& endpoints, Clock::time_point deadline) {
    client::Options options;
    options.endpoints = endpoints;
    options.retry_deadline_ms = 5000;
    auto created = client::Client::create(options);
    if (!created.ok()) {
      failures_.fetch_add(1);
      return;
    }
    client::Client& cl = *created.value();
    const auto period = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(static_cast<double>(kLoadThreads) /
                                      static_cast<double>(settings_.rate)));
    auto due = Clock::now();
    std::vector<std::string> payloads(settings_.batch, std::string(settings_.entry_size, 'l'));
    std::vector<client::EntryAttributes> attributes(settings_.batch);
    while (Clock::now() < deadline) {
      const std::uint64_t first = next_entry_.fetch_add(settings_.batch);
      for (std::uint64_t i = 0; i < settings_.batch; ++i) {
        attributes[i].topic = "t" + std::to_string((first + i) % settings_.topics);
        attributes[i].keys.clear();
        if (settings_.keys) attributes[i].keys.push_back("k" + std::to_string(first + i));
      }
      if (cl.append(payloads, attributes).ok()) {
        appends_.fetch_add(1);
      } else {
        failures_.fetch_add(1);
      }
      // Open loop as far as one client allows: a late append does not make the next ones early
      // by more than one period.
      due = std::max(due + period, Clock::now() - period);
      std::this_thread::sleep_until(std::min(due, deadline));
    }
  }

  const LiveSettings settings_;
  std::atomic<std::uint64_t> next_entry_{0};
  std::atomic<std::uint64_t> appends_{0};
  std::atomic<std::uint64_t> failures_{0};
  std::vector<std::thread> threads_;
};

// Commits consumer group "bench-probe"'s offset 0 of topic "t0" (the load's first entry goes
// there) every kProbeInterval until `deadline`, from the second second on; counts the commits,
// the failed ones, and their latencies.
class GroupCommitProbe {
 public:
  GroupCommitProbe(const std::vector<std::string>& endpoints, Clock::time_point deadline)
      : thread_([this, endpoints, deadline] { run(endpoints, deadline); }) {}
  ~GroupCommitProbe() { join(); }
  void join() {
    if (thread_.joinable()) thread_.join();
  }
  std::uint64_t commits() const { return latencies_ms_.size() + failures_; }
  std::uint64_t failures() const { return failures_; }
  // The latencies of the commits that succeeded, in ms (after join()).
  double percentile_ms(double q) const {
    if (latencies_ms_.empty()) return 0;
    std::vector<double> sorted = latencies_ms_;
    std::sort(sorted.begin(), sorted.end());
    return sorted[static_cast<std::size_t>(q * static_cast<double>(sorted.size() - 1))];
  }
  const std::string& first_error() const { return first_error_; }

 private:
  void run(const std::vector<std::string>& endpoints, Clock::time_point deadline) {
    client::Options options;
    options.endpoints = endpoints;
    options.retry_deadline_ms = kProbeRetryMs;
    auto created = client::Groups::create(options);
    if (!created.ok()) {
      ++failures_;
      first_error_ = created.status().to_string();
      return;
    }
    std::this_thread::sleep_until(std::min(Clock::now() + std::chrono::seconds(1), deadline));
    for (auto due = Clock::now(); Clock::now() < deadline; due += kProbeInterval) {
      const auto started = Clock::now();
      auto committed = created.value()->commit("bench-probe", "t0", 0);
      if (committed.ok()) {
        latencies_ms_.push_back(seconds_since(started) * 1000.0);
      } else {
        if (failures_++ == 0) first_error_ = committed.status().to_string();
      }
      std::this_thread::sleep_until(std::min(std::max(due + kProbeInterval, Clock::now()), deadline));
    }
  }

  std::vector<double> latencies_ms_;  // written by the thread only; read after join()
  std::uint64_t failures_ = 0;
  std::string first_error_;
  std::thread thread_;
};

// The largest derived_lag_entries of the nodes (0 for a node that does not answer).
std::uint64_t max_lag(testing::LocalCluster& cluster) {
  std::uint64_t lag = 0;
  for (int id = 1; id <= cluster.size(); ++id) {
    if (auto status = cluster.status(id)) lag = std::max(lag, status->derived_lag_entries);
  }
  return lag;
}

bool run_live_variant(const LiveSettings& settings, const std::string& flush_mode,
                      const cli::Io& io) {
  testing::LocalClusterOptions options;
  options.raftlogd_path = sibling_raftlogd();
  options.nodes = static_cast<int>(settings.nodes);
  options.flush_mode = flush_mode;
  options.segment_size_bytes = 256ULL << 20;
  options.max_entry_size_bytes = 4ULL << 20;
  options.metrics = true;
  options.extra_flags = {"--derived-persist-slice-ms", std::to_string(settings.slice_ms)};
  std::unique_ptr<testing::LocalCluster> cluster = start_local_cluster(options, io.err);
  if (!cluster) return false;
  io.err << started_line(*cluster, flush_mode) << "; persist slice " << settings.slice_ms
         << " ms, " << settings.topics << " topics, keys " << (settings.keys ? "on" : "off")
         << "\n";
  std::vector<DispatchTotals> before;
  for (int id = 1; id <= cluster->size(); ++id) {
    const std::optional<DispatchTotals> totals = scrape_dispatch(*cluster, id);
    if (!totals) {
      io.err << "node " << id << ": no dispatcher metrics\n";
      return false;
    }
    before.push_back(*totals);
  }
  const auto started = Clock::now();
  std::uint64_t peak = 0, lag_at_end = 0, appends = 0, failures = 0, samples = 0;
  std::string lag_series;  // each second's largest sampled lag: "0,612,2089,..."
  std::uint64_t probe_commits = 0, probe_failures = 0;
  double probe_p50_ms = 0, probe_max_ms = 0;
  {
    const auto load_end = started + std::chrono::seconds(settings.seconds);
    PacedLoad load(endpoints_of(*cluster), settings);
    GroupCommitProbe probe(endpoints_of(*cluster), load_end);
    // The wall second the open bucket covers, its largest sample and its sample count.
    std::uint64_t second = 0, second_peak = 0, second_samples = 0;
    const auto close_second = [&] {
      lag_series += (second == 0 ? "" : ",") +
                    (second_samples == 0 ? std::string("-") : std::to_string(second_peak));
      if (second_samples > 0) {
        io.err << "  t=" << second + 1 << "s appends " << load.appends()
               << " largest dispatcher lag " << second_peak << " entries (" << second_samples
               << " samples)\n";
      }
      ++second;
      second_peak = 0;
      second_samples = 0;
    };
    for (auto next = started + kSampleInterval; next < load_end; next += kSampleInterval) {
      std::this_thread::sleep_until(next);
      // The wall second the sample is taken in (before its Status calls, which may run long).
      const auto at = static_cast<std::uint64_t>(seconds_since(started));
      const std::uint64_t lag = max_lag(*cluster);
      while (second < at) close_second();
      peak = std::max(peak, lag);
      second_peak = std::max(second_peak, lag);
      ++second_samples;
      ++samples;
    }
    if (second_samples > 0) close_second();
    load.join();
    probe.join();
    appends = load.appends();
    failures = load.failures();
    lag_at_end = max_lag(*cluster);
    peak = std::max(peak, lag_at_end);
    probe_commits = probe.commits();
    probe_failures = probe.failures();
    probe_p50_ms = probe.percentile_ms(0.5);
    probe_max_ms = probe.percentile_ms(1.0);
    if (probe_failures > 0) {
      io.err << "  group commit probe: " << probe_failures << " of " << probe_commits
             << " commits failed under the load, the first: " << probe.first_error() << "\n";
    }
  }
  const double load_seconds = seconds_since(started);
  const auto drain_started = Clock::now();
  std::uint64_t lag = lag_at_end;
  while (lag > 0 && Clock::now() - drain_started < kDrainTimeout) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    lag = max_lag(*cluster);
  }
  const double drain_seconds = lag == 0 ? seconds_since(drain_started) : -1.0;
  DispatchTotals sum;
  double longest_last_persist = 0;
  for (int id = 1; id <= cluster->size(); ++id) {
    const std::optional<DispatchTotals> after = scrape_dispatch(*cluster, id);
    if (!after) {
      io.err << "node " << id << ": no dispatcher metrics after the load\n";
      return false;
    }
    const DispatchTotals delta = after->minus(before[static_cast<std::size_t>(id - 1)]);
    io.err << "  node " << id << ": " << fixed(delta.persists, 0) << " persists, "
           << fixed(delta.syncs, 0) << " syncs, persisting " << fixed(delta.persist_s, 2)
           << " s, applying " << fixed(delta.apply_s, 2) << " s, last persist "
           << fixed(delta.last_persist_s, 3) << " s\n";
    sum = {sum.persists + delta.persists, sum.syncs + delta.syncs,
           sum.persist_s + delta.persist_s, sum.apply_s + delta.apply_s, 0};
    longest_last_persist = std::max(longest_last_persist, delta.last_persist_s);
  }
  const double nodes = static_cast<double>(cluster->size());
  io.out << ResultLine("topics-live")
                .add("nodes", settings.nodes)
                .add("flush_mode", flush_mode)
                .add("topics", settings.topics)
                .add("keys", settings.keys ? "on" : "off")
                .add("persist_slice_ms", settings.slice_ms)
                .add("offered_appends_per_s", settings.rate)
                .add("entries_per_append", settings.batch)
                .add("load_seconds", load_seconds, 1)
                .add("appends_per_s", static_cast<double>(appends) / load_seconds, 0)
                .add("failures", failures)
                .add("max_lag_entries", peak)
                .add("lag_at_load_end", lag_at_end)
                .add("drain_seconds", drain_seconds, 1)
                .add("persists_per_node", sum.persists / nodes, 1)
                .add("syncs_per_persist", sum.persists > 0 ? sum.syncs / sum.persists : 0.0, 0)
                .add("persist_s_per_node", sum.persist_s / nodes, 2)
                .add("apply_s_per_node", sum.apply_s / nodes, 2)
                .add("persist_share_of_load",
                     load_seconds > 0 ? sum.persist_s / nodes / load_seconds : 0.0, 3)
                .add("longest_last_persist_s", longest_last_persist, 3)
                .add("lag_samples", samples)
                .add("group_commits", probe_commits)
                .add("group_commit_failures", probe_failures)
                .add("group_commit_p50_ms", probe_p50_ms, 1)
                .add("group_commit_max_ms", probe_max_ms, 1)
                .add("lag_per_s", lag_series)
                .text()
         << std::endl;  // flushed: a node started later must not inherit it (LocalCluster forks)
  return drain_seconds >= 0 && failures == 0;
}

}  // namespace

bool run_topics_live(const LiveSettings& settings, const std::vector<std::uint64_t>& slices,
                     const std::string& keys, const std::string& flush_mode, const cli::Io& io) {
  bool ok = true;
  for (const std::string& mode : {std::string("off"), std::string("on")}) {
    if (keys != "both" && keys != mode) continue;
    for (std::uint64_t slice : slices) {
      LiveSettings variant = settings;
      variant.keys = mode == "on";
      variant.slice_ms = slice;
      ok = run_live_variant(variant, flush_mode, io) && ok;
    }
  }
  return ok;
}

}  // namespace raftlog::bench

// `raftlog-bench topics` (topics_bench.h): the append path's cost of topics and keys, side by side
// in one run, and the dispatcher's rate when it rebuilds a node's indexes from its log.
#include "topics_bench.h"
#include "topics_live_bench.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/flags.h"
#include "client/client.h"
#include "closed_loop.h"
#include "cluster_bench.h"
#include "local_cluster_run.h"
#include "report.h"
#include "testing/local_cluster.h"

namespace raftlog::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::uint64_t kTopicCount = 8;
constexpr std::uint64_t kMaxAppendEntries = 1024;      // the node's default max_entries_per_append
constexpr std::uint64_t kMaxAppendBytes = 4ULL << 20;  // well under the node's 8 MiB per append
// Every wait of the command ends by itself: a preload, a restart, an index catching up.
constexpr auto kPreloadTimeout = std::chrono::minutes(10);
constexpr auto kRebuildTimeout = std::chrono::minutes(10);

std::string topic_for(std::uint64_t n) { return "bench-topic-" + std::to_string(n % kTopicCount); }

std::unique_ptr<testing::LocalCluster> start_cluster(int nodes, const std::string& flush_mode,
                                                     const cli::Io& io) {
  testing::LocalClusterOptions options;
  options.raftlogd_path = sibling_raftlogd();
  options.nodes = nodes;
  options.flush_mode = flush_mode;
  options.segment_size_bytes = 256ULL << 20;
  options.max_entry_size_bytes = 4ULL << 20;
  std::unique_ptr<testing::LocalCluster> cluster = start_local_cluster(options, io.err);
  if (cluster) io.err << started_line(*cluster, flush_mode) << "\n";
  return cluster;
}

// --- Append cost ---------------------------------------------------------------------------------

// One closed-loop client appending one entry per call; with `attributes`, each entry gets one of
// kTopicCount topics and a key of its own ("k<client>-<n>", as an order id would be).
ClientCall topics_call(const client::Options& options, std::uint64_t entry_size,
                       std::uint64_t client_index, bool attributes) {
  if (!attributes) return append_call(options, 1, entry_size, client_index);
  auto created = client::Client::create(options);
  if (!created.ok()) return {};
  std::shared_ptr<client::Client> cl = std::move(created.value());
  auto payloads = std::make_shared<std::vector<std::string>>(
      1, std::string(entry_size, static_cast<char>('a' + client_index % 26)));
  auto attrs = std::make_shared<std::vector<client::EntryAttributes>>(1);
  (*attrs)[0].topic = topic_for(client_index);
  auto counter = std::make_shared<std::uint64_t>(0);
  return [cl, payloads, attrs, counter, client_index] {
    (*attrs)[0].keys = {"k" + std::to_string(client_index) + "-" + std::to_string((*counter)++)};
    return cl->append(*payloads, *attrs).ok();
  };
}

struct VariantRun {
  double ops_per_s = 0.0;
  double p50_ms = 0.0;
  double server_cpu_us_per_append = 0.0;  // the three raftlogd processes' CPU time per append
  std::uint64_t failures = 0;
};

VariantRun run_variant(const std::vector<std::string>& endpoints, const ClosedLoopOptions& load,
                       bool attributes) {
  std::ostringstream quiet;  // the per-second progress of eight short phases is noise
  const ClosedLoopResult result = run_closed_loop(
      load,
      [&](std::uint64_t c) -> ClientCall {
        client::Options options;
        options.endpoints = endpoints;
        options.retry_deadline_ms = 10000;
        return topics_call(options, load.payload_bytes_per_entry, c, attributes);
      },
      quiet);
  const double cpu_us = result.ops() == 0 || !result.server_usage_complete
                            ? 0.0
                            : result.server_cpu_s * 1e6 / static_cast<double>(result.ops());
  return {result.ops_per_s(), result.percentile_ms(0.5), cpu_us, result.failures};
}

// The largest derived_lag_entries any node reports: how far the dispatchers trail the commit.
std::uint64_t max_dispatch_lag(testing::LocalCluster& cluster) {
  std::uint64_t lag = 0;
  for (int id = 1; id <= cluster.size(); ++id) {
    if (auto status = cluster.status(id)) lag = std::max(lag, status->derived_lag_entries);
  }
  return lag;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

bool run_append_cost(std::uint64_t rounds, std::uint64_t round_seconds, std::uint64_t clients,
                     std::uint64_t entry_size, const std::string& flush_mode, const cli::Io& io) {
  auto cluster = start_cluster(3, flush_mode, io);
  if (!cluster) return false;
  const std::vector<std::string> endpoints = endpoints_of(*cluster);
  ClosedLoopOptions load;
  load.clients = clients;
  load.duration = std::chrono::seconds(round_seconds);
  load.entries_per_call = 1;
  load.payload_bytes_per_entry = entry_size;
  // CPU per append is what the variants' difference costs; appends/s on this shared machine move
  // with the disk's fsync latency and the neighbours' load as much as with the work done.
  for (int id = 1; id <= cluster->size(); ++id) load.server_pids.push_back(cluster->pid(id));
  std::vector<double> plain_rates, topic_rates, ratios, plain_p50, topic_p50;
  std::vector<double> plain_cpu, topic_cpu, cpu_ratios;
  std::uint64_t failures = 0;
  std::uint64_t max_lag = 0;
  std::string ratio_list;
  for (std::uint64_t round = 0; round < rounds; ++round) {
    // ABBA: each variant goes first in every other round, so a drift of the shared machine's load
    // during the run does not favour one of them.
    const bool topics_first = round % 2 == 1;
    VariantRun plain, topics;
    for (int turn = 0; turn < 2; ++turn) {
      const bool with_topics = (turn == 0) == topics_first;
      VariantRun& run = with_topics ? topics : plain;
      run = run_variant(endpoints, load, with_topics);
      if (with_topics) max_lag = std::max(max_lag, max_dispatch_lag(*cluster));
    }
    failures += plain.failures + topics.failures;
    const double ratio = plain.ops_per_s > 0 ? topics.ops_per_s / plain.ops_per_s : 0.0;
    plain_rates.push_back(plain.ops_per_s);
    topic_rates.push_back(topics.ops_per_s);
    plain_p50.push_back(plain.p50_ms);
    topic_p50.push_back(topics.p50_ms);
    ratios.push_back(ratio);
    ratio_list += (ratio_list.empty() ? "" : ",") + fixed(ratio, 3);
    const double cpu_ratio = plain.server_cpu_us_per_append > 0
                                 ? topics.server_cpu_us_per_append / plain.server_cpu_us_per_append
                                 : 0.0;
    plain_cpu.push_back(plain.server_cpu_us_per_append);
    topic_cpu.push_back(topics.server_cpu_us_per_append);
    cpu_ratios.push_back(cpu_ratio);
    io.err << "round " << round + 1 << "/" << rounds << (topics_first ? " (topics first)" : "")
           << ": without topics " << fixed(plain.ops_per_s, 0) << " appends/s, with "
           << fixed(topics.ops_per_s, 0) << " appends/s, ratio " << fixed(ratio, 3)
           << "; server CPU per append " << fixed(plain.server_cpu_us_per_append, 0) << " us and "
           << fixed(topics.server_cpu_us_per_append, 0) << " us, ratio " << fixed(cpu_ratio, 3)
           << "\n";
  }
  const double ratio = median(ratios);
  io.out << ResultLine("topics-append")
                .add("nodes", std::uint64_t{3})
                .add("flush_mode", flush_mode)
                .add("clients", clients)
                .add("entry_size_bytes", entry_size)
                .add("rounds", rounds)
                .add("round_seconds", round_seconds)
                .add("plain_ops_per_s", median(plain_rates), 0)
                .add("topics_ops_per_s", median(topic_rates), 0)
                .add("plain_p50_ms", median(plain_p50), 2)
                .add("topics_p50_ms", median(topic_p50), 2)
                .add("ratio_median", ratio, 3)
                .add("ratio_min", *std::min_element(ratios.begin(), ratios.end()), 3)
                .add("ratio_max", *std::max_element(ratios.begin(), ratios.end()), 3)
                .add("slowdown_pct", (1.0 - ratio) * 100.0, 1)
                .add("ratios", ratio_list)
                .add("plain_server_cpu_us_per_append", median(plain_cpu), 1)
                .add("topics_server_cpu_us_per_append", median(topic_cpu), 1)
                .add("cpu_ratio_median", median(cpu_ratios), 3)
                .add("cpu_ratio_min", *std::min_element(cpu_ratios.begin(), cpu_ratios.end()), 3)
                .add("cpu_ratio_max", *std::max_element(cpu_ratios.begin(), cpu_ratios.end()), 3)
                .add("max_dispatch_lag_entries", max_lag)
                .add("failures", failures)
                .text()
         << std::endl;  // flushed: a node started later must not inherit it (LocalCluster forks)
  return failures == 0;
}

// --- Dispatch and rebuild ------------------------------------------------------------------------

// Appends `count` entries of `entry_size` bytes, each with a topic and a key of its own, in
// batches (at most kMaxAppendEntries entries and kMaxAppendBytes bytes); the last index, or 0 on a
// failure or after kPreloadTimeout.
std::uint64_t preload(const std::vector<std::string>& endpoints, std::uint64_t count,
                      std::uint64_t entry_size, const cli::Io& io) {
  client::Options options;
  options.endpoints = endpoints;
  options.retry_deadline_ms = 10000;
  auto created = client::Client::create(options);
  if (!created.ok()) {
    io.err << "preload: " << created.status().to_string() << "\n";
    return 0;
  }
  client::Client& cl = *created.value();
  const std::uint64_t batch =
      std::max<std::uint64_t>(1, std::min(kMaxAppendEntries, kMaxAppendBytes / (entry_size + 64)));
  const auto deadline = Clock::now() + kPreloadTimeout;
  std::uint64_t last = 0;
  for (std::uint64_t done = 0; done < count;) {
    if (Clock::now() > deadline) {
      io.err << "preload: not done within " << kPreloadTimeout.count() << " minutes\n";
      return 0;
    }
    const std::uint64_t n = std::min(batch, count - done);
    std::vector<std::string> payloads(n, std::string(entry_size, 'p'));
    std::vector<client::EntryAttributes> attributes(n);
    for (std::uint64_t i = 0; i < n; ++i) {
      attributes[i].topic = topic_for(done + i);
      attributes[i].keys = {"key-" + std::to_string(done + i)};
    }
    auto appended = cl.append(payloads, attributes);
    if (!appended.ok()) {
      io.err << "preload: " << appended.status().to_string() << "\n";
      return 0;
    }
    last = appended->last_index;
    done += n;
  }
  return last;
}

struct RebuildTiming {
  bool ok = false;
  double seconds = 0.0;
  std::uint64_t entries = 0;  // log entries indexed while timed
  // "status": from the first status that showed the node knows the commit index (restart and
  // election not counted); "start": from the restart, when the node had indexed everything before
  // it first answered (a log too small to time otherwise).
  std::string timed_from;
};

// Restarts node 1 without its derived indexes and times its dispatcher indexing the log through
// `last_index`. Polls the node's status every 20 ms.
RebuildTiming time_rebuild(testing::LocalCluster& cluster, std::uint64_t last_index,
                           const cli::Io& io) {
  RebuildTiming timing;
  if (int code = cluster.stop(1); code != 0) {
    io.err << "node 1 exited with " << code << " when stopped\n";
    return timing;
  }
  std::error_code ec;
  std::filesystem::remove_all(std::filesystem::path(cluster.data_dir(1)) / "derived", ec);
  if (ec) {
    io.err << "cannot remove node 1's derived indexes: " << ec.message() << "\n";
    return timing;
  }
  const auto restarted = Clock::now();
  cluster.start(1);
  const auto deadline = restarted + kRebuildTimeout;
  std::optional<Clock::time_point> started;
  std::uint64_t indexed_at_start = 0;
  while (Clock::now() < deadline) {
    // A client of its own per poll (LocalCluster::status): one channel kept across the restart
    // would wait out gRPC's reconnect backoff (seen: 5 s) after the first refused connection.
    const std::optional<client::NodeStatus> status = cluster.status(1);
    const auto now = Clock::now();
    if (status && status->commit_index >= last_index) {
      if (!status->derived_problem.empty()) {
        io.err << "node 1's indexes: " << status->derived_problem << "\n";
        return timing;
      }
      const std::uint64_t indexed = status->derived_indexed_through;
      if (!started) {
        const bool done_already = indexed >= last_index;
        started = done_already ? restarted : now;
        indexed_at_start = done_already ? 0 : indexed;
        timing.timed_from = done_already ? "start" : "status";
      }
      if (indexed >= last_index) {
        timing.ok = true;
        timing.seconds = std::chrono::duration<double>(now - *started).count();
        timing.entries = last_index - indexed_at_start;
        return timing;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  io.err << "node 1 did not index through " << last_index << " within "
         << std::chrono::duration_cast<std::chrono::minutes>(kRebuildTimeout).count()
         << " minutes\n";
  return timing;
}

// One 1-node cluster: `count` entries of `entry_size` bytes with topics and keys, then a rebuild.
bool run_rebuild(const char* bench_name, std::uint64_t count, std::uint64_t entry_size,
                 const std::string& flush_mode, const cli::Io& io) {
  auto cluster = start_cluster(1, flush_mode, io);
  if (!cluster) return false;
  const auto preload_started = Clock::now();
  const std::uint64_t last_index = preload(endpoints_of(*cluster), count, entry_size, io);
  if (last_index == 0) return false;
  io.err << bench_name << ": appended " << count << " entries of " << entry_size << " bytes in "
         << fixed(seconds_since(preload_started), 1) << " s; restarting node 1 without indexes\n";
  const RebuildTiming timing = time_rebuild(*cluster, last_index, io);
  if (!timing.ok) return false;
  // The payload bytes the timed part of the rebuild read (envelopes not counted).
  const double gib = static_cast<double>(timing.entries) * static_cast<double>(entry_size) / kGiB;
  const double seconds = std::max(timing.seconds, 1e-3);
  io.out << ResultLine(bench_name)
                .add("entries", timing.entries)
                .add("entry_size_bytes", entry_size)
                .add("log_payload_gib", gib, 3)
                .add("seconds", timing.seconds, 3)
                .add("entries_per_s", static_cast<double>(timing.entries) / seconds, 0)
                .add("gib_per_s", gib / seconds, 3)
                .add("timed_from", timing.timed_from)
                .text()
         << std::endl;  // flushed: a node started later must not inherit it (LocalCluster forks)
  return true;
}

// --live-slices: milliseconds up to 1000 (raftlogd's --derived-persist-slice-ms range), by commas.
bool parse_slices(const std::string& list, std::vector<std::uint64_t>* slices) {
  std::istringstream items(list);
  for (std::string item; std::getline(items, item, ',');) {
    const bool digits = !item.empty() && item.size() <= 4 &&
                        std::all_of(item.begin(), item.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || std::stoull(item) > 1000) return false;
    slices->push_back(std::stoull(item));
  }
  return !slices->empty();
}

}  // namespace

int run_topics_command(std::string_view command_path, std::span<const std::string> args,
                       const cli::Io& io) {
  std::string phases = "append,dispatch,rebuild";
  std::uint64_t rounds = 4;
  std::uint64_t round_seconds = 5;
  std::uint64_t clients = 16;
  std::uint64_t entry_size = 1024;
  std::uint64_t dispatch_entries = 200000;
  std::uint64_t dispatch_entry_size = 128;
  std::uint64_t rebuild_bytes = 512ULL << 20;
  std::uint64_t rebuild_entry_size = 64ULL << 10;
  std::string flush_mode = "sync";
  LiveSettings live;
  std::string live_keys = "both";
  std::string live_slices = "0,20";
  cli::FlagSet flags(
      std::string(command_path),
      "What topics and keys cost: appends/s of a 3-node cluster without and with a topic and a "
      "key per entry, alternating round by round (append); the dispatcher's entries/s (dispatch) "
      "and GiB/s of log (rebuild) when a restarted 1-node cluster rebuilds its indexes; the "
      "dispatchers' lag and time under a steady load with many topics (live, not by default). "
      "Starts its own local clusters.");
  flags.string_flag("phases", &phases, "LIST", "any of append,dispatch,rebuild,live");
  flags.uint_flag("live-nodes", &live.nodes, "N", "live: nodes", {1, 5});
  flags.uint_flag("live-topics", &live.topics, "N", "live: topics the entries spread over",
                  {1, 10000});
  flags.uint_flag("live-rate", &live.rate, "N", "live: appends per second offered", {1, 20000});
  flags.uint_flag("live-batch", &live.batch, "N", "live: entries per append", {1, 1024});
  flags.bytes_flag("live-entry-size", &live.entry_size, "BYTES", "live: payload bytes per entry",
                   {1, 64ULL << 10});
  flags.uint_flag("live-seconds", &live.seconds, "S", "live: seconds of load per variant",
                  {1, 600});
  flags.string_flag("live-keys", &live_keys, "off|on|both", "live: a unique key per entry");
  flags.string_flag("live-slices", &live_slices, "LIST",
                    "live: raftlogd --derived-persist-slice-ms values, one cluster each (0: the "
                    "whole persist at once, as before 2026-12-07)");
  flags.uint_flag("rounds", &rounds, "N", "append: rounds, each running both variants", {1, 100});
  flags.uint_flag("round-seconds", &round_seconds, "S", "append: seconds per variant and round",
                  {1, 600});
  flags.uint_flag("clients", &clients, "N", "append: closed-loop clients", {1, 256});
  flags.bytes_flag("entry-size", &entry_size, "BYTES", "append: payload bytes per entry",
                   {1, 1ULL << 20});
  flags.uint_flag("dispatch-entries", &dispatch_entries, "N", "dispatch: entries in the log",
                  {1, 10'000'000});
  flags.bytes_flag("dispatch-entry-size", &dispatch_entry_size, "BYTES",
                   "dispatch: payload bytes per entry", {1, 1ULL << 20});
  flags.bytes_flag("rebuild-bytes", &rebuild_bytes, "BYTES", "rebuild: payload bytes in the log",
                   {1, 16ULL << 30});
  flags.bytes_flag("rebuild-entry-size", &rebuild_entry_size, "BYTES",
                   "rebuild: payload bytes per entry", {1, 1ULL << 20});
  flags.string_flag("flush-mode", &flush_mode, "sync|async", "flush mode of the clusters");
  if (int code = cli::parse_or_exit(flags, command_path, args, io); code >= 0) return code;
  bool append = false, dispatch = false, rebuild = false, run_live = false, known = true;
  std::istringstream phase_list(phases);
  for (std::string phase; std::getline(phase_list, phase, ',');) {
    if (phase == "append") {
      append = true;
    } else if (phase == "dispatch") {
      dispatch = true;
    } else if (phase == "rebuild") {
      rebuild = true;
    } else if (phase == "live") {
      run_live = true;
    } else {
      known = false;
    }
  }
  std::vector<std::uint64_t> slices;
  known = parse_slices(live_slices, &slices) && known;
  if (!known || (!append && !dispatch && !rebuild && !run_live) || slices.empty() ||
      (live_keys != "off" && live_keys != "on" && live_keys != "both") ||
      (flush_mode != "sync" && flush_mode != "async")) {
    io.err << command_path << ": --phases is a list of append, dispatch, rebuild and live; "
           << "--flush-mode is sync or async; --live-keys off, on or both; --live-slices a list "
           << "of milliseconds up to 1000\n";
    return cli::kExitUsage;
  }
  bool ok = true;
  if (append)
    ok = run_append_cost(rounds, round_seconds, clients, entry_size, flush_mode, io) && ok;
  if (dispatch) {
    ok =
        run_rebuild("topics-dispatch", dispatch_entries, dispatch_entry_size, flush_mode, io) && ok;
  }
  if (rebuild) {
    const std::uint64_t entries = std::max<std::uint64_t>(1, rebuild_bytes / rebuild_entry_size);
    ok = run_rebuild("topics-rebuild", entries, rebuild_entry_size, flush_mode, io) && ok;
  }
  if (run_live) ok = run_topics_live(live, slices, live_keys, flush_mode, io) && ok;
  return ok ? cli::kExitOk : cli::kExitFailure;
}

}  // namespace raftlog::bench

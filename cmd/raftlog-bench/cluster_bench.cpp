// `raftlog-bench cluster` and `raftlog-bench failover`: load against a running (or self-started)
// raftlog cluster, and leader-kill failover time.
#include "cluster_bench.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "cli/flags.h"
#include "client/client.h"
#include "client/producer.h"
#include "closed_loop.h"
#include "local_cluster_run.h"
#include "report.h"
#include "testing/local_cluster.h"

namespace raftlog::bench {

std::string sibling_raftlogd() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "raftlogd";
  return (self.parent_path() / "raftlogd").string();
}

ClientCall append_call(const client::Options& options, std::size_t batch, std::size_t entry_size,
                       std::uint64_t client_index) {
  auto created = client::Client::create(options);
  if (!created.ok()) return {};
  // Shared, so the call (a copyable std::function) owns the client; one thread uses it.
  std::shared_ptr<client::Client> cl = std::move(created.value());
  auto payloads = std::make_shared<std::vector<std::string>>(
      batch, std::string(entry_size, static_cast<char>('a' + client_index % 26)));
  return [cl, payloads] { return cl->append(*payloads).ok(); };
}

namespace {

using Clock = std::chrono::steady_clock;

// Starts a local cluster when no endpoints were given, so one command measures everything.
struct ClusterSource {
  std::unique_ptr<testing::LocalCluster> spawned;
  std::vector<std::string> endpoints;
};

std::optional<ClusterSource> resolve_cluster(const std::string& endpoints_text, std::uint64_t nodes,
                                             const std::string& flush_mode, const cli::Io& io) {
  ClusterSource source;
  if (!endpoints_text.empty()) {
    auto parsed = client::parse_endpoints(endpoints_text);
    if (!parsed.ok()) {
      io.err << "--endpoints: " << parsed.status().message() << "\n";
      return std::nullopt;
    }
    source.endpoints = parsed.value();
    return source;
  }
  testing::LocalClusterOptions options;
  options.raftlogd_path = sibling_raftlogd();
  options.nodes = static_cast<int>(nodes);
  options.flush_mode = flush_mode;
  options.segment_size_bytes = 256ULL << 20;
  options.max_entry_size_bytes = 4ULL << 20;
  source.spawned = start_local_cluster(options, io.err);
  if (!source.spawned) return std::nullopt;
  source.endpoints = endpoints_of(*source.spawned);
  io.err << started_line(*source.spawned, flush_mode) << "\n";
  return source;
}

}  // namespace

int run_cluster_command(std::string_view command_path, std::span<const std::string> args,
                        const cli::Io& io) {
  std::string endpoints;
  std::string server_pids_text;
  std::uint64_t clients = 64;
  std::uint64_t entry_size = 1024;
  std::uint64_t batch = 1;
  std::uint64_t duration_s = 10;
  std::uint64_t nodes = 3;
  std::uint64_t producer_lanes = 0;
  std::string flush_mode = "sync";
  std::string append_rpc = "stream";
  cli::FlagSet flags(
      std::string(command_path),
      "Closed-loop append load: N clients, each appending batches of B entries of S bytes and "
      "waiting for each commit. Without --endpoints it starts its own local cluster.");
  flags.string_flag("endpoints", &endpoints, "HOST:PORT,...",
                    "an existing cluster (default: start one)");
  flags.uint_flag("clients", &clients, "N",
                  "concurrent clients, each with its own client object and client id");
  flags.bytes_flag("entry-size", &entry_size, "BYTES", "payload bytes per entry");
  flags.uint_flag("batch", &batch, "B", "entries per Append call");
  flags.uint_flag("duration", &duration_s, "SECONDS", "how long to run");
  flags.uint_flag("nodes", &nodes, "3|5",
                  "size of the cluster started when --endpoints is not given");
  flags.string_flag("flush-mode", &flush_mode, "sync|async", "flush mode of the cluster it starts");
  flags.string_flag(
      "server-pids", &server_pids_text, "PID,...",
      "report CPU seconds and RSS of these server processes over the run (with --endpoints)");
  flags.uint_flag(
      "producer-lanes", &producer_lanes, "L",
      "0: each client has its own Client and sends its own Append per call; 1..64: the clients "
      "share one client::Producer with L lanes, which coalesces their one-entry appends (needs "
      "--batch 1)");
  flags.string_flag("append-rpc", &append_rpc, "stream|own-stream|unary",
                    "stream: the client library's default, the clients' appends share one "
                    "AppendStream call per node and leave together; own-stream: each client "
                    "sends its appends on an AppendStream call of its own; unary: one Append call "
                    "each");
  // Fixed ids make a run replayable against the same cluster (--endpoints): a second run with the
  // same ids re-sends each client's appends from --first-sequence (a client's payloads are all
  // alike). The node remembers the last 64 sequences of each client (docs/durability.md): those
  // answer as duplicates, counted like appends (such a run measures the dedup answers), and a
  // client that made more than 64 appends in the first run has its first ones refused
  // SEQUENCE_TOO_OLD, counted as failures.
  std::uint64_t first_client_id = 0;
  std::uint64_t first_sequence = 1;
  flags.uint_flag("first-client-id", &first_client_id, "ID",
                  "client c (0-based) appends as client ID + c (default: random ids)",
                  {1, std::numeric_limits<std::uint64_t>::max() - kMaxLoadClients});
  flags.uint_flag("first-sequence", &first_sequence, "N",
                  "each client's first append's sequence number (needs --first-client-id)",
                  {1, std::numeric_limits<std::uint64_t>::max() / 2});
  if (int code = cli::parse_or_exit(flags, command_path, args, io); code >= 0) return code;
  if (flags.was_set("first-sequence") && !flags.was_set("first-client-id")) {
    io.err << command_path << ": --first-sequence needs --first-client-id\n";
    return cli::kExitUsage;
  }
  if (flags.was_set("first-client-id") && endpoints.empty()) {
    io.err << command_path
           << ": --first-client-id needs --endpoints (a cluster this run starts holds no earlier "
              "appends to replay)\n";
    return cli::kExitUsage;
  }
  if (flags.was_set("first-client-id") && producer_lanes != 0) {
    io.err << command_path
           << ": --first-client-id is for clients of their own (--producer-lanes 0): a Producer's "
              "lanes pick their ids\n";
    return cli::kExitUsage;
  }
  if (append_rpc != "stream" && append_rpc != "own-stream" && append_rpc != "unary") {
    io.err << command_path << ": --append-rpc must be stream, own-stream or unary\n";
    return cli::kExitUsage;
  }
  const bool use_stream = append_rpc != "unary";
  const bool share_stream = append_rpc == "stream";
  if (clients == 0 || clients > kMaxLoadClients || batch == 0 || batch > 1024 || duration_s == 0 ||
      duration_s > kMaxLoadDurationS || (nodes != 3 && nodes != 5 && nodes != 1) ||
      producer_lanes > client::kMaxProducerLanes || (producer_lanes != 0 && batch != 1)) {
    io.err << command_path << ": need 1 <= clients <= " << kMaxLoadClients
           << ", 1 <= batch <= 1024, 1 <= duration <= " << kMaxLoadDurationS
           << ", nodes 1, 3 or 5, "
           << "producer-lanes <= " << client::kMaxProducerLanes << " and only with batch 1\n";
    return cli::kExitUsage;
  }
  std::optional<ClosedLoopOptions> load_options = make_closed_loop_options(
      clients, duration_s, batch, entry_size, server_pids_text, command_path, io.err);
  if (!load_options) return cli::kExitUsage;
  ClosedLoopOptions& load = *load_options;
  auto source = resolve_cluster(endpoints, nodes, flush_mode, io);
  if (!source) return cli::kExitFailure;

  std::shared_ptr<client::Producer> producer;
  if (producer_lanes != 0) {
    client::ProducerOptions options;
    options.client.endpoints = source->endpoints;
    options.client.retry_deadline_ms = 10000;
    options.client.append_stream = use_stream;
    options.client.share_append_stream = share_stream;
    options.lanes = producer_lanes;
    auto created = client::Producer::create(options);
    if (!created.ok()) {
      io.err << command_path << ": " << created.status().to_string() << "\n";
      return cli::kExitFailure;
    }
    producer = std::move(created).value();
  }
  const ClosedLoopResult result = run_closed_loop(
      load,
      [&](std::uint64_t c) -> ClientCall {
        if (producer) {
          return [producer, payload = std::string(entry_size, static_cast<char>('a' + c % 26))] {
            return producer->append(payload).ok();
          };
        }
        client::Options options;
        options.endpoints = source->endpoints;
        options.retry_deadline_ms = 10000;
        options.append_stream = use_stream;
        options.share_append_stream = share_stream;
        if (first_client_id != 0) {
          options.client_id = first_client_id + c;
          options.first_sequence = first_sequence;
        }
        return append_call(options, batch, entry_size, c);
      },
      io.err);
  ResultLine line("cluster");
  add_closed_loop_fields(line, load, result);
  line.add("flush_mode", endpoints.empty() ? flush_mode : std::string("external"));
  line.add("producer_lanes", producer_lanes);
  line.add("append_rpc", append_rpc);
  if (first_client_id != 0) {
    line.add("first_client_id", first_client_id);
    line.add("first_sequence", first_sequence);
  }
  if (producer) {
    const client::Producer::Stats stats = producer->stats();
    line.add("entries_per_rpc",
             stats.rpcs == 0 ? 0.0 : static_cast<double>(stats.entries) / stats.rpcs, 1);
  }
  io.out << line.text() << "\n";
  return result.failures == 0 ? cli::kExitOk : cli::kExitFailure;
}

int run_failover_command(std::string_view command_path, std::span<const std::string> args,
                         const cli::Io& io) {
  std::uint64_t trials = 5;
  std::uint64_t nodes = 3;
  std::uint64_t writers = 4;
  std::string flush_mode = "sync";
  cli::FlagSet flags(
      std::string(command_path),
      "Leader kill -9 under a writer load: time from the kill until an append is acknowledged "
      "by the new leader. Starts its own local cluster; restarts the killed node between trials.");
  flags.uint_flag("trials", &trials, "N", "number of leader kills (1..100)");
  flags.uint_flag("nodes", &nodes, "3|5", "cluster size");
  flags.uint_flag("writers", &writers, "N", "concurrent writers during each trial (1..64)");
  flags.string_flag("flush-mode", &flush_mode, "sync|async", "flush mode of the cluster");
  if (int code = cli::parse_or_exit(flags, command_path, args, io); code >= 0) return code;
  if (trials == 0 || trials > 100 || (nodes != 3 && nodes != 5) || writers == 0 || writers > 64) {
    io.err << command_path << ": need 1 <= trials <= 100, nodes 3 or 5, 1 <= writers <= 64\n";
    return cli::kExitUsage;
  }
  auto source = resolve_cluster("", nodes, flush_mode, io);
  if (!source) return cli::kExitFailure;
  testing::LocalCluster& cluster = *source->spawned;

  std::vector<double> failover_ms;
  for (std::uint64_t trial = 0; trial < trials; ++trial) {
    const int leader = cluster.wait_for_leader(std::chrono::seconds(15));
    if (leader == 0) {
      io.err << "trial " << trial << ": no leader\n";
      return cli::kExitFailure;
    }
    const auto old = cluster.status(leader);
    const std::uint64_t old_term = old ? old->term : 0;
    std::atomic<bool> stop{false};
    std::atomic<std::int64_t> recovered_at_ns{0};
    std::atomic<std::int64_t> killed_at_ns{0};
    std::vector<std::thread> threads;
    for (std::uint64_t w = 0; w < writers; ++w) {
      threads.emplace_back([&] {
        client::Options options;
        options.endpoints = source->endpoints;
        options.call_timeout_ms = 300;
        options.retry_deadline_ms = 600;
        options.backoff_min_ms = 5;
        options.backoff_max_ms =
            25;  // fine-grained retries: the measurement is only as good as them
        auto created = client::Client::create(options);
        if (!created.ok()) return;
        auto& cl = created.value();
        // Bounded: the trial stops the writers within 15 s (see below).
        while (!stop.load()) {
          auto r = cl->append({"failover-probe"});
          if (r.ok() && r->term > old_term && killed_at_ns.load() != 0) {
            std::int64_t expected = 0;
            const std::int64_t now = Clock::now().time_since_epoch().count();
            recovered_at_ns.compare_exchange_strong(expected, now);
          }
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    killed_at_ns.store(Clock::now().time_since_epoch().count());
    cluster.kill(leader);
    const auto give_up = Clock::now() + std::chrono::seconds(15);
    while (recovered_at_ns.load() == 0 && Clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    stop.store(true);
    for (auto& t : threads) t.join();
    if (recovered_at_ns.load() == 0) {
      io.err << "trial " << trial << ": writes did not resume within 15 s\n";
      return cli::kExitFailure;
    }
    const double ms = static_cast<double>(recovered_at_ns.load() - killed_at_ns.load()) / 1e6;
    failover_ms.push_back(ms);
    io.err << "trial " << trial + 1 << "/" << trials << ": killed leader node " << leader
           << " (term " << old_term << "), writes resumed after " << fixed(ms, 1) << " ms\n";
    cluster.start(leader);
    // Let the restarted node catch up before the next kill, so each trial starts from a full cluster.
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  }
  std::vector<double> sorted = failover_ms;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted.size() % 2 == 1
                            ? sorted[sorted.size() / 2]
                            : (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]) / 2;
  io.out << ResultLine("failover")
                .add("nodes", nodes)
                .add("trials", trials)
                .add("flush_mode", flush_mode)
                .add("median_ms", median, 1)
                .add("max_ms", sorted.back(), 1)
                .add("min_ms", sorted.front(), 1)
                .text()
         << "\n";
  return cli::kExitOk;
}

}  // namespace raftlog::bench

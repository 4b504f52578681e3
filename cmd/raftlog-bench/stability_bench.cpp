// `raftlog-bench leader-stability`: closed-loop appends of large entries against a local cluster while
// busy threads hold the CPUs, and how often the cluster changed its leader meanwhile.
#include "stability_bench.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "busy_threads.h"
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

// The documented default limits (docs/configuration.md): the soak stays within them.
constexpr std::uint64_t kDefaultMaxEntryBytes = 4ULL << 20;
constexpr std::uint64_t kDefaultMaxAppendBytes = 8ULL << 20;
constexpr std::chrono::milliseconds kSampleInterval{100};
// Bounds the disk the soak uses: each node keeps about this much log (the retention policy deletes
// older committed segments every second).
constexpr std::uint64_t kRetainedBytesPerNode = 1ULL << 30;
constexpr std::size_t kMaxRoleLinesPerNode = 20;

// Samples every node's status until stopped and counts leader changes: a node naming a leader in a
// term above every term a leader was seen in before.
class LeaderWatch {
 public:
  explicit LeaderWatch(testing::LocalCluster& cluster) {
    for (int id = 1; id <= cluster.size(); ++id) {
      client::Options options;
      options.endpoints = {cluster.address(id)};
      options.call_timeout_ms = 500;
      auto created = client::Client::create(options);
      if (created.ok()) nodes_.push_back(Node{cluster.address(id), std::move(created).value()});
    }
    sample();
    initial_term_ = max_term_;
    thread_ = std::thread([this] { run(); });
  }
  ~LeaderWatch() { stop(); }
  LeaderWatch(const LeaderWatch&) = delete;
  LeaderWatch& operator=(const LeaderWatch&) = delete;

  void stop() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  // After stop().
  std::uint64_t elections() const {
    return max_term_ - initial_term_;
  }  // every real campaign bumps the term
  std::uint64_t leader_changes() const { return leader_changes_; }
  std::uint64_t unanswered_samples() const { return unanswered_; }
  std::uint64_t max_term() const { return max_term_; }

 private:
  struct Node {
    std::string address;
    std::unique_ptr<client::Client> client;
  };

  void run() {
    std::unique_lock lock(mu_);
    // Bounded: stops when stop() is called, at the end of the measurement.
    while (!wake_.wait_for(lock, kSampleInterval, [&] { return stopping_; })) {
      lock.unlock();
      sample();
      lock.lock();
    }
  }

  void sample() {
    for (Node& node : nodes_) {
      auto status = node.client->status(node.address);
      if (!status.ok()) {
        ++unanswered_;
        continue;
      }
      max_term_ = std::max(max_term_, status->term);
      if (status->leader_id == 0) continue;
      if (leader_term_ != 0 && status->term > leader_term_) ++leader_changes_;
      leader_term_ = std::max(leader_term_, status->term);
    }
  }

  std::vector<Node> nodes_;
  // Written by the sampling thread only (and by the constructor before it starts).
  std::uint64_t initial_term_ = 0;
  std::uint64_t max_term_ = 0;
  std::uint64_t leader_term_ = 0;  // the highest term a leader was seen in
  std::uint64_t leader_changes_ = 0;
  std::uint64_t unanswered_ = 0;

  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

// The nodes' "role A -> B" log lines, so a run with elections shows when and why.
void print_role_changes(const testing::LocalCluster& cluster, std::ostream& err) {
  for (int id = 1; id <= cluster.size(); ++id) {
    std::ifstream log(cluster.log_file(id));
    std::vector<std::string> lines;
    // Bounded by the log file's length; only the last few matching lines are kept.
    for (std::string line; std::getline(log, line);) {
      if (line.find(": role ") == std::string::npos) continue;
      lines.push_back(line);
      if (lines.size() > kMaxRoleLinesPerNode) lines.erase(lines.begin());
    }
    err << "node " << id << " role changes (last " << kMaxRoleLinesPerNode << "):\n";
    for (const std::string& line : lines) err << "  " << line << "\n";
  }
}

// A local 3-node cluster within the default limits, its log bounded by retention, with a leader; null
// (and why, on io.err) if it did not come up.
std::unique_ptr<testing::LocalCluster> start_cluster(const std::string& flush_mode,
                                                     std::uint64_t election_ticks,
                                                     const cli::Io& io) {
  testing::LocalClusterOptions options;
  options.raftlogd_path = sibling_raftlogd();
  options.nodes = 3;
  options.flush_mode = flush_mode;
  options.segment_size_bytes = 256ULL << 20;
  options.max_entry_size_bytes = kDefaultMaxEntryBytes;
  options.extra_flags = {"--retention-max-bytes", std::to_string(kRetainedBytesPerNode),
                         "--retention-check-interval-ms", "1000"};
  if (election_ticks != 0) {
    options.extra_flags.push_back("--election-ticks");
    options.extra_flags.push_back(std::to_string(election_ticks));
  }
  return start_local_cluster(options, io.err);
}

}  // namespace

int run_leader_stability_command(std::string_view command_path, std::span<const std::string> args,
                                 const cli::Io& io) {
  std::uint64_t entry_size = kDefaultMaxEntryBytes;
  std::uint64_t batch = 1;
  std::uint64_t clients = 2;
  std::uint64_t duration_s = 60;
  std::uint64_t busy_threads = 2;
  std::uint64_t busy_us = BusyThreads::kMaxBusyUs;
  std::uint64_t election_ticks = 0;
  std::string flush_mode = "sync";
  std::string keep_logs_dir;
  cli::FlagSet flags(
      std::string(command_path),
      "Closed-loop appends of B entries of S bytes by N clients against a local 3-node cluster "
      "while busy threads hold the CPUs; prints how many times the leader changed (the goal is "
      "zero). Entries and appends stay within the default limits (4 MiB, 8 MiB).");
  flags.bytes_flag("entry-size", &entry_size, "BYTES", "payload bytes per entry (at most 4MiB)");
  flags.uint_flag("batch", &batch, "B",
                  "entries per Append call (batch x entry-size at most 8MiB)");
  flags.uint_flag("clients", &clients, "N", "concurrent clients (1..64)");
  flags.uint_flag("duration", &duration_s, "SECONDS", "how long to append (1..3600)");
  flags.uint_flag("busy-threads", &busy_threads, "N", "threads that burn CPU meanwhile (0..64)");
  flags.uint_flag("busy-us", &busy_us, "US",
                  "CPU each busy thread burns before sleeping ~1 ms (1..100000)");
  flags.uint_flag("election-ticks", &election_ticks, "N",
                  "the nodes' --election-ticks (0: raftlogd's default)");
  flags.string_flag("flush-mode", &flush_mode, "sync|async", "flush mode of the cluster");
  flags.string_flag("keep-logs", &keep_logs_dir, "DIR", "copy the nodes' logs into DIR at the end");
  if (int code = cli::parse_or_exit(flags, command_path, args, io); code >= 0) return code;
  if (entry_size == 0 || entry_size > kDefaultMaxEntryBytes || batch == 0 ||
      batch * entry_size > kDefaultMaxAppendBytes || clients == 0 || clients > 64 ||
      duration_s == 0 || duration_s > kMaxLoadDurationS || busy_threads > 64 || busy_us == 0 ||
      busy_us > BusyThreads::kMaxBusyUs || (flush_mode != "sync" && flush_mode != "async")) {
    io.err << command_path
           << ": need 1 <= entry-size <= 4MiB, batch x entry-size <= 8MiB, 1 <= clients <= 64, "
           << "1 <= duration <= " << kMaxLoadDurationS
           << ", busy-threads <= 64, 1 <= busy-us <= " << BusyThreads::kMaxBusyUs
           << ", flush-mode sync or async\n";
    return cli::kExitUsage;
  }

  std::unique_ptr<testing::LocalCluster> cluster = start_cluster(flush_mode, election_ticks, io);
  if (!cluster) return cli::kExitFailure;
  io.err << started_line(*cluster, flush_mode) << "; " << busy_threads << " busy threads\n";

  std::optional<ClosedLoopOptions> load =
      make_closed_loop_options(clients, duration_s, batch, entry_size, "", command_path, io.err);
  if (!load) return cli::kExitUsage;
  const std::vector<std::string> endpoints = endpoints_of(*cluster);

  BusyThreads busy(busy_threads, busy_us);
  LeaderWatch watch(*cluster);
  const ClosedLoopResult result = run_closed_loop(
      *load,
      [&](std::uint64_t c) -> ClientCall {
        client::Options client_options;
        client_options.endpoints = endpoints;
        client_options.retry_deadline_ms = 10000;
        client_options.call_timeout_ms = 10000;
        return append_call(client_options, batch, entry_size, c);
      },
      io.err);
  watch.stop();
  const double busy_cpu_s = busy.stop();
  if (watch.elections() != 0) print_role_changes(*cluster, io.err);
  if (!keep_logs_dir.empty()) keep_logs(*cluster, keep_logs_dir, io.err);

  ResultLine line("leader_stability");
  add_closed_loop_fields(line, *load, result);
  line.add("flush_mode", flush_mode)
      .add("election_ticks",
           election_ticks == 0 ? std::string("default") : std::to_string(election_ticks))
      .add("busy_threads", busy_threads)
      .add("busy_cpu_s", busy_cpu_s, 1)
      .add("append_mib", static_cast<double>(batch * entry_size) / static_cast<double>(1 << 20), 2)
      .add("leader_changes", watch.leader_changes())
      .add("elections", watch.elections())
      .add("final_term", watch.max_term())
      .add("unanswered_status_samples", watch.unanswered_samples());
  io.out << line.text() << "\n";
  return cli::kExitOk;
}

}  // namespace raftlog::bench

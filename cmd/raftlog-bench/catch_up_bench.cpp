// `raftlog-bench catch-up`: a new member catches up by replication from a leader holding hundreds of
// MiB of retained entries, and what that costs the leader's Raft loop (issue 15, drills F6).
#include "catch_up_bench.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "cli/flags.h"
#include "client/admin.h"
#include "client/client.h"
#include "cluster_bench.h"
#include "local_cluster_run.h"
#include "report.h"
#include "testing/loop_rounds.h"
#include "testing/local_cluster.h"

namespace raftlog::bench {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr std::uint64_t kMaxLogMib = 4096;
constexpr std::uint64_t kMaxEntryBytes = 4ULL << 20;
constexpr std::uint64_t kMaxAppendBytes = 8ULL << 20;
constexpr int kFounders = 3;
constexpr int kLearner = kFounders + 1;
constexpr auto kSampleInterval = 100ms;

using testing::LoopRounds;
using testing::scrape_loop_rounds;

// The highest term any founder reports, sampled until stopped (every real campaign bumps it).
class TermWatch {
 public:
  explicit TermWatch(testing::LocalCluster& cluster) : cluster_(cluster) {
    initial_ = sample();
    max_ = initial_;
    thread_ = std::thread([this] {
      // Bounded: stops when stop() is called.
      while (!stopping_.load()) {
        max_ = std::max(max_.load(), sample());
        std::this_thread::sleep_for(kSampleInterval);
      }
    });
  }
  ~TermWatch() { stop(); }
  TermWatch(const TermWatch&) = delete;
  TermWatch& operator=(const TermWatch&) = delete;
  void stop() {
    stopping_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  std::uint64_t elections() const { return max_.load() - initial_; }

 private:
  std::uint64_t sample() {
    std::uint64_t term = 0;
    for (int id = 1; id <= kFounders; ++id) {
      if (auto status = cluster_.status(id)) term = std::max(term, status->term);
    }
    return term;
  }
  testing::LocalCluster& cluster_;
  std::uint64_t initial_ = 0;
  std::atomic<std::uint64_t> max_{0};
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

// Appends `total_bytes` of `entry_size` entries, `batch` per call; the last index appended, 0 on a
// failed append.
std::uint64_t fill_log(testing::LocalCluster& cluster, std::uint64_t total_bytes,
                       std::uint64_t entry_size, std::uint64_t batch, std::ostream& err) {
  client::Options options;
  options.endpoints = endpoints_of(cluster, kFounders);
  options.retry_deadline_ms = 20000;
  options.call_timeout_ms = 20000;
  auto created = client::Client::create(options);
  if (!created.ok()) return 0;
  const std::vector<std::string> payloads(batch, std::string(entry_size, 'c'));
  const std::uint64_t calls = (total_bytes + batch * entry_size - 1) / (batch * entry_size);
  std::uint64_t last = 0;
  for (std::uint64_t i = 0; i < calls; ++i) {  // bounded by calls
    auto appended = created.value()->append(payloads);
    if (!appended.ok()) {
      err << "append failed: " << appended.status().message() << "\n";
      return 0;
    }
    last = appended->last_index;
  }
  return last;
}

}  // namespace

int run_catch_up_command(std::string_view command_path, std::span<const std::string> args,
                         const cli::Io& io) {
  std::uint64_t log_mib = 200;
  std::uint64_t entry_size = 64 << 10;
  std::uint64_t batch = 4;
  std::uint64_t timeout_s = 300;
  std::string keep_logs_dir;
  cli::FlagSet flags(
      std::string(command_path),
      "Starts a local 3-node cluster, appends --log-mib MiB of --entry-size entries, then adds a "
      "fourth node (--join, added as a learner) that catches up by replication; prints the "
      "catch-up time, the elections meanwhile and the leader's Raft loop rounds "
      "(raftlog_raft_loop_round_seconds) during the catch-up.");
  flags.uint_flag("log-mib", &log_mib, "MIB",
                  "log to append before the new member joins (1..4096)");
  flags.bytes_flag("entry-size", &entry_size, "BYTES", "payload bytes per entry (at most 4MiB)");
  flags.uint_flag("batch", &batch, "B", "entries per Append call (batch x entry-size <= 8MiB)");
  flags.uint_flag("timeout", &timeout_s, "SECONDS", "how long the catch-up may take (1..3600)");
  flags.string_flag("keep-logs", &keep_logs_dir, "DIR", "copy the nodes' logs into DIR at the end");
  if (int code = cli::parse_or_exit(flags, command_path, args, io); code >= 0) return code;
  if (log_mib == 0 || log_mib > kMaxLogMib || entry_size == 0 || entry_size > kMaxEntryBytes ||
      batch == 0 || batch * entry_size > kMaxAppendBytes || timeout_s == 0 || timeout_s > 3600) {
    io.err << command_path
           << ": need 1 <= log-mib <= 4096, 1 <= entry-size <= 4MiB, batch x entry-size <= 8MiB, "
              "1 <= timeout <= 3600\n";
    return cli::kExitUsage;
  }

  testing::LocalClusterOptions options;
  options.raftlogd_path = sibling_raftlogd();
  options.nodes = kLearner;
  options.founding_members = kFounders;
  options.metrics = true;
  options.segment_size_bytes = 64ULL << 20;
  options.max_entry_size_bytes = kMaxEntryBytes;
  std::unique_ptr<testing::LocalCluster> cluster = start_local_cluster(options, io.err, kFounders);
  if (!cluster) return cli::kExitFailure;
  const auto fill_started = Clock::now();
  const std::uint64_t last = fill_log(*cluster, log_mib << 20, entry_size, batch, io.err);
  if (last == 0) return cli::kExitFailure;
  const double fill_s = std::chrono::duration<double>(Clock::now() - fill_started).count();
  const int leader = cluster->wait_for_leader(15s);
  std::optional<LoopRounds> before = scrape_loop_rounds(cluster->metrics_address(leader));
  if (leader == 0 || !before) {
    io.err << "no leader or no metrics after the fill\n";
    return cli::kExitFailure;
  }
  io.err << "appended " << log_mib << " MiB up to index " << last << " in " << fill_s
         << " s; leader " << leader << "; adding node " << kLearner << "\n";

  client::Options admin_options;
  admin_options.endpoints = endpoints_of(*cluster, kFounders);
  admin_options.retry_deadline_ms = 20000;
  admin_options.call_timeout_ms = 20000;
  auto members = client::MembersClient::create(admin_options);
  if (!members.ok()) return cli::kExitFailure;
  TermWatch watch(*cluster);
  cluster->start(kLearner);
  const auto started = Clock::now();
  auto added = members.value()->add(kLearner, cluster->address(kLearner), /*learner=*/true);
  if (!added.ok()) {
    io.err << "members add: " << added.status().message() << "\n";
    return cli::kExitFailure;
  }
  const bool caught_up = cluster->wait_for_commit(kLearner, last, std::chrono::seconds(timeout_s));
  const double catch_up_s = std::chrono::duration<double>(Clock::now() - started).count();
  watch.stop();
  std::optional<LoopRounds> after = scrape_loop_rounds(cluster->metrics_address(leader));
  if (!after) after = before;

  const LoopRounds during = after->minus(*before);  // the catch-up's rounds (and the samples')
  if (!keep_logs_dir.empty()) keep_logs(*cluster, keep_logs_dir, io.err);
  ResultLine line("catch_up");
  line.add("log_mib", log_mib)
      .add("entry_size_bytes", entry_size)
      .add("last_index", last)
      .add("caught_up", caught_up ? "yes" : "no")
      .add("catch_up_s", catch_up_s, 2)
      .add("catch_up_mib_per_s", static_cast<double>(log_mib) / catch_up_s, 1)
      .add("elections", watch.elections())
      .add("leader_rounds", during.count, 0)
      .add("leader_rounds_over_128ms", during.over(0.128), 0)
      .add("leader_rounds_over_256ms", during.over(0.256), 0)
      .add("leader_longest_round_le_s", during.longest_bound(), 3);
  io.out << line.text() << "\n";
  return caught_up ? cli::kExitOk : cli::kExitFailure;
}

}  // namespace raftlog::bench

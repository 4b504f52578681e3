#include "closed_loop.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <ostream>
#include <string>
#include <thread>

#include "proc_usage.h"

namespace raftlog::bench {
namespace {

using Clock = std::chrono::steady_clock;

// A failed call is retried after this pause, so an unreachable server does not turn a client into a
// busy loop (the failure count still shows it).
constexpr std::chrono::milliseconds kPauseAfterFailure{10};

}  // namespace

double ClosedLoopResult::ops_per_s() const {
  return seconds > 0 ? static_cast<double>(ops()) / seconds : 0.0;
}

double ClosedLoopResult::percentile_ms(double fraction) const {
  if (sorted_latencies_us.empty()) return 0.0;
  const auto rank = static_cast<std::size_t>(
      fraction * static_cast<double>(sorted_latencies_us.size() - 1) + 0.5);
  return static_cast<double>(sorted_latencies_us[std::min(rank, sorted_latencies_us.size() - 1)]) /
         1000.0;
}

ClosedLoopResult run_closed_loop(const ClosedLoopOptions& options, const ClientFactory& make_client,
                                 std::ostream& progress) {
  assert(options.clients >= 1 && options.clients <= kMaxLoadClients);
  assert(options.duration.count() >= 1 &&
         static_cast<std::uint64_t>(options.duration.count()) <= kMaxLoadDurationS);
  std::atomic<std::uint64_t> ops{0};
  std::atomic<std::uint64_t> failures{0};
  std::atomic<std::uint64_t> last_ops{0};
  std::vector<std::vector<std::uint32_t>> latencies(options.clients);
  const ServerUsageWindow usage(options.server_pids);
  const auto start = Clock::now();
  const auto deadline = start + options.duration;
  {
    ProgressTicker ticker(progress, std::chrono::milliseconds(1000), [&] {
      const std::uint64_t now_ops = ops.load();
      const std::uint64_t delta = now_ops - last_ops.exchange(now_ops);
      return "t=" + fixed(seconds_since(start), 1) + "s ops/s=" + std::to_string(delta) +
             " entries/s=" + std::to_string(delta * options.entries_per_call) + " MiB/s=" +
             fixed(static_cast<double>(delta * options.entries_per_call *
                                       options.payload_bytes_per_entry) /
                       kMiB,
                   1) +
             " failures=" + std::to_string(failures.load());
    });
    std::vector<std::thread> threads;
    threads.reserve(options.clients);
    for (std::uint64_t c = 0; c < options.clients; ++c) {
      threads.emplace_back([&, c] {
        const ClientCall call = make_client(c);
        if (!call) {
          failures.fetch_add(1);
          return;
        }
        auto& mine = latencies[c];
        mine.reserve(std::min<std::size_t>(kMaxSamplesPerClient, 1 << 16));
        while (Clock::now() < deadline && mine.size() < kMaxSamplesPerClient) {
          const auto t0 = Clock::now();
          const bool acknowledged = call();
          const auto us =
              std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
          if (!acknowledged) {
            failures.fetch_add(1);
            std::this_thread::sleep_for(kPauseAfterFailure);
            continue;
          }
          mine.push_back(static_cast<std::uint32_t>(std::min<std::int64_t>(us, UINT32_MAX)));
          ops.fetch_add(1);
        }
      });
    }
    for (auto& t : threads) t.join();
  }
  ClosedLoopResult result;
  result.seconds = seconds_since(start);
  result.failures = failures.load();
  for (auto& v : latencies)
    result.sorted_latencies_us.insert(result.sorted_latencies_us.end(), v.begin(), v.end());
  std::sort(result.sorted_latencies_us.begin(), result.sorted_latencies_us.end());
  if (!usage.empty()) {
    const auto totals = usage.finish();
    result.server_usage_complete = totals.complete;
    result.server_cpu_s = totals.cpu_s;
    result.server_rss_total_kib = totals.rss_total_kib;
    result.server_rss_max_kib = totals.rss_max_kib;
    result.server_rss_anon_total_kib = totals.rss_anon_total_kib;
  }
  return result;
}

void add_closed_loop_fields(ResultLine& line, const ClosedLoopOptions& options,
                            const ClosedLoopResult& result) {
  const double entries_per_s = result.ops_per_s() * static_cast<double>(options.entries_per_call);
  line.add("clients", options.clients)
      .add("entry_size_bytes", options.payload_bytes_per_entry)
      .add("batch", options.entries_per_call)
      .add("seconds", result.seconds)
      .add("ops", result.ops())
      .add("ops_per_s", result.ops_per_s(), 0)
      .add("entries_per_s", entries_per_s, 0)
      .add("mib_per_s", entries_per_s * static_cast<double>(options.payload_bytes_per_entry) / kMiB)
      .add("p50_ms", result.percentile_ms(0.50), 3)
      .add("p99_ms", result.percentile_ms(0.99), 3)
      .add("p999_ms", result.percentile_ms(0.999), 3)
      .add("failures", result.failures);
  if (options.server_pids.empty()) return;
  const double entries = static_cast<double>(result.ops() * options.entries_per_call);
  line.add("server_processes", static_cast<std::uint64_t>(options.server_pids.size()))
      .add("server_usage_complete", result.server_usage_complete ? "true" : "false")
      .add("server_cpu_s", result.server_cpu_s, 2)
      .add("server_cpu_us_per_entry", entries > 0 ? result.server_cpu_s * 1e6 / entries : 0.0, 1)
      .add("server_rss_total_kib", result.server_rss_total_kib)
      .add("server_rss_max_kib", result.server_rss_max_kib)
      .add("server_rss_anon_total_kib", result.server_rss_anon_total_kib);
}

std::optional<ClosedLoopOptions> make_closed_loop_options(
    std::uint64_t clients, std::uint64_t duration_s, std::uint64_t entries_per_call,
    std::uint64_t payload_bytes_per_entry, const std::string& server_pids_text,
    std::string_view command_path, std::ostream& err) {
  ClosedLoopOptions load;
  load.clients = clients;
  load.duration = std::chrono::seconds(duration_s);
  load.entries_per_call = entries_per_call;
  load.payload_bytes_per_entry = payload_bytes_per_entry;
  if (!server_pids_text.empty()) {
    std::string error;
    auto pids = parse_pid_list(server_pids_text, &error);
    if (!pids) {
      err << command_path << ": --server-pids: " << error << "\n";
      return std::nullopt;
    }
    load.server_pids = std::move(*pids);
  }
  return load;
}

}  // namespace raftlog::bench

// The closed-loop load that `raftlog-bench cluster` (raftlog Append) and `raftlog-bench etcd` (etcd
// Put) share, so both systems see the same load generator: N client threads, each with its own
// client object, issue one call at a time and start the next as soon as the previous one is
// acknowledged. Only the call differs between the two targets.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "report.h"

namespace raftlog::bench {

inline constexpr std::uint64_t kMaxLoadClients = 1024;
inline constexpr std::uint64_t kMaxLoadDurationS = 3600;
inline constexpr std::size_t kMaxSamplesPerClient =
    4'000'000;  // bounds memory: 16 MB of latencies per client

struct ClosedLoopOptions {
  std::uint64_t clients = 64;          // 1..kMaxLoadClients
  std::chrono::seconds duration{10};   // 1..kMaxLoadDurationS
  std::uint64_t entries_per_call = 1;  // for entries/s and MiB/s
  std::uint64_t payload_bytes_per_entry = 1024;
  std::vector<pid_t>
      server_pids;  // their CPU time and RSS over the run are reported (may be empty)
};

// The options both load commands (cluster, etcd) build from their flags. Nullopt, with a message on
// `err`, when --server-pids does not parse.
std::optional<ClosedLoopOptions> make_closed_loop_options(
    std::uint64_t clients, std::uint64_t duration_s, std::uint64_t entries_per_call,
    std::uint64_t payload_bytes_per_entry, const std::string& server_pids_text,
    std::string_view command_path, std::ostream& err);

// One client's call: true when acknowledged. It runs only on that client's thread, one at a time.
using ClientCall = std::function<bool()>;
// Runs on client `index`'s own thread before its loop: connects and returns its call, or an empty
// function if it could not (counted as a failure; that client then sits out the run).
using ClientFactory = std::function<ClientCall(std::uint64_t index)>;

struct ClosedLoopResult {
  double seconds = 0.0;
  std::uint64_t failures = 0;
  std::vector<std::uint32_t> sorted_latencies_us;  // one per acknowledged call
  bool server_usage_complete = false;              // every server pid readable at both ends
  double server_cpu_s = 0.0;
  std::uint64_t server_rss_total_kib = 0;  // at the end of the run
  std::uint64_t server_rss_max_kib = 0;
  std::uint64_t server_rss_anon_total_kib =
      0;  // anonymous part of the total (the rest: mapped files)

  std::uint64_t ops() const { return sorted_latencies_us.size(); }
  double ops_per_s() const;
  double percentile_ms(double fraction) const;
};

// Runs the load for `options.duration` (each client stops at the deadline or after
// kMaxSamplesPerClient calls); prints a progress line a second to `progress`.
ClosedLoopResult run_closed_loop(const ClosedLoopOptions& options, const ClientFactory& make_client,
                                 std::ostream& progress);

// Adds the keys both `bench=cluster` and `bench=etcd` report: clients, entry_size_bytes, batch,
// seconds, ops, ops_per_s, entries_per_s, mib_per_s, p50_ms, p99_ms, p999_ms, failures and, with
// server pids, server_cpu_s, server_cpu_us_per_entry, server_rss_total_kib, server_rss_max_kib,
// server_rss_anon_total_kib.
void add_closed_loop_fields(ResultLine& line, const ClosedLoopOptions& options,
                            const ClosedLoopResult& result);

}  // namespace raftlog::bench

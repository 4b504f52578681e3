// raftlog-sim: runs the deterministic cluster simulator over one seed or a range of seeds.
//
//   raftlog-sim --seed S [--trace] [--nodes 3|5]            one seed; --trace prints every event
//   raftlog-sim --seeds N --seed-start S [--nodes 3|5]      N seeds from S, ends with a RESULT line
// Common options: --fault-ticks T, --liveness-ticks T, --aggressive (leader-churn fault profile),
// --reconfigure (membership changes in the fault schedule, with spare node slots), --retention
// (retention trims in the fault schedule: stranded followers must catch up through snapshots),
// --wipe (a node restarts on an empty data directory under its id), --plant-ignore-unvouched (TEST
// ONLY: the planted bug --wipe must catch), --plant-ignore-not-founder (TEST ONLY: the planted bug
// --wipe --reconfigure must catch).
// --version prints the version and git revision.
// Exit status: 0 when every seed passed, 1 on any violation or liveness failure, 2 on bad arguments.
// stdout is a pure function of the arguments (byte-identical every run); progress goes to stderr.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "sim/simulation.h"
#include "util/build_info.h"

namespace {

constexpr std::uint64_t kMaxSeedsPerRun = 100'000'000;
constexpr std::uint64_t kMaxTicks = 1'000'000;
constexpr int kFullReportsInSweep = 3;  // later failures in a sweep get one line each

struct Arguments {
  std::optional<std::uint64_t> seed;
  std::optional<std::uint64_t> seeds;
  std::uint64_t seed_start = 1;
  raftlog::sim::SimOptions options;
  bool trace = false;
};

void print_usage(std::FILE* out) {
  std::fputs(
      "usage: raftlog-sim --seed S [--trace] [--nodes 3|5] [options]\n"
      "       raftlog-sim --seeds N [--seed-start S] [--nodes 3|5] [options]\n"
      "options: --fault-ticks T (default 500)  --liveness-ticks T (recovery bound before the "
      "catch-up\n"
      "         allowance, default 250)  --aggressive (leader-churn fault profile for every seed)\n"
      "         --reconfigure (membership changes in the fault schedule; 2 spare node slots)\n"
      "         --retention (retention trims in the fault schedule; snapshots catch up)\n"
      "         --wipe (nodes restart on an empty data directory under their id)\n"
      "           with --reconfigure a wipe also needs the other voters holding a vouched log\n"
      "           to be a majority of every configuration naming the node as voter; a founder\n"
      "           loses only log/ after a membership change unless every other founder holds a\n"
      "           vouched log or knew a commit; no change is proposed while a wiped node is down\n"
      "           (what docs/operations.md forbids: docs/testing.md, \"Wiped data directories\")\n"
      "         --plant-ignore-unvouched (TEST ONLY: the replicas ignore DATA_DIR/UNVOUCHED)\n"
      "         --plant-ignore-not-founder (TEST ONLY: the replicas ignore DATA_DIR/NOT_FOUNDER)\n"
      "       raftlog-sim --version\n",
      out);
}

std::optional<std::uint64_t> parse_number(std::string_view text) {
  std::uint64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || ptr != end || text.empty()) return std::nullopt;
  return value;
}

// Returns an error message, or nullopt on success.
std::optional<std::string> parse(int argc, char** argv, Arguments& args) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    auto value = [&](std::uint64_t max) -> std::optional<std::uint64_t> {
      if (i + 1 >= argc) return std::nullopt;
      std::optional<std::uint64_t> number = parse_number(argv[++i]);
      if (!number || *number > max) return std::nullopt;
      return number;
    };
    std::optional<std::uint64_t> number;
    if (flag == "--trace") {
      args.trace = true;
    } else if (flag == "--aggressive") {
      args.options.aggressive = true;
    } else if (flag == "--reconfigure") {
      args.options.reconfigure = true;
    } else if (flag == "--retention") {
      args.options.retention = true;
    } else if (flag == "--wipe") {
      args.options.wipe = true;
    } else if (flag == "--plant-ignore-unvouched") {
      args.options.plant_ignore_unvouched = true;
    } else if (flag == "--plant-ignore-not-founder") {
      args.options.plant_ignore_not_founder = true;
    } else if (flag == "--seed") {
      if (!(number = value(UINT64_MAX))) return "--seed needs a number";
      args.seed = number;
    } else if (flag == "--seeds") {
      if (!(number = value(kMaxSeedsPerRun)) || *number == 0)
        return "--seeds needs a count in [1, 100000000]";
      args.seeds = number;
    } else if (flag == "--seed-start") {
      if (!(number = value(UINT64_MAX))) return "--seed-start needs a number";
      args.seed_start = *number;
    } else if (flag == "--nodes") {
      if (!(number = value(5)) || (*number != 3 && *number != 5)) return "--nodes must be 3 or 5";
      args.options.node_count = *number;
    } else if (flag == "--fault-ticks") {
      if (!(number = value(kMaxTicks))) return "--fault-ticks needs a number <= 1000000";
      args.options.fault_ticks = *number;
    } else if (flag == "--liveness-ticks") {
      if (!(number = value(kMaxTicks)) || *number == 0)
        return "--liveness-ticks needs a number in [1, 1000000]";
      args.options.liveness_ticks = *number;
    } else if (flag == "--help" || flag == "-h") {
      print_usage(stdout);
      std::exit(0);
    } else if (flag == "--version") {
      std::puts(raftlog::util::version_line("raftlog-sim").c_str());
      std::exit(0);
    } else {
      return fmt::format("unknown argument '{}'", flag);
    }
  }
  if (args.seed.has_value() == args.seeds.has_value())
    return "give exactly one of --seed and --seeds";
  if (args.trace && args.seeds) return "--trace is for a single --seed";
  if (args.seeds && *args.seeds - 1 > UINT64_MAX - args.seed_start) return "seed range overflows";
  return std::nullopt;
}

std::string summary(const raftlog::sim::SimResult& r) {
  return fmt::format(
      "ticks={} liveness_ticks={} leaders={} committed={} acked={} lost={} appends_acked={} "
      "dedup_answers={} "
      "reads={} crashes={} sync_failures={} flush_cycles={} catching_up={} pauses={} partitions={} "
      "sent={} "
      "dropped={} conf_changes={}/{}/{} trims={} snapshots_installed={} "
      "snapshot_points={}/{}/{}",
      r.ticks, r.liveness_ticks, r.leaders_elected, r.committed_entries, r.proposals_acknowledged,
      r.proposals_failed, r.appends_acknowledged, r.cluster.duplicate_answers, r.reads_released,
      r.cluster.crashes, r.cluster.sync_failures, r.cluster.flush_cycles,
      r.cluster.restarts_catching_up, r.cluster.pauses, r.partitions, r.cluster.messages_sent,
      r.cluster.messages_dropped, r.cluster.conf_changes_committed, r.cluster.conf_changes_proposed,
      r.cluster.conf_changes_refused, r.cluster.trims, r.cluster.snapshots_installed,
      r.cluster.snapshots_at_first_index, r.cluster.snapshots_above_first_index_conf_unknown,
      r.cluster.snapshots_above_first_index_fallback);
}

int run_one(const Arguments& args) {
  raftlog::sim::SimOptions options = args.options;
  options.seed = *args.seed;
  options.full_trace = args.trace;
  const raftlog::sim::SimResult result = raftlog::sim::run_simulation(options);
  if (args.trace) std::fputs(result.full_trace.c_str(), stdout);
  if (!result.ok()) std::fputs(raftlog::sim::format_failure(result).c_str(), stdout);
  std::fputs(
      fmt::format(
          "SEED seed={} nodes={} {} {}\n", result.seed, options.node_count,
          result.ok() ? "ok" : (result.liveness_failure() ? "LIVENESS_FAILURE" : "VIOLATION"),
          summary(result))
          .c_str(),
      stdout);
  return result.ok() ? 0 : 1;
}

int run_many(const Arguments& args) {
  const auto started = std::chrono::steady_clock::now();
  std::uint64_t violations = 0;
  std::uint64_t liveness_failures = 0;
  std::uint64_t ticks = 0;
  std::uint64_t acked = 0;
  std::uint64_t reads = 0;
  std::uint64_t crashes = 0;
  std::uint64_t appends_acked = 0;
  std::uint64_t dedup_answers = 0;
  std::uint64_t sync_failures = 0;
  std::uint64_t catching_up = 0;
  std::uint64_t max_liveness_ticks = 0;
  std::uint64_t conf_changes = 0;
  std::uint64_t trims = 0;
  std::uint64_t snapshots_installed = 0;
  std::uint64_t off_loop_jobs = 0;  // snapshot encodings completed off the replicas' loops
  // Checked snapshot points: at the leader's first index - 1 or below / above it because of a
  // committed configuration / above it because the leader fell back (check_snapshot_point).
  std::uint64_t points_at_first = 0;
  std::uint64_t points_conf = 0;
  std::uint64_t points_fallback = 0;
  std::uint64_t wipes = 0;
  std::uint64_t log_wipes = 0;
  const std::uint64_t progress_every = std::max<std::uint64_t>(*args.seeds / 10, 1);
  for (std::uint64_t i = 0; i < *args.seeds; ++i) {
    raftlog::sim::SimOptions options = args.options;
    options.seed = args.seed_start + i;
    const raftlog::sim::SimResult result = raftlog::sim::run_simulation(options);
    ticks += result.ticks;
    acked += result.proposals_acknowledged;
    reads += result.reads_released;
    crashes += result.cluster.crashes;
    appends_acked += result.appends_acknowledged;
    dedup_answers += result.cluster.duplicate_answers;
    sync_failures += result.cluster.sync_failures;
    catching_up += result.cluster.restarts_catching_up;
    max_liveness_ticks = std::max(max_liveness_ticks, result.liveness_ticks);
    conf_changes += result.cluster.conf_changes_committed;
    trims += result.cluster.trims;
    snapshots_installed += result.cluster.snapshots_installed;
    off_loop_jobs += result.cluster.off_loop_jobs;
    wipes += result.cluster.wipes;
    log_wipes += result.cluster.log_wipes;
    points_at_first += result.cluster.snapshots_at_first_index;
    points_conf += result.cluster.snapshots_above_first_index_conf_unknown;
    points_fallback += result.cluster.snapshots_above_first_index_fallback;
    if (!result.ok()) {
      const std::uint64_t failures = violations + liveness_failures;
      if (result.liveness_failure()) {
        ++liveness_failures;
      } else {
        ++violations;
      }
      if (failures < kFullReportsInSweep) {
        std::fputs(raftlog::sim::format_failure(result).c_str(), stdout);
      } else {
        std::fputs(
            fmt::format("FAILURE seed={} invariant={}\n", result.seed, result.violation->invariant)
                .c_str(),
            stdout);
      }
      std::fflush(stdout);
    }
    if ((i + 1) % progress_every == 0) {
      const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - started);
      std::fprintf(stderr, "raftlog-sim: %llu/%llu seeds, %llu failures, %lld ms\n",
                   static_cast<unsigned long long>(i + 1),
                   static_cast<unsigned long long>(*args.seeds),
                   static_cast<unsigned long long>(violations + liveness_failures),
                   static_cast<long long>(elapsed.count()));
    }
  }
  std::fputs(
      fmt::format(
          "RESULT seeds={} violations={} liveness_failures={} ticks={} nodes={} seed_start={} "
          "acked_proposals={} appends_acked={} dedup_answers={} reads={} crashes={} "
          "sync_failures={} "
          "restarts_catching_up={} max_liveness_ticks={} conf_changes={} trims={} "
          "snapshots_installed={} snapshot_points={}/{}/{} off_loop_jobs={}{}\n",
          *args.seeds, violations, liveness_failures, ticks, args.options.node_count,
          args.seed_start, acked, appends_acked, dedup_answers, reads, crashes, sync_failures,
          catching_up, max_liveness_ticks, conf_changes, trims, snapshots_installed,
          points_at_first, points_conf, points_fallback, off_loop_jobs,
          // Only with --wipe: the line of every other run stays as it was.
          args.options.wipe ? fmt::format(" wipes={} log_wipes={}", wipes, log_wipes)
                             : std::string())
          .c_str(),
      stdout);
  // Apart from the RESULT line, which depends on the seeds only.
  const double elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::fputs(fmt::format("RATE seeds={} wall_s={:.1f} seeds_per_s={:.1f}\n", *args.seeds, elapsed_s,
                         elapsed_s > 0 ? static_cast<double>(*args.seeds) / elapsed_s : 0.0)
                 .c_str(),
             stdout);
  return violations + liveness_failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Arguments args;
  if (std::optional<std::string> error = parse(argc, argv, args)) {
    std::fprintf(stderr, "raftlog-sim: %s\n", error->c_str());
    print_usage(stderr);
    return 2;
  }
  return args.seed ? run_one(args) : run_many(args);
}

#include "store_command.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "cli/flags.h"
#include "busy_threads.h"
#include "raw_disk.h"
#include "raw_group_commit.h"
#include "recovery.h"
#include "report.h"
#include "store_cell.h"

namespace raftlog::bench {
namespace {

namespace fs = std::filesystem;

constexpr double kMaxCellSeconds = 600.0;             // one cell never runs longer than this
constexpr std::uint64_t kMaxLoadPairs = 20;           // raw --busy-threads: alone/loaded pairs
constexpr double kMaxRecoveryGiB = 64.0;              // bound on the recovery log size
constexpr std::uint64_t kMaxEntryBytes = 4ULL << 20;  // the store's default max entry size

enum class RawFor { kNone, kSync, kAll };

struct StorePlan {
  std::string dir;
  std::vector<store::FlushMode> modes{store::FlushMode::kSync, store::FlushMode::kAsync};
  std::vector<std::uint64_t> writers{1, 16, 64};
  WriterModel writer_model = WriterModel::kThread;
  std::vector<std::uint64_t> entry_sizes{128, 1024, 16384};
  double cell_seconds = 2.0;
  std::uint64_t repeat = 1;
  RawFor raw_for = RawFor::kAll;
  std::uint64_t segment_size_bytes = 256ULL << 20;
  bool zero_fill_segments = false;
  std::uint64_t max_cell_bytes = 2ULL << 30;
  double recovery_gib = 0.0;
  std::uint64_t recovery_entry_bytes = 1024;
  std::uint64_t recovery_segment_size_bytes = 1ULL << 30;
  bool drop_caches = false;
  bool keep = false;
  bool verbose = false;
  bool quick = false;
};

struct CellRow {
  store::FlushMode mode;
  std::uint64_t writers;
  std::uint64_t entry_bytes;
  CellResult store;
  bool has_raw = false;
  RawDiskResult raw;
  WriterModel writer_model = WriterModel::kThread;
  double ratio() const {
    return has_raw && raw.mib_per_s() > 0 ? store.disk_mib_per_s() / raw.mib_per_s() : 0.0;
  }
};

std::chrono::milliseconds to_duration(double seconds) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000.0));
}

// Owns the benchmark directory: creates it, refuses a non-empty one (it would delete user data) and
// removes everything it created at the end unless --keep.
class BenchDir {
 public:
  BenchDir(const std::string& path, bool keep) : path_(path), keep_(keep) {
    std::error_code error;
    if (fs::exists(path_, error)) {
      if (!fs::is_directory(path_, error) || !fs::is_empty(path_, error)) {
        throw std::runtime_error("--dir " + path +
                                 " exists and is not an empty directory; refusing to use it");
      }
    } else {
      created_ = true;
    }
    fs::create_directories(path_);
  }
  ~BenchDir() {
    if (keep_) return;
    std::error_code ignored;
    if (created_) {
      fs::remove_all(path_, ignored);
    } else {
      for (const auto& item : fs::directory_iterator(path_, ignored))
        fs::remove_all(item.path(), ignored);
    }
  }
  BenchDir(const BenchDir&) = delete;
  BenchDir& operator=(const BenchDir&) = delete;
  std::string sub(const std::string& name) const { return (path_ / name).string(); }
  void remove_sub(const std::string& name) const {
    if (keep_) return;
    std::error_code ignored;
    fs::remove_all(path_ / name, ignored);
  }

 private:
  fs::path path_;
  bool keep_;
  bool created_ = false;
};

bool parse_modes(const std::string& text, std::vector<store::FlushMode>* out) {
  std::vector<store::FlushMode> modes;
  std::size_t start = 0;
  for (int guard = 0; guard < 8; ++guard) {
    const std::size_t comma = text.find(',', start);
    const std::string word =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (word == "sync") {
      modes.push_back(store::FlushMode::kSync);
    } else if (word == "async") {
      modes.push_back(store::FlushMode::kAsync);
    } else {
      return false;
    }
    if (comma == std::string::npos) {
      *out = modes;
      return true;
    }
    start = comma + 1;
  }
  return false;
}

RawDiskResult measure_raw(const BenchDir& dir, std::uint64_t batch_bytes, double seconds,
                          std::uint64_t max_bytes, std::ostream& progress) {
  RawDiskOptions options;
  options.file = dir.sub("raw-disk.tmp");
  options.batch_bytes = batch_bytes;
  options.duration = to_duration(seconds);
  options.max_file_bytes = std::max(batch_bytes, max_bytes / batch_bytes * batch_bytes);
  std::atomic<std::uint64_t> written{0};
  const auto start = std::chrono::steady_clock::now();
  ProgressTicker ticker(progress, std::chrono::seconds(1), [&] {
    const double elapsed = seconds_since(start);
    const double mib = static_cast<double>(written.load()) / kMiB;
    return "  [raw write+fdatasync batch=" + std::to_string(batch_bytes) + "B] " +
           fixed(elapsed, 1) + "s MiB/s=" + fixed(elapsed > 0 ? mib / elapsed : 0.0, 1);
  });
  return measure_raw_sync_loop(options, &written);
}

// Sums a repeat into the cell's totals. Latency: mean of the repeats' p50, max of their p99.
void accumulate(CellResult& total, const CellResult& run, std::uint64_t repeat) {
  total.seconds += run.seconds;
  total.entries += run.entries;
  total.payload_bytes += run.payload_bytes;
  total.flushes += run.flushes;
  total.sync_calls += run.sync_calls;
  total.entries_flushed += run.entries_flushed;
  total.bytes_flushed += run.bytes_flushed;
  total.sync_duration_us += run.sync_duration_us;
  total.grouped_appends += run.grouped_appends;
  total.group_writes += run.group_writes;
  total.latency_p50_us = (total.latency_p50_us * static_cast<double>(repeat) + run.latency_p50_us) /
                         static_cast<double>(repeat + 1);
  total.latency_p99_us = std::max(total.latency_p99_us, run.latency_p99_us);
  total.final_flush_ms = std::max(total.final_flush_ms, run.final_flush_ms);
}

void print_raw_result(std::ostream& out, const RawDiskResult& raw, std::uint64_t batch_bytes);

// `raw --writers N`: the minimal group commit, then the one-thread loop at the bytes per sync the group
// commit reached (rounded to whole records), and their ratio.
int run_raw_group_commit(const BenchDir& dir, std::uint64_t writers, std::uint64_t record_bytes,
                         double seconds, std::uint64_t max_bytes, const cli::Io& io) {
  RawGroupCommitOptions options;
  options.file = dir.sub("raw-group-commit.tmp");
  options.writers = writers;
  options.record_bytes = record_bytes;
  options.duration = to_duration(seconds);
  options.max_file_bytes = max_bytes;
  std::atomic<std::uint64_t> durable_bytes{0};
  RawGroupCommitResult group;
  {
    const auto start = std::chrono::steady_clock::now();
    ProgressTicker ticker(io.err, std::chrono::seconds(1), [&] {
      const double elapsed = seconds_since(start);
      return "  [raw group commit x" + std::to_string(writers) + "] " + fixed(elapsed, 1) +
             "s MiB/s=" +
             fixed(elapsed > 0 ? static_cast<double>(durable_bytes.load()) / kMiB / elapsed : 0.0,
                   1);
    });
    group = measure_raw_group_commit(options, &durable_bytes);
  }
  const double mib_per_s =
      group.seconds > 0 ? static_cast<double>(group.bytes) / kMiB / group.seconds : 0.0;
  const std::uint64_t records_per_sync =
      group.syncs == 0 ? 1 : std::max<std::uint64_t>(1, group.records / group.syncs);
  io.out << ResultLine("raw_group_commit")
                .add("writers", writers)
                .add("record_bytes", record_bytes)
                .add("seconds", group.seconds)
                .add("records", group.records)
                .add("syncs_per_s",
                     group.seconds > 0 ? static_cast<double>(group.syncs) / group.seconds : 0.0, 0)
                .add("records_per_sync",
                     static_cast<double>(group.records) /
                         static_cast<double>(std::max<std::uint64_t>(1, group.syncs)),
                     1)
                .add("mib_per_s", mib_per_s, 1)
                .text()
         << '\n';
  const std::uint64_t batch_bytes = records_per_sync * record_bytes;
  const RawDiskResult raw = measure_raw(dir, batch_bytes, seconds, max_bytes, io.err);
  print_raw_result(io.out, raw, batch_bytes);
  io.out << ResultLine("raw_group_commit_vs_raw")
                .add("writers", writers)
                .add("batch_bytes", batch_bytes)
                .add("ratio", raw.mib_per_s() > 0 ? mib_per_s / raw.mib_per_s() : 0.0, 3)
                .text()
         << '\n';
  return cli::kExitOk;
}

// `raw --busy-threads N --busy-us U`: the one-thread loop alone and under background CPU load
// (busy_threads.h), alternating `pairs` times, and the ratio loaded / alone. The load's CPU use is
// reported (CPUs busy on average), so it can be matched with what a store cell uses.
int run_raw_under_load(const BenchDir& dir, std::uint64_t batch_bytes, double seconds,
                       std::uint64_t max_bytes, std::uint64_t busy_threads, std::uint64_t busy_us,
                       std::uint64_t pairs, const cli::Io& io) {
  double alone_mib = 0.0;
  double loaded_mib = 0.0;
  double load_cpus = 0.0;
  // Bounded: `pairs` (at most kMaxLoadPairs) pairs of two timed runs.
  for (std::uint64_t pair = 0; pair < pairs; ++pair) {
    const RawDiskResult alone = measure_raw(dir, batch_bytes, seconds, max_bytes, io.err);
    RawDiskResult loaded;
    double cpu_seconds = 0.0;
    {
      BusyThreads load(busy_threads, busy_us);
      loaded = measure_raw(dir, batch_bytes, seconds, max_bytes, io.err);
      cpu_seconds = load.stop();
    }
    const double cpus = loaded.seconds > 0 ? cpu_seconds / loaded.seconds : 0.0;
    io.out << ResultLine("raw_under_load")
                  .add("batch_bytes", batch_bytes)
                  .add("busy_threads", busy_threads)
                  .add("busy_us", busy_us)
                  .add("load_cpus", cpus, 2)
                  .add("alone_mib_per_s", alone.mib_per_s(), 1)
                  .add("loaded_mib_per_s", loaded.mib_per_s(), 1)
                  .add("alone_fdatasyncs_per_s", alone.syncs_per_s(), 0)
                  .add("loaded_fdatasyncs_per_s", loaded.syncs_per_s(), 0)
                  .add("ratio",
                       alone.mib_per_s() > 0 ? loaded.mib_per_s() / alone.mib_per_s() : 0.0, 3)
                  .text()
           << '\n';
    alone_mib += alone.mib_per_s();
    loaded_mib += loaded.mib_per_s();
    load_cpus += cpus;
  }
  io.out << ResultLine("raw_under_load_total")
                .add("pairs", pairs)
                .add("load_cpus", load_cpus / static_cast<double>(pairs), 2)
                .add("ratio", alone_mib > 0 ? loaded_mib / alone_mib : 0.0, 3)
                .text()
         << '\n';
  return cli::kExitOk;
}

void print_raw_result(std::ostream& out, const RawDiskResult& raw, std::uint64_t batch_bytes) {
  out << ResultLine("raw_disk")
             .add("batch_bytes", batch_bytes)
             .add("seconds", raw.seconds)
             .add("fdatasyncs", raw.syncs)
             .add("fdatasyncs_per_s", raw.syncs_per_s(), 0)
             .add("mib_per_s", raw.mib_per_s(), 1)
             .text()
      << '\n';
}

void print_repeat_result(std::ostream& out, store::FlushMode mode, std::uint64_t writers,
                         std::uint64_t entry_bytes, std::uint64_t repeat, const CellResult& r) {
  out << ResultLine("store_repeat")
             .add("mode", store::to_string(mode))
             .add("writers", writers)
             .add("entry_bytes", entry_bytes)
             .add("repeat", repeat + 1)
             .add("entries_per_s", r.entries_per_s(), 0)
             .add("disk_mib_per_s", r.disk_mib_per_s(), 1)
             .add("fsyncs_per_s", r.flushes_per_s(), 0)
             .add("entries_per_fsync", r.entries_per_flush(), 1)
             .add("batch_bytes", r.bytes_per_flush())
             .text()
      << '\n';
}

void print_cell_result(std::ostream& out, const CellRow& row) {
  const CellResult& r = row.store;
  out << ResultLine("store")
             .add("mode", store::to_string(row.mode))
             .add("writers", row.writers)
             .add("entry_bytes", row.entry_bytes)
             .add("writer_model", to_string(row.writer_model))
             .add("seconds", r.seconds)
             .add("entries", r.entries)
             .add("entries_per_s", r.entries_per_s(), 0)
             .add("mib_per_s", r.payload_mib_per_s(), 1)
             .add("disk_mib_per_s", r.disk_mib_per_s(), 1)
             .add("fsyncs_per_s", r.flushes_per_s(), 0)
             .add("sync_calls_per_s", r.sync_calls_per_s(), 0)
             .add("entries_per_fsync", r.entries_per_flush(), 1)
             .add("batch_bytes", r.bytes_per_flush())
             .add("sync_busy", r.sync_busy_ratio(), 2)
             .add("appends_per_write", r.appends_per_write(), 2)
             .add("p50_us", r.latency_p50_us, 0)
             .add("p99_us", r.latency_p99_us, 0)
             .text()
      << '\n';
  if (row.has_raw) {
    print_raw_result(out, row.raw, r.bytes_per_flush());
    out << ResultLine("store_vs_raw")
               .add("mode", store::to_string(row.mode))
               .add("writers", row.writers)
               .add("entry_bytes", row.entry_bytes)
               .add("batch_bytes", r.bytes_per_flush())
               .add("store_disk_mib_per_s", r.disk_mib_per_s(), 1)
               .add("raw_mib_per_s", row.raw.mib_per_s(), 1)
               .add("ratio", row.ratio(), 3)
               .text()
        << '\n';
  }
  out.flush();
}

std::string pad(const std::string& text, std::size_t width) {
  return text.size() >= width ? text : std::string(width - text.size(), ' ') + text;
}

void print_table(std::ostream& out, const std::vector<CellRow>& rows) {
  out << "\n"
      << pad("mode", 5) << pad("writers", 8) << pad("entry", 7) << pad("entries/s", 11)
      << pad("MiB/s", 8) << pad("fsyncs/s", 9) << pad("ent/fsync", 10) << pad("p50 us", 8)
      << pad("p99 us", 8) << pad("raw MiB/s", 10) << pad("store/raw", 10) << '\n';
  for (const CellRow& row : rows) {
    const CellResult& r = row.store;
    out << pad(store::to_string(row.mode), 5) << pad(std::to_string(row.writers), 8)
        << pad(size_label(row.entry_bytes), 7) << pad(fixed(r.entries_per_s(), 0), 11)
        << pad(fixed(r.payload_mib_per_s(), 1), 8) << pad(fixed(r.flushes_per_s(), 0), 9)
        << pad(fixed(r.entries_per_flush(), 1), 10) << pad(fixed(r.latency_p50_us, 0), 8)
        << pad(fixed(r.latency_p99_us, 0), 8)
        << pad(row.has_raw ? fixed(row.raw.mib_per_s(), 1) : "-", 10)
        << pad(row.has_raw ? fixed(row.ratio() * 100.0, 0) + "%" : "-", 10) << '\n';
  }
  out << "(MiB/s: payload; store/raw compares on-disk bytes incl. entry headers with a "
         "write+fdatasync loop at the\n"
         " store's average bytes per flush; async rows: entries/s counts appends written to the "
         "mapping)\n\n";
}

void print_recovery(std::ostream& out, const RecoveryResult& result, const RecoveryConfig& config) {
  const auto emit = [&](const char* shutdown, const RecoveryOpen& open) {
    const auto& report = open.report;
    const double scanned_gib = static_cast<double>(report.bytes_scanned) / kGiB;
    const double recovery_seconds = static_cast<double>(report.duration.count()) / 1e6;
    out << "  after " << shutdown << " shutdown: open() took "
        << fixed(open.open_seconds * 1000.0, 1) << " ms ("
        << fixed(open.open_cpu_seconds * 1000.0, 1) << " ms CPU); " << report.to_string() << '\n';
    out << ResultLine("recovery")
               .add("shutdown", shutdown)
               .add("mode", store::to_string(report.mode))
               .add("log_payload_gib", static_cast<double>(config.log_payload_bytes) / kGiB, 3)
               .add("last_index", result.last_index)
               .add("open_ms", open.open_seconds * 1000.0, 1)
               .add("recovery_ms", recovery_seconds * 1000.0, 1)
               .add("bytes_scanned", report.bytes_scanned)
               .add("validate_gib_per_s",
                    recovery_seconds > 0 ? scanned_gib / recovery_seconds : 0.0, 2)
               .add("cpu_ms", open.open_cpu_seconds * 1000.0, 1)
               .add("validate_gib_per_cpu_s",
                    open.open_cpu_seconds > 0 ? scanned_gib / open.open_cpu_seconds : 0.0, 2)
               .add("cache", open.caches_dropped ? "cold" : "warm")
               .text()
        << '\n';
  };
  out << "recovery of a " << fixed(static_cast<double>(config.log_payload_bytes) / kGiB, 2)
      << " GiB log (built in " << fixed(result.build_seconds, 1) << " s, last index "
      << result.last_index << "):\n";
  emit("unclean", result.unclean);
  emit("clean", result.clean);
}

// One line per issue-2 target that this run measured; "met" is only a reading of this run's figures.
void print_targets(std::ostream& out, const std::vector<CellRow>& rows,
                   const RecoveryResult* recovery) {
  for (const CellRow& row : rows) {
    if (row.mode == store::FlushMode::kSync && row.writers == 64 && row.entry_bytes == 1024 &&
        row.has_raw) {
      out << ResultLine("target")
                 .add("name", "sync_64w_1KiB_vs_raw")
                 .add("writer_model", to_string(row.writer_model))
                 .add("value", row.ratio(), 3)
                 .add("goal", ">=0.70")
                 .add("met", row.ratio() >= 0.70 ? "yes" : "no")
                 .text()
          << '\n';
    }
  }
  if (recovery != nullptr) {
    const double clean_ms = recovery->clean.open_seconds * 1000.0;
    out << ResultLine("target")
               .add("name", "clean_restart_ms")
               .add("value", clean_ms, 1)
               .add("goal", "<200")
               .add("met", clean_ms < 200.0 ? "yes" : "no")
               .text()
        << '\n';
    const auto& report = recovery->unclean.report;
    const double seconds = static_cast<double>(report.duration.count()) / 1e6;
    const double rate =
        seconds > 0 ? static_cast<double>(report.bytes_scanned) / kGiB / seconds : 0.0;
    out << ResultLine("target")
               .add("name", "abnormal_validate_gib_per_s")
               .add("value", rate, 2)
               .add("goal", ">=1.0")
               .add("met", rate >= 1.0 ? "yes" : "no")
               .text()
        << '\n';
  }
}

int run_plan(const StorePlan& plan, const cli::Io& io) {
  const BenchDir dir(plan.dir, plan.keep);
  io.out << "raftlog-bench store: "
         << plan.modes.size() * plan.writers.size() * plan.entry_sizes.size() << " cells of "
         << plan.repeat << " x " << fixed(plan.cell_seconds, 1) << " s in " << plan.dir << '\n';
  std::vector<CellRow> rows;
  std::size_t cell_number = 0;
  for (const store::FlushMode mode : plan.modes) {
    for (const std::uint64_t entry_bytes : plan.entry_sizes) {
      for (const std::uint64_t writers : plan.writers) {
        ++cell_number;
        CellConfig config;
        config.mode = mode;
        config.writers = writers;
        config.writer_model = plan.writer_model;
        config.entry_bytes = entry_bytes;
        config.duration = to_duration(plan.cell_seconds);
        config.segment_size_bytes = plan.segment_size_bytes;
        config.zero_fill_segments = plan.zero_fill_segments;
        config.max_payload_bytes = plan.max_cell_bytes;
        const bool wants_raw = plan.raw_for == RawFor::kAll ||
                               (plan.raw_for == RawFor::kSync && mode == store::FlushMode::kSync);
        // Store and raw runs alternate so that slow drifts of a shared disk hit both alike.
        CellRow row{mode, writers, entry_bytes, {}, false, {}, plan.writer_model};
        for (std::uint64_t repeat = 0; repeat < plan.repeat; ++repeat) {
          const std::string cell_dir =
              "cell-" + std::to_string(cell_number) + "-run-" + std::to_string(repeat + 1);
          config.dir = dir.sub(cell_dir);
          const CellResult store_run = run_store_cell(config, io.err);
          dir.remove_sub(cell_dir);  // before the raw loop, so that both see the same free space
          if (plan.repeat > 1)
            print_repeat_result(io.out, mode, writers, entry_bytes, repeat, store_run);
          accumulate(row.store, store_run, repeat);
          if (wants_raw && store_run.entries > 0) {
            const RawDiskResult raw = measure_raw(dir, store_run.bytes_per_flush(),
                                                  plan.cell_seconds, plan.max_cell_bytes, io.err);
            if (plan.repeat > 1) print_raw_result(io.out, raw, store_run.bytes_per_flush());
            row.raw.syncs += raw.syncs;
            row.raw.bytes += raw.bytes;
            row.raw.seconds += raw.seconds;
            row.has_raw = true;
          }
        }
        print_cell_result(io.out, row);
        rows.push_back(row);
      }
    }
  }
  if (!rows.empty()) print_table(io.out, rows);

  std::optional<RecoveryResult> recovery;
  if (plan.recovery_gib > 0) {
    RecoveryConfig config;
    config.dir = dir.sub("recovery");
    config.log_payload_bytes = static_cast<std::uint64_t>(plan.recovery_gib * kGiB);
    config.entry_bytes = plan.recovery_entry_bytes;
    config.segment_size_bytes = plan.recovery_segment_size_bytes;
    config.drop_caches = plan.drop_caches;
    recovery = run_recovery_bench(config, io.err);
    print_recovery(io.out, *recovery, config);
    dir.remove_sub("recovery");
  }
  print_targets(io.out, rows, recovery ? &*recovery : nullptr);
  if (plan.quick) {
    io.out
        << "(--quick is a demo: 1 s cells and a 64 MiB log are too small for the issue's targets;\n"
           " the real figures and the command that produced them are in docs/benchmarks.md)\n";
  }
  return cli::kExitOk;
}

}  // namespace

int run_store_command(std::string_view command_path, std::span<const std::string> args,
                      const cli::Io& io) {
  StorePlan plan;
  std::string modes = "sync,async";
  std::string raw_for = "all";
  bool quick = false;
  std::string writer_model = "thread";
  cli::FlagSet flags(
      std::string(command_path),
      "Appends to a CommitLog with concurrent writers for every combination of flush mode, writer\n"
      "count and entry size, measures the raw disk (write + fdatasync) at the batch size the "
      "store\n"
      "achieved, and optionally the recovery time of a large log after an unclean (SIGKILL) and a\n"
      "clean shutdown. Prints a progress line every second (stderr) and RESULT lines (stdout).");
  flags.string_flag("dir", &plan.dir, "DIR",
                    "scratch directory (created; must be empty if it exists)");
  flags.bool_flag(
      "quick", &quick,
      "short demo (~10 s): sync+async, 1 and 64 writers, 1 KiB, 1 s cells, 64 MiB recovery log");
  flags.string_flag("modes", &modes, "LIST", "flush modes to run: sync, async or sync,async");
  flags.uint_list_flag("writers", &plan.writers, "LIST", "concurrent writer counts");
  flags.string_flag(
      "writer-model", &writer_model, "MODEL",
      "thread: one thread per writer, blocking in append() (default); completion: the writers are\n"
      "appenders with one entry outstanding each, driven from one thread by append_no_wait() and\n"
      "wait_flushed(), as raftlogd drives its log");
  flags.bytes_list_flag("sizes", &plan.entry_sizes, "LIST",
                        "entry payload sizes, e.g. 128,1KiB,16KiB");
  flags.double_flag("seconds", &plan.cell_seconds, "S",
                    "duration of each cell and of each raw-disk run");
  flags.uint_flag(
      "repeat", &plan.repeat, "N",
      "run each cell (and its raw-disk run) N times, alternating; figures are totals over the N");
  flags.string_flag("raw", &raw_for, "WHICH",
                    "cells followed by a raw-disk run: all, sync or none");
  flags.bytes_flag("segment-bytes", &plan.segment_size_bytes, "BYTES",
                   "segment size of the benchmark logs");
  flags.bool_flag("zero-fill-segments", &plan.zero_fill_segments,
                  "store option zero_fill_segments: write zeros over new segments ahead of use");
  flags.bytes_flag("max-cell-bytes", &plan.max_cell_bytes, "BYTES",
                   "payload bound per cell and raw file size bound (disk use)");
  flags.double_flag("recovery-gib", &plan.recovery_gib, "GIB",
                    "size of the recovery log in GiB (0 = skip)");
  flags.bytes_flag("recovery-entry-bytes", &plan.recovery_entry_bytes, "BYTES",
                   "entry payload size of the recovery log");
  flags.bytes_flag("recovery-segment-bytes", &plan.recovery_segment_size_bytes, "BYTES",
                   "segment size of the recovery log (the store's default is 1GiB)");
  flags.bool_flag("drop-caches", &plan.drop_caches,
                  "drop the page cache before each recovery open (root; cold start)");
  flags.bool_flag("keep", &plan.keep, "keep the logs and scratch files instead of deleting them");
  flags.bool_flag("verbose", &plan.verbose,
                  "show the store's info log lines (recovery reports are printed anyway)");
  flags.require("dir");
  if (int code = cli::parse_or_exit(flags, command_path, args, io); code >= 0) return code;
  plan.quick = quick;
  if (quick) {  // explicit flags still win
    if (!flags.was_set("writers")) plan.writers = {1, 64};
    if (!flags.was_set("sizes")) plan.entry_sizes = {1024};
    if (!flags.was_set("seconds")) plan.cell_seconds = 1.0;
    if (!flags.was_set("raw")) raw_for = "sync";
    if (!flags.was_set("recovery-gib")) plan.recovery_gib = 1.0 / 16;
    if (!flags.was_set("segment-bytes")) plan.segment_size_bytes = 64ULL << 20;
    if (!flags.was_set("recovery-segment-bytes")) plan.recovery_segment_size_bytes = 64ULL << 20;
  }
  std::string problem;
  if (!parse_modes(modes, &plan.modes)) problem = "--modes expects sync, async or sync,async";
  if (writer_model == "thread") {
    plan.writer_model = WriterModel::kThread;
  } else if (writer_model == "completion") {
    plan.writer_model = WriterModel::kCompletion;
  } else {
    problem = "--writer-model expects thread or completion";
  }
  if (raw_for == "all") {
    plan.raw_for = RawFor::kAll;
  } else if (raw_for == "sync") {
    plan.raw_for = RawFor::kSync;
  } else if (raw_for == "none") {
    plan.raw_for = RawFor::kNone;
  } else {
    problem = "--raw expects all, sync or none";
  }
  if (plan.cell_seconds <= 0 || plan.cell_seconds > kMaxCellSeconds)
    problem = "--seconds must be in (0, 600]";
  if (plan.repeat == 0 || plan.repeat > 20) problem = "--repeat must be in [1, 20]";
  for (const std::uint64_t writers : plan.writers) {
    if (writers == 0 || writers > 256) problem = "--writers values must be in [1, 256]";
  }
  for (const std::uint64_t size : plan.entry_sizes) {
    if (size == 0 || size > kMaxEntryBytes) problem = "--sizes values must be in [1, 4MiB]";
  }
  if (plan.recovery_gib < 0 || plan.recovery_gib > kMaxRecoveryGiB)
    problem = "--recovery-gib must be in [0, 64]";
  if (plan.recovery_entry_bytes == 0 || plan.recovery_entry_bytes > kMaxEntryBytes) {
    problem = "--recovery-entry-bytes must be in [1, 4MiB]";
  }
  if (plan.max_cell_bytes < (1ULL << 20)) problem = "--max-cell-bytes must be at least 1MiB";
  if (!problem.empty()) {
    io.err << command_path << ": " << problem << "\n\n" << flags.usage();
    return cli::kExitUsage;
  }
  // The store logs each open's recovery at info level; the benchmark prints those reports itself.
  spdlog::set_level(plan.verbose ? spdlog::level::info : spdlog::level::warn);
  try {
    return run_plan(plan, io);
  } catch (const std::exception& error) {
    io.err << command_path << ": " << error.what() << '\n';
    return cli::kExitFailure;
  }
}

int run_raw_command(std::string_view command_path, std::span<const std::string> args,
                    const cli::Io& io) {
  std::string dir_path;
  std::string via = "write";
  std::uint64_t batch_bytes = 64 << 10;
  std::uint64_t streams = 1;
  double seconds = 2.0;
  std::uint64_t max_bytes = 2ULL << 30;
  std::uint64_t group_commit_writers = 0;
  std::uint64_t record_bytes = 1024 + 56;  // a 1 KiB entry with its header
  std::uint64_t busy_threads = 0;
  std::uint64_t busy_us = 10;
  std::uint64_t pairs = 2;
  bool keep = false;
  cli::FlagSet flags(
      std::string(command_path),
      "Measures sequential writes of BYTES per batch, each made durable before the next, into a\n"
      "preallocated file: the raw disk limit that `raftlog-bench store` compares the store with.\n"
      "--streams N runs N such loops at once on N files (a 3-node cluster on one disk is 3 "
      "streams).");
  flags.string_flag("dir", &dir_path, "DIR",
                    "scratch directory (created; must be empty if it exists)");
  flags.string_flag(
      "via", &via, "write|mmap",
      "write: pwrite + fdatasync; mmap: memcpy into a shared mapping + msync, as the store does");
  flags.bytes_flag("batch-bytes", &batch_bytes, "BYTES", "bytes written between two syncs");
  flags.uint_flag("streams", &streams, "N", "concurrent loops, each on its own file (1..8)");
  flags.double_flag("seconds", &seconds, "S", "duration");
  flags.bytes_flag("max-bytes", &max_bytes, "BYTES", "size bound of each scratch file");
  flags.bool_flag("keep", &keep, "keep the scratch directory");
  flags.uint_flag("writers", &group_commit_writers, "N",
                  "0: the one-thread loop; 1..1024: a minimal group commit of N writer threads "
                  "(one --record-bytes "
                  "record each per sync round, one syncer thread), then the one-thread loop at its "
                  "bytes per sync");
  flags.bytes_flag("record-bytes", &record_bytes, "BYTES", "record size of each --writers write");
  flags.uint_flag(
      "busy-threads", &busy_threads, "N",
      "0: no load; 1..1024: run the one-thread loop alone and with N background threads that each\n"
      "burn --busy-us of CPU per ~1 ms, alternating --pairs times, and print the ratio");
  flags.uint_flag("busy-us", &busy_us, "US",
                  "CPU microseconds each busy thread burns per ~1 ms (0..100000)");
  flags.uint_flag("pairs", &pairs, "N", "alone/loaded pairs for --busy-threads (1..20)");
  flags.require("dir");
  if (int code = cli::parse_or_exit(flags, command_path, args, io); code >= 0) return code;
  if (batch_bytes == 0 || batch_bytes > max_bytes || seconds <= 0 || seconds > kMaxCellSeconds ||
      streams == 0 || streams > 8 || (via != "write" && via != "mmap") ||
      group_commit_writers > 1024 || record_bytes == 0 || record_bytes > max_bytes ||
      busy_threads > BusyThreads::kMaxThreads || busy_us > BusyThreads::kMaxBusyUs || pairs == 0 ||
      pairs > kMaxLoadPairs || (busy_threads > 0 && group_commit_writers > 0)) {
    io.err << command_path
           << ": need 0 < --batch-bytes <= --max-bytes, 0 < --seconds <= 600, 1 <= --streams <= 8, "
              "--via write|mmap,\n"
              "--busy-threads <= 1024, --busy-us <= 100000, 1 <= --pairs <= 20, not --busy-threads "
              "with --writers\n";
    return cli::kExitUsage;
  }
  const RawSyncMethod method =
      via == "mmap" ? RawSyncMethod::kMmapMsync : RawSyncMethod::kWriteFdatasync;
  try {
    const BenchDir dir(dir_path, keep);
    if (group_commit_writers > 0) {
      return run_raw_group_commit(dir, group_commit_writers, record_bytes, seconds, max_bytes, io);
    }
    if (busy_threads > 0) {
      return run_raw_under_load(dir, batch_bytes, seconds, max_bytes, busy_threads, busy_us, pairs,
                                io);
    }
    if (streams == 1 && method == RawSyncMethod::kWriteFdatasync) {
      const RawDiskResult raw = measure_raw(dir, batch_bytes, seconds, max_bytes, io.err);
      print_raw_result(io.out, raw, batch_bytes);
      return cli::kExitOk;
    }
    std::vector<RawDiskResult> results(streams);
    std::vector<std::string> errors(streams);
    std::vector<std::atomic<std::uint64_t>> written(streams);
    const auto start = std::chrono::steady_clock::now();
    {
      ProgressTicker ticker(io.err, std::chrono::seconds(1), [&] {
        std::uint64_t bytes = 0;
        for (const auto& w : written) bytes += w.load();
        const double elapsed = seconds_since(start);
        return "  [raw " + std::string(to_string(method)) + " x" + std::to_string(streams) +
               " batch=" + std::to_string(batch_bytes) + "B] " + fixed(elapsed, 1) + "s MiB/s=" +
               fixed(elapsed > 0 ? static_cast<double>(bytes) / kMiB / elapsed : 0.0, 1);
      });
      std::vector<std::thread> threads;
      for (std::uint64_t i = 0; i < streams; ++i) {
        threads.emplace_back([&, i] {
          RawDiskOptions options;
          options.file = dir.sub("raw-disk-" + std::to_string(i) + ".tmp");
          options.batch_bytes = batch_bytes;
          options.duration = to_duration(seconds);
          options.max_file_bytes = std::max(batch_bytes, max_bytes / batch_bytes * batch_bytes);
          options.method = method;
          try {
            results[i] = measure_raw_sync_loop(options, &written[i]);
          } catch (const std::exception& error) {
            errors[i] = error.what();
          }
        });
      }
      for (auto& t : threads) t.join();
    }
    double syncs_per_s = 0;
    double mib_per_s = 0;
    for (std::uint64_t i = 0; i < streams; ++i) {
      if (!errors[i].empty()) throw std::runtime_error(errors[i]);
      syncs_per_s += results[i].syncs_per_s();
      mib_per_s += results[i].mib_per_s();
    }
    io.out << ResultLine("raw_streams")
                  .add("method", to_string(method))
                  .add("streams", streams)
                  .add("batch_bytes", batch_bytes)
                  .add("seconds", results.front().seconds)
                  .add("syncs_per_s_per_stream", syncs_per_s / static_cast<double>(streams), 0)
                  .add("mib_per_s_per_stream", mib_per_s / static_cast<double>(streams), 1)
                  .add("mib_per_s_total", mib_per_s, 1)
                  .text()
           << '\n';
    return cli::kExitOk;
  } catch (const std::exception& error) {
    io.err << command_path << ": " << error.what() << '\n';
    return cli::kExitFailure;
  }
}

}  // namespace raftlog::bench

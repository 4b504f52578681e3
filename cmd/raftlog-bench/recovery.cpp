#include "recovery.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <ostream>
#include <stdexcept>
#include <vector>

#include "report.h"

namespace raftlog::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kEntriesPerAppend = 256;  // batch size of the builder's append() calls
// The child must finish building within this; the parent kills it otherwise (bounds the run).
constexpr auto kBuildTimeout = std::chrono::minutes(10);

[[noreturn]] void child_fail(const std::string& message) {
  const std::string line = "recovery builder: " + message + "\n";
  [[maybe_unused]] const ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  ::_exit(1);
}

// Runs in the forked child: builds the log and reports its last durable index on `report_fd`, then
// waits to be killed. Never returns.
[[noreturn]] void build_log_in_child(const RecoveryConfig& config, int report_fd) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the benchmark
  store::Options options;
  options.flush_mode = store::FlushMode::kAsync;
  options.segment_size_bytes = config.segment_size_bytes;
  options.max_entry_size_bytes =
      static_cast<std::uint32_t>(std::max<std::uint64_t>(config.entry_bytes, 4096));
  options.checkpoint_interval_ms = UINT32_MAX;  // keep the checkpoint at the empty log: worst case
  auto opened = store::CommitLog::open(config.dir, options);
  if (!opened.ok()) child_fail("open: " + opened.status().to_string());
  std::unique_ptr<store::CommitLog> log = std::move(opened).value();

  // One payload slice per batch slot: the views must stay distinct until append() copies them.
  std::string payloads(kEntriesPerAppend * config.entry_bytes, 'r');
  std::vector<store::EntryToAppend> batch(kEntriesPerAppend);
  const std::uint64_t total_entries =
      std::max<std::uint64_t>(1, config.log_payload_bytes / config.entry_bytes);
  const auto start = Clock::now();
  auto next_progress = start + std::chrono::seconds(1);
  std::uint64_t next_index = 1;
  while (next_index <= total_entries) {  // bounded: every round appends >= 1 entry
    const std::size_t count = static_cast<std::size_t>(
        std::min<std::uint64_t>(kEntriesPerAppend, total_entries - next_index + 1));
    for (std::size_t i = 0; i < count; ++i) {
      const std::uint64_t index = next_index + i;
      char* slice = payloads.data() + i * config.entry_bytes;
      // Vary the payload so that every entry's CRC differs.
      std::memcpy(slice, &index, std::min<std::size_t>(sizeof(index), config.entry_bytes));
      batch[i] =
          store::EntryToAppend{store::EntryMeta{index, 1, store::EntryType::kNormal, 0, 0, 0},
                               std::string_view(slice, config.entry_bytes)};
    }
    auto appended = log->append(std::span<const store::EntryToAppend>(batch.data(), count));
    if (!appended.ok())
      child_fail("append at " + std::to_string(next_index) + ": " + appended.status().to_string());
    next_index += count;
    if (Clock::now() >= next_progress) {
      next_progress += std::chrono::seconds(1);
      const double built = static_cast<double>((next_index - 1) * config.entry_bytes) / kGiB;
      const std::string line =
          "  [recovery build] " + fixed(seconds_since(start), 1) + "s " + fixed(built, 2) +
          " GiB of " + fixed(static_cast<double>(config.log_payload_bytes) / kGiB, 2) + "\n";
      [[maybe_unused]] const ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
    }
  }
  if (const store::Status flushed = log->flush(); !flushed.ok())
    child_fail("flush: " + flushed.to_string());
  const std::uint64_t flushed_index = log->flushed_index();
  if (::write(report_fd, &flushed_index, sizeof(flushed_index)) != sizeof(flushed_index))
    child_fail("report");
  // Wait for SIGKILL without closing the log: the abort marker stays, the checkpoint stays stale.
  for (;;) ::pause();
}

double process_cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

bool drop_page_cache() {
  ::sync();
  std::ofstream control("/proc/sys/vm/drop_caches");
  control << "3\n";
  control.flush();
  return static_cast<bool>(control);
}

RecoveryOpen timed_open(const RecoveryConfig& config, store::RecoveryMode expected_mode,
                        std::uint64_t expected_last) {
  RecoveryOpen result;
  if (config.drop_caches) result.caches_dropped = drop_page_cache();
  store::Options options;
  options.segment_size_bytes = config.segment_size_bytes;
  options.max_entry_size_bytes =
      static_cast<std::uint32_t>(std::max<std::uint64_t>(config.entry_bytes, 4096));
  const double cpu_before = process_cpu_seconds();
  const auto start = Clock::now();
  auto opened = store::CommitLog::open(config.dir, options);
  result.open_seconds = seconds_since(start);
  result.open_cpu_seconds = process_cpu_seconds() - cpu_before;
  if (!opened.ok()) throw std::runtime_error("recovery open: " + opened.status().to_string());
  std::unique_ptr<store::CommitLog> log = std::move(opened).value();
  result.report = log->recovery_report();
  if (result.report.mode != expected_mode) {
    throw std::runtime_error(std::string("recovery ran in mode ") +
                             store::to_string(result.report.mode) + ", expected " +
                             store::to_string(expected_mode));
  }
  if (log->last_index() < expected_last) {
    throw std::runtime_error("recovery lost acknowledged entries: last index " +
                             std::to_string(log->last_index()) + " < flushed index " +
                             std::to_string(expected_last) + " reported before the crash");
  }
  if (const store::Status closed = log->close(); !closed.ok()) {
    throw std::runtime_error("close after recovery: " + closed.to_string());
  }
  return result;
}

}  // namespace

RecoveryResult run_recovery_bench(const RecoveryConfig& config, std::ostream& progress) {
  RecoveryResult result;
  int report_pipe[2];
  if (::pipe2(report_pipe, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  progress << "  [recovery build] child process appends "
           << fixed(static_cast<double>(config.log_payload_bytes) / kGiB, 2) << " GiB of "
           << config.entry_bytes << " B entries, then is killed with SIGKILL" << std::endl;
  const auto start = Clock::now();
  const pid_t child = ::fork();
  if (child < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (child == 0) {
    ::close(report_pipe[0]);
    build_log_in_child(config, report_pipe[1]);
  }
  ::close(report_pipe[1]);

  // Wait (bounded) for the child's report; poll so that a hung child is killed at the timeout.
  std::uint64_t flushed_index = 0;
  std::size_t received = 0;
  const auto deadline = start + kBuildTimeout;
  while (received < sizeof(flushed_index) && Clock::now() < deadline) {
    pollfd poll_fd{report_pipe[0], POLLIN, 0};
    const int ready = ::poll(&poll_fd, 1, 200);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    const ssize_t n = ::read(report_pipe[0], reinterpret_cast<char*>(&flushed_index) + received,
                             sizeof(flushed_index) - received);
    if (n <= 0) break;  // EOF: the child failed (it printed why)
    received += static_cast<std::size_t>(n);
  }
  ::close(report_pipe[0]);
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (received != sizeof(flushed_index)) {
    throw std::runtime_error("recovery builder did not finish (exit status " +
                             std::to_string(status) + ")");
  }
  result.build_seconds = seconds_since(start);
  result.last_index = flushed_index;

  result.unclean = timed_open(config, store::RecoveryMode::kAbnormal, flushed_index);
  result.clean = timed_open(config, store::RecoveryMode::kNormal, flushed_index);
  return result;
}

}  // namespace raftlog::bench

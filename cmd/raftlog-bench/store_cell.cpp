#include "store_cell.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <deque>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "report.h"
#include "store/commit_log.h"

namespace raftlog::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Upper bounds that keep one cell's memory and thread count small whatever the flags say.
constexpr std::uint64_t kMaxWriters = 256;
constexpr std::size_t kMaxLatencySamples = 1 << 20;  // across all writers

// State shared by the writers of one cell.
struct Shared {
  store::CommitLog* log = nullptr;
  std::uint64_t max_entries = 0;  // bound derived from max_payload_bytes

  std::atomic<std::uint64_t> entries_taken{0};  // bounds the cell at max_entries

  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> acked_entries{0};

  std::mutex error_mutex;
  std::string first_error;

  void fail(const std::string& message) {
    {
      std::lock_guard lock(error_mutex);
      if (first_error.empty()) first_error = message;
    }
    stop.store(true);
  }
};

void writer_loop(Shared& shared, std::uint64_t writer_id, std::uint64_t entry_bytes,
                 std::size_t latency_capacity, std::vector<std::uint32_t>& latencies_us) {
  // Distinct, non-zero payload per writer so that nothing can shortcut zero pages.
  const std::string payload(entry_bytes, static_cast<char>('A' + writer_id % 26));
  std::uint64_t sequence = 0;
  latencies_us.reserve(latency_capacity);
  while (!shared.stop.load(std::memory_order_relaxed)) {
    const auto started = Clock::now();
    if (shared.entries_taken.fetch_add(1) >= shared.max_entries) {
      shared.stop.store(true);
      break;
    }
    // Index 0: the log assigns the next index. Sync mode: append() returns once the entry is
    // durable, and concurrent writers share both the write (the log's append group) and the flush
    // (group commit). Async mode: returns once written.
    const store::EntryToAppend entry{
        store::EntryMeta{0, 1, store::EntryType::kNormal, 0, writer_id + 1, ++sequence}, payload};
    auto appended = shared.log->append(std::span<const store::EntryToAppend>(&entry, 1));
    if (!appended.ok()) {
      shared.fail("append failed: " + appended.status().to_string());
      return;
    }
    assert(appended->first == appended->last);
    shared.acked_entries.fetch_add(1, std::memory_order_relaxed);
    if (latencies_us.size() < latency_capacity) {
      const auto elapsed =
          std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - started).count();
      latencies_us.push_back(
          static_cast<std::uint32_t>(std::min<std::int64_t>(elapsed, UINT32_MAX)));
    }
  }
}

// WriterModel::kCompletion: every writer has at most one entry outstanding; the next one is appended
// when the previous is acknowledged. Each writer's entry is its own append_no_wait() call (one
// write each, no batching across writers); only the waiting is shared: one wait_flushed() for the
// oldest outstanding entry, instead of one sleeping thread per writer.
void completion_driver(Shared& shared, std::uint64_t writers, std::uint64_t entry_bytes,
                       bool sync_mode, std::size_t latency_capacity,
                       std::vector<std::uint32_t>& latencies_us) {
  struct Outstanding {
    std::uint64_t index = 0;
    std::uint64_t writer = 0;
    Clock::time_point started;
  };
  std::vector<std::string> payloads;
  for (std::uint64_t w = 0; w < writers; ++w)
    payloads.emplace_back(entry_bytes, static_cast<char>('A' + w % 26));
  std::vector<std::uint64_t> sequences(writers, 0);
  std::deque<Outstanding> outstanding;  // in index order; at most one per writer
  std::vector<std::uint64_t> ready(writers);
  for (std::uint64_t w = 0; w < writers; ++w) ready[w] = w;
  latencies_us.reserve(latency_capacity);
  // Bounded by the cell's deadline (stop) and by max_entries.
  while (!shared.stop.load(std::memory_order_relaxed)) {
    for (const std::uint64_t writer : ready) {
      if (shared.entries_taken.fetch_add(1) >= shared.max_entries) {
        shared.stop.store(true);
        break;
      }
      const store::EntryToAppend entry{
          store::EntryMeta{0, 1, store::EntryType::kNormal, 0, writer + 1, ++sequences[writer]},
          payloads[writer]};
      const auto started = Clock::now();
      auto appended = shared.log->append_no_wait(std::span<const store::EntryToAppend>(&entry, 1));
      if (!appended.ok()) {
        shared.fail("append failed: " + appended.status().to_string());
        return;
      }
      outstanding.push_back({appended->last, writer, started});
    }
    ready.clear();
    if (outstanding.empty()) break;
    if (sync_mode) {
      if (const store::Status flushed = shared.log->wait_flushed(outstanding.front().index);
          !flushed.ok()) {
        shared.fail("wait_flushed failed: " + flushed.to_string());
        return;
      }
    }
    // Async mode: an append is acknowledged once written, which it already is.
    const std::uint64_t acknowledged = sync_mode ? shared.log->flushed_index() : UINT64_MAX;
    const auto now = Clock::now();
    while (!outstanding.empty() && outstanding.front().index <= acknowledged) {
      const Outstanding& done = outstanding.front();
      shared.acked_entries.fetch_add(1, std::memory_order_relaxed);
      if (latencies_us.size() < latency_capacity) {
        const auto elapsed =
            std::chrono::duration_cast<std::chrono::microseconds>(now - done.started).count();
        latencies_us.push_back(
            static_cast<std::uint32_t>(std::min<std::int64_t>(elapsed, UINT32_MAX)));
      }
      ready.push_back(done.writer);
      outstanding.pop_front();
    }
  }
}

double percentile_us(std::vector<std::uint32_t>& samples, double fraction) {
  if (samples.empty()) return 0.0;
  const std::size_t rank = std::min(
      samples.size() - 1, static_cast<std::size_t>(fraction * static_cast<double>(samples.size())));
  std::nth_element(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(rank),
                   samples.end());
  return static_cast<double>(samples[rank]);
}

double per_second(double count, double seconds) { return seconds > 0 ? count / seconds : 0.0; }

}  // namespace

double CellResult::entries_per_s() const {
  return per_second(static_cast<double>(entries), seconds);
}
double CellResult::payload_mib_per_s() const {
  return per_second(static_cast<double>(payload_bytes) / kMiB, seconds);
}
double CellResult::disk_mib_per_s() const {
  // bytes_flushed may include entries acknowledged only after the writers stopped (async tail);
  // scale to the acknowledged entries so that sync and async compare like with like.
  if (entries_flushed == 0) return 0.0;
  const double bytes_per_entry =
      static_cast<double>(bytes_flushed) / static_cast<double>(entries_flushed);
  return per_second(bytes_per_entry * static_cast<double>(entries) / kMiB, seconds);
}
double CellResult::flushes_per_s() const {
  return per_second(static_cast<double>(flushes), seconds);
}
double CellResult::sync_busy_ratio() const {
  return seconds <= 0.0 ? 0.0 : static_cast<double>(sync_duration_us) / 1e6 / seconds;
}
double CellResult::appends_per_write() const {
  return group_writes == 0
             ? 0.0
             : static_cast<double>(grouped_appends) / static_cast<double>(group_writes);
}
double CellResult::sync_calls_per_s() const {
  return per_second(static_cast<double>(sync_calls), seconds);
}
double CellResult::entries_per_flush() const {
  return flushes == 0 ? 0.0 : static_cast<double>(entries_flushed) / static_cast<double>(flushes);
}
std::uint64_t CellResult::bytes_per_flush() const {
  return flushes == 0 ? 1 : std::max<std::uint64_t>(1, bytes_flushed / flushes);
}

const char* to_string(WriterModel model) {
  return model == WriterModel::kThread ? "thread" : "completion";
}

std::string size_label(std::uint64_t bytes) {
  if (bytes >= (1U << 20) && bytes % (1U << 20) == 0) return std::to_string(bytes >> 20) + "MiB";
  if (bytes >= (1U << 10) && bytes % (1U << 10) == 0) return std::to_string(bytes >> 10) + "KiB";
  return std::to_string(bytes) + "B";
}

std::string cell_label(store::FlushMode mode, std::uint64_t writers, std::uint64_t entry_bytes) {
  return std::string(store::to_string(mode)) + " w=" + std::to_string(writers) + " " +
         size_label(entry_bytes);
}

CellResult run_store_cell(const CellConfig& config, std::ostream& progress) {
  if (config.writers == 0 || config.writers > kMaxWriters) {
    throw std::invalid_argument("writers must be in [1, " + std::to_string(kMaxWriters) + "]");
  }
  assert(config.entry_bytes > 0);
  store::Options options;
  options.flush_mode = config.mode;
  options.segment_size_bytes = config.segment_size_bytes;
  options.zero_fill_segments = config.zero_fill_segments;
  options.max_entry_size_bytes =
      static_cast<std::uint32_t>(std::max<std::uint64_t>(config.entry_bytes, 4096));
  auto opened = store::CommitLog::open(config.dir, options);
  if (!opened.ok())
    throw std::runtime_error("open " + config.dir + ": " + opened.status().to_string());
  std::unique_ptr<store::CommitLog> log = std::move(opened).value();
  const store::FlushStats before = log->stats();

  Shared shared;
  shared.log = log.get();
  shared.max_entries = std::max<std::uint64_t>(1, config.max_payload_bytes / config.entry_bytes);

  const std::string label = cell_label(config.mode, config.writers, config.entry_bytes);
  const std::size_t latency_capacity = kMaxLatencySamples / config.writers;
  std::vector<std::vector<std::uint32_t>> latencies(config.writers);
  const auto start = Clock::now();
  {
    ProgressTicker ticker(progress, std::chrono::seconds(1), [&] {
      const double elapsed = seconds_since(start);
      const auto entries = shared.acked_entries.load(std::memory_order_relaxed);
      const auto stats = log->stats();
      return "  [" + label + "] " + fixed(elapsed, 1) + "s entries=" + std::to_string(entries) +
             " entries/s=" + fixed(per_second(static_cast<double>(entries), elapsed), 0) +
             " flushes=" + std::to_string(stats.flushes - before.flushes);
    });
    std::vector<std::thread> threads;
    if (config.writer_model == WriterModel::kCompletion) {
      threads.emplace_back(completion_driver, std::ref(shared), config.writers, config.entry_bytes,
                           config.mode == store::FlushMode::kSync, kMaxLatencySamples,
                           std::ref(latencies[0]));
    } else {
      threads.reserve(config.writers);
      for (std::uint64_t w = 0; w < config.writers; ++w) {
        threads.emplace_back(writer_loop, std::ref(shared), w, config.entry_bytes, latency_capacity,
                             std::ref(latencies[w]));
      }
    }
    // Sleep in short steps so that a budget-limited or failed cell ends early.
    const auto deadline = start + config.duration;
    while (Clock::now() < deadline && !shared.stop.load()) {
      std::this_thread::sleep_for(
          std::min<Clock::duration>(std::chrono::milliseconds(20), deadline - Clock::now()));
    }
    shared.stop.store(true);
    for (std::thread& thread : threads) thread.join();
  }
  CellResult result;
  result.seconds = seconds_since(start);
  if (!shared.first_error.empty()) throw std::runtime_error(label + ": " + shared.first_error);

  const auto flush_start = Clock::now();
  if (const store::Status flushed = log->flush(); !flushed.ok()) {
    throw std::runtime_error(label + ": final flush failed: " + flushed.to_string());
  }
  result.final_flush_ms = seconds_since(flush_start) * 1000.0;
  const store::FlushStats after = log->stats();
  if (const store::Status closed = log->close(); !closed.ok()) {
    throw std::runtime_error(label + ": close failed: " + closed.to_string());
  }

  result.entries = shared.acked_entries.load();
  result.payload_bytes = result.entries * config.entry_bytes;
  result.flushes = after.flushes - before.flushes;
  result.sync_calls = after.sync_calls - before.sync_calls;
  result.entries_flushed = after.entries_flushed - before.entries_flushed;
  result.bytes_flushed = after.bytes_flushed - before.bytes_flushed;
  result.sync_duration_us = after.sync_duration_us - before.sync_duration_us;
  result.grouped_appends = after.grouped_appends - before.grouped_appends;
  result.group_writes = after.group_writes - before.group_writes;
  std::vector<std::uint32_t> all_latencies;
  for (auto& samples : latencies)
    all_latencies.insert(all_latencies.end(), samples.begin(), samples.end());
  result.latency_p50_us = percentile_us(all_latencies, 0.50);
  result.latency_p99_us = percentile_us(all_latencies, 0.99);
  return result;
}

}  // namespace raftlog::bench

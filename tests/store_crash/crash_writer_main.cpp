// store_crash_writer: the child process of the real crash test (store_crash_test.cpp).
//
// Opens (recovering) the log in --dir in sync flush mode and appends from several threads until it is
// killed, reporting every durable append as an AckRecord on --report-fd. Bounded: exits by itself
// after --max-seconds or --max-entries, and dies with its parent (PR_SET_PDEATHSIG).
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <mutex>
#include <string>
#include <functional>
#include <thread>
#include <vector>

#include "cli/flags.h"
#include "crash_protocol.h"
#include "store/commit_log.h"

namespace {

using raftlog::crash_test::AckRecord;

struct WriterConfig {
  std::string dir;
  std::uint64_t seed = 1;
  std::uint64_t term = 1;
  std::uint64_t writers = 4;
  bool grouped = false;
  std::uint64_t max_payload_bytes = 2048;
  std::uint64_t segment_size_bytes = 256 << 10;
  std::uint64_t report_fd = 3;
  std::uint64_t max_entries = 200000;
  std::uint64_t max_seconds = 30;
};

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "store_crash_writer: %s\n", message.c_str());
  std::_Exit(3);
}

void write_all(int fd, const AckRecord& record) {
  // One write() of 32 bytes (< PIPE_BUF) is atomic on a pipe.
  for (;;) {
    const ssize_t n = ::write(fd, &record, sizeof(record));
    if (n == static_cast<ssize_t>(sizeof(record))) return;
    if (n < 0 && errno == EINTR) continue;
    die("report write failed");
  }
}

}  // namespace

int main(int argc, char** argv) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  WriterConfig config;
  raftlog::cli::FlagSet flags("store_crash_writer",
                              "Crash-test child: appends in sync mode until killed.");
  flags.string_flag("dir", &config.dir, "DIR", "log directory");
  flags.uint_flag("seed", &config.seed, "N", "payload seed");
  flags.uint_flag("term", &config.term, "N", "term of the appended entries");
  flags.uint_flag("writers", &config.writers, "N", "concurrent appending threads");
  flags.bool_flag(
      "grouped", &config.grouped,
      "append with index 0 and append() (the log's append group) instead of assigning indexes");
  flags.bytes_flag("max-payload-bytes", &config.max_payload_bytes, "BYTES",
                   "payload sizes are 1..BYTES");
  flags.bytes_flag("segment-bytes", &config.segment_size_bytes, "BYTES", "segment size");
  flags.uint_flag("report-fd", &config.report_fd, "FD", "where AckRecords go");
  flags.uint_flag("max-entries", &config.max_entries, "N", "stop after this many appends");
  flags.uint_flag("max-seconds", &config.max_seconds, "S", "stop after this long");
  flags.require("dir");
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (flags.parse(args) != raftlog::cli::ParseStatus::kOk)
    die(flags.error() + "\n" + flags.usage());
  if (config.writers == 0 || config.writers > 64 || config.max_payload_bytes == 0)
    die("bad --writers/--max-payload-bytes");

  raftlog::store::Options options;
  options.flush_mode = raftlog::store::FlushMode::kSync;
  options.segment_size_bytes = config.segment_size_bytes;
  options.max_entry_size_bytes = static_cast<std::uint32_t>(config.max_payload_bytes);
  options.checkpoint_interval_ms =
      20;  // checkpoints land mid-run, so crashes hit every recovery path
  auto opened = raftlog::store::CommitLog::open(config.dir, options);
  if (!opened.ok()) die("open: " + opened.status().to_string());
  std::unique_ptr<raftlog::store::CommitLog> log = std::move(opened).value();

  const int report_fd = static_cast<int>(config.report_fd);
  std::mutex order_mutex;  // indexes must be contiguous: assign and hand over under one lock
  std::atomic<std::uint64_t> appended{0};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(config.max_seconds);
  // Explicit indexes: assigned and handed over under one lock, then waited for. Payload and
  // sequence number are derived from the index.
  auto writer_with_indexes = [&] {
    while (appended.fetch_add(1) < config.max_entries &&
           std::chrono::steady_clock::now() < deadline) {
      std::uint64_t index = 0;
      std::string payload;
      {
        std::lock_guard lock(order_mutex);
        index = log->last_index() + 1;
        payload = raftlog::crash_test::make_payload(config.seed, index, config.max_payload_bytes);
        const raftlog::store::EntryToAppend entry{
            raftlog::store::EntryMeta{index, config.term, raftlog::store::EntryType::kNormal, 0,
                                      config.seed, index},
            payload};
        auto result =
            log->append_no_wait(std::span<const raftlog::store::EntryToAppend>(&entry, 1));
        if (!result.ok())
          die("append " + std::to_string(index) + ": " + result.status().to_string());
      }
      if (const auto status = log->wait_flushed(index); !status.ok()) {
        die("wait_flushed " + std::to_string(index) + ": " + status.to_string());
      }
      write_all(report_fd, AckRecord{index, config.term, raftlog::crash_test::fnv1a64(payload),
                                     static_cast<std::uint32_t>(payload.size()),
                                     raftlog::crash_test::kAckMagic});
    }
  };
  // Grouped: the log assigns the index; concurrent threads' entries are written together by one of
  // them. The payload is derived from the sequence number (unique in this process), which the entry
  // carries, so the parent can check entries recovered without an acknowledgement too.
  std::atomic<std::uint64_t> next_sequence{1};
  auto grouped_writer = [&] {
    while (appended.fetch_add(1) < config.max_entries &&
           std::chrono::steady_clock::now() < deadline) {
      const std::uint64_t sequence = next_sequence.fetch_add(1);
      const std::string payload =
          raftlog::crash_test::make_payload(config.seed, sequence, config.max_payload_bytes);
      const raftlog::store::EntryToAppend entry{
          raftlog::store::EntryMeta{0, config.term, raftlog::store::EntryType::kNormal, 0,
                                    config.seed, sequence},
          payload};
      auto result = log->append(std::span<const raftlog::store::EntryToAppend>(&entry, 1));
      if (!result.ok()) die("grouped append: " + result.status().to_string());
      write_all(
          report_fd,
          AckRecord{result->last, config.term, raftlog::crash_test::fnv1a64(payload),
                    static_cast<std::uint32_t>(payload.size()), raftlog::crash_test::kAckMagic});
    }
  };
  const std::function<void()> writer = config.grouped ? std::function<void()>(grouped_writer)
                                                      : std::function<void()>(writer_with_indexes);
  std::vector<std::thread> threads;
  for (std::uint64_t i = 0; i < config.writers; ++i) threads.emplace_back(writer);
  for (auto& thread : threads) thread.join();
  if (const auto status = log->close(); !status.ok()) die("close: " + status.to_string());
  return 0;
}

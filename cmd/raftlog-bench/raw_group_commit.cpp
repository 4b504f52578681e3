#include "raw_group_commit.h"

#include <fcntl.h>
#include <unistd.h>

#include <cassert>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "report.h"
#include "scratch_file.h"

namespace raftlog::bench {
namespace {

// Sync rounds: a write that completed before round k started is durable once round k completes.
struct SyncRounds {
  std::mutex mu;
  std::condition_variable synced;   // writers wait here for their round
  std::condition_variable pending;  // the syncer waits here for a writer
  std::uint64_t started = 0;
  std::uint64_t completed = 0;
  std::uint64_t waiting = 0;  // writers whose record is written and not yet durable
  bool stop = false;
  std::string error;
};

}  // namespace

RawGroupCommitResult measure_raw_group_commit(const RawGroupCommitOptions& options,
                                              std::atomic<std::uint64_t>* progress_bytes) {
  assert(options.writers > 0 && options.record_bytes > 0 &&
         options.max_file_bytes >= options.record_bytes);
  const ScratchFile file(options.file, options.max_file_bytes, "raw group commit");
  const int fd = file.fd();

  std::vector<char> record(options.record_bytes);
  for (std::size_t i = 0; i < record.size(); ++i) record[i] = static_cast<char>('a' + (i * 7) % 26);
  std::atomic<std::uint64_t> next_offset{0};
  std::atomic<std::uint64_t> durable_records{0};
  SyncRounds rounds;
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + options.duration;

  std::thread syncer([&] {
    // Bounded by the deadline: writers stop there, and then the syncer is stopped.
    for (;;) {
      std::unique_lock lock(rounds.mu);
      rounds.pending.wait(lock, [&] { return rounds.stop || rounds.waiting > 0; });
      if (rounds.stop) return;
      const std::uint64_t round = ++rounds.started;
      lock.unlock();
      const int rc = ::fdatasync(fd);
      lock.lock();
      if (rc != 0 && rounds.error.empty())
        rounds.error = "fdatasync: " + std::string(std::strerror(errno));
      rounds.completed = round;
      rounds.synced.notify_all();
    }
  });
  std::vector<std::thread> writers;
  for (std::uint64_t w = 0; w < options.writers; ++w) {
    writers.emplace_back([&] {
      // Bounded: by the deadline and by the file size (each pass takes one record's offset).
      while (std::chrono::steady_clock::now() < deadline) {
        const std::uint64_t offset = next_offset.fetch_add(options.record_bytes);
        if (offset + options.record_bytes > options.max_file_bytes) return;
        if (::pwrite(fd, record.data(), record.size(), static_cast<off_t>(offset)) !=
            static_cast<ssize_t>(record.size())) {
          std::lock_guard lock(rounds.mu);
          if (rounds.error.empty()) rounds.error = "pwrite: " + std::string(std::strerror(errno));
          return;
        }
        std::unique_lock lock(rounds.mu);
        const std::uint64_t needed =
            rounds.started + 1;  // the first round that starts after our write
        ++rounds.waiting;
        rounds.pending.notify_one();
        rounds.synced.wait(lock,
                           [&] { return rounds.completed >= needed || !rounds.error.empty(); });
        --rounds.waiting;
        if (!rounds.error.empty()) return;
        lock.unlock();
        const std::uint64_t done = durable_records.fetch_add(1) + 1;
        if (progress_bytes != nullptr)
          progress_bytes->store(done * options.record_bytes, std::memory_order_relaxed);
      }
    });
  }
  for (auto& writer : writers) writer.join();
  RawGroupCommitResult result;
  result.seconds = seconds_since(start);
  {
    std::lock_guard lock(rounds.mu);
    rounds.stop = true;
    rounds.pending.notify_one();
  }
  syncer.join();
  if (!rounds.error.empty())
    throw std::system_error(EIO, std::generic_category(), "raw group commit: " + rounds.error);
  result.syncs = rounds.completed;
  result.records = durable_records.load();
  result.bytes = result.records * options.record_bytes;
  return result;
}

}  // namespace raftlog::bench

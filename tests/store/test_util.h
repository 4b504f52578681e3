// Helpers shared by the store tests.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "store/commit_log.h"
#include "store/memory_env.h"

namespace raftlog::store::testing {

// A unique directory under the system temp dir, removed on destruction.
class TempDir {
 public:
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "raftlog-store-XXXXXX").string();
    char* made = mkdtemp(pattern.data());
    EXPECT_NE(made, nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Deterministic payload for (index, term): tests can recompute what must be stored.
inline std::string payload_for(std::uint64_t index, std::uint64_t term, std::size_t size) {
  std::string payload(size, '\0');
  std::uint64_t x = index * 0x9E3779B97F4A7C15ULL ^ term * 0xC2B2AE3D27D4EB4FULL;
  for (std::size_t i = 0; i < size; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    payload[i] = static_cast<char>(x);
  }
  return payload;
}

// Owns payload strings so that EntryToAppend views stay valid.
struct Batch {
  std::vector<std::string> payloads;
  std::vector<EntryToAppend> entries;
  std::span<const EntryToAppend> span() const { return entries; }
};

inline Batch make_batch(std::uint64_t first_index, std::size_t count, std::uint64_t term,
                        std::size_t payload_size) {
  Batch batch;
  batch.payloads.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    batch.payloads.push_back(payload_for(first_index + i, term, payload_size));
  }
  for (std::size_t i = 0; i < count; ++i) {
    EntryToAppend entry;
    entry.meta.index = first_index + i;
    entry.meta.term = term;
    entry.meta.type = EntryType::kNormal;
    entry.meta.client_id = 7;
    entry.meta.sequence = first_index + i;
    entry.payload = batch.payloads[i];
    batch.entries.push_back(entry);
  }
  return batch;
}

// A test whose log lives in /log on its own simulated file system (env_).
class MemoryLogDirTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(env_.create_dir("/log").ok()); }
  MemoryEnv env_;
};

inline Options small_options(Env* env, FlushMode mode = FlushMode::kSync) {
  Options options;
  options.env = env;
  options.segment_size_bytes = 64 << 10;
  options.max_entry_size_bytes = 8 << 10;
  options.flush_mode = mode;
  options.flush_interval_ms = 2;
  options.checkpoint_interval_ms = 5;
  return options;
}

// Sync mode on real files (a TempDir), for tests that need the kernel's own write and sync paths.
inline Options real_file_sync_options(std::uint64_t segment_size_bytes) {
  Options options;
  options.segment_size_bytes = segment_size_bytes;
  options.max_entry_size_bytes = 4096;
  options.flush_mode = FlushMode::kSync;
  return options;
}

inline std::unique_ptr<CommitLog> open_ok(const std::string& dir, const Options& options) {
  auto log = CommitLog::open(dir, options);
  EXPECT_TRUE(log.ok()) << log.status().to_string();
  if (!log.ok()) return nullptr;
  return std::move(*log);
}

// `count` entries of term 1 from index 1, 1000-byte payloads (payload_for), ten an append: 200 make
// about 4 segments of 64 KiB under small_options.
inline void fill_log(CommitLog& log, std::uint64_t count = 200) {
  for (std::uint64_t i = 1; i <= count; i += 10) {
    auto batch = make_batch(i, 10, 1, 1000);
    ASSERT_TRUE(log.append(batch.span()).ok());
  }
}

// small_options for the tests that cut an operation at every sync: the flusher's own checkpoints
// are kept out of the count.
inline Options crash_test_options(Env* env) {
  Options options = small_options(env);
  options.checkpoint_interval_ms = 60000;
  return options;
}

// What cut_by_a_crash's operation returned, and whether the armed crash cut it (false: it completed
// before `syncs` more sync calls).
struct Cut {
  Status status;
  bool crashed = false;
};

// A log of fill_log's 200 entries in `env`'s /log (crash_test_options), whose `operation` a crash
// cuts after `syncs` more sync calls; then the power goes whether or not it cut it, and `env`
// restarts losing unsynced bytes as `restart` says. The log is not reopened. A fatal failure ends
// only this function: call it through ASSERT_NO_FATAL_FAILURE.
inline void cut_by_a_crash(MemoryEnv& env, std::uint64_t syncs,
                           const std::function<Status(CommitLog&)>& operation,
                           const CrashOptions& restart, Cut* cut) {
  ASSERT_TRUE(env.create_dir("/log").ok());
  auto log = open_ok("/log", crash_test_options(&env));
  ASSERT_TRUE(log);
  ASSERT_NO_FATAL_FAILURE(fill_log(*log));
  env.crash_after_syncs(syncs);
  cut->status = operation(*log);
  cut->crashed = env.crashed();
  env.crash();
  log.reset();
  env.restart(restart);
}

// Reads every entry and checks payloads against payload_for(index, term-from-log, size-from-log)
// unless `expected` gives (term, payload) for each index from first_index().
inline void expect_entries(const CommitLog& log, std::uint64_t from, std::uint64_t to,
                           std::uint64_t term, std::size_t payload_size) {
  for (std::uint64_t index = from; index <= to;) {
    auto batch = log.read(index, 1000, 1 << 30);
    ASSERT_TRUE(batch.ok()) << batch.status().to_string();
    ASSERT_FALSE(batch->entries.empty());
    for (const EntryView& entry : batch->entries) {
      if (index > to) break;
      ASSERT_EQ(entry.meta.index, index);
      ASSERT_EQ(entry.meta.term, term);
      ASSERT_EQ(entry.payload, payload_for(index, term, payload_size)) << "index " << index;
      ++index;
    }
  }
}

}  // namespace raftlog::store::testing

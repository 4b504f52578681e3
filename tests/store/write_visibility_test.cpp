// Written but not yet flushed entries: an append writes its entries to the segment file before it
// returns (readers see them at once, and they survive a process crash), truncation removes them
// cleanly while the flusher is held, and readers racing with appends and flushes always read what
// was appended.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "flusher_gate.h"
#include "store/entry_format.h"
#include "store/segment_format.h"
#include "test_util.h"

namespace raftlog::store {
namespace {

using namespace std::chrono_literals;
using testing::expect_entries;
using testing::FlusherGate;
using testing::make_batch;
using testing::open_ok;
using testing::small_options;

constexpr std::size_t kPayloadBytes = 100;

// File offset of entry `index` in the first segment when every entry carries kPayloadBytes.
std::uint64_t offset_of(std::uint64_t index) {
  return segment_format::kSegmentHeaderBytes +
         (index - 1) * entry_format::record_bytes(kPayloadBytes);
}

// Whether the segment file (MemoryEnv's volatile image: the page cache) holds a record at `offset`.
bool file_has_record_at(const MemoryEnv& env, const std::string& path, std::uint64_t offset) {
  auto content = env.content(path);
  EXPECT_TRUE(content.ok()) << content.status().to_string();
  if (!content.ok() || content->size() < offset + 4) return false;
  return content->compare(offset, 4, std::string(4, '\0')) != 0;
}

// Crashes the environment (what survives depends on `crash`), drops the old log object and opens
// the log again from what the "disk" kept.
std::unique_ptr<CommitLog> crash_and_reopen(MemoryEnv& env, std::unique_ptr<CommitLog>& log,
                                            const Options& options, const CrashOptions& crash) {
  env.crash();
  log.reset();
  env.restart(crash);
  return open_ok("/log", options);
}

TEST(WriteVisibility, SyncModeReadersSeeEntriesWrittenButNotFlushed) {
  MemoryEnv env;
  ASSERT_TRUE(env.create_dir("/log").ok());
  auto options = small_options(&env, FlushMode::kSync);
  options.checkpoint_interval_ms = 60000;
  auto log = open_ok("/log", options);
  ASSERT_TRUE(log);
  FlusherGate gate;
  gate.attach(*log);
  auto first = make_batch(1, 1, 1, kPayloadBytes);
  ASSERT_TRUE(log->append(first.span()).ok());
  ASSERT_TRUE(gate.wait_held());

  auto unflushed = make_batch(2, 40, 1, kPayloadBytes);
  auto range = log->append_no_wait(unflushed.span());
  ASSERT_TRUE(range.ok()) << range.status().to_string();
  EXPECT_EQ(log->written_index(), 41U);
  EXPECT_EQ(log->flushed_index(), 1U);
  const std::string path = log->segments().front().data_path;
  // Written: in the segment file (page cache), not yet durable.
  EXPECT_TRUE(file_has_record_at(env, path, offset_of(41)));

  // Readers see the written entries before they are flushed.
  expect_entries(*log, 1, 41, 1, kPayloadBytes);
  auto term = log->term_at(41);
  ASSERT_TRUE(term.ok());
  EXPECT_EQ(*term, 1U);
  auto middle = log->read(20, 5, 1 << 20);
  ASSERT_TRUE(middle.ok());
  ASSERT_EQ(middle->entries.size(), 5U);
  EXPECT_EQ(middle->entries[0].meta.index, 20U);

  // Once the flusher runs again, the entries are durable.
  gate.release();
  ASSERT_TRUE(log->wait_flushed(41).ok());
  expect_entries(*log, 1, 41, 1, kPayloadBytes);
  EXPECT_EQ(middle->entries[4].payload, testing::payload_for(24, 1, kPayloadBytes));

  auto reopened = crash_and_reopen(env, log, options, {CrashMode::kLoseUnflushed, 5});
  ASSERT_TRUE(reopened);
  EXPECT_EQ(reopened->last_index(), 41U);
  expect_entries(*reopened, 1, 41, 1, kPayloadBytes);
}

TEST(WriteVisibility, AsyncAppendReturnsWithItsEntriesInTheFile) {
  MemoryEnv env;
  ASSERT_TRUE(env.create_dir("/log").ok());
  auto options = small_options(&env, FlushMode::kAsync);
  options.flush_interval_ms = 60000;
  options.flush_dirty_bytes = 1ULL << 40;
  options.checkpoint_interval_ms = 60000;
  auto log = open_ok("/log", options);
  ASSERT_TRUE(log);
  // One flushed entry first: it makes the segment's name durable (MemoryEnv keeps directory entries
  // only once the directory was synced, even in a process crash).
  auto first = make_batch(1, 1, 1, kPayloadBytes);
  ASSERT_TRUE(log->append(first.span()).ok());
  ASSERT_TRUE(log->flush().ok());
  auto batch = make_batch(2, 29, 1, kPayloadBytes);
  ASSERT_TRUE(log->append(batch.span()).ok());
  EXPECT_EQ(log->flushed_index(), 1U);
  const std::string path = log->segments().front().data_path;
  EXPECT_TRUE(file_has_record_at(env, path, offset_of(30)));
  // "Written" in async mode survives a process crash (the page cache outlives the process).
  auto reopened = crash_and_reopen(env, log, options, {CrashMode::kKeepAll, 1});
  ASSERT_TRUE(reopened);
  EXPECT_EQ(reopened->last_index(), 30U);
  expect_entries(*reopened, 1, 30, 1, kPayloadBytes);
}

TEST(WriteVisibility, TruncateSuffixRemovesUnflushedEntriesWhileTheFlusherIsHeld) {
  MemoryEnv env;
  ASSERT_TRUE(env.create_dir("/log").ok());
  auto options = small_options(&env, FlushMode::kSync);
  auto log = open_ok("/log", options);
  ASSERT_TRUE(log);
  FlusherGate gate;
  gate.attach(*log);
  auto first = make_batch(1, 1, 1, kPayloadBytes);
  ASSERT_TRUE(log->append(first.span()).ok());
  ASSERT_TRUE(gate.wait_held());
  auto unflushed = make_batch(2, 29, 1, kPayloadBytes);
  ASSERT_TRUE(log->append_no_wait(unflushed.span()).ok());
  ASSERT_TRUE(log->truncate_suffix(20).ok());
  EXPECT_EQ(log->last_index(), 19U);
  auto replacement = make_batch(20, 6, 2, kPayloadBytes);
  ASSERT_TRUE(log->append_no_wait(replacement.span()).ok());
  expect_entries(*log, 1, 19, 1, kPayloadBytes);
  expect_entries(*log, 20, 25, 2, kPayloadBytes);
  gate.release();
  ASSERT_TRUE(log->wait_flushed(25).ok());
  auto reopened = crash_and_reopen(env, log, options, {CrashMode::kLoseUnflushed, 9});
  ASSERT_TRUE(reopened);
  EXPECT_EQ(reopened->last_index(), 25U);
  expect_entries(*reopened, 1, 19, 1, kPayloadBytes);
  expect_entries(*reopened, 20, 25, 2, kPayloadBytes);
}

// A writer appends (sync mode, non-blocking path, real files, segments rolling) while a reader keeps
// reading the newest entries and the flusher syncs them: every read must return exactly what was
// appended. Bounded by kEntries and 20 s.
TEST(WriteVisibility, ReadersRacingWithAppendsAndFlushesReadWhatWasAppended) {
  testing::TempDir dir;
  Options options;
  options.segment_size_bytes = 64 << 10;  // about 40 entries of 1 KiB: many rolls
  options.max_entry_size_bytes = 8 << 10;
  options.flush_mode = FlushMode::kSync;
  auto log = open_ok(dir.path(), options);
  ASSERT_TRUE(log);
  constexpr std::uint64_t kEntries = 3000;
  constexpr std::size_t kBytes = 1000;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  std::atomic<bool> writer_done{false};
  std::atomic<std::uint64_t> reads{0};
  std::atomic<bool> read_failed{false};
  std::thread reader([&] {
    std::uint64_t next = 1;
    while (!read_failed.load() && std::chrono::steady_clock::now() < deadline) {
      const std::uint64_t last = log->last_index();
      if (next > last) {
        if (writer_done.load()) break;
        std::this_thread::yield();
        continue;
      }
      auto batch = log->read(next, 8, 1 << 20);
      if (!batch.ok()) {
        ADD_FAILURE() << "read(" << next << "): " << batch.status().to_string();
        read_failed.store(true);
        break;
      }
      for (const EntryView& entry : batch->entries) {
        if (entry.meta.index != next || entry.payload != testing::payload_for(next, 1, kBytes)) {
          ADD_FAILURE() << "entry " << next << " read back wrong";
          read_failed.store(true);
          break;
        }
        ++next;
      }
      reads.fetch_add(1);
    }
  });
  for (std::uint64_t index = 1; index <= kEntries && !read_failed.load(); index += 3) {
    auto batch = make_batch(index, 3, 1, kBytes);
    auto range = log->append_no_wait(batch.span());
    ASSERT_TRUE(range.ok()) << range.status().to_string();
    if (index % 300 == 1) {
      ASSERT_TRUE(log->wait_flushed(index).ok());
    }
    if (std::chrono::steady_clock::now() > deadline) break;
  }
  writer_done.store(true);
  reader.join();
  EXPECT_FALSE(read_failed.load());
  EXPECT_GT(reads.load(), 0U);
  ASSERT_TRUE(log->flush().ok());
  EXPECT_EQ(log->flushed_index(), log->last_index());
  expect_entries(*log, 1, log->last_index(), 1, kBytes);
}

}  // namespace
}  // namespace raftlog::store

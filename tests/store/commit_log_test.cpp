// CommitLog basics: append/read/term_at, bounds, segment roll-over, zero-copy reads, reopen.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "store/entry_format.h"
#include "store/segment_format.h"
#include "test_util.h"

namespace raftlog::store {
namespace {

using testing::make_batch;
using testing::open_ok;
using testing::payload_for;
using testing::small_options;

class CommitLogTest : public testing::MemoryLogDirTest {};

TEST_F(CommitLogTest, FreshLogIsEmpty) {
  auto log = open_ok("/log", small_options(&env_));
  ASSERT_TRUE(log);
  EXPECT_EQ(log->first_index(), 1U);
  EXPECT_EQ(log->last_index(), 0U);
  EXPECT_EQ(log->flushed_index(), 0U);
  EXPECT_EQ(log->recovery_report().mode, RecoveryMode::kFresh);
  EXPECT_EQ(*log->term_at(0), 0U);
  EXPECT_EQ(log->term_at(1).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(log->read(1, 10, 1000).status().code(), StatusCode::kOutOfRange);
}

TEST_F(CommitLogTest, AppendReadTermAt) {
  auto log = open_ok("/log", small_options(&env_));
  ASSERT_TRUE(log);
  auto batch = make_batch(1, 10, 3, 100);
  auto range = log->append(batch.span());
  ASSERT_TRUE(range.ok()) << range.status().to_string();
  EXPECT_EQ(range->first, 1U);
  EXPECT_EQ(range->last, 10U);
  EXPECT_EQ(log->last_index(), 10U);
  EXPECT_EQ(log->flushed_index(), 10U);  // sync mode: durable on return
  testing::expect_entries(*log, 1, 10, 3, 100);
  EXPECT_EQ(*log->term_at(5), 3U);
  EXPECT_EQ(*log->term_at(0), 0U);
  EXPECT_EQ(log->term_at(11).status().code(), StatusCode::kOutOfRange);
  auto read = log->read(4, 1, 1 << 20);
  ASSERT_TRUE(read.ok());
  ASSERT_EQ(read->entries.size(), 1U);
  EXPECT_EQ(read->entries[0].meta.client_id, 7U);
  EXPECT_EQ(read->entries[0].meta.sequence, 4U);
  EXPECT_EQ(read->entries[0].meta.type, EntryType::kNormal);
}

TEST_F(CommitLogTest, FirstAppendMayStartAboveOne) {
  auto log = open_ok("/log", small_options(&env_));
  ASSERT_TRUE(log);
  auto batch = make_batch(500, 3, 9, 10);
  ASSERT_TRUE(log->append(batch.span()).ok());
  EXPECT_EQ(log->first_index(), 500U);
  EXPECT_EQ(log->last_index(), 502U);
  EXPECT_EQ(*log->term_at(499), 0U);  // no entry before the first
  EXPECT_EQ(log->term_at(498).status().code(), StatusCode::kOutOfRange);
}

TEST_F(CommitLogTest, RejectsBadBatchesAndWritesNothing) {
  auto options = small_options(&env_);
  options.max_batch_entries = 100;
  auto log = open_ok("/log", options);
  ASSERT_TRUE(log);
  auto first = make_batch(1, 5, 2, 10);
  ASSERT_TRUE(log->append(first.span()).ok());

  EXPECT_EQ(log->append({}).status().code(), StatusCode::kInvalidArgument);
  auto gap = make_batch(7, 1, 2, 10);
  EXPECT_EQ(log->append(gap.span()).status().code(), StatusCode::kInvalidArgument);
  auto overlap = make_batch(5, 1, 2, 10);
  EXPECT_EQ(log->append(overlap.span()).status().code(), StatusCode::kInvalidArgument);
  auto lower_term = make_batch(6, 1, 1, 10);
  EXPECT_EQ(log->append(lower_term.span()).status().code(), StatusCode::kInvalidArgument);
  auto non_contiguous = make_batch(6, 3, 2, 10);
  non_contiguous.entries[2].meta.index = 9;
  EXPECT_EQ(log->append(non_contiguous.span()).status().code(), StatusCode::kInvalidArgument);
  auto too_many = make_batch(6, 101, 2, 1);
  EXPECT_EQ(log->append(too_many.span()).status().code(), StatusCode::kInvalidArgument);
  // An oversized entry in the middle of a batch: the whole batch is refused.
  auto oversized = make_batch(6, 3, 2, 10);
  const std::string big(options.max_entry_size_bytes + 1, 'x');
  oversized.entries[1].payload = big;
  auto status = log->append(oversized.span()).status();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("max_entry_size_bytes"), std::string::npos) << status.message();

  EXPECT_EQ(log->last_index(), 5U);
  auto next = make_batch(6, 1, 2, 10);
  ASSERT_TRUE(log->append(next.span()).ok());
  EXPECT_EQ(log->last_index(), 6U);
  testing::expect_entries(*log, 1, 6, 2, 10);
  // Exactly max_entry_size_bytes is fine.
  auto max = make_batch(7, 1, 2, options.max_entry_size_bytes);
  EXPECT_TRUE(log->append(max.span()).ok());
}

TEST_F(CommitLogTest, RejectsBadOptions) {
  auto options = small_options(&env_);
  options.segment_size_bytes = 1000;
  EXPECT_EQ(CommitLog::open("/log", options).status().code(), StatusCode::kInvalidArgument);
  options = small_options(&env_);
  options.max_entry_size_bytes = 64 << 10;  // does not fit a 64 KiB segment with its header
  EXPECT_EQ(CommitLog::open("/log", options).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(CommitLogTest, RollsOverSegmentsAndReadsAcrossThem) {
  auto log = open_ok("/log", small_options(&env_));
  ASSERT_TRUE(log);
  // 1000-byte payloads (1048-byte records): ~62 per 64 KiB segment; 300 entries span 5+ segments.
  for (std::uint64_t i = 1; i <= 300; i += 10) {
    auto batch = make_batch(i, 10, 1, 1000);
    ASSERT_TRUE(log->append(batch.span()).ok());
  }
  auto names = env_.list_dir("/log");
  ASSERT_TRUE(names.ok());
  const auto segments = std::count_if(names->begin(), names->end(), [](const std::string& n) {
    return segment_format::parse_segment_file_name(n).has_value();
  });
  EXPECT_GE(segments, 5);
  EXPECT_GE(log->stats().segments_created, 5U);
  testing::expect_entries(*log, 1, 300, 1, 1000);
  // A read crossing segment boundaries in one call.
  auto batch = log->read(50, 100, 1 << 30);
  ASSERT_TRUE(batch.ok());
  ASSERT_EQ(batch->entries.size(), 100U);
  for (std::size_t i = 0; i < 100; ++i) EXPECT_EQ(batch->entries[i].meta.index, 50 + i);
  EXPECT_GE(batch->pins.size(), 2U);
  // Segment headers carry the previous entry's term: the next segment's base has a known prev.
  const auto report = verify_log_directory("/log", &env_);
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok) << report->problem;
  EXPECT_EQ(report->first_index, 1U);
  EXPECT_EQ(report->last_index, 300U);
  EXPECT_EQ(report->entries, 300U);
}

// Payloads at and above Options::direct_write_min_payload_bytes are written without the staging
// buffer. Mixed with staged ones in one batch, across segment rolls and every padding length, they
// read back, survive a reopen and pass the offline verifier (which checks every CRC).
TEST_F(CommitLogTest, UnstagedLargePayloadsReadBackAndRecover) {
  Options options = small_options(&env_);
  options.direct_write_min_payload_bytes = 1000;
  std::vector<std::size_t> sizes;
  for (std::size_t size : {0, 1, 999, 1000, 1001, 1002, 1003, 1004, 1005, 1006, 1007, 8000, 8192})
    sizes.push_back(size);
  for (int i = 0; i < 40; ++i) sizes.push_back(i % 3 == 0 ? 5000 + i : 17 + i);
  std::vector<std::string> payloads;
  std::vector<EntryToAppend> batch;
  for (std::size_t i = 0; i < sizes.size(); ++i)
    payloads.push_back(payload_for(i + 1, 2, sizes[i]));
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    EntryToAppend entry;
    entry.meta.term = 2;
    entry.meta.client_id = 9;
    entry.meta.sequence = i + 1;
    entry.payload = payloads[i];
    batch.push_back(entry);
  }
  auto check_all = [&](const CommitLog& log, const std::string& when) {
    ASSERT_EQ(log.last_index(), sizes.size()) << when;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      auto read = log.read(i + 1, 1, 1 << 20);
      ASSERT_TRUE(read.ok()) << when << " index " << i + 1 << ": " << read.status().to_string();
      ASSERT_EQ(read->entries.size(), 1U) << when;
      EXPECT_EQ(read->entries[0].payload, payloads[i]) << when << " index " << i + 1;
      EXPECT_EQ(read->entries[0].meta.sequence, i + 1) << when;
    }
  };
  {
    auto log = open_ok("/log", options);
    ASSERT_TRUE(log);
    // Two appends: the second starts right after an unstaged record's end marker.
    const std::size_t half = 8;
    ASSERT_TRUE(log->append(std::span(batch).first(half)).ok());
    auto second = log->append(std::span(batch).subspan(half));
    ASSERT_TRUE(second.ok()) << second.status().to_string();
    ASSERT_GE(log->stats().segments_created, 2U);  // the batch rolled a segment
    check_all(*log, "after append");
  }
  auto log = open_ok("/log", options);
  ASSERT_TRUE(log);
  check_all(*log, "after reopen");
  auto report = verify_log_directory("/log", &env_);
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok) << report->bad_file << " @" << report->bad_offset << " "
                          << report->problem;
  EXPECT_EQ(report->last_index, sizes.size());
}

TEST_F(CommitLogTest, ReadHonoursEntryAndByteLimits) {
  auto log = open_ok("/log", small_options(&env_));
  ASSERT_TRUE(log);
  auto batch = make_batch(1, 20, 1, 100);
  ASSERT_TRUE(log->append(batch.span()).ok());
  auto limited = log->read(1, 5, 1 << 20);
  ASSERT_TRUE(limited.ok());
  EXPECT_EQ(limited->entries.size(), 5U);
  auto by_bytes = log->read(1, 100, 350);
  ASSERT_TRUE(by_bytes.ok());
  EXPECT_EQ(by_bytes->entries.size(), 3U);  // 300 payload bytes fit, a fourth would exceed 350
  auto at_least_one = log->read(3, 100, 1);
  ASSERT_TRUE(at_least_one.ok());
  EXPECT_EQ(at_least_one->entries.size(), 1U);
  auto tail = log->read(18, 100, 1 << 20);
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(tail->entries.size(), 3U);
  EXPECT_EQ(log->read(21, 1, 1).status().code(), StatusCode::kOutOfRange);
}

TEST_F(CommitLogTest, ReadsAreZeroCopyAndSurvivePrefixDeletion) {
  auto log = open_ok("/log", small_options(&env_));
  ASSERT_TRUE(log);
  for (std::uint64_t i = 1; i <= 200; i += 10) {
    auto batch = make_batch(i, 10, 1, 1000);
    ASSERT_TRUE(log->append(batch.span()).ok());
  }
  auto batch = log->read(1, 5, 1 << 20);
  ASSERT_TRUE(batch.ok());
  const char* payload_address = batch->entries[0].payload.data();
  // The payload points into the mapping, not into a copy: a second read yields the same address.
  auto again = log->read(1, 1, 1 << 20);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->entries[0].payload.data(), payload_address);
  ASSERT_TRUE(log->truncate_prefix(150).ok());
  EXPECT_GT(log->first_index(), 1U);
  EXPECT_FALSE(env_.exists("/log/" + segment_format::segment_file_name(1)));
  // The deleted segment's memory stays valid while the batch pins it.
  EXPECT_EQ(batch->entries[0].payload, payload_for(1, 1, 1000));
  EXPECT_EQ(batch->entries[4].payload, payload_for(5, 1, 1000));
}

TEST_F(CommitLogTest, CleanReopenIsNormalAndDoesNotRescan) {
  {
    auto log = open_ok("/log", small_options(&env_));
    ASSERT_TRUE(log);
    for (std::uint64_t i = 1; i <= 300; i += 10) {
      auto batch = make_batch(i, 10, 4, 1000);
      ASSERT_TRUE(log->append(batch.span()).ok());
    }
    ASSERT_TRUE(log->set_commit_index(250).ok());
    ASSERT_TRUE(log->close().ok());
    EXPECT_EQ(log->append(make_batch(301, 1, 4, 1).span()).status().code(), StatusCode::kClosed);
  }
  EXPECT_FALSE(env_.exists("/log/ABORT"));
  auto log = open_ok("/log", small_options(&env_));
  ASSERT_TRUE(log);
  const auto& report = log->recovery_report();
  EXPECT_EQ(report.mode, RecoveryMode::kNormal) << report.to_string();
  EXPECT_EQ(report.checkpoint_flushed_index, 300U);
  // Only O(segments) spot checks: far fewer than the 300 entries were CRC-checked.
  EXPECT_LT(report.entries_scanned, 20U) << report.to_string();
  EXPECT_EQ(report.index_files_rebuilt, 0U);
  EXPECT_EQ(log->first_index(), 1U);
  EXPECT_EQ(log->last_index(), 300U);
  EXPECT_EQ(log->flushed_index(), 300U);
  EXPECT_EQ(log->commit_index(), 250U);
  testing::expect_entries(*log, 1, 300, 4, 1000);
  auto next = make_batch(301, 5, 5, 10);
  ASSERT_TRUE(log->append(next.span()).ok());
  EXPECT_EQ(*log->term_at(305), 5U);
}

TEST_F(CommitLogTest, MissingOrDamagedIndexIsRebuilt) {
  {
    auto log = open_ok("/log", small_options(&env_));
    ASSERT_TRUE(log);
    for (std::uint64_t i = 1; i <= 200; i += 10) {
      auto batch = make_batch(i, 10, 2, 1000);
      ASSERT_TRUE(log->append(batch.span()).ok());
    }
  }
  // Remove one index file, corrupt another's last records, truncate a third's header.
  ASSERT_TRUE(env_.remove("/log/" + segment_format::index_file_name(1)).ok());
  auto names = env_.list_dir("/log");
  ASSERT_TRUE(names.ok());
  std::vector<std::uint64_t> bases;
  for (const auto& n : *names) {
    if (auto b = segment_format::parse_segment_file_name(n)) bases.push_back(*b);
  }
  std::sort(bases.begin(), bases.end());
  ASSERT_GE(bases.size(), 3U);
  const std::string second_index = "/log/" + segment_format::index_file_name(bases[1]);
  const std::uint64_t last_of_second = bases[2] - 1;
  ASSERT_TRUE(env_.corrupt_byte(second_index, 64 + (last_of_second - bases[1]) * 32 + 3).ok());
  ASSERT_TRUE(env_.corrupt_byte("/log/" + segment_format::index_file_name(bases[2]), 5).ok());

  auto log = open_ok("/log", small_options(&env_));
  ASSERT_TRUE(log);
  EXPECT_GE(log->recovery_report().index_files_rebuilt, 3U) << log->recovery_report().to_string();
  testing::expect_entries(*log, 1, 200, 2, 1000);
  for (std::uint64_t i = 1; i <= 200; ++i) ASSERT_EQ(*log->term_at(i), 2U);
}

TEST_F(CommitLogTest, ConcurrentReadersWhileAppending) {
  auto options = small_options(&env_, FlushMode::kAsync);
  auto log = open_ok("/log", options);
  ASSERT_TRUE(log);
  std::atomic<bool> done{false};
  std::atomic<std::uint64_t> checked{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&, r] {
      std::uint64_t step = static_cast<std::uint64_t>(r);
      while (!done.load()) {
        const std::uint64_t last = log->last_index();
        if (last == 0) continue;
        // A different start each time, anywhere in what has been written so far.
        const std::uint64_t from = log->first_index() + (++step * 7919) % last;
        auto batch = log->read(from, 16, 1 << 20);
        if (!batch.ok()) continue;  // raced with nothing: range only grows here
        for (const auto& entry : batch->entries) {
          ASSERT_EQ(entry.payload, payload_for(entry.meta.index, 1, 200));
          checked.fetch_add(1);
        }
      }
    });
  }
  auto append_range = [&](std::uint64_t first, std::uint64_t last) {
    for (std::uint64_t i = first; i <= last; i += 20) {
      auto batch = make_batch(i, 20, 1, 200);
      ASSERT_TRUE(log->append(batch.span()).ok());
    }
  };
  append_range(1, 1000);
  // On a loaded machine the appends can finish before any reader ran: let the readers start
  // (bounded) before the second half, so that reads and appends overlap.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (checked.load() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  append_range(1001, 2000);
  done.store(true);
  for (auto& t : readers) t.join();
  EXPECT_GT(checked.load(), 0U);
  ASSERT_TRUE(log->flush().ok());
  EXPECT_EQ(log->flushed_index(), 2000U);
}

TEST(CommitLogPosix, RealFilesRoundTrip) {
  testing::TempDir dir;
  Options options;
  options.segment_size_bytes = 256 << 10;
  options.max_entry_size_bytes = 16 << 10;
  {
    auto log = open_ok(dir.path(), options);
    ASSERT_TRUE(log);
    for (std::uint64_t i = 1; i <= 500; i += 50) {
      auto batch = make_batch(i, 50, 1, 2000);
      ASSERT_TRUE(log->append(batch.span()).ok());
    }
    testing::expect_entries(*log, 1, 500, 1, 2000);
  }
  auto log = open_ok(dir.path(), options);
  ASSERT_TRUE(log);
  EXPECT_EQ(log->recovery_report().mode, RecoveryMode::kNormal);
  EXPECT_EQ(log->last_index(), 500U);
  testing::expect_entries(*log, 1, 500, 1, 2000);
  auto report = verify_log_directory(dir.path());
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok);
  EXPECT_EQ(report->entries, 500U);
  EXPECT_TRUE(report->abort_marker_present);  // the log is open right now
}

}  // namespace
}  // namespace raftlog::store

namespace raftlog::store {
namespace {

TEST(PosixEnvTest, ReadOnlyOpenCannotModify) {
  testing::TempDir dir;
  Env* env = Env::posix();
  const std::string path = dir.path() + "/file";
  ASSERT_TRUE(env->write_file(path, std::string(8192, 'a')).ok());
  auto file = env->open_read_only(path);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  EXPECT_FALSE((*file)->allocate(0, 1 << 20).ok());  // O_RDONLY: EBADF
  EXPECT_FALSE((*file)->truncate(0).ok());
  auto map = (*file)->map(8192);
  ASSERT_TRUE(map.ok());
  EXPECT_EQ((*map)->data()[100], 'a');
  EXPECT_FALSE(env->open_read_only(dir.path() + "/missing").ok());
}

}  // namespace
}  // namespace raftlog::store

namespace raftlog::store {
namespace {

class CommitLogUsageTest : public ::testing::Test {
 protected:
  MemoryEnv env_;
};

TEST_F(CommitLogUsageTest, DiskUsageAndBytesAfterFollowTheLog) {
  Options options = testing::small_options(&env_);
  options.segment_size_bytes = Options::kMinSegmentSizeBytes;
  auto opened = CommitLog::open("/log", options);
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  auto log = std::move(opened).value();
  EXPECT_EQ(log->bytes_after(0), 0U);
  constexpr std::size_t kPayload = 1000;
  const std::uint64_t record = entry_format::record_bytes(kPayload);
  // 200 entries of ~1 KiB span several 64 KiB segments.
  for (std::uint64_t first = 1; first <= 200; first += 20) {
    auto batch = testing::make_batch(first, 20, 1, kPayload);
    ASSERT_TRUE(log->append(batch.span()).ok());
  }
  const auto usage = log->disk_usage();
  EXPECT_GE(usage.segments, 3U);
  EXPECT_GE(usage.bytes, usage.segments * options.segment_size_bytes);
  EXPECT_EQ(log->bytes_after(200), 0U);
  EXPECT_EQ(log->bytes_after(199), record);
  EXPECT_EQ(log->bytes_after(150), 50 * record);
  EXPECT_EQ(log->bytes_after(0), 200 * record);  // across every segment
  // Retention removes whole segments: usage shrinks, bytes_after counts from the first kept entry.
  ASSERT_TRUE(log->truncate_prefix(150).ok());
  const auto after_trim = log->disk_usage();
  EXPECT_LT(after_trim.segments, usage.segments);
  EXPECT_EQ(log->bytes_after(0), (200 - log->first_index() + 1) * record);
}

}  // namespace
}  // namespace raftlog::store

// Recovery: normal vs abnormal mode, torn and zero-filled tails, stray garbage after the end,
// corruption before the flushed point (error naming file and offset, or operator truncation),
// invalid/discontinuous segments after the flushed point, a lost checkpoint.
#include <gtest/gtest.h>

#include <algorithm>

#include "store/entry_format.h"
#include "store/segment_format.h"
#include "test_util.h"

namespace raftlog::store {
namespace {

using testing::make_batch;
using testing::open_ok;
using testing::small_options;

class RecoveryTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(env_->create_dir("/log").ok()); }

  // Async log whose background flusher never fires on its own during a test.
  Options quiet_async() {
    auto options = small_options(env_.get(), FlushMode::kAsync);
    options.flush_interval_ms = 60000;
    options.flush_dirty_bytes = 1ULL << 40;
    options.checkpoint_interval_ms = 60000;
    return options;
  }

  // Appends [1, flushed] durably and (flushed, written] without flushing, then power-fails.
  void write_then_crash(std::uint64_t flushed, std::uint64_t written, CrashOptions crash,
                        std::size_t payload = 700) {
    auto log = open_ok("/log", quiet_async());
    ASSERT_TRUE(log);
    for (std::uint64_t i = 1; i <= flushed; ++i) {
      auto batch = make_batch(i, 1, 1, payload);
      ASSERT_TRUE(log->append(batch.span()).ok());
    }
    ASSERT_TRUE(log->flush().ok());
    for (std::uint64_t i = flushed + 1; i <= written; ++i) {
      auto batch = make_batch(i, 1, 1, payload);
      ASSERT_TRUE(log->append(batch.span()).ok());
    }
    env_->crash();
    log.reset();
    env_->restart(crash);
  }

  // Entries 1..200 of 1000 bytes, closed cleanly (all checkpointed, the first segments sealed), then
  // one payload byte of entry 10 flipped; `offset` is that entry's record offset in segment 1.
  void write_200_entries_and_corrupt_entry_10(std::uint64_t* offset) {
    {
      auto log = open_ok("/log", small_options(env_.get()));
      ASSERT_TRUE(log);
      for (std::uint64_t i = 1; i <= 200; i += 10) {
        auto batch = make_batch(i, 10, 1, 1000);
        ASSERT_TRUE(log->append(batch.span()).ok());
      }
    }
    *offset = segment_format::kSegmentHeaderBytes + 9 * entry_format::record_bytes(1000);
    ASSERT_TRUE(
        env_->corrupt_byte("/log/" + segment_format::segment_file_name(1), *offset + 60, 1).ok());
  }

  // Entries 1..100 of 1000 bytes in `term`, in two segments, closed cleanly (all checkpointed).
  void write_100_entries_and_close(std::uint64_t term) {
    auto log = open_ok("/log", small_options(env_.get()));
    ASSERT_TRUE(log);
    for (std::uint64_t i = 1; i <= 100; i += 10) {
      auto batch = make_batch(i, 10, term, 1000);
      ASSERT_TRUE(log->append(batch.span()).ok());
    }
  }

  std::vector<std::uint64_t> segment_bases() {
    std::vector<std::uint64_t> bases;
    auto names = env_->list_dir("/log");
    EXPECT_TRUE(names.ok());
    for (const auto& n : *names) {
      if (auto b = segment_format::parse_segment_file_name(n)) bases.push_back(*b);
    }
    std::sort(bases.begin(), bases.end());
    return bases;
  }

  std::unique_ptr<MemoryEnv> env_ = std::make_unique<MemoryEnv>();
};

TEST_F(RecoveryTest, AbortMarkerSelectsAbnormalMode) {
  write_then_crash(20, 20, {CrashMode::kKeepAll, 1});
  EXPECT_TRUE(env_->exists("/log/ABORT"));
  auto log = open_ok("/log", quiet_async());
  ASSERT_TRUE(log);
  EXPECT_EQ(log->recovery_report().mode, RecoveryMode::kAbnormal);
  EXPECT_EQ(log->last_index(), 20U);
  testing::expect_entries(*log, 1, 20, 1, 700);
  ASSERT_TRUE(log->close().ok());
  EXPECT_FALSE(env_->exists("/log/ABORT"));
  auto again = open_ok("/log", quiet_async());
  ASSERT_TRUE(again);
  EXPECT_EQ(again->recovery_report().mode, RecoveryMode::kNormal);
}

TEST_F(RecoveryTest, ZeroTailLosesOnlyUnflushedEntries) {
  write_then_crash(30, 45, {CrashMode::kLoseUnflushed, 1});
  auto log = open_ok("/log", quiet_async());
  ASSERT_TRUE(log);
  EXPECT_EQ(log->last_index(), 30U);
  EXPECT_EQ(log->flushed_index(), 30U);
  testing::expect_entries(*log, 1, 30, 1, 700);
  auto next = make_batch(31, 1, 2, 10);
  EXPECT_TRUE(log->append(next.span()).ok());
}

TEST_F(RecoveryTest, TornTailIsTruncatedAtTheTear) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    SetUp();
    write_then_crash(10, 25, {CrashMode::kTornWrite, seed});
    auto log = open_ok("/log", quiet_async());
    ASSERT_TRUE(log);
    const std::uint64_t last = log->last_index();
    EXPECT_GE(last, 10U);
    EXPECT_LE(last, 25U);
    testing::expect_entries(*log, 1, last, 1, 700);
    EXPECT_EQ(log->recovery_report().mode, RecoveryMode::kAbnormal);
    ASSERT_TRUE(log->close().ok());
    log.reset();
    env_ = std::make_unique<MemoryEnv>();
  }
}

TEST_F(RecoveryTest, GarbageAfterTheEndNeverResurfaces) {
  // Keep random unflushed sectors: a lost sector in the middle leaves valid-looking entries after a
  // zero gap. Recovery must zero them so that later appends cannot make them readable.
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    SetUp();
    write_then_crash(5, 40, {CrashMode::kKeepRandomSectors, seed}, 300);
    std::uint64_t last = 0;
    {
      auto log = open_ok("/log", quiet_async());
      ASSERT_TRUE(log);
      last = log->last_index();
      // New entries with the SAME term and size as the lost ones, so they land exactly where the
      // old ones were and a surviving old entry right after them would continue index, term and
      // offset perfectly. Only its older generation exposes it. Then a process crash keeps all.
      for (std::uint64_t i = last + 1; i <= last + 3; ++i) {
        auto batch = make_batch(i, 1, 1, 300);
        ASSERT_TRUE(log->append(batch.span()).ok());
      }
      ASSERT_TRUE(log->flush().ok());
      env_->crash();
    }
    env_->restart({CrashMode::kKeepAll, seed});
    auto log = open_ok("/log", quiet_async());
    ASSERT_TRUE(log);
    EXPECT_EQ(log->last_index(), last + 3) << "seed " << seed;
    testing::expect_entries(*log, 1, last + 3, 1, 300);
    log.reset();
    env_ = std::make_unique<MemoryEnv>();
  }
}

TEST_F(RecoveryTest, CorruptionOfCheckpointedEntryFailsOpenNamingFileAndOffset) {
  {
    auto log = open_ok("/log", small_options(env_.get()));
    ASSERT_TRUE(log);
    auto batch = make_batch(1, 20, 1, 500);
    ASSERT_TRUE(log->append(batch.span()).ok());
  }
  // Entry 20 is the checkpointed one: flip a payload byte.
  const std::uint64_t record = entry_format::record_bytes(500);
  const std::uint64_t offset = segment_format::kSegmentHeaderBytes + 19 * record;
  ASSERT_TRUE(
      env_->corrupt_byte("/log/" + segment_format::segment_file_name(1), offset + 100).ok());
  auto failed = CommitLog::open("/log", small_options(env_.get()));
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kCorruption);
  const std::string& message = failed.status().message();
  EXPECT_NE(message.find(segment_format::segment_file_name(1)), std::string::npos) << message;
  EXPECT_NE(message.find("offset " + std::to_string(offset)), std::string::npos) << message;
  // The offline verifier points at the same place.
  auto report = verify_log_directory("/log", env_.get());
  ASSERT_TRUE(report.ok());
  EXPECT_FALSE(report->ok);
  EXPECT_EQ(report->bad_file, segment_format::segment_file_name(1));
  EXPECT_EQ(report->bad_offset, offset);
  EXPECT_EQ(report->last_index, 19U);
}

TEST_F(RecoveryTest, CorruptionFoundByIndexRebuildFailsUnlessOperatorAllowsTruncation) {
  std::uint64_t offset = 0;
  ASSERT_NO_FATAL_FAILURE(write_200_entries_and_corrupt_entry_10(&offset));
  ASSERT_TRUE(env_->remove("/log/" + segment_format::index_file_name(1)).ok());  // forces a scan

  auto failed = CommitLog::open("/log", small_options(env_.get()));
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kCorruption);
  EXPECT_NE(failed.status().message().find(segment_format::segment_file_name(1) + " offset " +
                                           std::to_string(offset)),
            std::string::npos)
      << failed.status().message();
  // Nothing was changed by the failed open: it fails again the same way.
  EXPECT_FALSE(CommitLog::open("/log", small_options(env_.get())).ok());

  auto options = small_options(env_.get());
  options.allow_truncate_corrupted_flushed_data = true;
  auto log = open_ok("/log", options);
  ASSERT_TRUE(log);
  EXPECT_TRUE(log->recovery_report().corrupted_flushed_data_truncated);
  EXPECT_EQ(log->last_index(), 9U);
  testing::expect_entries(*log, 1, 9, 1, 1000);
}

// A reader found an entry of a sealed, checkpointed segment corrupt. Recovery only spot-checks such
// segments, so without the suspect marker every later open trusted the segment and served the error
// on every read; with it the next open verifies the segment in full.
TEST_F(RecoveryTest, SuspectMarkerMakesTheNextOpenVerifyTheWholeSegment) {
  std::uint64_t offset = 0;
  ASSERT_NO_FATAL_FAILURE(write_200_entries_and_corrupt_entry_10(&offset));
  {
    auto log = open_ok("/log", small_options(env_.get()));  // the spot check does not see it
    ASSERT_TRUE(log);
    EXPECT_EQ(log->last_index(), 200U);
    auto read = log->read(10, 1, 1 << 20);
    ASSERT_FALSE(read.ok());
    EXPECT_EQ(read.status().code(), StatusCode::kCorruption);
    ASSERT_TRUE(log->mark_suspect(10).ok());
  }
  auto failed = CommitLog::open("/log", small_options(env_.get()));
  ASSERT_FALSE(failed.ok()) << "the marker must make recovery look at every entry of the segment";
  EXPECT_EQ(failed.status().code(), StatusCode::kCorruption);

  auto options = small_options(env_.get());
  options.allow_truncate_corrupted_flushed_data = true;
  {
    auto log = open_ok("/log", options);
    ASSERT_TRUE(log);
    EXPECT_TRUE(log->recovery_report().corrupted_flushed_data_truncated);
    EXPECT_EQ(log->recovery_report().suspect_index, 10U);
    EXPECT_EQ(log->recovery_report().highest_index_seen, 200U)
        << "what the log held before the cut";
    EXPECT_EQ(log->last_index(), 9U);
    testing::expect_entries(*log, 1, 9, 1, 1000);
  }
  auto log = open_ok("/log", options);
  ASSERT_TRUE(log);
  EXPECT_EQ(log->recovery_report().suspect_index, 0U) << "checked once, then cleared";
  EXPECT_FALSE(log->recovery_report().corrupted_flushed_data_truncated);
}

// A flipped byte in the middle of the unflushed tail after a process crash: the scan cuts there, and
// the valid entries after the cut (which a process crash cannot leave behind a torn entry) are
// reported, with the highest index the log held.
TEST_F(RecoveryTest, ValidEntriesAfterACutAreReported) {
  write_then_crash(10, 25, {CrashMode::kKeepAll, 1});
  const std::uint64_t record = entry_format::record_bytes(700);
  const std::uint64_t offset = segment_format::kSegmentHeaderBytes + 14 * record;  // entry 15
  ASSERT_TRUE(
      env_->corrupt_byte("/log/" + segment_format::segment_file_name(1), offset + 80, 1).ok());
  auto log = open_ok("/log", quiet_async());
  ASSERT_TRUE(log);
  EXPECT_EQ(log->last_index(), 14U);
  EXPECT_EQ(log->recovery_report().valid_entries_after_cut, 10U);
  EXPECT_EQ(log->recovery_report().highest_index_seen, 25U);
}

TEST_F(RecoveryTest, InvalidOrDiscontinuousSegmentsAfterTheFlushedPointAreRemoved) {
  {
    auto log = open_ok("/log", small_options(env_.get()));
    ASSERT_TRUE(log);
    auto batch = make_batch(1, 20, 1, 100);
    ASSERT_TRUE(log->append(batch.span()).ok());
  }
  // A segment whose header never became durable (crash mid-roll), and one that leaves a gap.
  {
    auto file = env_->open("/log/" + segment_format::segment_file_name(21), true);
    ASSERT_TRUE(file.ok());
    ASSERT_TRUE((*file)->allocate(0, 64 << 10).ok());
  }
  {
    auto file = env_->open("/log/" + segment_format::segment_file_name(40), true);
    ASSERT_TRUE(file.ok());
    ASSERT_TRUE((*file)->allocate(0, 64 << 10).ok());
    auto map = (*file)->map(64 << 10);
    ASSERT_TRUE(map.ok());
    segment_format::encode_segment_header({40, 1, 64 << 10}, (*map)->data());
  }
  auto log = open_ok("/log", small_options(env_.get()));
  ASSERT_TRUE(log);
  EXPECT_EQ(log->last_index(), 20U);
  EXPECT_EQ(log->recovery_report().segments_removed, 2U) << log->recovery_report().to_string();
  EXPECT_EQ(segment_bases(), std::vector<std::uint64_t>{1});
  auto next = make_batch(21, 100, 1, 1000);  // rolls into a fresh segment 21
  ASSERT_TRUE(log->append(next.span()).ok());
  testing::expect_entries(*log, 21, 120, 1, 1000);
}

// The checkpoint's segment must continue the one before it. When it does not, open() refuses, or,
// if the operator allows cutting durable data, recovery cuts there and scans that segment from its
// start (its index opened for the scan, although the check failed before it was opened).
TEST_F(RecoveryTest, CheckpointSegmentThatDoesNotContinueTheLogIsCutOnlyWhenAllowed) {
  write_100_entries_and_close(2);
  const std::vector<std::uint64_t> bases = segment_bases();
  ASSERT_EQ(bases.size(), 2U);
  // The second (checkpoint) segment's header claims a previous term below the first one's last term.
  {
    std::string header(segment_format::kSegmentHeaderBytes, '\0');
    segment_format::encode_segment_header({bases[1], 1, 64 << 10}, header.data());
    ASSERT_TRUE(
        env_->overwrite("/log/" + segment_format::segment_file_name(bases[1]), 0, header).ok());
  }
  auto refused = CommitLog::open("/log", small_options(env_.get()));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kCorruption);
  EXPECT_NE(refused.status().message().find("does not continue segment"), std::string::npos)
      << refused.status().to_string();

  auto options = small_options(env_.get());
  options.allow_truncate_corrupted_flushed_data = true;
  auto log = open_ok("/log", options);
  ASSERT_TRUE(log);
  EXPECT_TRUE(log->recovery_report().corrupted_flushed_data_truncated)
      << log->recovery_report().to_string();
  // Its entries (term 2, not below the header's 1) are valid: the scan keeps them all.
  EXPECT_EQ(log->last_index(), 100U);
  testing::expect_entries(*log, 1, 100, 2, 1000);
}

// An index record is derived data with a CRC; one that passes it but points outside its segment
// (a crafted or buggy file) is invalid like a torn one, never followed out of the mapping.
TEST_F(RecoveryTest, IndexRecordPointingOutsideItsSegmentIsInvalid) {
  write_100_entries_and_close(1);
  // Entry 5 of the first (sealed, spot-checked) segment: its record says offset 64 KiB + 4 KiB.
  char record[segment_format::kIndexRecordBytes];
  segment_format::encode_index_record(
      {5, 1, (64 << 10) + 4096, static_cast<std::uint32_t>(entry_format::record_bytes(1000))},
      record);
  ASSERT_TRUE(
      env_->overwrite("/log/" + segment_format::index_file_name(1),
                      segment_format::kIndexHeaderBytes + 4 * segment_format::kIndexRecordBytes,
                      std::string(record, sizeof(record)))
          .ok());
  auto log = open_ok("/log", small_options(env_.get()));
  ASSERT_TRUE(log);
  auto read = log->read(5, 1, 1 << 20);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), StatusCode::kCorruption);
  EXPECT_NE(read.status().message().find("invalid index record for index 5"), std::string::npos)
      << read.status().to_string();
  EXPECT_FALSE(log->term_at(5).ok());
  testing::expect_entries(*log, 6, 100, 1, 1000);
}

TEST_F(RecoveryTest, LostCheckpointMeansFullValidation) {
  write_100_entries_and_close(1);
  ASSERT_TRUE(env_->remove("/log/CHECKPOINT").ok());
  auto log = open_ok("/log", small_options(env_.get()));
  ASSERT_TRUE(log);
  EXPECT_EQ(log->recovery_report().mode, RecoveryMode::kAbnormal);
  EXPECT_EQ(log->recovery_report().entries_scanned, 100U);
  EXPECT_EQ(log->last_index(), 100U);
  testing::expect_entries(*log, 1, 100, 1, 1000);
}

TEST_F(RecoveryTest, MissingSegmentsBehindTheCheckpointAreAnError) {
  {
    auto log = open_ok("/log", small_options(env_.get()));
    ASSERT_TRUE(log);
    auto batch = make_batch(1, 5, 1, 100);
    ASSERT_TRUE(log->append(batch.span()).ok());
  }
  ASSERT_TRUE(env_->remove("/log/" + segment_format::segment_file_name(1)).ok());
  auto failed = CommitLog::open("/log", small_options(env_.get()));
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kCorruption);
  EXPECT_NE(failed.status().message().find("CHECKPOINT"), std::string::npos);
}

}  // namespace
}  // namespace raftlog::store

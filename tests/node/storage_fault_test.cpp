// assess_storage_fault(): which recoveries mean lost durable entries (the node then catches up without
// voting), and which do not (a torn unsynced tail, async mode, a single node). And the Scrubber's
// pacing, wrap-around and single report.
#include "replica/storage_fault.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "server/scrubber.h"

namespace raftlog::server {
namespace {

using replica::assess_storage_fault;
using replica::RecoveryFacts;
using replica::StorageFault;

RecoveryFacts healthy() {
  RecoveryFacts facts;
  facts.report.highest_index_seen = 100;
  facts.report.checkpoint_flushed_index = 90;
  facts.checkpoint_commit_index = 95;
  facts.recovered_last_index = 100;
  facts.hard_state_term = 4;
  facts.last_log_term = 3;
  return facts;
}

TEST(StorageFaultAssessment, ACleanRecoveryIsNoFault) {
  EXPECT_FALSE(assess_storage_fault(healthy()).lost_durable_entries);
}

TEST(StorageFaultAssessment, CorruptDurableDataCutByRecoveryIsAFault) {
  RecoveryFacts facts = healthy();
  facts.report.corrupted_flushed_data_truncated = true;
  facts.recovered_last_index = 40;
  facts.report.highest_index_seen = 120;
  const StorageFault fault = assess_storage_fault(facts);
  EXPECT_TRUE(fault.lost_durable_entries);
  EXPECT_EQ(fault.promised_index, 120u);  // everything the log held before the cut
  EXPECT_EQ(fault.promised_term, 4u);
  EXPECT_FALSE(fault.description.empty());
}

TEST(StorageFaultAssessment, ALogEndingBelowItsCommitIndexIsAFault) {
  RecoveryFacts facts = healthy();
  facts.recovered_last_index = 80;
  facts.report.highest_index_seen = 80;
  const StorageFault fault = assess_storage_fault(facts);
  EXPECT_TRUE(fault.lost_durable_entries);
  EXPECT_EQ(fault.promised_index, 95u);
}

TEST(StorageFaultAssessment, ValidEntriesAfterACutCountOnlyWithoutAReboot) {
  RecoveryFacts facts = healthy();
  facts.report.valid_entries_after_cut = 5;
  facts.same_boot = true;
  EXPECT_TRUE(assess_storage_fault(facts).lost_durable_entries);
  // After a reboot (power cut) pages of the unsynced tail can survive out of order: not evidence.
  facts.same_boot = false;
  EXPECT_FALSE(assess_storage_fault(facts).lost_durable_entries);
}

TEST(StorageFaultAssessment, AsyncModeAndSingleNodesNeverCatchUp) {
  RecoveryFacts facts = healthy();
  facts.report.corrupted_flushed_data_truncated = true;
  facts.sync_flush = false;
  EXPECT_FALSE(assess_storage_fault(facts).lost_durable_entries);
  facts.sync_flush = true;
  facts.single_member = true;
  EXPECT_FALSE(assess_storage_fault(facts).lost_durable_entries);
}

// A fake log of 10 entries of 100 bytes with entry 7 corrupt.
struct FakeLog {
  std::uint64_t first = 1;
  std::uint64_t last = 10;
  std::uint64_t corrupt = 0;
  std::vector<std::uint64_t> reads_from;
  ScrubChunk read(std::uint64_t from, std::uint64_t max_bytes) {
    reads_from.push_back(from);
    ScrubChunk chunk;
    if (from < first) from = first;
    if (from > last) return chunk;  // kAtEnd
    const std::uint64_t count = std::max<std::uint64_t>(1, max_bytes / 100);
    const std::uint64_t end = std::min(last + 1, from + count);
    if (corrupt >= from && corrupt < end) {
      chunk.outcome = ScrubChunk::Outcome::kCorrupt;
      chunk.corrupt_index = corrupt;
      chunk.message = "CRC mismatch";
      return chunk;
    }
    chunk.outcome = ScrubChunk::Outcome::kVerified;
    chunk.entries = end - from;
    chunk.bytes = chunk.entries * 100;
    chunk.next_index = end;
    return chunk;
  }
};

TEST(Scrubber, WalksTheLogInPacedChunksAndStartsOver) {
  FakeLog log;
  std::vector<std::uint64_t> reported;
  // 3000 bytes/s at 100 ms per chunk: 300 bytes, three entries a chunk.
  Scrubber scrubber(
      3000, 100, [&](std::uint64_t from, std::uint64_t max) { return log.read(from, max); },
      [&](std::uint64_t index, const std::string&) { reported.push_back(index); });
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(scrubber.step());  // 1-3, 4-6, 7-9, 10, end
  EXPECT_EQ(scrubber.stats().entries_verified, 10u);
  EXPECT_EQ(scrubber.stats().bytes_verified, 1000u);
  EXPECT_EQ(scrubber.stats().passes_completed, 1u);
  ASSERT_TRUE(scrubber.step());
  EXPECT_EQ(log.reads_from.back(), 0u) << "a new pass starts at the first index";
  EXPECT_TRUE(reported.empty());
}

TEST(Scrubber, ReportsTheFirstCorruptEntryOnceAndStops) {
  FakeLog log;
  log.corrupt = 7;
  std::vector<std::uint64_t> reported;
  Scrubber scrubber(
      3000, 100, [&](std::uint64_t from, std::uint64_t max) { return log.read(from, max); },
      [&](std::uint64_t index, const std::string&) { reported.push_back(index); });
  EXPECT_TRUE(scrubber.step());
  EXPECT_TRUE(scrubber.step());
  EXPECT_FALSE(scrubber.step());
  EXPECT_FALSE(scrubber.step());
  ASSERT_EQ(reported, std::vector<std::uint64_t>{7});
  EXPECT_EQ(scrubber.stats().corrupt_index, 7u);
}

TEST(Scrubber, ARunningThreadFindsCorruptionByItself) {
  FakeLog log;
  log.corrupt = 9;
  std::atomic<std::uint64_t> reported{0};
  Scrubber scrubber(
      1 << 20, 1, [&](std::uint64_t from, std::uint64_t max) { return log.read(from, max); },
      [&](std::uint64_t index, const std::string&) { reported = index; });
  scrubber.start();
  for (int i = 0; i < 500 && reported == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  scrubber.stop();
  EXPECT_EQ(reported.load(), 9u);
}

TEST(Scrubber, ZeroRateMeansOff) {
  int reads = 0;
  Scrubber scrubber(
      0, 1,
      [&](std::uint64_t, std::uint64_t) {
        ++reads;
        return ScrubChunk{};
      },
      [](std::uint64_t, const std::string&) {});
  scrubber.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  scrubber.stop();
  EXPECT_EQ(reads, 0);
}

}  // namespace
}  // namespace raftlog::server

#include "server/dedup_table.h"

#include <gtest/gtest.h>

namespace raftlog::server {
namespace {

using Lookup = DedupTable::Lookup;
using Range = DedupTable::Range;

TEST(DedupTable, RecordsAndExtendsAContiguousRange) {
  DedupTable table(8, 8);
  table.record_entry(7, 1, 5, 2);
  table.record_entry(7, 1, 6, 2);
  table.record_entry(7, 1, 7, 2);
  Range range;
  ASSERT_EQ(table.find(7, 1, &range), Lookup::kFound);
  EXPECT_EQ(range, (Range{5, 7, 2}));
  EXPECT_EQ(table.clients(), 1u);
}

TEST(DedupTable, ANewSequenceStartsANewRange) {
  DedupTable table(8, 8);
  table.record_entry(7, 1, 5, 2);
  table.record_entry(7, 2, 6, 2);
  Range range;
  ASSERT_EQ(table.find(7, 1, &range), Lookup::kFound);
  EXPECT_EQ(range, (Range{5, 5, 2}));
  ASSERT_EQ(table.find(7, 2, &range), Lookup::kFound);
  EXPECT_EQ(range, (Range{6, 6, 2}));
}

TEST(DedupTable, SameSequenceAfterAGapOrTermChangeIsANewRangeAndTheNewestWins) {
  DedupTable table(8, 8);
  table.record_entry(7, 1, 5, 2);
  table.record_entry(7, 1, 9, 3);  // re-proposed after a truncation: not contiguous
  Range range;
  ASSERT_EQ(table.find(7, 1, &range), Lookup::kFound);
  EXPECT_EQ(range, (Range{9, 9, 3}));
  table.record_entry(8, 1, 10, 3);
  table.record_entry(8, 1, 11, 4);  // contiguous but another term: another append
  ASSERT_EQ(table.find(8, 1, &range), Lookup::kFound);
  EXPECT_EQ(range, (Range{11, 11, 4}));
}

TEST(DedupTable, UnknownClientOrSequence) {
  DedupTable table(8, 8);
  Range range;
  EXPECT_EQ(table.find(7, 1, &range), Lookup::kUnknown);
  table.record_entry(7, 1, 5, 2);
  EXPECT_EQ(table.find(7, 2, &range), Lookup::kUnknown);
  EXPECT_EQ(table.find(9, 1, &range), Lookup::kUnknown);
  // A lookup of an unknown client does not create it.
  EXPECT_EQ(table.clients(), 1u);
}

TEST(DedupTable, EvictingTheLowestSequenceMakesItAndEverythingBelowTooOld) {
  DedupTable table(8, 2);
  table.record_entry(7, 1, 1, 1);
  table.record_entry(7, 2, 2, 1);
  table.record_entry(7, 3, 3, 1);  // evicts sequence 1
  Range range;
  EXPECT_EQ(table.find(7, 1, &range), Lookup::kTooOld);
  EXPECT_EQ(table.find(7, 0, &range), Lookup::kTooOld);
  ASSERT_EQ(table.find(7, 2, &range), Lookup::kFound);
  EXPECT_EQ(range, (Range{2, 2, 1}));
  ASSERT_EQ(table.find(7, 3, &range), Lookup::kFound);
  EXPECT_EQ(table.find(7, 4, &range), Lookup::kUnknown);
}

TEST(DedupTable, OutOfOrderSequencesEvictTheLowestNotTheOldest) {
  DedupTable table(8, 2);
  table.record_entry(7, 5, 1, 1);
  table.record_entry(7, 3, 2, 1);
  table.record_entry(7, 4, 3, 1);  // over the bound: sequence 3 (lowest) goes, 5 (oldest) stays
  Range range;
  ASSERT_EQ(table.find(7, 5, &range), Lookup::kFound);
  EXPECT_EQ(range, (Range{1, 1, 1}));
  ASSERT_EQ(table.find(7, 4, &range), Lookup::kFound);
  EXPECT_EQ(range, (Range{3, 3, 1}));
  EXPECT_EQ(table.find(7, 3, &range), Lookup::kTooOld);
  EXPECT_EQ(table.find(7, 2, &range), Lookup::kTooOld);
  EXPECT_EQ(table.find(7, 6, &range), Lookup::kUnknown);
}

TEST(DedupTable, EvictsTheLeastRecentlyUsedClientWhole) {
  DedupTable table(2, 8);
  table.record_entry(1, 1, 1, 1);
  table.record_entry(2, 1, 2, 1);
  Range range;
  ASSERT_EQ(table.find(1, 1, &range), Lookup::kFound);  // client 1 is now the most recently used
  table.record_entry(3, 1, 3, 1);                        // evicts client 2
  EXPECT_EQ(table.clients(), 2u);
  EXPECT_EQ(table.find(2, 1, &range), Lookup::kUnknown);  // forgotten entirely, not "too old"
  ASSERT_EQ(table.find(1, 1, &range), Lookup::kFound);
  EXPECT_EQ(range, (Range{1, 1, 1}));
  ASSERT_EQ(table.find(3, 1, &range), Lookup::kFound);
  EXPECT_EQ(range, (Range{3, 3, 1}));
}

TEST(DedupTable, TruncateDropsEveryRangeReachingTheCut) {
  DedupTable table(8, 8);
  table.record_entry(7, 1, 1, 1);
  table.record_entry(7, 1, 2, 1);
  table.record_entry(7, 2, 3, 1);
  table.record_entry(7, 2, 4, 1);
  table.record_entry(7, 2, 5, 1);
  table.record_entry(8, 1, 6, 1);
  table.truncate_from(4);  // cuts inside sequence 2's range [3, 5] and removes client 8's [6, 6]
  Range range;
  ASSERT_EQ(table.find(7, 1, &range), Lookup::kFound);
  EXPECT_EQ(range, (Range{1, 2, 1}));
  EXPECT_EQ(table.find(7, 2, &range), Lookup::kUnknown);
  EXPECT_EQ(table.find(8, 1, &range), Lookup::kUnknown);
  table.truncate_from(2);  // reaches the last entry of [1, 2]
  EXPECT_EQ(table.find(7, 1, &range), Lookup::kUnknown);
  // The same sequence can be recorded again after the cut.
  table.record_entry(7, 2, 2, 2);
  ASSERT_EQ(table.find(7, 2, &range), Lookup::kFound);
  EXPECT_EQ(range, (Range{2, 2, 2}));
}

TEST(DedupTable, TruncateAboveEveryRangeKeepsThemAll) {
  DedupTable table(8, 8);
  table.record_entry(7, 1, 1, 1);
  table.record_entry(7, 2, 2, 1);
  table.truncate_from(3);
  Range range;
  EXPECT_EQ(table.find(7, 1, &range), Lookup::kFound);
  EXPECT_EQ(table.find(7, 2, &range), Lookup::kFound);
}

TEST(DedupTable, ClientZeroIsNotIdempotentAndIsIgnored) {
  DedupTable table(8, 8);
  table.record_entry(0, 1, 1, 1);
  table.record_entry(0, 0, 2, 1);
  EXPECT_EQ(table.clients(), 0u);
  Range range;
  EXPECT_EQ(table.find(0, 1, &range), Lookup::kUnknown);
  EXPECT_EQ(table.find(0, 0, &range), Lookup::kUnknown);
}

}  // namespace
}  // namespace raftlog::server

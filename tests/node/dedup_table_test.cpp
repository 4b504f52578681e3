#include "replica/dedup_table.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace raftlog::replica {
namespace {

using Lookup = DedupTable::Lookup;
using Range = DedupTable::Range;

// The payloads of an append of `count` entries as these tests record them (record_entry(..., "p")).
std::vector<std::string> entries(std::size_t count) { return std::vector<std::string>(count, "p"); }

TEST(DedupTable, RecordsAndExtendsAContiguousRange) {
  DedupTable table(8, 8);
  table.record_entry(7, 1, 5, 2, "p");
  table.record_entry(7, 1, 6, 2, "p");
  table.record_entry(7, 1, 7, 2, "p");
  Range range;
  ASSERT_EQ(table.find(7, 1, entries(3), &range), Lookup::kFound);
  EXPECT_EQ(range, (Range{5, 7, 2}));
  EXPECT_EQ(table.clients(), 1u);
}

TEST(DedupTable, ANewSequenceStartsANewRange) {
  DedupTable table(8, 8);
  table.record_entry(7, 1, 5, 2, "p");
  table.record_entry(7, 2, 6, 2, "p");
  Range range;
  ASSERT_EQ(table.find(7, 1, entries(1), &range), Lookup::kFound);
  EXPECT_EQ(range, (Range{5, 5, 2}));
  ASSERT_EQ(table.find(7, 2, entries(1), &range), Lookup::kFound);
  EXPECT_EQ(range, (Range{6, 6, 2}));
}

TEST(DedupTable, SameSequenceAfterAGapOrTermChangeIsANewRangeAndTheNewestWins) {
  DedupTable table(8, 8);
  table.record_entry(7, 1, 5, 2, "p");
  table.record_entry(7, 1, 9, 3, "p");  // re-proposed after a truncation: not contiguous
  Range range;
  ASSERT_EQ(table.find(7, 1, entries(1), &range), Lookup::kFound);
  EXPECT_EQ(range, (Range{9, 9, 3}));
  table.record_entry(8, 1, 10, 3, "p");
  table.record_entry(8, 1, 11, 4, "p");  // contiguous but another term: another append
  ASSERT_EQ(table.find(8, 1, entries(1), &range), Lookup::kFound);
  EXPECT_EQ(range, (Range{11, 11, 4}));
}

TEST(DedupTable, UnknownClientOrSequence) {
  DedupTable table(8, 8);
  Range range;
  EXPECT_EQ(table.find(7, 1, entries(1), &range), Lookup::kUnknown);
  table.record_entry(7, 1, 5, 2, "p");
  EXPECT_EQ(table.find(7, 2, entries(1), &range), Lookup::kUnknown);
  EXPECT_EQ(table.find(9, 1, entries(1), &range), Lookup::kUnknown);
  // A lookup of an unknown client does not create it.
  EXPECT_EQ(table.clients(), 1u);
}

TEST(DedupTable, EvictingTheLowestSequenceMakesItAndEverythingBelowTooOld) {
  DedupTable table(8, 2);
  table.record_entry(7, 1, 1, 1, "p");
  table.record_entry(7, 2, 2, 1, "p");
  table.record_entry(7, 3, 3, 1, "p");  // evicts sequence 1
  Range range;
  EXPECT_EQ(table.find(7, 1, entries(1), &range), Lookup::kTooOld);
  EXPECT_EQ(table.find(7, 0, entries(1), &range), Lookup::kTooOld);
  ASSERT_EQ(table.find(7, 2, entries(1), &range), Lookup::kFound);
  EXPECT_EQ(range, (Range{2, 2, 1}));
  ASSERT_EQ(table.find(7, 3, entries(1), &range), Lookup::kFound);
  EXPECT_EQ(table.find(7, 4, entries(1), &range), Lookup::kUnknown);
}

TEST(DedupTable, OutOfOrderSequencesEvictTheLowestNotTheOldest) {
  DedupTable table(8, 2);
  table.record_entry(7, 5, 1, 1, "p");
  table.record_entry(7, 3, 2, 1, "p");
  table.record_entry(7, 4, 3, 1,
                     "p");  // over the bound: sequence 3 (lowest) goes, 5 (oldest) stays
  Range range;
  ASSERT_EQ(table.find(7, 5, entries(1), &range), Lookup::kFound);
  EXPECT_EQ(range, (Range{1, 1, 1}));
  ASSERT_EQ(table.find(7, 4, entries(1), &range), Lookup::kFound);
  EXPECT_EQ(range, (Range{3, 3, 1}));
  EXPECT_EQ(table.find(7, 3, entries(1), &range), Lookup::kTooOld);
  EXPECT_EQ(table.find(7, 2, entries(1), &range), Lookup::kTooOld);
  EXPECT_EQ(table.find(7, 6, entries(1), &range), Lookup::kUnknown);
}

TEST(DedupTable, EvictsTheLeastRecentlyUsedClientWhole) {
  DedupTable table(2, 8);
  table.record_entry(1, 1, 1, 1, "p");
  table.record_entry(2, 1, 2, 1, "p");
  Range range;
  ASSERT_EQ(table.find(1, 1, entries(1), &range),
            Lookup::kFound);            // client 1 is now the most recently used
  table.record_entry(3, 1, 3, 1, "p");  // evicts client 2
  EXPECT_EQ(table.clients(), 2u);
  EXPECT_EQ(table.find(2, 1, entries(1), &range),
            Lookup::kUnknown);  // forgotten entirely, not "too old"
  ASSERT_EQ(table.find(1, 1, entries(1), &range), Lookup::kFound);
  EXPECT_EQ(range, (Range{1, 1, 1}));
  ASSERT_EQ(table.find(3, 1, entries(1), &range), Lookup::kFound);
  EXPECT_EQ(range, (Range{3, 3, 1}));
}

TEST(DedupTable, TruncateDropsEveryRangeReachingTheCut) {
  DedupTable table(8, 8);
  table.record_entry(7, 1, 1, 1, "p");
  table.record_entry(7, 1, 2, 1, "p");
  table.record_entry(7, 2, 3, 1, "p");
  table.record_entry(7, 2, 4, 1, "p");
  table.record_entry(7, 2, 5, 1, "p");
  table.record_entry(8, 1, 6, 1, "p");
  table.truncate_from(4);  // cuts inside sequence 2's range [3, 5] and removes client 8's [6, 6]
  Range range;
  ASSERT_EQ(table.find(7, 1, entries(2), &range), Lookup::kFound);
  EXPECT_EQ(range, (Range{1, 2, 1}));
  EXPECT_EQ(table.find(7, 2, entries(3), &range), Lookup::kUnknown);
  EXPECT_EQ(table.find(8, 1, entries(1), &range), Lookup::kUnknown);
  table.truncate_from(2);  // reaches the last entry of [1, 2]
  EXPECT_EQ(table.find(7, 1, entries(2), &range), Lookup::kUnknown);
  // The same sequence can be recorded again after the cut.
  table.record_entry(7, 2, 2, 2, "p");
  ASSERT_EQ(table.find(7, 2, entries(1), &range), Lookup::kFound);
  EXPECT_EQ(range, (Range{2, 2, 2}));
}

TEST(DedupTable, TruncateAboveEveryRangeKeepsThemAll) {
  DedupTable table(8, 8);
  table.record_entry(7, 1, 1, 1, "p");
  table.record_entry(7, 2, 2, 1, "p");
  table.truncate_from(3);
  Range range;
  EXPECT_EQ(table.find(7, 1, entries(1), &range), Lookup::kFound);
  EXPECT_EQ(table.find(7, 2, entries(1), &range), Lookup::kFound);
}

TEST(DedupTable, ClientZeroIsNotIdempotentAndIsIgnored) {
  DedupTable table(8, 8);
  table.record_entry(0, 1, 1, 1, "p");
  table.record_entry(0, 0, 2, 1, "p");
  table.record_append(0, 3, Range{3, 3, 1}, append_digest(entries(1)));
  EXPECT_EQ(table.clients(), 0u);
  Range range;
  EXPECT_EQ(table.find(0, 1, entries(1), &range), Lookup::kUnknown);
  EXPECT_EQ(table.find(0, 0, entries(1), &range), Lookup::kUnknown);
}

// --- exact idempotency: the retry must carry the remembered entries ------------------------------

TEST(DedupTable, ARetryWithOtherContentsIsAReuseNotADuplicate) {
  DedupTable table(8, 8);
  table.record_entry(7, 1, 5, 2, "alpha");
  table.record_entry(7, 1, 6, 2, "beta");
  Range range;
  EXPECT_EQ(table.find(7, 1, std::vector<std::string>{"alpha", "beta"}, &range), Lookup::kFound);
  EXPECT_EQ(range, (Range{5, 6, 2}));
  // One byte changed, the same entries in another order, the bytes split differently between the
  // entries (the length prefix tells ["ab", "c"] from ["a", "bc"]), an empty entry for a missing one.
  for (const std::vector<std::string>& other :
       {std::vector<std::string>{"alpha", "betA"}, std::vector<std::string>{"beta", "alpha"},
        std::vector<std::string>{"alph", "abeta"}, std::vector<std::string>{"alphabeta", ""}}) {
    range = Range{};
    EXPECT_EQ(table.find(7, 1, other, &range), Lookup::kReused) << other[0] << "," << other[1];
    EXPECT_EQ(range, (Range{5, 6, 2})) << "a reuse reports the range the sequence holds";
  }
}

TEST(DedupTable, ARetryWithAnotherEntryCountIsAReuse) {
  DedupTable table(8, 8);
  table.record_entry(7, 1, 5, 2, "a");
  Range range;
  EXPECT_EQ(table.find(7, 1, std::vector<std::string>{"a", "b", "c"}, &range), Lookup::kReused);
  EXPECT_EQ(range, (Range{5, 5, 2}));
  table.record_entry(7, 2, 6, 2, "a");
  table.record_entry(7, 2, 7, 2, "b");
  table.record_entry(7, 2, 8, 2, "c");
  EXPECT_EQ(table.find(7, 2, std::vector<std::string>{"a"}, &range), Lookup::kReused);
  // Only the first entries of an append in this log (a follower that became leader before the rest
  // reached it): the retry of the whole append is not an exact match either.
  EXPECT_EQ(table.find(7, 2, std::vector<std::string>{"a", "b", "c", "d"}, &range),
            Lookup::kReused);
  EXPECT_EQ(table.find(7, 2, std::vector<std::string>{"a", "b", "c"}, &range), Lookup::kFound);
  EXPECT_EQ(range, (Range{6, 8, 2}));
}

TEST(DedupTable, ADigestAccumulatedEntryByEntryEqualsTheProposalsDigest) {
  // A follower records a replicated append entry by entry, possibly across batches; the leader
  // records its proposal whole. Both must answer the same retries the same way.
  const std::vector<std::string> payloads{"first", "", std::string(5000, 'z'), "last"};
  DedupTable follower(8, 8);
  for (std::size_t i = 0; i < payloads.size(); ++i)
    follower.record_entry(7, 1, 10 + i, 3, payloads[i]);
  DedupTable leader(8, 8);
  leader.record_append(7, 1, Range{10, 13, 3}, append_digest(payloads));
  for (DedupTable* table : {&follower, &leader}) {
    Range range;
    EXPECT_EQ(table->find(7, 1, payloads, &range), Lookup::kFound);
    EXPECT_EQ(range, (Range{10, 13, 3}));
    EXPECT_EQ(table->find(7, 1, std::vector<std::string>{"first", "", "last"}, &range),
              Lookup::kReused);
  }
  std::uint32_t chained = 0;
  for (const std::string& payload : payloads) chained = extend_append_digest(chained, payload);
  EXPECT_EQ(chained, append_digest(payloads));
  EXPECT_NE(append_digest(std::vector<std::string>{"ab", "c"}),
            append_digest(std::vector<std::string>{"a", "bc"}));
  EXPECT_NE(append_digest(std::vector<std::string>{""}),
            append_digest(std::vector<std::string>{"", ""}));
}

TEST(DedupTable, AMismatchAtTheStartOfTheViewIsTooOldNotAReuse) {
  // Rebuilt from the log from index 100 on: the append recorded from 100 may have begun below it,
  // so the table cannot tell a reuse from a retry of the whole append.
  DedupTable table(8, 8);
  table.set_view_start(100);
  table.record_entry(7, 1, 100, 2, "b");
  table.record_entry(7, 1, 101, 2, "c");
  table.record_entry(7, 2, 102, 2, "d");
  Range range;
  EXPECT_EQ(table.find(7, 1, std::vector<std::string>{"a", "b", "c"}, &range), Lookup::kTooOld);
  EXPECT_EQ(table.find(7, 1, std::vector<std::string>{"b", "c"}, &range), Lookup::kFound);
  EXPECT_EQ(table.find(7, 2, std::vector<std::string>{"x"}, &range),
            Lookup::kReused);  // seen whole
  // A cut at or below the view's start: what is recorded there afterwards is seen from its start.
  table.truncate_from(100);
  table.record_entry(7, 1, 100, 3, "b");
  EXPECT_EQ(table.find(7, 1, std::vector<std::string>{"a", "b"}, &range), Lookup::kReused);
}

}  // namespace
}  // namespace raftlog::replica

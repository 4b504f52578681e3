#include "sim/sim_storage.h"

#include <gtest/gtest.h>

#include <vector>

namespace raftlog::sim {
namespace {

raft::Entry entry(raft::Index index, raft::Term term) {
  raft::Entry e;
  e.index = index;
  e.term = term;
  e.payload = "p" + std::to_string(index);
  return e;
}

PersistJob job_for(const SimStorage& storage, std::optional<raft::Index> truncate_from, std::vector<raft::Entry> entries,
                   std::uint64_t at_step) {
  PersistJob job;
  job.truncate_from = truncate_from;
  job.entries = std::move(entries);
  job.hard_state = raft::HardState{job.entries.empty() ? 0 : job.entries.back().term, 1, 0};
  job.last_index = storage.last_index();
  job.last_term = storage.term_at(job.last_index).value_or(0);
  job.log_changed = true;
  job.complete_at_step = at_step;
  return job;
}

TEST(SimStorage, VolatileLogFollowsTruncateThenAppend) {
  SimStorage storage;
  ASSERT_TRUE(storage.apply_volatile(std::nullopt, {entry(1, 1), entry(2, 1), entry(3, 1)}));
  EXPECT_EQ(storage.last_index(), 3U);
  EXPECT_EQ(storage.term_at(0), 0U);
  EXPECT_EQ(storage.term_at(3), 1U);
  EXPECT_FALSE(storage.term_at(4).has_value());
  ASSERT_TRUE(storage.apply_volatile(2, {entry(2, 2)}));
  EXPECT_EQ(storage.last_index(), 2U);
  EXPECT_EQ(storage.term_at(2), 2U);
}

TEST(SimStorage, RejectsBatchesThatDoNotFit) {
  SimStorage storage;
  ASSERT_TRUE(storage.apply_volatile(std::nullopt, {entry(1, 1)}));
  EXPECT_FALSE(storage.apply_volatile(std::nullopt, {entry(3, 1)}));  // gap
  EXPECT_FALSE(storage.apply_volatile(3, {}));                        // truncation beyond the end
  EXPECT_FALSE(storage.apply_volatile(0, {}));
  EXPECT_EQ(storage.last_index(), 1U);
}

TEST(SimStorage, EntriesRespectByteBoundButReturnAtLeastOne) {
  SimStorage storage;
  ASSERT_TRUE(storage.apply_volatile(std::nullopt, {entry(1, 1), entry(2, 1), entry(3, 1)}));
  EXPECT_EQ(storage.entries(1, 3, 0).size(), 1U);
  EXPECT_EQ(storage.entries(1, 3, 2 * entry(1, 1).byte_size()).size(), 2U);
  EXPECT_EQ(storage.entries(2, 3, SIZE_MAX).size(), 2U);
}

TEST(SimStorage, WritesBecomeDurableInOrder) {
  SimStorage storage;
  ASSERT_TRUE(storage.apply_volatile(std::nullopt, {entry(1, 1), entry(2, 1)}));
  storage.enqueue(job_for(storage, std::nullopt, {entry(1, 1), entry(2, 1)}, 5));
  EXPECT_FALSE(storage.has_due_job(4));
  ASSERT_TRUE(storage.has_due_job(5));
  const PersistJob done = storage.complete_oldest();
  EXPECT_EQ(done.last_index, 2U);
  EXPECT_EQ(storage.durable_log().size(), 2U);
  EXPECT_EQ(storage.durable_hard_state().term, 1U);
}

TEST(SimStorage, CrashLosesUnpersistedEntriesAndUndoesUnpersistedTruncation) {
  SimStorage storage;
  ASSERT_TRUE(storage.apply_volatile(std::nullopt, {entry(1, 1), entry(2, 1)}));
  storage.enqueue(job_for(storage, std::nullopt, {entry(1, 1), entry(2, 1)}, 1));
  storage.complete_oldest();
  // Truncate and replace index 2, and append 3: none of it reaches the disk.
  ASSERT_TRUE(storage.apply_volatile(2, {entry(2, 3), entry(3, 3)}));
  storage.enqueue(job_for(storage, 2, {entry(2, 3), entry(3, 3)}, 10));
  EXPECT_EQ(storage.term_at(2), 3U);
  storage.crash();
  EXPECT_EQ(storage.pending_jobs(), 0U);
  EXPECT_EQ(storage.last_index(), 2U);
  EXPECT_EQ(storage.term_at(2), 1U);  // the old entry is back
  EXPECT_EQ(storage.durable_hard_state().term, 1U);
}

TEST(SimVectorLogView, ReadsAPlainVector) {
  std::vector<raft::Entry> log = {entry(1, 1), entry(2, 2)};
  VectorLogView view(log);
  EXPECT_EQ(view.first_index(), 1U);
  EXPECT_EQ(view.last_index(), 2U);
  EXPECT_EQ(view.term_at(2), 2U);
  EXPECT_EQ(view.entries(1, 2, SIZE_MAX).size(), 2U);
}

}  // namespace
}  // namespace raftlog::sim

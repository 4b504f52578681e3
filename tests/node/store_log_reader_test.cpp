#include "replica/store_log_reader.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "temp_dir.h"

namespace raftlog::replica {
namespace {

using server::testing::TempDir;

constexpr std::size_t kPayloadBytes = 1000;

store::Options small_segments() {
  store::Options options;
  options.segment_size_bytes = store::Options::kMinSegmentSizeBytes;  // 64 KiB: ~60 entries each
  options.max_entry_size_bytes = 16 << 10;
  options.preallocate_next_segment = false;
  return options;
}

// Entry i of the test log: term grows every 50 entries; types, client ids and sequences vary so that
// the conversion of every field is checked.
raft::Entry make_entry(raft::Index index) {
  raft::Entry entry;
  entry.index = index;
  entry.term = 1 + index / 50;
  entry.type = index % 7 == 0 ? raft::EntryType::kNoop : raft::EntryType::kNormal;
  entry.client_id = index % 3 == 0 ? 0 : 1000 + index % 5;
  entry.sequence = entry.client_id == 0 ? 0 : index * 11;
  entry.proposal_continues = index % 4 != 0;
  entry.is_group_commit = index % 5 == 0;  // stored as kEntryFlagGroupCommit
  std::string payload(kPayloadBytes, static_cast<char>('a' + index % 26));
  payload[0] = static_cast<char>(index & 0xFF);
  entry.payload = std::move(payload);
  return entry;
}

class StoreLogReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto log = store::CommitLog::open(dir_.path(), small_segments());
    ASSERT_TRUE(log.ok()) << log.status().to_string();
    log_ = std::move(log).value();
    reader_ = std::make_unique<StoreLogReader>(*log_);
  }

  void append_through(raft::Index last) {
    std::vector<raft::Entry> entries;
    for (raft::Index i = log_->last_index() + 1; i <= last; ++i) entries.push_back(make_entry(i));
    std::vector<store::EntryToAppend> batch;
    for (const raft::Entry& entry : entries) batch.push_back(to_store_entry(entry));
    auto appended = log_->append(batch);
    ASSERT_TRUE(appended.ok()) << appended.status().to_string();
  }

  TempDir dir_;
  std::unique_ptr<store::CommitLog> log_;
  std::unique_ptr<StoreLogReader> reader_;
};

TEST_F(StoreLogReaderTest, EmptyLog) {
  EXPECT_EQ(reader_->first_index(), 1u);
  EXPECT_EQ(reader_->last_index(), 0u);
  EXPECT_EQ(reader_->term_at(0), std::optional<raft::Term>(0));
  EXPECT_EQ(reader_->term_at(1), std::nullopt);
}

TEST_F(StoreLogReaderTest, TermAtCoversZeroTheLogAndNothingBeyond) {
  append_through(120);
  EXPECT_EQ(reader_->first_index(), 1u);
  EXPECT_EQ(reader_->last_index(), 120u);
  EXPECT_EQ(reader_->term_at(0), std::optional<raft::Term>(0));
  for (raft::Index i = 1; i <= 120; ++i) EXPECT_EQ(reader_->term_at(i), make_entry(i).term) << i;
  EXPECT_EQ(reader_->term_at(121), std::nullopt);
}

TEST_F(StoreLogReaderTest, TermAtFirstMinusOneSurvivesAPrefixTrim) {
  append_through(200);  // several 64 KiB segments
  ASSERT_TRUE(log_->truncate_prefix(150).ok());
  const raft::Index first = reader_->first_index();
  ASSERT_GT(first, 1u) << "the trim removed no segment: the test log is too small";
  ASSERT_LE(first, 150u);
  EXPECT_EQ(reader_->term_at(first - 1), make_entry(first - 1).term);
  EXPECT_EQ(reader_->term_at(first), make_entry(first).term);
  if (first >= 2) {
    EXPECT_EQ(reader_->term_at(first - 2), std::nullopt);  // gone with its segment
  }
  EXPECT_EQ(reader_->term_at(0), std::optional<raft::Term>(0));
}

TEST_F(StoreLogReaderTest, EntriesRoundTripEveryField) {
  append_through(120);
  const std::vector<raft::Entry> entries = reader_->entries(1, 120, 1ULL << 30);
  ASSERT_EQ(entries.size(), 120u);
  for (raft::Index i = 1; i <= 120; ++i) EXPECT_EQ(entries[i - 1], make_entry(i)) << i;
}

TEST_F(StoreLogReaderTest, EntriesStopAtTheRequestedEnd) {
  append_through(120);
  const std::vector<raft::Entry> entries = reader_->entries(10, 14, 1ULL << 30);
  ASSERT_EQ(entries.size(), 5u);
  EXPECT_EQ(entries.front().index, 10u);
  EXPECT_EQ(entries.back().index, 14u);
}

TEST_F(StoreLogReaderTest, EntriesAlwaysReturnAtLeastOneEntry) {
  append_through(10);
  for (std::size_t max_bytes : {std::size_t{0}, std::size_t{1}, kPayloadBytes}) {
    const std::vector<raft::Entry> entries = reader_->entries(3, 10, max_bytes);
    ASSERT_EQ(entries.size(), 1u) << max_bytes;
    EXPECT_EQ(entries[0], make_entry(3));
  }
}

TEST_F(StoreLogReaderTest, EntriesCountPayloadPlusOverheadAgainstTheByteLimit) {
  append_through(10);
  const std::size_t one = make_entry(1).byte_size();
  EXPECT_EQ(reader_->entries(1, 10, 2 * one).size(), 2u);
  EXPECT_EQ(reader_->entries(1, 10, 3 * one - 1).size(), 2u);
  EXPECT_EQ(reader_->entries(1, 10, 3 * one).size(), 3u);
}

TEST_F(StoreLogReaderTest, EntriesAcrossSegmentBoundaries) {
  append_through(200);
  const std::vector<raft::Entry> entries = reader_->entries(40, 180, 1ULL << 30);
  ASSERT_EQ(entries.size(), 141u);
  for (std::size_t i = 0; i < entries.size(); ++i) EXPECT_EQ(entries[i], make_entry(40 + i));
}

TEST(StoreEntryConversion, RaftToStoreAndBack) {
  raft::Entry entry;
  entry.index = 42;
  entry.term = 9;
  entry.type = raft::EntryType::kConfig;
  entry.client_id = 0xFFFFFFFFFFFFFFFFULL;
  entry.sequence = 123456789;
  entry.proposal_continues = true;
  entry.payload = std::string("\0binary\xff", 8);
  const store::EntryToAppend stored = to_store_entry(entry);
  EXPECT_EQ(stored.meta.flags, kEntryFlagProposalContinues);
  EXPECT_EQ(stored.meta.index, 42u);
  EXPECT_EQ(stored.meta.term, 9u);
  EXPECT_EQ(stored.meta.type, store::EntryType::kConfig);
  EXPECT_EQ(stored.meta.client_id, entry.client_id);
  EXPECT_EQ(stored.meta.sequence, entry.sequence);
  EXPECT_EQ(stored.payload, entry.payload);
  const store::EntryView view{stored.meta, stored.payload};
  EXPECT_EQ(to_raft_entry(view), entry);
}

}  // namespace
}  // namespace raftlog::replica

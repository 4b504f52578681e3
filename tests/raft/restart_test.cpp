// Restart: the core resumes from the durable hard state and log, takes its voter set from the newest
// kConfig entry, and refuses a log newer than the persisted term (restart_problem).
#include <gtest/gtest.h>

#include "raft/memory_log.h"
#include "raft/raft.h"
#include "test_cluster.h"

namespace raftlog::raft {
namespace {

using testing::make_entries;

Config base_config(NodeId id) {
  Config config;
  config.id = id;
  config.initial_conf.voters = {1, 2, 3};
  return config;
}

TEST(Restart, ResumesTermVoteAndCommit) {
  MemoryLog log;
  log.append(make_entries(1, {1, 2, 2}));
  Raft raft(base_config(2), log, HardState{3, 1, 2});
  EXPECT_EQ(raft.term(), 3u);
  EXPECT_EQ(raft.hard_state().vote, 1u);
  EXPECT_EQ(raft.commit_index(), 2u);
  EXPECT_EQ(raft.last_index(), 3u);
  EXPECT_EQ(raft.persisted_index(), 3u);
  EXPECT_EQ(raft.role(), Role::kFollower);
  EXPECT_FALSE(raft.has_ready());
}

TEST(Restart, VoterSetComesFromTheNewestConfigEntry) {
  MemoryLog log;
  std::vector<Entry> entries = make_entries(1, {1, 1, 1});
  entries[0].type = EntryType::kConfig;
  entries[0].payload = encode_config(ConfState{{1, 2, 3, 4, 5}});
  entries[1].type = EntryType::kConfig;
  entries[1].payload = encode_config(ConfState{{1, 2, 3, 4}});
  log.append(entries);
  Raft raft(base_config(1), log, HardState{1, 0, 3});
  EXPECT_EQ(raft.conf(), (ConfState{{1, 2, 3, 4}}));
  Raft fresh(base_config(1), MemoryLog{}, HardState{});
  EXPECT_EQ(fresh.conf(), (ConfState{{1, 2, 3}}));
}

// A driver that keeps its configurations (the replica's CONFSTATE) spares the core the log scan: a
// log whose kConfig entry says otherwise is then not consulted at all.
TEST(Restart, ConfHistorySkipsTheLogScan) {
  MemoryLog log;
  std::vector<Entry> entries = make_entries(1, {1, 1});
  entries[0].type = EntryType::kConfig;
  entries[0].payload = encode_config(ConfState{{1, 2, 3, 4, 5}});
  log.append(entries);
  Config config = base_config(1);
  config.conf_history = {ConfRecord{0, 0, ConfState{{1, 2, 3}}}};
  Raft raft(config, log, HardState{1, 0, 2});
  EXPECT_EQ(raft.conf(), (ConfState{{1, 2, 3}}));
  config.conf_history = {ConfRecord{0, 0, ConfState{{3, 1}}}};  // not sorted
  EXPECT_FALSE(validate_config(config).empty());
  config.conf_history = {ConfRecord{2, 1, ConfState{{1, 2}}}, ConfRecord{2, 1, ConfState{{1}}}};
  EXPECT_NE(validate_config(config).find("increase"), std::string::npos);
}

// The scan stops at the newest configuration at or below the commit index: nothing older can be
// rolled back to, and the uncommitted ones above it are kept for a truncation to roll back.
TEST(Restart, ScanKeepsTheUncommittedConfigurationsAndTheNewestCommittedOne) {
  MemoryLog log;
  std::vector<Entry> entries = make_entries(1, {1, 1, 1, 2});
  entries[0].type = EntryType::kConfig;
  entries[0].payload = encode_config(ConfState{{1, 2, 3, 4, 5}});
  entries[1].type = EntryType::kConfig;
  entries[1].payload = encode_config(ConfState{{1, 2, 3, 4}});
  entries[3].type = EntryType::kConfig;
  entries[3].payload = encode_config(ConfState{{1, 2, 3}, {4}});
  log.append(entries);
  Raft raft(base_config(1), log, HardState{2, 0, 3});
  ASSERT_EQ(raft.conf_history().size(), 2u);
  EXPECT_EQ(raft.conf_history()[0].index, 2u);
  EXPECT_EQ(raft.conf_history()[1].index, 4u);
  EXPECT_EQ(raft.conf(), (ConfState{{1, 2, 3}, {4}}));
}

TEST(RestartDeathTest, CorruptConfigEntryIsFatal) {
  MemoryLog log;
  std::vector<Entry> entries = make_entries(1, {1});
  entries[0].type = EntryType::kConfig;
  entries[0].payload = "garbage";
  log.append(entries);
  EXPECT_DEATH(Raft(base_config(1), log, HardState{1, 0, 1}), "corrupt");
}

TEST(RestartDeathTest, CommitBeyondTheLogIsFatal) {
  MemoryLog log;
  log.append(make_entries(1, {1}));
  EXPECT_DEATH(Raft(base_config(1), log, HardState{1, 0, 2}), "lost committed entries");
}

TEST(RestartDeathTest, InvalidConfigIsFatalWithItsReason) {
  Config config = base_config(1);
  config.heartbeat_ticks = 0;
  EXPECT_DEATH(Raft(config, MemoryLog{}, HardState{}), "heartbeat_ticks");
}

// The restart rule (raft.h, restart_problem): the driver checks it and refuses to start; the core
// aborts rather than guess. Adopting the log's term with no vote, as the core once did, would let a
// node whose hard state was replaced by an older copy vote a second time in a term it voted in.
TEST(Restart, ALogAheadOfThePersistedTermIsARestartProblem) {
  MemoryLog log;
  log.append(make_entries(1, {1, 4}));
  const std::string problem = restart_problem(HardState{2, 1, 1}, log);
  EXPECT_NE(problem.find("below the term 4 of log entry 2"), std::string::npos) << problem;
  EXPECT_EQ(restart_problem(HardState{4, 1, 1}, log), "");
  EXPECT_EQ(restart_problem(HardState{0, 0, 0}, MemoryLog()), "");
  EXPECT_NE(restart_problem(HardState{4, 1, 3}, log).find("lost committed entries"),
            std::string::npos);
}

TEST(RestartDeathTest, ALogAheadOfThePersistedTermIsFatal) {
  MemoryLog log;
  log.append(make_entries(1, {1, 4}));
  EXPECT_DEATH(Raft(base_config(3), log, HardState{2, 1, 1}), "vote twice");
}

}  // namespace
}  // namespace raftlog::raft

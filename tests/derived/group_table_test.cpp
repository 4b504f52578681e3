// The consumer group table (derived/group_table.h): applying commits in log order, its bounds, its
// file, and recovery against the log: resumed, rebuilt when the file is corrupt, rolled back when
// the log's tail was cut under it, replayed forward, marked unknown when commits were trimmed
// before it applied them, and crashes at every sync of a persist.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>

#include "derived/group_table.h"
#include "derived_test_support.h"
#include "store/memory_env.h"
#include "util/prng.h"

namespace raftlog::derived {
namespace {

using testing::FakeLog;

constexpr const char* kDataDir = "/data";
constexpr const char* kDir = "/data/derived";
constexpr const char* kCluster = "cluster-a";

void add_commit(FakeLog* log, std::uint64_t term, const std::string& group,
                const std::string& topic, std::uint64_t offset) {
  SourceEntry entry;
  entry.index = log->first + log->entries.size();
  entry.term = term;
  entry.is_group_commit = true;
  entry.payload = encode_group_commit({group, topic, offset});
  log->entries.push_back(std::move(entry));
}

std::unique_ptr<GroupTable> open_table(store::Env* env, const FakeLog& log, OpenReport* report,
                                       const std::string& cluster = kCluster) {
  store::Status error;
  EXPECT_TRUE(env->create_dir(kDataDir).ok());
  auto table = GroupTable::open(env, kDir, kDataDir, cluster, log, report, &error);
  EXPECT_NE(table, nullptr) << error.to_string();
  return table;
}

void replay(GroupTable& table, const FakeLog& log, std::size_t batch = 5) {
  while (table.boundary() <= log.last_index()) {
    std::vector<SourceEntry> entries;
    for (std::uint64_t i = table.boundary(); i <= log.last_index() && entries.size() < batch; ++i) {
      entries.push_back(log.entries[i - log.first]);
    }
    ASSERT_TRUE(table.apply(entries));
  }
}

// The table built from nothing over `log` (its groups, as a state without the boundary term).
GroupTableState from_scratch(const FakeLog& log) {
  store::MemoryEnv env;
  OpenReport report;
  auto table = open_table(&env, log, &report);
  replay(*table, log);
  return table->state();
}

GroupLookup lookup(const GroupTable& table, const std::string& group, const std::string& topic,
                   std::uint64_t* offset = nullptr) {
  GroupOffset found;
  const GroupLookup result = table.lookup(group, topic, &found);
  if (offset != nullptr) *offset = found.offset;
  return result;
}

TEST(GroupTable, LastCommitInLogOrderWinsAndOtherEntriesOnlyMoveTheBoundary) {
  store::MemoryEnv env;
  FakeLog log;
  log.add_plain(1);
  add_commit(&log, 1, "billing", "orders", 5);
  log.add(1, "orders", {"k"}, 100);             // an envelope entry: not a commit
  add_commit(&log, 2, "billing", "orders", 3);  // backwards is allowed (a rewind)
  add_commit(&log, 2, "billing", "payments", 7);
  add_commit(&log, 2, "audit", "orders", 1);
  SourceEntry forged;  // both flags: refused, counted
  forged.index = log.last_index() + 1;
  forged.term = 2;
  forged.is_group_commit = true;
  forged.has_envelope = true;
  forged.payload = encode_group_commit({"billing", "orders", 999});
  log.entries.push_back(forged);
  SourceEntry garbage = forged;  // a commit flag on bytes that do not decode
  garbage.index = forged.index + 1;
  garbage.has_envelope = false;
  garbage.payload = "\x01\xff";
  log.entries.push_back(garbage);

  OpenReport report;
  auto table = open_table(&env, log, &report);
  EXPECT_EQ(report.mode, OpenMode::kFresh);
  EXPECT_TRUE(table->complete());
  replay(*table, log, 2);
  EXPECT_EQ(table->boundary(), log.last_index() + 1);
  EXPECT_EQ(table->bad_commits(), 2U);
  std::uint64_t offset = 0;
  ASSERT_EQ(lookup(*table, "billing", "orders", &offset), GroupLookup::kKnown);
  EXPECT_EQ(offset, 3U);
  ASSERT_EQ(lookup(*table, "billing", "payments", &offset), GroupLookup::kKnown);
  EXPECT_EQ(offset, 7U);
  EXPECT_EQ(lookup(*table, "billing", "nothing"), GroupLookup::kNone);
  EXPECT_EQ(lookup(*table, "nobody", "orders"), GroupLookup::kNone);
  const GroupFetch billing = table->fetch("billing");
  ASSERT_TRUE(billing.found);
  ASSERT_EQ(billing.offsets.size(), 2U);
  EXPECT_EQ(billing.offsets[0].first, "orders");
  EXPECT_EQ(billing.offsets[0].second, (GroupOffset{3, 4, 2}));
  const std::vector<GroupInfo> groups = table->list();
  ASSERT_EQ(groups.size(), 2U);
  EXPECT_EQ(groups[0].group, "audit");
  EXPECT_EQ(groups[1].topics, 2U);
  // Entries must continue at the boundary.
  EXPECT_FALSE(table->apply({log.entries[0]}));
}

// The bounds are the leader's admission check (fits()), never applied on replay: every well-formed
// commit applies, so two tables over the same log agree whatever they held before (finding: a
// node that rebuilt an incomplete table after retention refused, or applied, differently).
TEST(GroupTable, BoundsAreCheckedAtAdmissionAndEveryWellFormedCommitApplies) {
  store::MemoryEnv env;
  FakeLog log;
  for (std::size_t g = 0; g < kMaxGroups; ++g) add_commit(&log, 1, "g" + std::to_string(g), "t", g);
  for (std::size_t t = 1; t < kMaxTopicsPerGroup; ++t) {
    add_commit(&log, 1, "g0", "t" + std::to_string(t), t);
  }
  OpenReport report;
  auto table = open_table(&env, log, &report);
  replay(*table, log, 100);
  EXPECT_EQ(table->group_count(), kMaxGroups);
  EXPECT_EQ(table->fits("new-group", "t"), GroupTable::Fit::kTooManyGroups);
  EXPECT_EQ(table->fits("g0", "another"), GroupTable::Fit::kTooManyTopics);
  EXPECT_EQ(table->fits("g0", "t5"), GroupTable::Fit::kFits);  // an existing slot
  EXPECT_EQ(table->fits("g1", "another"), GroupTable::Fit::kFits);
  // Commits admitted together past the bound (racing on the leader) apply on every node.
  add_commit(&log, 1, "new-group", "t", 1);
  add_commit(&log, 1, "g0", "another", 1);
  add_commit(&log, 1, "g0", "t5", 55);
  replay(*table, log);
  EXPECT_EQ(table->refused_commits(), 0U);
  std::uint64_t offset = 0;
  EXPECT_EQ(lookup(*table, "new-group", "t", &offset), GroupLookup::kKnown);
  EXPECT_EQ(offset, 1U);
  EXPECT_EQ(lookup(*table, "g0", "another"), GroupLookup::kKnown);
  EXPECT_EQ(lookup(*table, "g0", "t5", &offset), GroupLookup::kKnown);
  EXPECT_EQ(offset, 55U);
  EXPECT_EQ(table->group_count(), kMaxGroups + 1);
  EXPECT_EQ(table->fits("g0", "t5"), GroupTable::Fit::kFits);
  // A table that lost its file and was rebuilt from a trimmed log (which holds fewer groups)
  // applies the same commits: both hold them.
  {
    store::MemoryEnv other_env;
    FakeLog trimmed;
    trimmed.first = log.last_index() - 2;
    for (std::uint64_t i = trimmed.first; i <= log.last_index(); ++i) {
      trimmed.entries.push_back(log.entries[i - log.first]);
    }
    OpenReport other_report;
    auto rebuilt = open_table(&other_env, trimmed, &other_report);
    replay(*rebuilt, trimmed);
    for (const auto& [group, topic] :
         {std::pair<std::string, std::string>{"new-group", "t"}, {"g0", "another"}, {"g0", "t5"}}) {
      GroupOffset ours, theirs;
      ASSERT_EQ(table->lookup(group, topic, &ours), GroupLookup::kKnown);
      ASSERT_EQ(rebuilt->lookup(group, topic, &theirs), GroupLookup::kKnown) << group << topic;
      EXPECT_EQ(ours, theirs);
    }
  }
  // The slack admitted commits can create persists and reopens.
  ASSERT_TRUE(table->persist().ok());
  auto reopened = open_table(&env, log, &report);
  EXPECT_EQ(report.mode, OpenMode::kResumed);
  EXPECT_EQ(reopened->state(), table->state());
  // Past the stored bounds (only a forged peer or a bug writes that many) commits are refused,
  // counted, alike on every node.
  const std::size_t free_groups = kMaxStoredGroups - table->group_count();
  for (std::size_t g = 0; g < free_groups + 5; ++g) {
    add_commit(&log, 1, "extra" + std::to_string(g), "t", g);
  }
  for (std::size_t t = 0; t < kMaxStoredTopicsPerGroup + 5; ++t) {  // g1 has "t" already
    add_commit(&log, 1, "g1", "x" + std::to_string(t), t);
  }
  replay(*table, log, 100);
  EXPECT_EQ(table->group_count(), kMaxStoredGroups);
  EXPECT_EQ(table->fetch("g1").offsets.size(), kMaxStoredTopicsPerGroup);
  EXPECT_EQ(table->refused_commits(), 5U + 6U);
  ASSERT_TRUE(table->persist().ok());
  auto biggest = open_table(&env, log, &report);
  EXPECT_EQ(report.mode, OpenMode::kResumed) << report.reason;
  EXPECT_EQ(biggest->state(), table->state());
}

TEST(GroupTable, ReopensWhereItPersistedAndReplaysForward) {
  store::MemoryEnv env;
  FakeLog log;
  add_commit(&log, 1, "a", "t", 1);
  add_commit(&log, 1, "b", "t", 2);
  OpenReport report;
  {
    auto table = open_table(&env, log, &report);
    replay(*table, log);
    ASSERT_TRUE(table->persist().ok());
    EXPECT_EQ(table->persisted_boundary(), 3U);
  }
  add_commit(&log, 2, "a", "t", 10);
  add_commit(&log, 2, "c", "u", 3);
  auto table = open_table(&env, log, &report);
  EXPECT_EQ(report.mode, OpenMode::kResumed);
  EXPECT_EQ(report.boundary, 3U);
  replay(*table, log);
  EXPECT_EQ(table->state(), from_scratch(log));
}

TEST(GroupTable, ACorruptForeignOrMissingFileIsRebuiltFromTheLog) {
  FakeLog log;
  for (int i = 0; i < 20; ++i) add_commit(&log, 1 + i / 7, "g" + std::to_string(i % 3), "t", i);
  const auto damage = [&](store::MemoryEnv& env, int how) {
    const std::string path = std::string(kDir) + "/GROUPS";
    switch (how) {
      case 0:
        ASSERT_TRUE(env.corrupt_byte(path, 40, 3).ok());
        break;
      case 1: {
        auto bytes = env.content(path);
        ASSERT_TRUE(bytes.ok());
        ASSERT_TRUE(env.write_file(path, bytes->substr(0, bytes->size() / 2)).ok());
        break;
      }
      case 2:
        ASSERT_TRUE(env.overwrite(path, 8, std::string("\x02\0\0\0", 4)).ok());  // version 2
        break;
      case 3:
        ASSERT_TRUE(env.remove(path).ok());
        break;
    }
  };
  for (int how = 0; how < 5; ++how) {
    store::MemoryEnv env;
    OpenReport report;
    {
      auto table = open_table(&env, log, &report);
      replay(*table, log);
      ASSERT_TRUE(table->persist().ok());
    }
    if (how < 4) {
      ASSERT_NO_FATAL_FAILURE(damage(env, how));
    }
    // how == 4: a table of another cluster.
    auto table = open_table(&env, log, &report, how == 4 ? "cluster-b" : kCluster);
    EXPECT_EQ(report.mode, how == 3 ? OpenMode::kFresh : OpenMode::kRebuilt) << how;
    EXPECT_EQ(table->boundary(), 1U) << how;
    replay(*table, log);
    GroupTableState expected = from_scratch(log);
    if (how == 4) expected.cluster_id = "cluster-b";
    EXPECT_EQ(table->state(), expected) << how;
  }
}

TEST(GroupTable, RolledBackWhenTheLogTailWasCutUnderIt) {
  // An untrimmed log: the roll back replays the whole log, exactly.
  store::MemoryEnv env;
  FakeLog log;
  add_commit(&log, 1, "a", "t", 1);
  add_commit(&log, 1, "b", "t", 2);
  add_commit(&log, 2, "a", "t", 3);
  add_commit(&log, 2, "c", "t", 4);
  OpenReport report;
  {
    auto table = open_table(&env, log, &report);
    replay(*table, log);
    ASSERT_TRUE(table->persist().ok());
  }
  log.truncate_from(3);  // the tail 3..4 lost; another term's entry takes 3
  add_commit(&log, 3, "b", "t", 20);
  auto table = open_table(&env, log, &report);
  EXPECT_EQ(report.mode, OpenMode::kRolledBack);
  EXPECT_EQ(table->boundary(), 1U);
  replay(*table, log);
  EXPECT_EQ(table->state(), from_scratch(log));
  EXPECT_EQ(lookup(*table, "c", "t"), GroupLookup::kNone);  // its commit is gone for good
  // And a table ahead of a shorter log.
  ASSERT_TRUE(table->persist().ok());
  log.truncate_from(2);
  auto shorter = open_table(&env, log, &report);
  EXPECT_EQ(report.mode, OpenMode::kRolledBack);
  replay(*shorter, log);
  EXPECT_EQ(shorter->state(), from_scratch(log));
}

TEST(GroupTable, RollBackOnATrimmedLogKeepsWhatNoCutCanReachAndMarksTheRestUnknown) {
  store::MemoryEnv env;
  FakeLog log;
  add_commit(&log, 1, "kept", "t", 1);   // 1: below the first index after trimming
  add_commit(&log, 1, "moved", "t", 2);  // 2
  log.add_plain(1);                      // 3
  log.add_plain(1);                      // 4
  add_commit(&log, 1, "moved", "t", 5);  // 5: replayed again after the roll back
  add_commit(&log, 2, "lost", "t", 6);   // 6: cut below
  add_commit(&log, 2, "kept", "u", 7);   // 7: cut below
  OpenReport report;
  {
    auto table = open_table(&env, log, &report);
    replay(*table, log);
    ASSERT_TRUE(table->persist().ok());
  }
  log.trim_to(4);
  log.truncate_from(6);
  auto table = open_table(&env, log, &report);
  EXPECT_EQ(report.mode, OpenMode::kRolledBack);
  EXPECT_EQ(table->boundary(), 4U);
  replay(*table, log);
  std::uint64_t offset = 0;
  EXPECT_EQ(lookup(*table, "kept", "t", &offset), GroupLookup::kKnown);
  EXPECT_EQ(offset, 1U);
  EXPECT_EQ(lookup(*table, "moved", "t", &offset), GroupLookup::kKnown);
  EXPECT_EQ(offset, 5U);
  // Set at or after the first index and not replayed: its earlier value is unknowable here.
  EXPECT_EQ(lookup(*table, "lost", "t"), GroupLookup::kUnknown);
  EXPECT_EQ(lookup(*table, "kept", "u"), GroupLookup::kUnknown);
  EXPECT_TRUE(table->complete());  // slots it never had are still truly absent
  EXPECT_EQ(lookup(*table, "never", "t"), GroupLookup::kNone);
  // A new commit makes a slot known again, and that survives a reopen.
  add_commit(&log, 3, "lost", "t", 60);
  replay(*table, log);
  ASSERT_TRUE(table->persist().ok());
  auto reopened = open_table(&env, log, &report);
  EXPECT_EQ(report.mode, OpenMode::kResumed);
  EXPECT_EQ(lookup(*reopened, "lost", "t", &offset), GroupLookup::kKnown);
  EXPECT_EQ(offset, 60U);
  EXPECT_EQ(lookup(*reopened, "kept", "u"), GroupLookup::kUnknown);
}

TEST(GroupTable, RetentionNeverLosesAnOffsetThePersistedTableHolds) {
  store::MemoryEnv env;
  FakeLog log;
  add_commit(&log, 1, "g", "orders", 42);
  for (int i = 0; i < 10; ++i) log.add_plain(1);
  OpenReport report;
  {
    auto table = open_table(&env, log, &report);
    replay(*table, log);
    ASSERT_TRUE(table->persist().ok());
  }
  log.trim_to(11);  // the commit entry is gone from the log; the table is not behind it
  auto table = open_table(&env, log, &report);
  EXPECT_EQ(report.mode, OpenMode::kResumed);
  std::uint64_t offset = 0;
  EXPECT_EQ(lookup(*table, "g", "orders", &offset), GroupLookup::kKnown);
  EXPECT_EQ(offset, 42U);
  EXPECT_TRUE(table->complete());
}

TEST(GroupTable, CommitsTrimmedBeforeTheTableAppliedThemMakeItsOffsetsUnknown) {
  store::MemoryEnv env;
  FakeLog log;
  add_commit(&log, 1, "g", "orders", 1);
  OpenReport report;
  {
    auto table = open_table(&env, log, &report);
    replay(*table, log);
    ASSERT_TRUE(table->persist().ok());
  }
  add_commit(&log, 1, "g", "orders", 2);  // 2: trimmed before the table saw it
  log.add_plain(1);
  log.add_plain(1);
  log.trim_to(4);
  auto table = open_table(&env, log, &report);
  EXPECT_EQ(report.mode, OpenMode::kResumed);
  EXPECT_FALSE(report.reason.empty());
  EXPECT_FALSE(table->complete());
  EXPECT_EQ(table->boundary(), 4U);
  EXPECT_EQ(lookup(*table, "g", "orders"), GroupLookup::kUnknown);  // 1 would be stale
  EXPECT_EQ(lookup(*table, "other", "orders"), GroupLookup::kUnknown);
  // The same while running (the dispatcher's skip_to).
  store::MemoryEnv env2;
  FakeLog fresh;
  add_commit(&fresh, 1, "g", "orders", 1);
  auto running = open_table(&env2, fresh, &report);
  replay(*running, fresh);
  running->skip_to(10);
  EXPECT_EQ(lookup(*running, "g", "orders"), GroupLookup::kUnknown);
  EXPECT_FALSE(running->complete());
}

// A node that lost its table (GROUPS_CREATED says it had one) cannot say "no offset" for what
// retention removed.
TEST(GroupTable, ALostTableRebuiltOverATrimmedLogIsIncomplete) {
  store::MemoryEnv env;
  FakeLog log;
  log.first = 100;
  add_commit(&log, 5, "g", "orders", 7);
  OpenReport report;
  {
    auto table = open_table(&env, log, &report);
    ASSERT_TRUE(table->persist().ok());
  }
  ASSERT_TRUE(env.remove(std::string(kDir) + "/GROUPS").ok());
  auto table = open_table(&env, log, &report);
  EXPECT_EQ(report.mode, OpenMode::kFresh);
  EXPECT_NE(report.reason.find("GROUPS_CREATED"), std::string::npos) << report.reason;
  EXPECT_FALSE(table->complete());
  replay(*table, log);
  std::uint64_t offset = 0;
  EXPECT_EQ(lookup(*table, "g", "orders", &offset), GroupLookup::kKnown);  // set after the trim
  EXPECT_EQ(offset, 7U);
  EXPECT_EQ(lookup(*table, "g", "payments"), GroupLookup::kUnknown);
}

// A node that never had a table (the first start after the upgrade that brought groups, retention
// on) starts complete: no commit was written before every node could apply it, so a group or
// topic the table lacks has no committed offset.
TEST(GroupTable, ANodeThatNeverHadATableStartsCompleteOverATrimmedLog) {
  store::MemoryEnv env;
  FakeLog log;
  log.first = 100;
  log.add_plain(5);
  add_commit(&log, 5, "g", "orders", 7);
  OpenReport report;
  auto table = open_table(&env, log, &report);
  EXPECT_EQ(report.mode, OpenMode::kFresh);
  EXPECT_TRUE(table->complete()) << report.reason;
  replay(*table, log);
  std::uint64_t offset = 0;
  EXPECT_EQ(lookup(*table, "g", "orders", &offset), GroupLookup::kKnown);
  EXPECT_EQ(offset, 7U);
  EXPECT_EQ(lookup(*table, "g", "payments"), GroupLookup::kNone);
  EXPECT_EQ(lookup(*table, "new-group", "orders"), GroupLookup::kNone);
  // The marker is on disk (checksummed, versioned, naming the cluster) before any table.
  auto marker = env.content(std::string(kDataDir) + "/" + kGroupTableMarkerName);
  ASSERT_TRUE(marker.ok());
  EXPECT_EQ(decode_group_table_marker(*marker), std::optional<std::string>(kCluster));
  std::string damaged = *marker;
  damaged[12] ^= 1;
  EXPECT_EQ(decode_group_table_marker(damaged), std::nullopt);
  EXPECT_EQ(decode_group_table_marker(marker->substr(0, marker->size() - 1)), std::nullopt);
}

// What the node holds retention at when it runs without a table: the file's boundary, when the file
// decodes and is this cluster's.
TEST(GroupTable, TheFilesBoundaryIsReadWithoutOpeningTheTable) {
  store::MemoryEnv env;
  FakeLog log;
  for (int i = 0; i < 12; ++i) add_commit(&log, 1, "g", "t", i);
  EXPECT_EQ(read_group_table_boundary(&env, kDir, kCluster), std::nullopt);  // no file
  OpenReport report;
  auto table = open_table(&env, log, &report);
  replay(*table, log);
  ASSERT_TRUE(table->persist().ok());
  EXPECT_EQ(read_group_table_boundary(&env, kDir, kCluster), std::optional<std::uint64_t>(13));
  EXPECT_EQ(read_group_table_boundary(&env, kDir, "cluster-b"), std::nullopt);
  ASSERT_TRUE(env.corrupt_byte(std::string(kDir) + "/GROUPS", 30, 1).ok());
  EXPECT_EQ(read_group_table_boundary(&env, kDir, kCluster), std::nullopt);
}

// A persist is needed when a slot changed; a move of the boundary alone is not (the dispatcher
// persists those rarely).
TEST(GroupTable, OnlySlotChangesMarkTheTableChanged) {
  store::MemoryEnv env;
  FakeLog log;
  log.add_plain(1);
  log.add_plain(1);
  OpenReport report;
  auto table = open_table(&env, log, &report);
  EXPECT_FALSE(table->slots_changed());
  replay(*table, log);
  EXPECT_FALSE(table->slots_changed());
  EXPECT_EQ(table->boundary(), 3U);
  add_commit(&log, 1, "g", "t", 1);
  replay(*table, log);
  EXPECT_TRUE(table->slots_changed());
  ASSERT_TRUE(table->persist().ok());
  EXPECT_FALSE(table->slots_changed());
  EXPECT_EQ(table->persisted_boundary(), 4U);
  table->skip_to(10);  // offsets become unknown: a change
  EXPECT_TRUE(table->slots_changed());
}

// Review of dispatch, L7: a leader's table adopted with a lower boundary than the file's (its
// completeness differs: Dispatcher::adopt_pending_groups) was never written: persist_state kept
// the file's newer boundary, and the table stayed "changed", every persist a no-op.
TEST(GroupTable, AReplacedTableIsPersistedWhateverItsBoundary) {
  store::MemoryEnv env;
  FakeLog log;
  for (int i = 0; i < 10; ++i) add_commit(&log, 1, "g", "t", i);
  OpenReport report;
  auto table = open_table(&env, log, &report);
  replay(*table, log);
  ASSERT_TRUE(table->persist().ok());
  ASSERT_EQ(table->persisted_boundary(), 11U);
  FakeLog prefix = log;  // the leader's table covers commits 1..5 only
  prefix.truncate_from(6);
  GroupTableState leaders = from_scratch(prefix);
  ASSERT_EQ(leaders.boundary, 6U);
  leaders.complete = !leaders.complete;
  table->replace(leaders);
  ASSERT_TRUE(table->slots_changed());
  auto [state, change_count] = table->state_for_persist();
  ASSERT_TRUE(table->persist_state(state, change_count).ok());
  EXPECT_EQ(table->persisted_boundary(), 6U);
  EXPECT_FALSE(table->slots_changed());
  EXPECT_EQ(read_group_table_boundary(&env, kDir, kCluster), std::optional<std::uint64_t>(6));
  // A state taken before the replacement never goes over it.
  auto [fresh_state, fresh_count] = table->state_for_persist();
  replay(*table, log);  // the commits at 6..10 apply again over the leader's table
  auto [later, later_count] = table->state_for_persist();
  ASSERT_TRUE(table->persist_state(later, later_count).ok());
  EXPECT_EQ(table->persisted_boundary(), 11U);
  ASSERT_TRUE(table->persist_state(fresh_state, fresh_count).ok());
  EXPECT_EQ(table->persisted_boundary(), 11U) << "an older state went over a newer file";
}

TEST(GroupTable, ACrashAtAnySyncOfAPersistLeavesTheOldOrTheNewTable) {
  FakeLog log;
  for (int i = 0; i < 30; ++i) add_commit(&log, 1, "g" + std::to_string(i % 4), "t", i);
  FakeLog first_half = log;
  first_half.truncate_from(16);
  const GroupTableState before = from_scratch(first_half);
  const GroupTableState after = from_scratch(log);
  for (std::uint64_t syncs = 0; syncs < 4; ++syncs) {
    for (int mode = 0; mode < 5; ++mode) {
      store::MemoryEnv env;
      OpenReport report;
      {
        auto table = open_table(&env, first_half, &report);
        replay(*table, first_half);
        ASSERT_TRUE(table->persist().ok());
        replay(*table, log);
        env.crash_after_syncs(syncs);
        (void)table->persist();
        if (!env.crashed()) env.crash();
      }
      env.restart(store::CrashOptions{static_cast<store::CrashMode>(mode), syncs * 7 + 1});
      auto table = open_table(&env, log, &report);
      // The file is replaced atomically: never torn, so never rebuilt.
      EXPECT_NE(report.mode, OpenMode::kRebuilt) << syncs << " " << mode << ": " << report.reason;
      const GroupTableState state = table->state();
      EXPECT_TRUE(state == before || state == after) << syncs << " " << mode;
      replay(*table, log);
      EXPECT_EQ(table->state(), after);
    }
  }
}

TEST(GroupTableFile, DamagedBytesAreRefusedNeverTrusted) {
  FakeLog log;
  for (int i = 0; i < 12; ++i)
    add_commit(&log, 1, "g" + std::to_string(i % 3), "t" + std::to_string(i % 2), i);
  const std::string bytes = encode_group_table(from_scratch(log));
  std::string problem;
  ASSERT_TRUE(decode_group_table(bytes, &problem).has_value()) << problem;
  util::Prng prng(7);
  for (int round = 0; round < 5000; ++round) {
    std::string damaged = bytes;
    damaged[prng.below(damaged.size())] ^= static_cast<char>(1 + prng.below(255));
    if (prng.below(3) == 0) damaged.resize(prng.below(damaged.size()));
    EXPECT_FALSE(decode_group_table(damaged, &problem).has_value());
  }
  for (std::size_t size = 0; size < bytes.size(); ++size) {
    EXPECT_FALSE(decode_group_table(bytes.substr(0, size), &problem).has_value()) << size;
  }
}

}  // namespace
}  // namespace raftlog::derived

// AppendGroup and grouped appends: the first caller leads, later callers queue and are appended in
// the order they came, a refused member fails alone, leadership is handed over after a bounded
// number of rounds, and through CommitLog every concurrent auto-indexed sync append gets its own
// durable range of the right entries, also when the log closes under them.
#include "store/append_group.h"

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace raftlog::store {
namespace {

using testing::open_ok;
using testing::small_options;

EntryToAppend entry_with_term(std::uint64_t term, std::string_view payload) {
  EntryToAppend entry;
  entry.meta.index = 0;
  entry.meta.term = term;
  entry.payload = payload;
  return entry;
}

// A log stand-in: assigns indexes from 1, records each run's payloads, refuses a run holding a
// payload "bad" as invalid (nothing written, as the real log does), and can queue more members
// during a run (arrivals while the leader writes). Its "truncation count" is 10 x the runs written.
struct FakeLog {
  std::uint64_t last_index = 0;
  std::vector<std::vector<std::string>> runs;
  std::function<void()> during_run;

  Result<IndexRange> append(std::span<const EntryToAppend> run) {
    if (during_run) during_run();
    for (const EntryToAppend& entry : run) {
      if (entry.payload == "bad") return Status::invalid_argument("bad entry");
    }
    runs.emplace_back();
    for (const EntryToAppend& entry : run) runs.back().emplace_back(entry.payload);
    const IndexRange range{last_index + 1, last_index + run.size()};
    last_index = range.last;
    return range;
  }
};

struct Lead {
  explicit Lead(FakeLog& fake) : log(fake) {}
  FakeLog& log;
  int wake_alls = 0;
  std::vector<IndexRange> appended_runs;               // what after_appended was told, in order
  std::function<void(const IndexRange&)> on_appended;  // optional check at that moment
  void operator()(AppendGroup& group, GroupMember* oldest) {
    group.lead(
        oldest,
        [this](std::span<const EntryToAppend> run,
               const AppendGroup::ResolveWritten& resolve_written) {
          auto appended = log.append(run);
          if (appended.ok()) resolve_written(*appended, 10 * log.runs.size());
          return appended;
        },
        [this](const IndexRange& run) {
          appended_runs.push_back(run);
          if (on_appended) on_appended(run);
        },
        [this] { ++wake_alls; });
  }
};

TEST(AppendGroupTest, FirstCallerLeadsAndLaterCallersAreAppendedOldestFirstInOneRun) {
  AppendGroup group(/*max_run_entries=*/100);
  const EntryToAppend a = entry_with_term(1, "a");
  const EntryToAppend b = entry_with_term(1, "b");
  const EntryToAppend c[2] = {entry_with_term(1, "c1"), entry_with_term(1, "c2")};
  GroupMember leader({&a, 1});
  GroupMember second({&b, 1});
  GroupMember third({c, 2});
  ASSERT_TRUE(group.join(&leader));   // nobody leads: the caller does
  ASSERT_FALSE(group.join(&second));  // queued behind the active leader
  ASSERT_FALSE(group.join(&third));
  FakeLog log;
  Lead lead{log};
  lead(group, &leader);
  // The leader's own batch first, then everything queued meanwhile in arrival order, one run.
  ASSERT_EQ(log.runs.size(), 2U);
  EXPECT_EQ(log.runs[0], (std::vector<std::string>{"a"}));
  EXPECT_EQ(log.runs[1], (std::vector<std::string>{"b", "c1", "c2"}));
  EXPECT_EQ(leader.state.load(), GroupMember::kAppended);
  EXPECT_EQ(second.state.load(), GroupMember::kAppended);
  EXPECT_EQ(third.state.load(), GroupMember::kAppended);
  EXPECT_EQ(leader.range.first, 1U);
  EXPECT_EQ(second.range.first, 2U);
  EXPECT_EQ(second.range.last, 2U);
  EXPECT_EQ(third.range.first, 3U);
  EXPECT_EQ(third.range.last, 4U);
  // Each member carries the log's truncation count of the run that wrote it.
  EXPECT_EQ(leader.truncations_seen, 10U);
  EXPECT_EQ(second.truncations_seen, 20U);
  EXPECT_EQ(third.truncations_seen, 20U);
  EXPECT_EQ(group.runs(), 2U);
  EXPECT_EQ(group.members(), 3U);
  EXPECT_EQ(lead.wake_alls, 0);
  // Leadership was released: the next caller leads again.
  GroupMember next({&a, 1});
  EXPECT_TRUE(group.join(&next));
  lead(group, &next);
}

TEST(AppendGroupTest, AfterAppendedHearsOfEachRunOnceItsMembersKnowTheirRanges) {
  // A member that read "queued" may have slept through the flush of its own entries; the log wakes
  // it from after_appended, which must therefore come after every state store of the run.
  AppendGroup group(/*max_run_entries=*/100);
  const EntryToAppend entry = entry_with_term(1, "e");
  GroupMember leader({&entry, 1});
  GroupMember second({&entry, 1});
  GroupMember third({&entry, 1});
  ASSERT_TRUE(group.join(&leader));
  ASSERT_FALSE(group.join(&second));
  ASSERT_FALSE(group.join(&third));
  FakeLog log;
  Lead lead{log};
  std::vector<std::vector<std::uint32_t>> states_at_call;
  lead.on_appended = [&](const IndexRange&) {
    states_at_call.push_back({leader.state.load(), second.state.load(), third.state.load()});
  };
  lead(group, &leader);
  ASSERT_EQ(lead.appended_runs.size(), 2U);
  EXPECT_EQ(lead.appended_runs[0].first, 1U);
  EXPECT_EQ(lead.appended_runs[0].last, 1U);
  EXPECT_EQ(lead.appended_runs[1].first, 2U);
  EXPECT_EQ(lead.appended_runs[1].last, 3U);
  ASSERT_EQ(states_at_call.size(), 2U);
  EXPECT_EQ(states_at_call[0][0], GroupMember::kAppended);
  EXPECT_EQ(states_at_call[1],
            (std::vector<std::uint32_t>{GroupMember::kAppended, GroupMember::kAppended,
                                        GroupMember::kAppended}));
}

TEST(AppendGroupTest, RunsRespectTheEntryBoundAndNeverSplitAMember) {
  AppendGroup group(/*max_run_entries=*/3);
  const EntryToAppend lead_entry = entry_with_term(1, "l");
  const EntryToAppend pair[2] = {entry_with_term(1, "p1"), entry_with_term(1, "p2")};
  const EntryToAppend triple[3] = {entry_with_term(1, "t1"), entry_with_term(1, "t2"),
                                   entry_with_term(1, "t3")};
  GroupMember leader({&lead_entry, 1});
  GroupMember first_pair({pair, 2});
  GroupMember whole_triple({triple, 3});
  GroupMember second_pair({pair, 2});
  ASSERT_TRUE(group.join(&leader));
  ASSERT_FALSE(group.join(&first_pair));
  ASSERT_FALSE(group.join(&whole_triple));
  ASSERT_FALSE(group.join(&second_pair));
  FakeLog log;
  Lead{log}(group, &leader);
  ASSERT_EQ(log.runs.size(), 4U);  // l | p1 p2 | t1 t2 t3 | p1 p2
  EXPECT_EQ(log.runs[1].size(), 2U);
  EXPECT_EQ(log.runs[2].size(), 3U);
  EXPECT_EQ(log.runs[3].size(), 2U);
  EXPECT_EQ(second_pair.range.first, 7U);
}

TEST(AppendGroupTest, AMemberTheLogRefusesFailsAloneAndTheOthersAreAppended) {
  AppendGroup group(/*max_run_entries=*/100);
  const EntryToAppend good = entry_with_term(1, "good");
  const EntryToAppend bad = entry_with_term(1, "bad");
  GroupMember leader({&good, 1});
  GroupMember before({&good, 1});
  GroupMember refused({&bad, 1});
  GroupMember after({&good, 1});
  ASSERT_TRUE(group.join(&leader));
  ASSERT_FALSE(group.join(&before));
  ASSERT_FALSE(group.join(&refused));
  ASSERT_FALSE(group.join(&after));
  FakeLog log;
  Lead lead{log};
  lead(group, &leader);
  EXPECT_EQ(before.state.load(), GroupMember::kAppended);
  EXPECT_EQ(after.state.load(), GroupMember::kAppended);
  ASSERT_EQ(refused.state.load(), GroupMember::kFailed);
  EXPECT_EQ(refused.status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(before.range.first, 2U);
  EXPECT_EQ(after.range.first, 3U);  // nothing of the refused run was written
  EXPECT_EQ(lead.wake_alls, 1);      // the failed member sleeps on the flush waiters
}

TEST(AppendGroupTest, TermsThatDecreaseStartANewRun) {
  AppendGroup group(/*max_run_entries=*/100);
  const EntryToAppend t5 = entry_with_term(5, "t5");
  const EntryToAppend t3 = entry_with_term(3, "t3");
  GroupMember leader({&t5, 1});
  GroupMember newer({&t5, 1});
  GroupMember older({&t3, 1});
  ASSERT_TRUE(group.join(&leader));
  ASSERT_FALSE(group.join(&newer));
  ASSERT_FALSE(group.join(&older));
  FakeLog log;
  Lead{log}(group, &leader);
  ASSERT_EQ(log.runs.size(), 3U);  // t5 | t5 | t3: the run of two would hold a decreasing term
}

TEST(AppendGroupTest, LeadershipIsHandedOverAfterTheRoundBound) {
  // Callers keep arriving while the leader writes: after kMaxLeadRounds rounds the leader hands the
  // queue to its oldest member instead of serving forever.
  AppendGroup group(/*max_run_entries=*/100);
  const EntryToAppend entry = entry_with_term(1, "e");
  std::vector<std::unique_ptr<GroupMember>> arrivals;
  GroupMember leader({&entry, 1});
  ASSERT_TRUE(group.join(&leader));
  FakeLog log;
  log.during_run = [&] {
    arrivals.push_back(std::make_unique<GroupMember>(std::span<const EntryToAppend>(&entry, 1)));
    ASSERT_FALSE(group.join(arrivals.back().get()));
  };
  Lead lead{log};
  lead(group, &leader);
  EXPECT_EQ(log.runs.size(), AppendGroup::kMaxLeadRounds);
  EXPECT_EQ(lead.wake_alls, 1);  // the new leader sleeps on the flush waiters
  // Every arrival but the last was appended; the last one now leads.
  ASSERT_EQ(arrivals.size(), AppendGroup::kMaxLeadRounds);
  for (std::size_t i = 0; i + 1 < arrivals.size(); ++i) {
    EXPECT_EQ(arrivals[i]->state.load(), GroupMember::kAppended) << i;
  }
  GroupMember* new_leader = arrivals.back().get();
  ASSERT_EQ(new_leader->state.load(), GroupMember::kLeading);
  log.during_run = nullptr;
  lead(group, new_leader);
  EXPECT_EQ(new_leader->state.load(), GroupMember::kAppended);
  EXPECT_EQ(new_leader->range.first, AppendGroup::kMaxLeadRounds + 1);
  GroupMember later({&entry, 1});
  EXPECT_TRUE(group.join(&later));  // released again
  lead(group, &later);
}

// Through the log: 16 threads, each appending auto-indexed batches of 1-3 entries in sync mode.
// Every returned range is durable when returned, ranges never overlap, together they cover the log,
// and each range holds that thread's entries.
TEST(GroupedAppendTest, ConcurrentSyncAppendsGetDisjointDurableRangesOfTheirOwnEntries) {
  MemoryEnv env;
  auto log = open_ok("/log", small_options(&env));
  ASSERT_TRUE(log);
  constexpr int kThreads = 16;
  constexpr int kAppendsPerThread = 200;
  std::vector<std::map<std::uint64_t, std::string>> expected(kThreads);  // index -> payload
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kAppendsPerThread; ++i) {
        const std::size_t count = 1 + static_cast<std::size_t>(i % 3);
        std::vector<std::string> payloads;
        for (std::size_t k = 0; k < count; ++k) {
          payloads.push_back("t" + std::to_string(t) + "-" + std::to_string(i) + "-" +
                             std::to_string(k));
        }
        std::vector<EntryToAppend> batch;
        for (const std::string& payload : payloads) batch.push_back(entry_with_term(1, payload));
        auto appended = log->append(batch);
        if (!appended.ok() || appended->last - appended->first + 1 != count ||
            log->flushed_index() < appended->last) {
          failures.fetch_add(1);
          continue;
        }
        for (std::size_t k = 0; k < count; ++k) expected[t][appended->first + k] = payloads[k];
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  std::map<std::uint64_t, std::string> all;
  for (const auto& mine : expected) {
    for (const auto& [index, payload] : mine)
      EXPECT_TRUE(all.emplace(index, payload).second) << "index " << index;
  }
  ASSERT_EQ(all.size(), log->last_index());
  for (std::uint64_t index = 1; index <= log->last_index();) {
    auto read = log->read(index, 1000, 1 << 30);
    ASSERT_TRUE(read.ok()) << read.status().to_string();
    for (const EntryView& entry : read->entries) {
      ASSERT_EQ(entry.meta.index, index);
      EXPECT_EQ(entry.payload, all[index]) << "index " << index;
      ++index;
    }
  }
  const FlushStats stats = log->stats();
  EXPECT_EQ(stats.grouped_appends, static_cast<std::uint64_t>(kThreads * kAppendsPerThread));
  EXPECT_LE(stats.group_writes, stats.grouped_appends);
}

TEST(GroupedAppendTest, AnInvalidBatchFailsAloneBeforeJoining) {
  MemoryEnv env;
  Options options = small_options(&env);
  auto log = open_ok("/log", options);
  ASSERT_TRUE(log);
  const std::string too_big(options.max_entry_size_bytes + 1, 'x');
  const EntryToAppend oversized = entry_with_term(1, too_big);
  auto refused = log->append(std::span<const EntryToAppend>(&oversized, 1));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  const EntryToAppend fine = entry_with_term(1, "fine");
  auto appended = log->append(std::span<const EntryToAppend>(&fine, 1));
  ASSERT_TRUE(appended.ok()) << appended.status().to_string();
  EXPECT_EQ(appended->first, 1U);
  EXPECT_EQ(log->stats().grouped_appends, 1U);
}

TEST(GroupedAppendTest, CloseUnderConcurrentAppendsNeitherHangsNorLosesAnAcknowledgedEntry) {
  testing::TempDir dir;
  const Options options = testing::real_file_sync_options(1 << 20);
  auto log = open_ok(dir.path(), options);
  ASSERT_TRUE(log);
  constexpr int kThreads = 16;
  std::vector<std::vector<std::uint64_t>> acknowledged(kThreads);
  std::atomic<int> unexpected{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  const std::string payload(512, 'q');
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Bounded: stops at the first refusal (the log closed) or after 100,000 appends.
      for (int i = 0; i < 100000 && !stop.load(); ++i) {
        const EntryToAppend entry = entry_with_term(1, payload);
        auto appended = log->append(std::span<const EntryToAppend>(&entry, 1));
        if (appended.ok()) {
          acknowledged[t].push_back(appended->last);
          continue;
        }
        if (appended.status().code() != StatusCode::kClosed) unexpected.fetch_add(1);
        return;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(log->close().ok());
  stop.store(true);
  for (auto& thread : threads)
    thread.join();  // a member left behind would hang here (ctest timeout)
  EXPECT_EQ(unexpected.load(), 0);
  log.reset();
  auto reopened = open_ok(dir.path(), options);
  ASSERT_TRUE(reopened);
  std::size_t total = 0;
  for (const auto& mine : acknowledged) {
    total += mine.size();
    for (std::uint64_t index : mine)
      ASSERT_LE(index, reopened->last_index()) << "acknowledged entry lost";
  }
  EXPECT_GT(total, 0U);
}

}  // namespace
}  // namespace raftlog::store

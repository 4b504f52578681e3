// A failed sync fails the log for good: whichever operation meets the error (a sync append, flush(),
// truncate_prefix, truncate_suffix, a persisted commit index), later appends are refused even when
// syncs work again. After an fsync error the kernel may have dropped the dirty data, so a later
// successful sync proves nothing about it; only reopening (recovery from what is on disk) is safe.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "test_util.h"

namespace raftlog::store {
namespace {

using testing::make_batch;
using testing::open_ok;
using testing::small_options;

struct Case {
  std::string name;
  std::function<Status(CommitLog&)> operation;  // meets the injected sync error
};

void expect_failed_for_good(const Case& c) {
  SCOPED_TRACE(c.name);
  MemoryEnv env;
  ASSERT_TRUE(env.create_dir("/log").ok());
  auto log = open_ok("/log", small_options(&env));  // 64 KiB segments
  ASSERT_TRUE(log);
  const auto batch =
      make_batch(1, 150, 1, 1000);  // three segments, so truncate_prefix has work to do
  ASSERT_TRUE(log->append(batch.span()).ok());
  ASSERT_TRUE(log->set_commit_index(100).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(30));  // let periodic checkpoints settle

  env.fail_next_syncs(1);
  const Status failed = c.operation(*log);
  EXPECT_FALSE(failed.ok()) << "the operation met the sync error and must report it";

  // Syncs work again; the log must still refuse writes (the flusher may have met the error first,
  // which fails the log too).
  const auto next = make_batch(151, 1, 1, 100);
  auto appended = log->append(next.span());
  ASSERT_FALSE(appended.ok()) << "a sync error was forgotten: append succeeded afterwards";
  EXPECT_EQ(appended.status().code(), StatusCode::kIo) << appended.status().to_string();
  // Still readable.
  auto read = log->read(log->first_index(), 10, 1 << 20);
  ASSERT_TRUE(read.ok()) << read.status().to_string();
  EXPECT_EQ(read->entries.size(), 10U);
}

TEST(SyncError, FailsTheLogForGoodWhicheverOperationMeetsIt) {
  const std::vector<Case> cases = {
      {"sync append",
       [](CommitLog& log) {
         const auto batch = make_batch(151, 1, 1, 100);
         return log.append(batch.span()).status();
       }},
      {"truncate_prefix", [](CommitLog& log) { return log.truncate_prefix(100); }},
      {"truncate_suffix", [](CommitLog& log) { return log.truncate_suffix(120); }},
      {"persisted commit index",
       [](CommitLog& log) { return log.set_commit_index(110, /*persist=*/true); }},
  };
  for (const Case& c : cases) expect_failed_for_good(c);
}

}  // namespace
}  // namespace raftlog::store

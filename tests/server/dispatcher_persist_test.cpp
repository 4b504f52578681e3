// When the dispatcher persists the derived indexes (src/server/dispatcher.h): a cursor that only
// moved over plain entries is not rewritten at the 200 ms cadence (kCursorOnlyPersistMs), records
// added by an envelope are, and stop() persists whatever moved; dispatch goes on while a persist
// syncs many topic files. On a real one-node Server in process; the cursor is read from
// derived/CURSOR as a restart would.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "derived/cursor.h"
#include "derived/group_table.h"
#include "server/dispatcher.h"
#include "server/in_process_node.h"
#include "shared/loopback.h"
#include "store/env.h"
#include "store/options.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;

// The boundary of the persisted cursor (the first index not yet indexed), or 0 when there is none.
std::uint64_t persisted_boundary(const std::string& data_dir) {
  std::string problem;
  const std::optional<derived::Cursor> cursor =
      derived::read_cursor(store::Env::posix(), store::join_path(data_dir, "derived"), &problem);
  return cursor ? cursor->boundary : 0;
}

// The disk, except that a sync of a topic queue's file or directory (under derived/topics/) takes
// `delay`: a persist of many new topics then takes seconds, as on the loaded disk of drills6 M2.
// With `create_delay`, so does creating a topic queue's file (a persist's writes of new topics).
class SlowTopicSyncEnv final : public store::Env {
 public:
  explicit SlowTopicSyncEnv(std::chrono::milliseconds delay,
                            std::chrono::milliseconds create_delay = 0ms)
      : delay_(delay), create_delay_(create_delay) {}
  int topic_syncs() const { return topic_syncs_.load(); }
  int topic_creates() const { return topic_creates_.load(); }

  store::Status create_dir(const std::string& path) override { return disk_->create_dir(path); }
  store::Result<std::vector<std::string>> list_dir(const std::string& dir) const override {
    return disk_->list_dir(dir);
  }
  bool exists(const std::string& path) const override { return disk_->exists(path); }
  store::Result<std::unique_ptr<store::File>> open(const std::string& path, bool create) override {
    if (create && is_topic_path(path) && !disk_->exists(path)) {
      std::this_thread::sleep_for(create_delay_);
      topic_creates_.fetch_add(1);
    }
    auto file = disk_->open(path, create);
    if (!file.ok() || !is_topic_path(path)) return file;
    return std::unique_ptr<store::File>(new SlowFile(std::move(*file), this));
  }
  store::Result<std::unique_ptr<store::File>> open_read_only(const std::string& path) override {
    return disk_->open_read_only(path);
  }
  store::Status rename(const std::string& from, const std::string& to) override {
    return disk_->rename(from, to);
  }
  store::Status remove(const std::string& path) override { return disk_->remove(path); }
  store::Status remove_dir(const std::string& path) override { return disk_->remove_dir(path); }
  store::Status sync_dir(const std::string& dir) override {
    if (is_topic_path(dir + "/")) slow_sync();
    return disk_->sync_dir(dir);
  }
  store::Result<std::string> read_file(const std::string& path,
                                       std::size_t max_bytes) const override {
    return disk_->read_file(path, max_bytes);
  }
  store::Status write_file(const std::string& path, std::string_view content) override {
    return disk_->write_file(path, content);
  }
  store::Result<std::chrono::system_clock::time_point> modified_at(
      const std::string& path) const override {
    return disk_->modified_at(path);
  }

 private:
  class SlowFile final : public store::File {
   public:
    SlowFile(std::unique_ptr<store::File> file, SlowTopicSyncEnv* env)
        : file_(std::move(file)), env_(env) {}
    store::Status allocate(std::uint64_t offset, std::uint64_t length) override {
      return file_->allocate(offset, length);
    }
    store::Status truncate(std::uint64_t size_bytes) override { return file_->truncate(size_bytes); }
    store::Result<std::uint64_t> size() const override { return file_->size(); }
    store::Result<std::shared_ptr<store::Mapping>> map(std::uint64_t length) override {
      return file_->map(length);
    }
    store::Status write_at(std::uint64_t offset, std::string_view data) override {
      return file_->write_at(offset, data);
    }
    store::Status sync() override {
      env_->slow_sync();
      return file_->sync();
    }

   private:
    std::unique_ptr<store::File> file_;
    SlowTopicSyncEnv* env_;
  };

  static bool is_topic_path(const std::string& path) {
    return path.find("/derived/topics/") != std::string::npos;
  }
  void slow_sync() {
    std::this_thread::sleep_for(delay_);
    topic_syncs_.fetch_add(1);
  }

  store::Env* disk_ = store::Env::posix();
  std::chrono::milliseconds delay_;
  std::chrono::milliseconds create_delay_;
  std::atomic<int> topic_syncs_{0};
  std::atomic<int> topic_creates_{0};
};

// Appends one entry while a persist runs, and checks that the dispatcher indexed it within a
// second, before that persist was (nearly) over (else the run shows nothing): `ran` counts the
// persist's slow steps so far (`what`: topic syncs, or topic files created), `steps` of them in
// all. Sets *index to the entry's index.
void append_indexed_mid_persist(InProcessNode& node, const std::function<int()>& ran, int steps,
                                const std::string& what, const std::string& when,
                                std::uint64_t* index) {
  const auto appended_at = std::chrono::steady_clock::now();
  *index = node.append_to_topic("orders", 1, 10);
  ASSERT_NE(*index, 0u);
  ASSERT_TRUE(eventually([&] { return node.derived_indexed_through() >= *index; }, 20000ms))
      << "the entry was never indexed";
  const auto waited = std::chrono::steady_clock::now() - appended_at;
  const int ran_then = ran();
  EXPECT_LT(waited, 1000ms) << "the entry waited "
                            << std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()
                            << " ms" << when << " for the persist's " << what << " to end ("
                            << ran_then << " " << what << " by then)";
  EXPECT_LT(ran_then, steps - 20)
      << "the persist was (nearly) over when the entry was indexed: this run shows nothing";
}

// The same while a persist of `topics` new topics syncs their files (two syncs each).
void append_indexed_mid_syncs(InProcessNode& node, const SlowTopicSyncEnv& env,
                              std::size_t topics, const std::string& when, std::uint64_t* index) {
  append_indexed_mid_persist(node, [&] { return env.topic_syncs(); }, static_cast<int>(2 * topics),
                             "topic syncs", when, index);
}

// drills6 M2: with thousands of topics every persist synced thousands of files, seconds on a
// loaded disk, and the dispatcher indexed nothing meanwhile (topic reads, key lookups and group
// commits waited). An entry committed while a persist of 300 new topics (600 syncs of 5 ms: 3 s)
// runs is indexed at once, and the persist still ends with a cursor that covers it later.
TEST(DispatcherPersist, DispatchGoesOnWhileAPersistSyncsManyTopicFiles) {
  constexpr std::size_t kTopics = 300;
  SlowTopicSyncEnv env(5ms);
  InProcessNode node([&](server::NodeConfig& config) { config.store.env = &env; });
  ASSERT_TRUE(node.started());
  const std::string dir = node.data_dir();
  // One Append: an entry in each of 300 topics, so the next persist syncs 300 files and dirs.
  const std::uint64_t batch_last = node.append_to_topics(kTopics, 10);
  ASSERT_NE(batch_last, 0u);
  const std::uint64_t batch_first = batch_last - kTopics + 1;
  ASSERT_TRUE(eventually([&] { return env.topic_syncs() >= 20; }, 10000ms))
      << "no persist of the topics began";
  std::uint64_t index = 0;
  ASSERT_NO_FATAL_FAILURE(append_indexed_mid_syncs(node, env, kTopics, "", &index));
  // The group table on disk is never ahead of the index records its commits can name: while the
  // batch's records are not durable, derived/GROUPS covers none of its entries (it holds
  // retention: a table past them would let a trim remove entries the indexes must replay).
  const std::optional<std::uint64_t> groups_boundary = derived::read_group_table_boundary(
      store::Env::posix(), store::join_path(dir, "derived"), node.config().cluster_id);
  EXPECT_LE(groups_boundary.value_or(0), batch_first)
      << "derived/GROUPS was persisted past entries whose index records were not durable yet "
      << "(the batch is " << batch_first << ".." << batch_last << ")";
  EXPECT_LT(env.topic_syncs(), static_cast<int>(2 * kTopics))
      << "the persist ended before GROUPS was read: the check above shows nothing";
  EXPECT_TRUE(eventually([&] { return persisted_boundary(dir) > index; }, 20000ms))
      << "no persist covered the entry; the cursor is at " << persisted_boundary(dir);
}

// Review of dispatch, M1: when retention moved the log's start, the dispatcher finished the pending
// persist whole and ran a second whole one before its next batch: with many busy topics the stall
// of drills6 M2 came back at every trim. The trim's persist is now sliced like any other: an entry
// committed right after a trim, while a persist of 300 topic files runs, is indexed within 1 s.
TEST(DispatcherPersist, DispatchGoesOnWhileATrimsPersistSyncsManyTopicFiles) {
  constexpr std::size_t kTopics = 300;
  SlowTopicSyncEnv env(5ms);
  InProcessNode node([&](server::NodeConfig& config) {
    config.store.env = &env;
    config.store.segment_size_bytes = store::Options::kMinSegmentSizeBytes;
    config.store.max_entry_size_bytes = 16 << 10;
  });
  ASSERT_TRUE(node.started());
  const std::string dir = node.data_dir();
  // Plain entries over several segments, applied by the group table and persisted (it holds
  // retention at its persisted boundary).
  const std::uint64_t last_plain = node.append(40, 8000);
  ASSERT_NE(last_plain, 0u);
  ASSERT_TRUE(eventually(
      [&] {
        return derived::read_group_table_boundary(store::Env::posix(),
                                                  store::join_path(dir, "derived"),
                                                  node.config().cluster_id)
                   .value_or(0) > last_plain;
      },
      10000ms));
  const std::uint64_t batch_last = node.append_to_topics(kTopics, 10);
  ASSERT_NE(batch_last, 0u);
  ASSERT_TRUE(eventually([&] { return env.topic_syncs() >= 20; }, 10000ms))
      << "no persist of the topics began";
  const std::uint64_t first = node.trim_before(last_plain, 1, 5000ms);
  ASSERT_GT(first, 1u) << "the log was not trimmed; it starts at " << first;
  std::uint64_t index = 0;
  ASSERT_NO_FATAL_FAILURE(
      append_indexed_mid_syncs(node, env, kTopics, " after the trim", &index));
  EXPECT_TRUE(eventually([&] { return persisted_boundary(dir) > index; }, 20000ms))
      << "no persist covered the entry; the cursor is at " << persisted_boundary(dir);
}

// A node whose topic file creations take `create_delay`, and a persist under way that creates
// kTopics of them (an entry in each of kTopics new topics; 20 files created so far).
class CreatingTopicFiles {
 public:
  static constexpr int kTopics = 300;
  explicit CreatingTopicFiles(std::chrono::milliseconds create_delay)
      : env_(0ms, create_delay),
        node_([&](server::NodeConfig& config) { config.store.env = &env_; }) {}
  void start() {
    ASSERT_TRUE(node_.started());
    batch_last_ = node_.append_to_topics(static_cast<std::size_t>(kTopics), 10);
    ASSERT_NE(batch_last_, 0u);
    ASSERT_TRUE(eventually([&] { return env_.topic_creates() >= 20; }, 10000ms))
        << "no persist of the topics began";
  }
  SlowTopicSyncEnv& env() { return env_; }
  InProcessNode& node() { return node_; }
  std::uint64_t batch_first() const { return batch_last_ - kTopics + 1; }

 private:
  SlowTopicSyncEnv env_;
  InProcessNode node_;
  std::uint64_t batch_last_ = 0;
};

// A persist's begin wrote every record log at once, unsliced: with many new topics a directory
// and a file created per topic while the dispatcher indexed nothing (and a stop waited past its
// bound). Its writes now run in the slices, one segment file a step: an entry committed while a
// persist creates 300 topic files (5 ms each: 1.5 s) is indexed at once.
TEST(DispatcherPersist, DispatchGoesOnWhileAPersistCreatesManyTopicFiles) {
  CreatingTopicFiles creating(5ms);
  ASSERT_NO_FATAL_FAILURE(creating.start());
  std::uint64_t index = 0;
  ASSERT_NO_FATAL_FAILURE(append_indexed_mid_persist(
      creating.node(), [&] { return creating.env().topic_creates(); },
      CreatingTopicFiles::kTopics, "topic file creations", "", &index));
}

// A stop while a persist writes many new topic files ends within its bound: the writes stop at
// it like the syncs (before, the begin wrote every file whatever the stop: 300 files of 20 ms, 6 s),
// and no cursor covers what was not written and synced.
TEST(DispatcherPersist, AStopWhileAPersistCreatesManyTopicFilesEndsWithinItsBound) {
  CreatingTopicFiles creating(20ms);
  ASSERT_NO_FATAL_FAILURE(creating.start());
  const auto stopping = std::chrono::steady_clock::now();
  creating.node().shutdown();
  const auto stop_took = std::chrono::steady_clock::now() - stopping;
  const int created = creating.env().topic_creates();
  EXPECT_LT(stop_took, 3000ms)
      << "the stop took "
      << std::chrono::duration_cast<std::chrono::milliseconds>(stop_took).count()
      << " ms: the persist's writes ran past the " << server::Dispatcher::kStopPersistBoundMs
      << " ms bound (" << created << " of " << CreatingTopicFiles::kTopics
      << " topic files created)";
  EXPECT_LT(created, CreatingTopicFiles::kTopics) << "every file was written: this run shows nothing";
  EXPECT_LE(persisted_boundary(creating.node().data_dir()), creating.batch_first())
      << "the cut persist wrote its cursor";
}

// Review of dispatch, L7: a stop persisted the group table as it stood even when it cut the
// indexes' last persist at kStopPersistBoundMs, so derived/GROUPS (which holds retention) covered
// commits past the index records that were durable. It stays as of the last finished persist now;
// the stop still ends within its bound.
TEST(DispatcherPersist, AStopThatCutsAPersistKeepsGroupsBehindTheDurableRecords) {
  constexpr std::size_t kTopics = 300;
  SlowTopicSyncEnv env(5ms);
  InProcessNode node([&](server::NodeConfig& config) { config.store.env = &env; });
  ASSERT_TRUE(node.started());
  const std::string dir = node.data_dir();
  const std::uint64_t batch_last = node.append_to_topics(kTopics, 10);
  ASSERT_NE(batch_last, 0u);
  const std::uint64_t batch_first = batch_last - kTopics + 1;
  ASSERT_TRUE(eventually([&] { return env.topic_syncs() >= 20; }, 10000ms))
      << "no persist of the topics began";
  // More entries, applied between the persist's slices: the table as it stands covers them.
  const std::uint64_t later = node.append_to_topic("orders", 3, 10);
  ASSERT_NE(later, 0u);
  ASSERT_TRUE(eventually([&] { return node.derived_indexed_through() >= later; }, 10000ms));
  ASSERT_LT(env.topic_syncs(), static_cast<int>(2 * kTopics) - 250)
      << "the persist is nearly over: the stop would not cut it, and this run shows nothing";
  const auto stopping = std::chrono::steady_clock::now();
  node.shutdown();
  const auto stop_took = std::chrono::steady_clock::now() - stopping;
  EXPECT_LT(stop_took, 3000ms)
      << "the stop took "
      << std::chrono::duration_cast<std::chrono::milliseconds>(stop_took).count()
      << " ms: its persist ran past the " << server::Dispatcher::kStopPersistBoundMs
      << " ms bound";
  // The batch's records are not durable (the cut persist wrote no cursor), so GROUPS covers none
  // of the batch's entries.
  ASSERT_LE(persisted_boundary(dir), batch_first) << "the cut persist wrote its cursor";
  const std::optional<std::uint64_t> groups_boundary = derived::read_group_table_boundary(
      store::Env::posix(), store::join_path(dir, "derived"), node.config().cluster_id);
  EXPECT_LE(groups_boundary.value_or(0), batch_first)
      << "derived/GROUPS was persisted at the stop past index records that are not durable";
}

TEST(DispatcherPersist, ACursorThatOnlyMovedWaitsRecordsAndStopDoNot) {
  static_assert(server::Dispatcher::kCursorOnlyPersistMs >= 5000,
                "the test's plain-append window must stay inside the cursor-only interval");
  InProcessNode node([](server::NodeConfig&) {});
  ASSERT_TRUE(node.started());
  const std::string dir = node.data_dir();
  // An entry with a topic and a key adds records: persisted at the 200 ms cadence.
  const std::uint64_t first_enveloped = node.append_to_topic("orders", 1, 100);
  ASSERT_NE(first_enveloped, 0u);
  ASSERT_TRUE(eventually([&] { return persisted_boundary(dir) > first_enveloped; }, 5000ms))
      << "records were not persisted; the cursor is at " << persisted_boundary(dir);
  const std::uint64_t start = persisted_boundary(dir);

  // Plain entries only: five and more 200 ms persist intervals pass, the cursor on disk stays.
  const auto plain_started = std::chrono::steady_clock::now();
  const std::uint64_t last_plain = node.append(40, 100);
  ASSERT_NE(last_plain, 0u);
  std::this_thread::sleep_for(1200ms);
  ASSERT_LT(std::chrono::steady_clock::now() - plain_started, 5000ms)
      << "the machine was too slow for this test's window";
  EXPECT_EQ(persisted_boundary(dir), start)
      << "a cursor that only moved over plain entries was rewritten at the 200 ms cadence";

  // Another one: persisted at the 200 ms cadence again, the plain entries before it with it.
  const std::uint64_t enveloped = node.append_to_topic("orders", 1, 100);
  ASSERT_NE(enveloped, 0u);
  EXPECT_TRUE(eventually([&] { return persisted_boundary(dir) > enveloped; }, 3000ms))
      << "records were not persisted; the cursor is at " << persisted_boundary(dir);

  // More plain entries, applied (the dispatcher follows the commit index within a wake-up), then
  // stop: the stop persists the cursor that moved, though it moved over plain entries only.
  const std::uint64_t last = node.append(5, 100);
  ASSERT_NE(last, 0u);
  std::this_thread::sleep_for(1000ms);
  EXPECT_LE(persisted_boundary(dir), last) << "plain entries were persisted before the stop";
  node.shutdown();
  EXPECT_GT(persisted_boundary(dir), last);
}

}  // namespace
}  // namespace raftlog::testing

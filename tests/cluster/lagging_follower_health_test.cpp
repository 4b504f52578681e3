// Health of a follower far behind its leader, over real raftlogd processes (drills7 L1;
// replica/catch_up_rule.h, docs/operations.md "Health, readiness and watching a cluster").
//
// A voter stopped while 80 MiB (20,000 entries) were appended reported SERVING as soon as it knew
// the leader after its restart, with commit 37 against the leader's 15,189: a readiness probe
// routed reads to it. Now it is NOT_SERVING, with the reason and the gap in its Status, until its
// log reaches the commit index its leader named; then SERVING.
//
// And the rule must never flap on a healthy follower under load (a few batches behind is normal):
// both followers of a loaded cluster stay SERVING throughout. That case held before the rule too;
// it guards against a threshold or hysteresis that would make readiness flap.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cluster_test_support.h"
#include "testing/local_cluster.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// What the stopped voter misses: 20,000 entries of 4 KiB (80 MiB), 64 per Append.
constexpr std::size_t kFillEntryBytes = 4 << 10;
constexpr int kFillEntriesPerAppend = 64;
constexpr int kFillAppends = 313;
constexpr auto kFillTimeout = 120s;
constexpr auto kCatchUpTimeout = 90s;
constexpr auto kSampleInterval = 10ms;
// The loaded cluster: writers each appending 32 entries of 1 KiB per call, for this long (the
// guard runs more of them, so that a follower's gap is not always 0).
constexpr int kLoadWriters = 2;
constexpr int kGuardLoadWriters = 8;
constexpr int kLoadEntriesPerAppend = 32;
constexpr auto kLoadDuration = 8s;
constexpr int kMaxLoadAppendsPerWriter = 20000;

LocalClusterOptions cluster_options() {
  LocalClusterOptions options;
  options.raftlogd_path = RAFTLOGD_PATH;
  options.nodes = 3;
  options.segment_size_bytes = 64ULL << 20;
  options.max_entry_size_bytes = 64 << 10;
  return options;
}

std::unique_ptr<client::Client> writer(LocalCluster& cluster, const std::vector<int>& ids) {
  client::Options options;
  options.retry_deadline_ms = 20000;
  options.call_timeout_ms = 20000;
  return cluster.client(options, ids);
}

// One endpoint's health, then its status (in that order: a SERVING answer is then checked against a
// log at least as long as when health was decided).
struct Sample {
  client::HealthState health = client::HealthState::kUnknown;
  std::optional<client::NodeStatus> status;
};

Sample sample(client::Client& client, LocalCluster& cluster, int id) {
  Sample s;
  const client::Result<client::HealthState> health = client.health(cluster.address(id), "");
  if (health.ok()) s.health = health.value();
  s.status = cluster.status(id);
  return s;
}

TEST(LaggingFollowerHealth, AVoterBackAfterMissingManyEntriesIsNotServingUntilItCatchesUp) {
  LocalCluster cluster(cluster_options());
  cluster.start_all();
  const int leader = cluster.wait_for_leader(20s);
  ASSERT_NE(leader, 0);
  const int lagging = leader == 3 ? 2 : 3;
  std::vector<int> others;
  for (int id = 1; id <= 3; ++id) {
    if (id != lagging) others.push_back(id);
  }
  ASSERT_EQ(cluster.stop(lagging), 0);

  auto client = writer(cluster, others);
  const auto fill_deadline = Clock::now() + kFillTimeout;
  std::uint64_t last_acknowledged = 0;
  for (int call = 0; call < kFillAppends; ++call) {
    ASSERT_LT(Clock::now(), fill_deadline) << "the fill took too long (" << call << " appends)";
    std::vector<std::string> payloads;
    for (int i = 0; i < kFillEntriesPerAppend; ++i) {
      std::string payload = "fill-" + std::to_string(call) + "-" + std::to_string(i) + "-";
      payload.resize(kFillEntryBytes, 'f');
      payloads.push_back(std::move(payload));
    }
    const auto appended = client->append(payloads);
    ASSERT_TRUE(appended.ok()) << appended.status().message();
    last_acknowledged = appended->last_index;
  }
  // Nothing more is appended: the commit index every SERVING answer must be measured against.
  const std::uint64_t commit = last_acknowledged;
  ASSERT_GT(commit, static_cast<std::uint64_t>(kFillAppends * kFillEntriesPerAppend));

  cluster.start(lagging);
  auto prober = cluster.client({}, {lagging});
  bool caught_up = false;
  bool catching_up_seen = false;
  std::uint64_t largest_gap_seen = 0;
  std::string first_reason;
  int serving_while_behind = 0;
  std::string serving_while_behind_example;
  const auto deadline = Clock::now() + kCatchUpTimeout;
  while (!caught_up && Clock::now() < deadline) {
    const Sample s = sample(*prober, cluster, lagging);
    if (s.status.has_value()) {
      const client::NodeStatus& st = *s.status;
      if (s.health == client::HealthState::kServing && st.last_index < commit) {
        if (serving_while_behind++ == 0) {
          serving_while_behind_example = "log ends at " + std::to_string(st.last_index) +
                                         ", commit " + std::to_string(st.commit_index) + " of " +
                                         std::to_string(commit);
        }
      }
      if (st.catching_up_to_leader_commit != 0) {
        catching_up_seen = true;
        EXPECT_GE(st.catching_up_to_leader_commit, st.last_index);
        EXPECT_EQ(st.learner_catching_up_to_index, 0u) << "a voter";
        largest_gap_seen = std::max(largest_gap_seen, st.behind_leader_commit_entries);
        if (first_reason.empty()) first_reason = st.not_serving_reason;
      }
      caught_up = s.health == client::HealthState::kServing && st.last_index >= commit;
    }
    if (!caught_up) std::this_thread::sleep_for(kSampleInterval);
  }
  EXPECT_EQ(serving_while_behind, 0)
      << "SERVING while its log lacked committed entries (first: " << serving_while_behind_example
      << ")";
  ASSERT_TRUE(caught_up) << "node " << lagging << " was not SERVING with its log at " << commit
                         << " within the bound\n"
                         << cluster.log_tail(lagging);
  EXPECT_TRUE(catching_up_seen) << "its Status never said it was catching up";
  EXPECT_GT(largest_gap_seen, 0u);
  EXPECT_NE(first_reason.find("catching up to the commit index its leader named"),
            std::string::npos)
      << first_reason;
  const std::optional<client::NodeStatus> after = cluster.status(lagging);
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->catching_up_to_leader_commit, 0u);
  EXPECT_EQ(after->not_serving_reason, "");
}

// kLoadWriters threads appending kLoadEntriesPerAppend entries of 1 KiB per call through `ids`
// until stop() (or kMaxLoadAppendsPerWriter calls each).
class Load {
 public:
  Load(LocalCluster& cluster, const std::vector<int>& ids, int writers = kLoadWriters) {
    for (int w = 0; w < writers; ++w) {
      writers_.emplace_back([this, &cluster, ids, w] {
        auto client = writer(cluster, ids);
        // Bounded by kMaxLoadAppendsPerWriter and by stop().
        for (int call = 0; call < kMaxLoadAppendsPerWriter && !stop_.load(); ++call) {
          std::vector<std::string> payloads;
          for (int i = 0; i < kLoadEntriesPerAppend; ++i) {
            std::string payload = "load-" + std::to_string(w) + "-" + std::to_string(call) + "-" +
                                  std::to_string(i) + "-";
            payload.resize(1024, 'l');
            payloads.push_back(std::move(payload));
          }
          if (client->append(payloads).ok()) {
            appended_ += kLoadEntriesPerAppend;
          } else {
            ++failed_;
          }
        }
      });
    }
  }
  ~Load() { stop(); }
  Load(const Load&) = delete;
  Load& operator=(const Load&) = delete;
  void stop() {
    stop_.store(true);
    for (std::thread& t : writers_) {
      if (t.joinable()) t.join();
    }
  }
  std::uint64_t appended() const { return appended_.load(); }
  int failed() const { return failed_.load(); }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> appended_{0};
  std::atomic<int> failed_{0};
  std::vector<std::thread> writers_;
};

// A voter restarted while the load goes on is SERVING again before the load stops: its log must
// reach the commit index its leader named (gap 0) while that index keeps moving, which it does
// with every append that carries the leader's newest entries.
TEST(LaggingFollowerHealth, AVoterRestartedUnderLoadIsServingAgainWhileTheLoadGoesOn) {
  LocalCluster cluster(cluster_options());
  cluster.start_all();
  const int leader = cluster.wait_for_leader(20s);
  ASSERT_NE(leader, 0);
  const int lagging = leader == 3 ? 2 : 3;
  Load load(cluster, {leader});
  std::this_thread::sleep_for(1s);
  ASSERT_EQ(cluster.stop(lagging), 0);
  std::this_thread::sleep_for(2s);
  const std::uint64_t appended_before_restart = load.appended();
  cluster.start(lagging);
  auto prober = cluster.client({}, {lagging});
  bool catching_up_seen = false;
  const bool serving = poll_until(
      [&] {
        const Sample s = sample(*prober, cluster, lagging);
        if (s.status && s.status->catching_up_to_leader_commit != 0) catching_up_seen = true;
        return s.health == client::HealthState::kServing;
      },
      kCatchUpTimeout, kSampleInterval);
  const std::uint64_t appended_when_serving = load.appended();
  load.stop();
  std::cout << "restarted under load: " << appended_before_restart << " entries before its restart, "
            << appended_when_serving << " when it was SERVING again\n";
  EXPECT_TRUE(serving) << "node " << lagging << " never SERVING again under load\n"
                       << cluster.log_tail(lagging);
  EXPECT_TRUE(catching_up_seen);
  EXPECT_GT(appended_when_serving, appended_before_restart) << "the load stopped first";
  EXPECT_EQ(load.failed(), 0);
}

// Both followers of a cluster under a steady append load: SERVING in every sample.
TEST(LaggingFollowerHealth, FollowersOfALoadedClusterStayServing) {
  LocalCluster cluster(cluster_options());
  cluster.start_all();
  const int leader = cluster.wait_for_leader(20s);
  ASSERT_NE(leader, 0);
  std::vector<int> followers;
  for (int id = 1; id <= 3; ++id) {
    if (id != leader) followers.push_back(id);
  }
  auto prober = cluster.client({}, {1, 2, 3});
  ASSERT_TRUE(poll_until([&] {
    for (int id : followers) {
      if (sample(*prober, cluster, id).health != client::HealthState::kServing) return false;
    }
    return true;
  }));
  const std::optional<client::NodeStatus> before = cluster.status(leader);
  ASSERT_TRUE(before.has_value());
  // Every start of a catch-up is logged: the guard is exact between samples too (review of
  // lagging6, #4: a flap between a heartbeat and the next append lasts milliseconds).
  std::map<int, std::uintmax_t> log_offset;
  for (int id : followers) log_offset[id] = std::filesystem::file_size(cluster.log_file(id));

  Load load(cluster, {leader}, kGuardLoadWriters);
  int samples = 0;
  int not_serving = 0;
  std::string not_serving_example;
  std::uint64_t largest_gap = 0;
  const auto end = Clock::now() + kLoadDuration;
  while (Clock::now() < end) {
    for (int id : followers) {
      const Sample s = sample(*prober, cluster, id);
      ++samples;
      if (s.status.has_value()) {
        largest_gap = std::max(largest_gap, s.status->behind_leader_commit_entries);
      }
      if (s.health != client::HealthState::kServing && not_serving++ == 0) {
        not_serving_example = "node " + std::to_string(id) + ": " +
                              client::to_string(s.health) +
                              (s.status ? " (" + s.status->not_serving_reason + "; term " +
                                              std::to_string(s.status->term) + ", leader " +
                                              std::to_string(s.status->leader_id) + ")"
                                        : std::string(" (no status)"));
      }
    }
    std::this_thread::sleep_for(kSampleInterval);
  }
  load.stop();
  const std::optional<client::NodeStatus> after = cluster.status(leader);
  ASSERT_TRUE(after.has_value());
  std::cout << "loaded cluster: " << load.appended() << " entries appended in "
            << std::chrono::duration_cast<std::chrono::seconds>(kLoadDuration).count()
            << " s, " << samples << " follower samples, largest follower gap " << largest_gap
            << " entries\n";
  EXPECT_GT(load.appended(), 0u);
  EXPECT_EQ(load.failed(), 0);
  EXPECT_EQ(after->term, before->term) << "an election under load: the samples say nothing";
  EXPECT_EQ(not_serving, 0) << not_serving << " of " << samples
                            << " samples NOT_SERVING; the first: " << not_serving_example;
  for (int id : followers) {
    std::ifstream in(cluster.log_file(id));
    in.seekg(static_cast<std::streamoff>(log_offset[id]));
    std::stringstream read;
    read << in.rdbuf();
    const std::string since = read.str();
    EXPECT_EQ(since.find("not ready for reads"), std::string::npos)
        << "node " << id << " started a catch-up under load:\n"
        << since.substr(0, 4000);
  }
}

}  // namespace
}  // namespace raftlog::testing

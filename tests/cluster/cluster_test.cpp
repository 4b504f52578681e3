// Integration tests over real raftlogd processes on 127.0.0.1 (issue 4's list): election, replication,
// kill -9 of the leader under load, catch-up across many segments, truncation of an old leader's
// uncommitted tail, idempotent retries across a leader change and restarts.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "testing/local_cluster.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;

// Every acknowledged append must be present exactly once, at the acknowledged index, on every node.
struct Acked {
  std::uint64_t index;
  std::string payload;
};

LocalClusterOptions cluster_options(int nodes, std::uint64_t segment_size_bytes = 1 << 20) {
  LocalClusterOptions options;
  options.raftlogd_path = RAFTLOGD_PATH;
  options.nodes = nodes;
  options.segment_size_bytes = segment_size_bytes;
  return options;
}

void expect_all_nodes_hold(LocalCluster& cluster, const std::vector<Acked>& acked) {
  std::uint64_t max_index = 0;
  for (const Acked& a : acked) max_index = std::max(max_index, a.index);
  for (int id = 1; id <= cluster.size(); ++id) {
    ASSERT_TRUE(cluster.wait_for_commit(id, max_index, 15s))
        << "node " << id << " did not catch up\n"
        << cluster.log_tail(id);
    const std::vector<client::Entry> log = cluster.read_all(id);
    std::map<std::uint64_t, const client::Entry*> by_index;
    std::multiset<std::string> payloads;
    for (const client::Entry& e : log) {
      by_index[e.index] = &e;
      payloads.insert(e.payload);
    }
    for (const Acked& a : acked) {
      auto it = by_index.find(a.index);
      ASSERT_NE(it, by_index.end()) << "node " << id << " lacks acknowledged index " << a.index;
      EXPECT_EQ(it->second->payload, a.payload) << "node " << id << " index " << a.index;
      EXPECT_EQ(payloads.count(a.payload), 1u)
          << "payload " << a.payload << " not exactly once on node " << id;
    }
    // Indexes are contiguous from 1.
    for (std::size_t i = 0; i < log.size(); ++i) ASSERT_EQ(log[i].index, i + 1);
  }
}

TEST(ClusterTest, ThreeNodesElectReplicateAndServeReadsEverywhere) {
  LocalCluster cluster(cluster_options(3));
  cluster.start_all();
  const int leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0) << cluster.log_tail(1);

  auto c = cluster.client();
  std::vector<Acked> acked;
  for (int i = 0; i < 50; ++i) {
    const std::string payload = "entry-" + std::to_string(i);
    auto r = c->append({payload});
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->first_index, r->last_index);
    acked.push_back({r->first_index, payload});
  }
  // A batch append is one contiguous range.
  auto batch = c->append({"b0", "b1", "b2"});
  ASSERT_TRUE(batch.ok()) << batch.status().message();
  EXPECT_EQ(batch->last_index, batch->first_index + 2);
  for (int i = 0; i < 3; ++i)
    acked.push_back({batch->first_index + static_cast<std::uint64_t>(i), "b" + std::to_string(i)});

  expect_all_nodes_hold(cluster, acked);

  // A linearizable read sees every completed append.
  auto read = c->read(acked.back().index, 10, 0, true);
  ASSERT_TRUE(read.ok()) << read.status().message();
  ASSERT_FALSE(read->entries.empty());
  EXPECT_EQ(read->entries.front().payload, acked.back().payload);

  // The leader reports each peer's progress.
  auto s = cluster.status(leader);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->peers.size(), 2u);
  EXPECT_EQ(s->flush_mode, client::FlushMode::kSync);
}

TEST(ClusterTest, FiveNodesElectAndReplicate) {
  LocalCluster cluster(cluster_options(5));
  cluster.start_all();
  ASSERT_NE(cluster.wait_for_leader(), 0) << cluster.log_tail(1);
  auto c = cluster.client();
  std::vector<Acked> acked;
  for (int i = 0; i < 20; ++i) {
    const std::string payload = "five-" + std::to_string(i);
    auto r = c->append({payload});
    ASSERT_TRUE(r.ok()) << r.status().message();
    acked.push_back({r->first_index, payload});
  }
  expect_all_nodes_hold(cluster, acked);
}

TEST(ClusterTest, LeaderKilledUnderLoadLosesNoAcknowledgedEntry) {
  LocalCluster cluster(cluster_options(3));
  cluster.start_all();
  const int old_leader = cluster.wait_for_leader();
  ASSERT_NE(old_leader, 0);

  std::mutex mu;
  std::vector<Acked> acked;
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&, w] {
      client::Options options;
      options.retry_deadline_ms = 8000;
      auto c = cluster.client(options);
      // Bounded: at most 100000 appends per writer, and the test stops it after a few seconds.
      for (int i = 0; i < 100000 && !stop.load(); ++i) {
        const std::string payload = "w" + std::to_string(w) + "-" + std::to_string(i);
        auto r = c->append({payload});
        if (r.ok()) {
          std::lock_guard lock(mu);
          acked.push_back({r->first_index, payload});
        }
      }
    });
  }
  std::this_thread::sleep_for(700ms);
  cluster.kill(old_leader);
  const auto killed_at = std::chrono::steady_clock::now();
  const int new_leader = cluster.wait_for_leader(10s, {old_leader});
  ASSERT_NE(new_leader, 0);
  EXPECT_NE(new_leader, old_leader);
  std::size_t acked_at_kill = 0;
  {
    std::lock_guard lock(mu);
    acked_at_kill = acked.size();
  }
  std::this_thread::sleep_for(1s);
  {
    std::lock_guard lock(mu);
    EXPECT_GT(acked.size(), acked_at_kill) << "the new leader took no writes";
  }
  const auto failover = std::chrono::steady_clock::now() - killed_at;
  EXPECT_LT(failover, 10s);

  cluster.start(old_leader);
  std::this_thread::sleep_for(1s);
  stop.store(true);
  for (auto& t : writers) t.join();
  ASSERT_GT(acked.size(), 10u);
  expect_all_nodes_hold(cluster, acked);
}

TEST(ClusterTest, StoppedFollowerCatchesUpAcrossManySegments) {
  LocalCluster cluster(cluster_options(3, 64 * 1024));
  cluster.start_all();
  const int leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0);
  const int follower = leader == 1 ? 2 : 1;
  ASSERT_EQ(cluster.stop(follower), 0) << cluster.log_tail(follower);

  auto c = cluster.client();
  std::vector<Acked> acked;
  const std::string filler(2000, 'x');
  // ~600 KiB of entries: about ten 64 KiB segments.
  for (int i = 0; i < 300; ++i) {
    const std::string payload = std::to_string(i) + ":" + filler;
    auto r = c->append({payload});
    ASSERT_TRUE(r.ok()) << r.status().message();
    acked.push_back({r->first_index, payload});
  }
  cluster.start(follower);
  expect_all_nodes_hold(cluster, acked);
}

TEST(ClusterTest, OldLeaderUncommittedTailIsTruncatedAndReplaced) {
  LocalCluster cluster(cluster_options(3));
  cluster.start_all();
  const int old_leader = cluster.wait_for_leader();
  ASSERT_NE(old_leader, 0);
  auto c = cluster.client();
  std::vector<Acked> acked;
  for (int i = 0; i < 5; ++i) {
    auto r = c->append({"before-" + std::to_string(i)});
    ASSERT_TRUE(r.ok()) << r.status().message();
    acked.push_back({r->first_index, "before-" + std::to_string(i)});
  }
  std::vector<int> followers;
  for (int id = 1; id <= 3; ++id) {
    if (id != old_leader) followers.push_back(id);
  }
  ASSERT_TRUE(cluster.wait_for_commit(followers[0], acked.back().index));
  ASSERT_TRUE(cluster.wait_for_commit(followers[1], acked.back().index));
  // Isolate the leader: its followers die, so what it appends now cannot commit. (Pausing them would
  // not do: the appends would wait in their socket buffers and be accepted when they resume.)
  for (int id : followers) cluster.kill(id);
  {
    client::Options options;
    options.retry_deadline_ms = 600;
    options.call_timeout_ms = 300;
    auto isolated = cluster.client(options, {old_leader});
    for (int i = 0; i < 3; ++i) {
      auto r = isolated->append({"orphan-" + std::to_string(i)});
      EXPECT_FALSE(r.ok()) << "an append committed without a majority";
    }
  }
  auto before = cluster.status(old_leader);
  ASSERT_TRUE(before.has_value());
  EXPECT_GT(before->last_index, acked.back().index)
      << "the isolated leader holds no uncommitted tail";
  // The old leader goes down with its tail; the others come back, elect a leader and move on.
  cluster.kill(old_leader);
  for (int id : followers) cluster.start(id);
  const int new_leader = cluster.wait_for_leader(10s, {old_leader});
  ASSERT_NE(new_leader, 0);
  auto c2 = cluster.client({}, followers);
  for (int i = 0; i < 5; ++i) {
    auto r = c2->append({"after-" + std::to_string(i)});
    ASSERT_TRUE(r.ok()) << r.status().message();
    acked.push_back({r->first_index, "after-" + std::to_string(i)});
  }
  // The old leader returns: its uncommitted tail conflicts with the new leader's entries.
  cluster.start(old_leader);
  expect_all_nodes_hold(cluster, acked);
  for (const client::Entry& e : cluster.read_all(old_leader)) {
    EXPECT_EQ(e.payload.rfind("orphan-", 0), std::string::npos)
        << "uncommitted entry survived at " << e.index;
  }
  EXPECT_NE(cluster.log_tail(old_leader, 100000).find("truncating uncommitted log tail"),
            std::string::npos)
      << cluster.log_tail(old_leader);
}

}  // namespace
}  // namespace raftlog::testing

namespace raftlog::testing {
namespace {

TEST(ClusterTest, TransferLeadershipMovesTheLeaderAndWritesContinue) {
  LocalCluster cluster(cluster_options(3));
  cluster.start_all();
  const int leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0);
  auto c = cluster.client();
  ASSERT_TRUE(c->append({"before-transfer"}).ok());
  const int target = leader == 3 ? 1 : leader + 1;
  auto transferred = c->transfer_leadership(static_cast<std::uint64_t>(target));
  ASSERT_TRUE(transferred.ok()) << transferred.status().message();
  EXPECT_EQ(transferred->leader_id, static_cast<std::uint64_t>(target));
  EXPECT_EQ(cluster.wait_for_leader(), target);
  auto after = c->append({"after-transfer"});
  ASSERT_TRUE(after.ok()) << after.status().message();
  // An unknown target is refused with a clear status.
  auto bad = c->transfer_leadership(42);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), client::StatusCode::kInvalidArgument) << bad.status().message();
}

TEST(ClusterTest, TailFollowsTheLogAcrossLeaderChangesAndNodeShutdown) {
  LocalCluster cluster(cluster_options(3));
  cluster.start_all();
  const int leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0);

  std::vector<std::uint64_t> tailed_indexes;
  std::vector<std::string> tailed_payloads;
  std::mutex mu;
  std::stop_source stop;
  // The tail starts on a follower so that stopping that follower forces a resume elsewhere.
  const int tail_node = leader == 1 ? 2 : 1;
  std::vector<int> order = {tail_node};
  for (int id = 1; id <= 3; ++id) {
    if (id != tail_node) order.push_back(id);
  }
  std::thread tailer([&] {
    client::Options options;
    for (int id : order) options.endpoints.push_back(cluster.address(id));
    auto c = client::Client::create(options);
    ASSERT_TRUE(c.ok());
    client::TailOptions tail;
    tail.from_index = 1;
    tail.stop = stop.get_token();
    tail.duration_ms = 30000;  // bound: the test stops it long before
    auto result = c.value()->tail(tail, [&](const client::Entry& e) {
      std::lock_guard lock(mu);
      tailed_indexes.push_back(e.index);
      tailed_payloads.push_back(e.payload);
      return true;
    });
    EXPECT_TRUE(result.ok()) << result.status().message();
  });

  auto c = cluster.client();
  std::vector<Acked> acked;
  auto append_some = [&](const std::string& prefix, int count) {
    for (int i = 0; i < count; ++i) {
      auto r = c->append({prefix + std::to_string(i)});
      ASSERT_TRUE(r.ok()) << r.status().message();
      acked.push_back({r->first_index, prefix + std::to_string(i)});
    }
  };
  append_some("a", 30);
  // Leadership moves away from the original leader...
  const int target = leader == 3 ? 1 : leader + 1;
  ASSERT_TRUE(c->transfer_leadership(static_cast<std::uint64_t>(target)).ok());
  append_some("b", 30);
  // ...and the node serving the tail shuts down: the client resumes on another node.
  if (cluster.wait_for_leader() != tail_node) {
    EXPECT_EQ(cluster.stop(tail_node), 0);
  }
  append_some("c", 30);
  const std::uint64_t last = acked.back().index;
  const auto deadline = std::chrono::steady_clock::now() + 15s;
  while (std::chrono::steady_clock::now() < deadline) {
    {
      std::lock_guard lock(mu);
      if (!tailed_indexes.empty() && tailed_indexes.back() >= last) break;
    }
    std::this_thread::sleep_for(20ms);
  }
  stop.request_stop();
  tailer.join();
  std::lock_guard lock(mu);
  ASSERT_FALSE(tailed_indexes.empty());
  ASSERT_GE(tailed_indexes.back(), last);
  // Gap-free, in order, no duplicates, from index 1.
  for (std::size_t i = 0; i < tailed_indexes.size(); ++i) ASSERT_EQ(tailed_indexes[i], i + 1);
  for (const Acked& a : acked) EXPECT_EQ(tailed_payloads[a.index - 1], a.payload);
}

}  // namespace
}  // namespace raftlog::testing

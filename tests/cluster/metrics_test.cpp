// Prometheus metrics of a real 3-node cluster (docs/metrics.md): every documented family is served,
// the values follow what the cluster did, peer series exist only on the leader, refusals are counted
// by reason, and `promtool check metrics` accepts the output.
#include <gtest/gtest.h>
#include <stdio.h>
#include <sys/wait.h>

#include <fstream>
#include <map>
#include <sstream>

#include "testing/http_get.h"
#include "testing/local_cluster.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;

std::string scrape(const LocalCluster& cluster, int id) {
  const auto body = http_get(cluster.metrics_address(id), "/metrics");
  EXPECT_TRUE(body.has_value()) << "no metrics from node " << id << " at "
                                << cluster.metrics_address(id);
  return body.value_or("");
}

// The value of the sample `series` (name plus labels exactly as exposed), or nullopt when absent.
std::optional<double> sample(const std::string& text, const std::string& series) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ') {
      return std::stod(line.substr(series.size() + 1));
    }
  }
  return std::nullopt;
}

// Every metric name documented in docs/metrics.md (the `raftlog_...` names in its tables).
std::vector<std::string> documented_names() {
  std::ifstream doc(std::string(RAFTLOG_SOURCE_DIR) + "/docs/metrics.md");
  EXPECT_TRUE(doc.good());
  std::stringstream text;
  text << doc.rdbuf();
  const std::string s = text.str();
  std::vector<std::string> names;
  // Table cells "| `raftlog_name` |" (std::regex is avoided: GCC 12 warns inside it under ASan).
  const std::string open = "| `raftlog_";
  for (std::size_t at = s.find(open); at != std::string::npos; at = s.find(open, at + 1)) {
    const std::size_t begin = at + 3;
    const std::size_t end = s.find('`', begin);
    if (end == std::string::npos) break;
    if (s.compare(end, 3, "` |") == 0) names.push_back(s.substr(begin, end - begin));
  }
  return names;
}

TEST(MetricsTest, ClusterExposesDocumentedMetricsThatFollowTheWork) {
  LocalClusterOptions options;
  options.raftlogd_path = RAFTLOGD_PATH;
  options.metrics = true;
  LocalCluster cluster(options);
  cluster.start_all();
  const int leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0) << cluster.log_tail(1);
  auto client = cluster.client();
  constexpr int kAppends = 20;
  for (int i = 0; i < kAppends; ++i) {
    auto result = client->append({"metric-" + std::to_string(i)});
    ASSERT_TRUE(result.ok()) << result.status().message();
  }
  // An entry over --max-entry-size is refused with a reason word.
  auto refused = client->append({std::string(options.max_entry_size_bytes + 1, 'x')});
  ASSERT_FALSE(refused.ok());
  const int follower = leader == 1 ? 2 : 1;
  ASSERT_TRUE(cluster.wait_for_commit(follower, kAppends));

  const std::string on_leader = scrape(cluster, leader);
  const std::string on_follower = scrape(cluster, follower);
  const std::string node = "node_id=\"" + std::to_string(leader) + "\"";
  const std::vector<std::string> documented = documented_names();
  EXPECT_GE(documented.size(), 30U) << "docs/metrics.md tables not found";
  for (const std::string& name : documented) {
    EXPECT_NE(on_leader.find("\n" + name), std::string::npos) << name << " missing on the leader";
  }
  EXPECT_EQ(sample(on_leader, "raftlog_raft_is_leader{" + node + "}"), 1.0);
  EXPECT_EQ(sample(on_leader, "raftlog_raft_role{" + node + ",role=\"leader\"}"), 1.0);
  EXPECT_EQ(sample(on_leader, "raftlog_appended_entries_total{" + node + "}"), kAppends);
  EXPECT_EQ(sample(on_leader, "raftlog_append_requests_total{" + node + "}"), kAppends);
  EXPECT_EQ(sample(on_leader, "raftlog_commit_latency_seconds_count{" + node + "}"), kAppends);
  // The client library sends its appends on an AppendStream call: each append counts as it is
  // answered, under that method (the long-lived call itself is not a request).
  EXPECT_EQ(sample(on_leader, "raftlog_grpc_requests_total{" + node +
                                  ",code=\"OK\",method=\"raftlog.v1.Log/AppendStream\"}"),
            kAppends);
  EXPECT_EQ(
      sample(on_leader, "raftlog_grpc_requests_total{" + node +
                            ",code=\"INVALID_ARGUMENT\",method=\"raftlog.v1.Log/AppendStream\"}"),
      1.0);
  EXPECT_EQ(sample(on_leader, "raftlog_grpc_request_duration_seconds_count{" + node +
                                  ",method=\"raftlog.v1.Log/AppendStream\"}"),
            kAppends + 1);
  EXPECT_EQ(
      sample(on_leader, "raftlog_rejected_requests_total{" + node + ",reason=\"ENTRY_TOO_LARGE\"}"),
      1.0);
  const auto commit = sample(on_leader, "raftlog_raft_commit_index{" + node + "}");
  ASSERT_TRUE(commit.has_value());
  EXPECT_GE(*commit, kAppends);
  EXPECT_GE(
      sample(on_leader, "raftlog_store_fsync_duration_seconds_count{" + node + "}").value_or(0),
      1.0);
  // Process memory: a running node holds some heap, and its anonymous part is within its resident set.
  const double resident =
      sample(on_leader, "raftlog_process_resident_memory_bytes{" + node + "}").value_or(0);
  const double anonymous =
      sample(on_leader, "raftlog_process_anonymous_memory_bytes{" + node + "}").value_or(0);
  // Under AddressSanitizer (RAFTLOG_SANITIZE, which builds this test and raftlogd alike) the heap is
  // ASan's allocator, not glibc's arenas, and mallinfo2() reports 0 bytes in use.
#if !defined(__SANITIZE_ADDRESS__)
  EXPECT_GT(sample(on_leader, "raftlog_process_heap_in_use_bytes{" + node + "}").value_or(0),
            64.0 * 1024);
#endif
  EXPECT_GT(anonymous, 0.0);
  EXPECT_LE(anonymous, resident);
  EXPECT_TRUE(sample(on_leader, "raftlog_process_heap_free_bytes{" + node + "}").has_value());
  // The leader exports one series per peer; the follower none.
  for (int peer = 1; peer <= 3; ++peer) {
    if (peer == leader) continue;
    const std::string labels = "{" + node + ",peer=\"" + std::to_string(peer) + "\"}";
    EXPECT_TRUE(sample(on_leader, "raftlog_peer_match_index" + labels).has_value()) << on_leader;
    EXPECT_TRUE(sample(on_leader, "raftlog_peer_lag_bytes" + labels).has_value());
  }
  EXPECT_EQ(on_follower.find("raftlog_peer_match_index{"), std::string::npos);
  const std::string fnode = "node_id=\"" + std::to_string(follower) + "\"";
  EXPECT_EQ(sample(on_follower, "raftlog_raft_is_leader{" + fnode + "}"), 0.0);
  EXPECT_EQ(sample(on_follower, "raftlog_raft_leader_id{" + fnode + "}"), leader);

  // promtool (Debian's prometheus package, installed by scripts/install-deps.sh) lints the format.
  const std::string file = cluster.data_dir(leader) + "/../metrics-scrape.txt";
  {
    std::ofstream out(file);
    out << on_leader;
  }
  const int rc =
      std::system(("promtool check metrics < " + file + " > " + file + ".lint 2>&1").c_str());
  std::ifstream lint(file + ".lint");
  std::stringstream lint_text;
  lint_text << lint.rdbuf();
  ASSERT_TRUE(WIFEXITED(rc)) << lint_text.str();
  EXPECT_EQ(WEXITSTATUS(rc), 0) << "promtool check metrics:\n" << lint_text.str();
}

}  // namespace
}  // namespace raftlog::testing

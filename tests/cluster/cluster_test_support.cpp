#include "cluster_test_support.h"

#include <algorithm>
#include <utility>

namespace raftlog::testing {

LocalClusterOptions small_segment_options(const std::string& raftlogd_path) {
  LocalClusterOptions options;
  options.raftlogd_path = raftlogd_path;
  options.segment_size_bytes = 64 << 10;
  options.max_entry_size_bytes = 8 << 10;
  return options;
}

LocalClusterOptions founders_options(const std::string& raftlogd_path, int nodes, int founders) {
  LocalClusterOptions options;
  options.raftlogd_path = raftlogd_path;
  options.nodes = nodes;
  options.founding_members = founders;
  return options;
}

int leader_among(LocalCluster& cluster, const std::vector<int>& ids,
                 std::chrono::milliseconds timeout) {
  int leader = 0;
  poll_until(
      [&] {
        for (int id : ids) {
          const std::optional<client::NodeStatus> status = cluster.status(id);
          if (status.has_value() && status->role == client::Role::kLeader) {
            leader = id;
            return true;
          }
        }
        return false;
      },
      timeout);
  return leader;
}

std::uint64_t append_entries(client::Client& client, int count, const std::string& tag,
                             Acknowledged* acknowledged, char filler) {
  std::uint64_t last = 0;
  for (int i = 0; i < count; ++i) {
    const std::string payload = tag + "-" + std::to_string(i) + std::string(2000, filler);
    auto result = client.append({payload});
    EXPECT_TRUE(result.ok()) << result.status().message();
    if (!result.ok()) continue;
    (*acknowledged)[result->first_index] = payload;
    last = result->last_index;
  }
  return last;
}

void expect_holds_acknowledged(LocalCluster& cluster, int id, const Acknowledged& acknowledged,
                               std::optional<std::uint64_t> from,
                               std::chrono::milliseconds commit_timeout) {
  ASSERT_FALSE(acknowledged.empty());
  ASSERT_TRUE(cluster.wait_for_commit(id, acknowledged.rbegin()->first, commit_timeout))
      << cluster.log_tail(id);
  std::uint64_t first_checked = 0;
  if (from.has_value()) {
    std::optional<client::NodeStatus> status;
    ASSERT_TRUE(poll_until([&] { return (status = cluster.status(id)).has_value(); }))
        << "node " << id << " does not answer\n"
        << cluster.log_tail(id);
    first_checked = std::max(*from, status->first_index);
  }
  Acknowledged log;
  for (const client::Entry& entry : cluster.read_all(id)) log[entry.index] = entry.payload;
  std::size_t missing = 0;
  std::size_t checked = 0;
  for (const auto& [index, payload] : acknowledged) {
    if (index < first_checked) continue;
    ++checked;
    const auto found = log.find(index);
    if (found == log.end() || found->second != payload) ++missing;
  }
  if (from.has_value()) {
    EXPECT_GT(checked, 0U) << "node " << id << " from index " << first_checked;
  }
  EXPECT_EQ(missing, 0U) << "node " << id << " lacks " << missing << " of " << checked
                         << " acknowledged entries from index " << first_checked
                         << " (its log: " << (log.empty() ? 0 : log.begin()->first) << ".."
                         << (log.empty() ? 0 : log.rbegin()->first) << ")";
}

BackgroundLoad::BackgroundLoad(LocalCluster& cluster, BackgroundLoadOptions options)
    : thread_([this, &cluster, options = std::move(options)] { run(cluster, options); }) {}

void BackgroundLoad::run(LocalCluster& cluster, const BackgroundLoadOptions& options) {
  client::Options client_options;
  for (int id : options.endpoints) client_options.endpoints.push_back(cluster.address(id));
  client_options.retry_deadline_ms = 15000;
  client_options.share_append_stream = options.share_append_stream;
  auto client = client::Client::create(client_options);
  if (!client.ok()) return;
  const auto until = std::chrono::steady_clock::now() + options.max_duration;
  // Bounded by max_appends and max_duration.
  for (int i = 0; i < options.max_appends && !stop_.load() &&
                  std::chrono::steady_clock::now() < until;
       ++i) {
    std::string payload = "load-" + std::to_string(i);
    if (options.payload_bytes > 0) {
      payload += "-";
      payload.resize(options.payload_bytes, 'l');
    }
    auto appended = client.value()->append({payload});
    {
      std::lock_guard lock(mu_);
      if (appended.ok()) {
        acknowledged_[appended->first_index] = payload;
      } else {
        ++failures_;
      }
    }
    if (options.interval.count() > 0) std::this_thread::sleep_for(options.interval);
  }
}

void BackgroundLoad::stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

Acknowledged BackgroundLoad::acknowledged() const {
  std::lock_guard lock(mu_);
  return acknowledged_;
}

std::size_t BackgroundLoad::count() const {
  std::lock_guard lock(mu_);
  return acknowledged_.size();
}

int BackgroundLoad::failures() const {
  std::lock_guard lock(mu_);
  return failures_;
}


std::uint64_t trim_until_settled(LocalCluster& cluster, client::Client& client, int id,
                                 std::uint64_t before, std::uint64_t past,
                                 std::chrono::milliseconds timeout) {
  constexpr auto kSettled = std::chrono::milliseconds(1500);
  std::uint64_t first = 0;
  auto unchanged_since = std::chrono::steady_clock::now();
  const bool settled = poll_until(
      [&] {
        auto trimmed = client.trim(cluster.address(id), before);
        const auto status = cluster.status(id);
        if (!trimmed.ok() || !status.has_value() || status->first_index != trimmed->first_index) {
          unchanged_since = std::chrono::steady_clock::now();
          return false;
        }
        if (trimmed->first_index != first) {
          first = trimmed->first_index;
          unchanged_since = std::chrono::steady_clock::now();
        }
        return first > past && std::chrono::steady_clock::now() - unchanged_since >= kSettled;
      },
      timeout + kSettled, std::chrono::milliseconds(100));
  EXPECT_GT(first, past) << "node " << id << " did not trim past " << past;
  EXPECT_TRUE(settled) << "node " << id << "'s trim still went on (first index " << first << ")";
  return first > past ? first : 0;
}

}  // namespace raftlog::testing

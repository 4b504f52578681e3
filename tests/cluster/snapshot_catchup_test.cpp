// Catching up from a snapshot over real raftlogd processes (issue 15, item 4): a follower stranded
// behind the leader's retention catches up by itself (status and health say so while it does, a
// retry of an append acknowledged before the trim is still answered from the dedup state the
// snapshot carried); a member added after retention trimmed the log catches up; kill -9 during a
// snapshot transfer or install, on the follower's side and on the leader's, leaves a cluster that
// converges with every acknowledged entry, and a follower killed mid-transfer resumes from the
// partial it kept on disk (SNAPSHOT.partial); a partial file of another cluster, or garbage, is
// dropped and the node catches up as without it. Small segments (64 KiB) so that trims cut whole segments
// quickly; the large snapshots come from many topics (each topic's next offset is snapshot state).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "client/admin.h"
#include "cluster_test_support.h"
#include "snapshot_cluster_support.h"
#include "server/snapshot_partial_file.h"
#include "shared/command_run.h"
#include "testing/http_get.h"
#include "testing/local_cluster.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;

LocalClusterOptions snapshot_cluster(int nodes = 3, int founders = 0) {
  LocalClusterOptions options;
  options.raftlogd_path = RAFTLOGD_PATH;
  options.nodes = nodes;
  options.founding_members = founders;
  options.segment_size_bytes = 64 << 10;
  options.max_entry_size_bytes = 8 << 10;
  options.metrics = true;
  // A silent follower no longer holds retention back after half a second.
  options.extra_flags = {"--retention-follower-grace-ms=500"};
  return options;
}

// `topics` distinct topics of 128-byte names (the longest), 1000 entries per append: snapshot state that takes
// several chunks (each topic's next offset travels in the snapshot).
std::uint64_t append_many_topics(client::Client& client, int topics, Acknowledged* acknowledged) {
  std::uint64_t last = 0;
  for (int first = 0; first < topics; first += 1000) {
    std::vector<std::string> payloads;
    std::vector<client::EntryAttributes> attributes;
    for (int t = first; t < std::min(topics, first + 1000); ++t) {
      std::string name = "topic-" + std::to_string(t) + "-";
      name.resize(128, 'x');
      payloads.push_back("t" + std::to_string(t));
      attributes.push_back(client::EntryAttributes{name, {}});
    }
    auto result = client.append(payloads, attributes);
    EXPECT_TRUE(result.ok()) << result.status().message();
    if (!result.ok()) continue;
    for (std::size_t i = 0; i < payloads.size(); ++i) {
      (*acknowledged)[result->first_index + i] = payloads[i];
    }
    last = result->last_index;
  }
  return last;
}

// Status calls to `id` every 100 ms until its derived indexes cover `last` (at most 240 s): how
// many answered before that, the longest time between two answers (from the first call), and the
// slowest answer.
struct StatusDuringReplay {
  std::optional<client::NodeStatus> status;  // the last answer
  int answered_during_replay = 0;
  std::chrono::milliseconds longest_gap{0};
  std::chrono::milliseconds slowest_answer{0};
};
StatusDuringReplay poll_status_during_replay(LocalCluster& cluster, int id, std::uint64_t last) {
  using Clock = std::chrono::steady_clock;
  StatusDuringReplay result;
  const auto deadline = Clock::now() + 240s;
  auto previous_answer = Clock::now();
  while (Clock::now() < deadline) {
    const auto asked = Clock::now();
    std::optional<client::NodeStatus> answer = cluster.status(id);
    const auto now = Clock::now();
    if (answer.has_value()) {
      const auto gap = std::chrono::duration_cast<std::chrono::milliseconds>(now - previous_answer);
      result.longest_gap = std::max(result.longest_gap, gap);
      result.slowest_answer =
          std::max(result.slowest_answer,
                   std::chrono::duration_cast<std::chrono::milliseconds>(now - asked));
      previous_answer = now;
      result.status = std::move(answer);
      if (result.status->derived_indexed_through >= last) break;
      ++result.answered_during_replay;
    } else {
      result.longest_gap =
          std::max(result.longest_gap,
                   std::chrono::duration_cast<std::chrono::milliseconds>(now - previous_answer));
    }
    std::this_thread::sleep_for(100ms);
  }
  return result;
}

int health_exit(int id, LocalCluster& cluster) {
  return run_command(std::string(RAFTLOGCTL_PATH) + " health --timeout-ms 2000 --endpoints " +
                     cluster.address(id))
      .exit_code;
}

// Watches `follower` until its health is SERVING with its commit index at `index` (bounded):
// whether it was seen receiving or installing a snapshot on the way.
struct CatchUp {
  bool caught_up = false;
  bool seen_in_snapshot = false;
};
CatchUp watch_catch_up(LocalCluster& cluster, int follower, std::uint64_t index) {
  CatchUp result;
  result.caught_up = poll_until(
      [&] {
        auto status = cluster.status(follower);
        if (!status.has_value()) return false;
        if (status->receiving_snapshot) result.seen_in_snapshot = true;
        return status->commit_index >= index && !status->receiving_snapshot &&
               health_exit(follower, cluster) == 0;
      },
      40s, 1ms);
  return result;
}

// The value of `name`{node_id="id"} in a Prometheus text answer, or nullopt.
std::optional<double> metric(const std::string& text, const std::string& name, int id) {
  const std::string key = name + "{node_id=\"" + std::to_string(id) + "\"} ";
  const std::size_t at = text.find(key);
  if (at == std::string::npos) return std::nullopt;
  return std::strtod(text.c_str() + at + key.size(), nullptr);
}

// Writes `bytes` as node `id`'s SNAPSHOT.partial (the node is down).
void plant_partial_file(LocalCluster& cluster, int id, const std::string& bytes) {
  std::ofstream out(cluster.data_dir(id) + "/" + std::string(server::kSnapshotPartialFileName),
                    std::ios::binary | std::ios::trunc);
  out << bytes;
}

// A well-formed partial of another cluster for node `id`: a snapshot far ahead of any log here,
// which the node would resume from if it trusted the file.
std::string another_clusters_partial(int id) {
  server::SnapshotPartialHeader header;
  header.cluster_id = "another-cluster";
  header.node_id = static_cast<raft::NodeId>(id);
  header.message.type = raft::MessageType::kSnapshot;
  header.message.from = id == 1 ? 2 : 1;
  header.message.to = header.node_id;
  header.message.term = 9;
  raft::Snapshot& snapshot = header.message.snapshot.emplace();
  snapshot.index = 1000000;
  snapshot.term = 9;
  snapshot.conf.voters = {1, 2, 3};
  const std::string data(3 << 20, 'p');
  header.place = server::SnapshotChunkPlace{0, 4 << 20, 0x12345678};
  const std::string encoded = server::encode_snapshot_partial_header(header);
  const std::uint32_t seed = server::snapshot_partial_header_crc(encoded);
  const std::string_view chunk = std::string_view(data).substr(0, 1 << 20);
  return encoded + server::encode_snapshot_partial_record(seed, 0, chunk) +
         server::encode_snapshot_partial_record(seed, 1 << 20, chunk);
}

// The checks of every acknowledged entry (expect_holds_acknowledged) start at the node's own first
// index: a follower caught up by a snapshot holds the log from the snapshot's index + 1, the
// leader's first index unless the leader fell back to a higher point
// (src/replica/replica_snapshot.cpp, "the snapshot point").

TEST(SnapshotCatchUpTest, AFollowerStrandedBehindRetentionCatchesUpByItself) {
  LocalCluster cluster(snapshot_cluster());
  cluster.start_all();
  const int leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0) << cluster.log_tail(1);
  const int follower = leader == 1 ? 2 : 1;
  auto client = cluster.client();
  Acknowledged acknowledged;

  // An idempotent append whose retry is tried after the trim and the catch-up.
  client::Options probe_options;
  probe_options.client_id = 0x5eed;
  probe_options.first_sequence = 1;
  auto probe = cluster.client(probe_options)->append({"dedup-probe"});
  ASSERT_TRUE(probe.ok()) << probe.status().message();
  acknowledged[probe->first_index] = "dedup-probe";

  ASSERT_TRUE(cluster.wait_for_commit(follower, append_entries(*client, 10, "a", &acknowledged, 'r')));
  const std::uint64_t follower_had = cluster.status(follower)->last_index;
  cluster.kill(follower);
  std::this_thread::sleep_for(800ms);  // past the follower grace
  // Topics make the snapshot several chunks long, so that its transfer and install take long
  // enough to be seen.
  append_many_topics(*client, 30000, &acknowledged);
  const std::uint64_t last = append_entries(*client, 150, "b", &acknowledged, 'r');
  const std::uint64_t first = trim_past(cluster, *client, leader, last + 1, follower_had + 1);

  // Hostile: a partial snapshot file another cluster's node left: dropped at start, counted.
  plant_partial_file(cluster, follower, another_clusters_partial(follower));
  cluster.start(follower);
  const CatchUp catch_up = watch_catch_up(cluster, follower, last);
  ASSERT_TRUE(catch_up.caught_up) << cluster.log_tail(follower) << cluster.log_tail(leader);
  // The caught-up follower replays the leader's retained entries into its derived indexes (a new
  // topic each, 30,000 of them). Its Status keeps answering meanwhile: polled throughout the
  // replay, no answer more than 2 s after the one before (one 500 ms call may time out on a
  // loaded machine). It used to answer only after more than 2 s, while the indexes held their lock
  // over each persist of a thousand new topic files.
  const StatusDuringReplay replay = poll_status_during_replay(cluster, follower, last);
  ASSERT_TRUE(replay.status.has_value() && replay.status->derived_indexed_through >= last)
      << cluster.log_tail(follower);
  if (replay.answered_during_replay == 0) {
    // Not a failure: a fast machine can finish the replay during watch_catch_up (whose own Status
    // calls then saw it); the bound above had nothing to check.
    std::cout << "the indexes were done before the first Status call: nothing measured\n";
  }
  EXPECT_LT(replay.longest_gap, 2000ms)
      << "Status did not answer for " << replay.longest_gap.count() << " ms during the replay";
  std::cout << "status during the replay: " << replay.answered_during_replay
            << " answers, the longest gap " << replay.longest_gap.count() << " ms, the slowest "
            << replay.slowest_answer.count() << " ms\n";
  const std::optional<client::NodeStatus>& status = replay.status;
  EXPECT_GE(status->snapshots_received, 1U);  // it caught up by a snapshot, not by entries
  EXPECT_EQ(status->snapshot_partial_files_dropped, 1U);
  EXPECT_EQ(status->snapshot_partials_restored, 0U);
  EXPECT_EQ(status->snapshot_bytes_restored, 0U);
  EXPECT_FALSE(std::filesystem::exists(cluster.data_dir(follower) + "/SNAPSHOT.partial"));
  EXPECT_GT(status->first_index, follower_had + 1);
  EXPECT_LE(status->first_index, last + 1);  // the snapshot covers committed entries only
  EXPECT_EQ(status->stranded_below_index, 0U);
  // Replication continues after the snapshot; the leader still holds everything from its trim.
  const std::uint64_t after = append_entries(*client, 5, "after", &acknowledged, 'r');
  ASSERT_TRUE(cluster.wait_for_commit(follower, after)) << cluster.log_tail(follower);
  expect_holds_acknowledged(cluster, follower, acknowledged, first, 30s);
  expect_holds_acknowledged(cluster, leader, acknowledged, first, 30s);
  // Its log starts where the leader's does: the follower itself serves every entry the leader
  // retains, those between the leader's first index and the commit index at the install included
  // (replicated after the install at the leader's first index - 1), not INDEX_TRIMMED.
  std::optional<client::NodeStatus> leader_status;
  ASSERT_TRUE(poll_until([&] { return (leader_status = cluster.status(leader)).has_value(); }))
      << cluster.log_tail(leader);
  EXPECT_EQ(status->first_index, leader_status->first_index);
  EXPECT_EQ(leader_status->snapshots_above_first_index, 0U);
  auto only_follower = cluster.client({}, {follower});
  std::size_t served = 0;
  for (std::uint64_t next = leader_status->first_index; next <= last;) {
    auto read = only_follower->read(next, 100, 1 << 20, false);
    ASSERT_TRUE(read.ok()) << "reading " << next << " from node " << follower << ": "
                           << read.status().message();
    ASSERT_FALSE(read->entries.empty()) << next;
    for (const client::Entry& entry : read->entries) {
      ASSERT_EQ(entry.index, next);
      const auto acked = acknowledged.find(entry.index);
      if (acked != acknowledged.end()) {
        EXPECT_EQ(entry.payload, acked->second) << entry.index;
        ++served;
      }
      ++next;
    }
  }
  EXPECT_GT(served, 0U);
  // Below its new first index the follower's log is trimmed, as the leader's is.
  auto below = only_follower->read(status->first_index - 1, 10, 1 << 20, false);
  ASSERT_FALSE(below.ok());
  EXPECT_EQ(below.status().code(), client::StatusCode::kOutOfRange) << below.status().message();
  // On the way it was NOT_SERVING (stranded, receiving or installing), and said so.
  const std::string log = cluster.log_tail(follower, 1 << 20);
  EXPECT_TRUE(log.find("NOT_SERVING (stranded") != std::string::npos ||
              log.find("NOT_SERVING (receiving a snapshot") != std::string::npos ||
              log.find("NOT_SERVING (installing a snapshot") != std::string::npos ||
              catch_up.seen_in_snapshot)
      << log;
  // raftlogctl status --json says how it caught up.
  const CommandRun json =
      run_command(std::string(RAFTLOGCTL_PATH) + " status --json --timeout-ms 2000 --endpoints " +
                  cluster.address(follower));
  EXPECT_EQ(json.out.find("\"snapshots_received\":0,"), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"receiving_snapshot\":null"), std::string::npos) << json.out;
  const auto metrics = http_get(cluster.metrics_address(follower), "/metrics");
  ASSERT_TRUE(metrics.has_value());
  EXPECT_NE(metrics->find("raftlog_node_snapshot_receiving{node_id=\"" + std::to_string(follower) +
                          "\"} 0"),
            std::string::npos);
  EXPECT_EQ(metrics->find("raftlog_snapshots_received_total{node_id=\"" + std::to_string(follower) +
                          "\"} 0"),
            std::string::npos);

  // The retry of the append acknowledged before the trim, answered by the caught-up follower as
  // leader from the dedup state its snapshot carried: the original index, not a second copy.
  auto transferred = client->transfer_leadership(static_cast<std::uint64_t>(follower));
  ASSERT_TRUE(transferred.ok()) << transferred.status().message();
  ASSERT_TRUE(poll_until([&] {
    auto now = cluster.status(follower);
    return now.has_value() && now->role == client::Role::kLeader;
  }));
  auto retried = cluster.client(probe_options, {follower})->append({"dedup-probe"});
  ASSERT_TRUE(retried.ok()) << retried.status().message();
  EXPECT_EQ(retried->first_index, probe->first_index);
  EXPECT_TRUE(retried->duplicate);
}

TEST(SnapshotCatchUpTest, AMemberAddedAfterRetentionCatchesUp) {
  LocalCluster cluster(snapshot_cluster(4, 3));
  cluster.start_all();
  const int leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0) << cluster.log_tail(1);
  auto client = cluster.client({}, {1, 2, 3});
  Acknowledged acknowledged;
  const std::uint64_t last = append_entries(*client, 150, "c", &acknowledged, 'r');
  std::uint64_t first = 0;
  for (int id = 1; id <= 3; ++id) {
    ASSERT_TRUE(cluster.wait_for_commit(id, last));
    const std::uint64_t trimmed = trim_past(cluster, *client, id, last + 1, 20);
    if (id == leader) first = trimmed;
  }

  client::Options members_options;
  for (int id = 1; id <= 3; ++id) members_options.endpoints.push_back(cluster.address(id));
  members_options.retry_deadline_ms = 30000;
  members_options.call_timeout_ms = 30000;
  auto members = client::MembersClient::create(members_options);
  ASSERT_TRUE(members.ok());
  auto added = members.value()->add(4, cluster.address(4), /*learner=*/true);
  ASSERT_TRUE(added.ok()) << added.status().to_string() << cluster.log_tail(4);
  auto promoted = members.value()->promote_when_caught_up(4, 30000);
  ASSERT_TRUE(promoted.ok()) << promoted.status().to_string() << cluster.log_tail(4)
                             << cluster.log_tail(leader);
  const std::uint64_t after = append_entries(*client, 5, "d", &acknowledged, 'r');
  const CatchUp catch_up = watch_catch_up(cluster, 4, after);
  ASSERT_TRUE(catch_up.caught_up) << cluster.log_tail(4);
  auto status = cluster.status(4);
  ASSERT_TRUE(status.has_value());
  EXPECT_GE(status->snapshots_received, 1U);
  EXPECT_GT(status->first_index, 1U);
  expect_holds_acknowledged(cluster, 4, acknowledged, first, 30s);
  expect_holds_acknowledged(cluster, leader, acknowledged, first, 30s);
}

// The snapshot a stranded follower needs, made large (tens of thousands of topics) so that its
// transfer takes several chunks; then `kill_side` is killed with -9 while the transfer or the
// install is seen in flight (or, when the machine was too quick to see it, as soon as the follower
// started). Afterwards every node converges on every acknowledged entry. The follower is killed
// while it is seen receiving, part of the data held (stopped at once with SIGSTOP, then killed): its
// restart resumes from the partial it kept on disk, and the leader sends only the rest. Before the
// leader's kill, the follower's data directory gets a garbage SNAPSHOT.partial: dropped at start.
enum class KillSide { kFollower, kLeader };

// The restarted `follower` restored the partial it held when killed (its SNAPSHOT.partial held at
// least a chunk of data), and `leader` (the same node throughout) resumed its transfer after the
// receipt instead of sending everything again.
void expect_resumed_from_disk(LocalCluster& cluster, int follower, int leader) {
  std::optional<client::NodeStatus> restarted = cluster.status(follower);
  std::optional<client::NodeStatus> leading = cluster.status(leader);
  ASSERT_TRUE(restarted.has_value() && leading.has_value());
  std::cout << "the follower restored " << restarted->snapshot_bytes_restored
            << " bytes; the leader resumed " << leading->snapshots_resumed << " transfer(s), "
            << leading->snapshot_bytes_skipped << " bytes not resent" << std::endl;
  EXPECT_EQ(restarted->snapshot_partials_restored, 1U) << cluster.log_tail(follower, 3000);
  EXPECT_GE(restarted->snapshot_bytes_restored, std::uint64_t{1} << 20);
  EXPECT_EQ(restarted->snapshot_partial_files_dropped, 0U);
  EXPECT_EQ(restarted->snapshot_chunks_refused, 0U);
  EXPECT_EQ(leading->role, client::Role::kLeader) << cluster.log_tail(leader, 3000);
  EXPECT_GE(leading->snapshots_resumed, 1U) << cluster.log_tail(leader, 3000);
  EXPECT_GE(leading->snapshot_bytes_skipped, restarted->snapshot_bytes_restored);
  EXPECT_FALSE(std::filesystem::exists(cluster.data_dir(follower) + "/SNAPSHOT.partial"));
  const auto metrics = http_get(cluster.metrics_address(follower), "/metrics");
  ASSERT_TRUE(metrics.has_value());
  EXPECT_EQ(metric(*metrics, "raftlog_snapshot_partial_bytes_restored_total", follower),
            static_cast<double>(restarted->snapshot_bytes_restored));
  const CommandRun json =
      run_command(std::string(RAFTLOGCTL_PATH) + " status --json --timeout-ms 2000 --endpoints " +
                  cluster.address(follower));
  EXPECT_NE(json.out.find("\"snapshot_bytes_restored\":" +
                          std::to_string(restarted->snapshot_bytes_restored)),
            std::string::npos)
      << json.out;
}

void kill_during_install(KillSide kill_side) {
  const auto started = std::chrono::steady_clock::now();
  const auto phase = [&](const char* what) {
    std::cout << what << " after "
              << std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::steady_clock::now() - started)
                     .count()
              << " ms" << std::endl;
  };
  LocalClusterOptions options = snapshot_cluster();
  // The follower's resume needs the same leader (its encoding) before and after the restart: an
  // election timeout of 1-2 s keeps a loaded machine's stalls from changing it.
  if (kill_side == KillSide::kFollower) options.extra_flags.push_back("--election-ticks=50");
  LocalCluster cluster(options);
  cluster.start_all();
  const int leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0) << cluster.log_tail(1);
  const int follower = leader == 1 ? 2 : 1;
  const int other = 6 - leader - follower;
  auto client = cluster.client();
  Acknowledged acknowledged;
  ASSERT_TRUE(cluster.wait_for_commit(follower, append_entries(*client, 5, "e", &acknowledged, 'r')));
  const std::uint64_t follower_had = cluster.status(follower)->last_index;
  cluster.kill(follower);
  std::this_thread::sleep_for(800ms);
  const std::uint64_t topics_end = append_many_topics(*client, 30000, &acknowledged);
  const std::uint64_t last = append_entries(*client, 60, "f", &acknowledged, 'r');
  ASSERT_TRUE(cluster.wait_for_commit(other, last));
  // Both remaining nodes trim, so whichever leads after a kill needs a snapshot for the follower.
  // For the follower's kill, past the topics: their table makes the snapshot several chunks long
  // (a trim that stopped short of them makes one small enough for a single message). The trim
  // waits for the consumer group table's retention hold, which follows the derived indexes'
  // progress through the 30,000 new topics: minutes on a loaded machine.
  const bool past_topics = kill_side == KillSide::kFollower;
  const std::uint64_t past = past_topics ? topics_end : follower_had + 1;
  const std::chrono::milliseconds trim_timeout = past_topics ? 300s : 10s;
  const std::uint64_t first = trim_past(cluster, *client, leader, last + 1, past, trim_timeout);
  trim_past(cluster, *client, other, last + 1, past, trim_timeout);
  phase("trimmed");

  if (kill_side == KillSide::kLeader)
    plant_partial_file(cluster, follower, "garbage, not a partial");
  cluster.start(follower);
  // In flight: the follower receives or installs it, so the leader's transfer is not acknowledged
  // yet either (polling the follower alone: a second status call per round made the window of a
  // few hundred milliseconds easy to miss). The follower's kill waits for it to hold part of the
  // data: its SNAPSHOT.partial holds a whole chunk (the file exists only while the partial is not
  // complete; a local stat every millisecond sees it where a Status call on a loaded machine did
  // not), and it is stopped at once (SIGSTOP: the chunks after it are not reassembled), then killed.
  bool in_flight = false;
  std::uint64_t partial_file_bytes = 0;
  if (kill_side == KillSide::kLeader) {
    poll_until(
        [&] {
          auto on_follower = cluster.status(follower);
          in_flight = on_follower.has_value() && on_follower->receiving_snapshot.has_value();
          return in_flight;
        },
        10s, 1ms);
  } else {
    const std::string partial =
        cluster.data_dir(follower) + "/" + std::string(server::kSnapshotPartialFileName);
    poll_until(
        [&] {
          std::error_code error;
          const std::uintmax_t size = std::filesystem::file_size(partial, error);
          if (error || size <= (1U << 20)) return false;
          cluster.pause(follower);
          partial_file_bytes = size;
          return in_flight = true;
        },
        30s, 1ms);
  }
  const int victim = kill_side == KillSide::kFollower ? follower : leader;
  cluster.kill(victim);
  std::cout << "killed node " << victim
            << (in_flight ? " with a snapshot in flight" : " (no snapshot seen in flight)");
  if (partial_file_bytes > 0)
    std::cout << ", its SNAPSHOT.partial " << partial_file_bytes << " bytes long";
  std::cout << std::endl;
  EXPECT_TRUE(in_flight) << "the snapshot was never seen in flight: the kill tested nothing\n"
                         << cluster.log_tail(follower, 3000) << cluster.log_tail(leader, 3000);
  cluster.start(victim);
  phase("restarted");

  // Every node converges (SERVING, caught up), then appends continue through whoever leads, and
  // every node holds every acknowledged entry from its own first index on.
  auto after_client = cluster.client();
  const std::uint64_t after = append_entries(*after_client, 5, "g", &acknowledged, 'r');
  for (int id = 1; id <= 3; ++id) {
    const CatchUp catch_up = watch_catch_up(cluster, id, after);
    ASSERT_TRUE(catch_up.caught_up) << "node " << id << "\n" << cluster.log_tail(id);
  }
  phase("converged");
  const std::uint64_t final_index = append_entries(*after_client, 5, "h", &acknowledged, 'r');
  for (int id = 1; id <= 3; ++id) {
    ASSERT_TRUE(cluster.wait_for_commit(id, final_index, 20s)) << cluster.log_tail(id);
    expect_holds_acknowledged(cluster, id, acknowledged, first, 30s);
  }
  // The node that never went down kept everything from its trim point on.
  expect_holds_acknowledged(cluster, other, acknowledged, first, 30s);
  if (kill_side == KillSide::kFollower) {
    expect_resumed_from_disk(cluster, follower, leader);
  } else {
    const std::optional<client::NodeStatus> status = cluster.status(follower);
    ASSERT_TRUE(status.has_value());
    EXPECT_EQ(status->snapshot_partial_files_dropped, 1U);  // the garbage
    EXPECT_EQ(status->snapshot_partials_restored, 0U);
  }
}

TEST(SnapshotCatchUpTest, KillNineOfTheFollowerDuringATransferResumesFromDiskAndConverges) {
  kill_during_install(KillSide::kFollower);
}

TEST(SnapshotCatchUpTest, KillNineOfTheLeaderDuringAnInstallConverges) {
  kill_during_install(KillSide::kLeader);
}

// The leader is killed while the follower holds part of its snapshot. Both remaining nodes trimmed
// by the same request over the same segment layout, and the retention hold keeps a follower's trim
// with its leader's, so the new leader's snapshot point is the old one's. The new leader then either
// resumes from the follower's receipt, when its encoding happens to be byte-identical (what this
// quiet cluster gave in the runs of 2026-12-06: one client, no group commits, no appends after the
// trim), or continues the follower's framed partial after its last complete block (another
// encoding), or sends from 0 and counts the miss: reason "bytes" or "head" at the same point,
// "point" when the points differ, never "beyond_sent" (also when the new leader had led during the
// trims and queued the same data for the follower while it was down: a later term trusts the
// receipt) and never "digest". The follower converges, with every acknowledged entry.
TEST(SnapshotCatchUpTest, ALeaderChangeMidTransferResumesOnlyIdenticalBytesAndCountsMissesByReason) {
  LocalCluster cluster(snapshot_cluster());
  Acknowledged acknowledged;
  const StrandedFollower stranded = strand_a_follower(cluster, &acknowledged);
  ASSERT_NE(stranded.first_leader, 0);
  const int first_leader = stranded.first_leader;
  const int follower = stranded.follower;
  client::Client* client = stranded.client.get();
  // 90,000 topics: a topic table of about 13 MB, well beyond the 4 MiB of chunks a leader has in
  // flight, so that the leader's death leaves the follower with a partial (30,000 topics, about
  // 4 MB, all in flight at once, reached the follower whole).
  const std::uint64_t topics_end = append_many_topics(*client, 90000, &acknowledged);
  const std::uint64_t last = append_entries(*client, 60, "f", &acknowledged);
  const int second = stranded.second;
  ASSERT_TRUE(cluster.wait_for_commit(second, last));
  // Past the topics: their table makes the snapshot several chunks long.
  const std::uint64_t first = trim_past(cluster, *client, first_leader, last + 1, topics_end, 300s);
  trim_past(cluster, *client, second, last + 1, topics_end, 300s);
  // A trim of many segments can cost its node the leadership (docs/design.md, "Known limits"):
  // whoever leads now sends the snapshot, and is the one killed.
  const int leader = cluster.wait_for_leader();
  ASSERT_TRUE(leader == first_leader || leader == second) << "leader " << leader;
  const int other = 6 - leader - follower;
  const std::uint64_t leader_first = cluster.status(leader)->first_index;
  const std::uint64_t other_first = cluster.status(other)->first_index;
  std::cout << "first index: leader " << leader_first << ", other " << other_first << std::endl;

  cluster.start(follower);
  // The follower holds a whole chunk of the leader's snapshot: the leader is killed then.
  const bool in_flight = kill_leader_mid_transfer(cluster, follower, leader, 1U << 20, 30s) > 0;
  ASSERT_TRUE(in_flight) << "the snapshot was never seen in flight: the kill tested nothing\n"
                         << cluster.log_tail(follower, 3000) << cluster.log_tail(leader, 3000);
  const int new_leader = other;
  ASSERT_TRUE(wait_until_leading(cluster, new_leader)) << cluster.log_tail(new_leader);
  const CatchUp catch_up = watch_catch_up(cluster, follower, last);
  ASSERT_TRUE(catch_up.caught_up) << cluster.log_tail(follower) << cluster.log_tail(new_leader);

  const auto metrics = http_get(cluster.metrics_address(new_leader), "/metrics");
  ASSERT_TRUE(metrics.has_value());
  std::map<std::string, double> missed;
  for (const char* reason : {"point", "bytes", "beyond_sent", "head", "continuation", "digest"}) {
    const std::string key = "raftlog_snapshot_resume_missed_total{node_id=\"" +
                            std::to_string(new_leader) + "\",reason=\"" + reason + "\"} ";
    const std::size_t at = metrics->find(key);
    ASSERT_NE(at, std::string::npos) << key;
    missed[reason] = std::strtod(metrics->c_str() + at + key.size(), nullptr);
    std::cout << "resume missed (" << reason << "): " << missed[reason] << std::endl;
  }
  const std::optional<client::NodeStatus> leading = cluster.status(new_leader);
  ASSERT_TRUE(leading.has_value());
  std::cout << "the new leader resumed " << leading->snapshots_resumed << " transfer(s), "
            << leading->snapshot_bytes_skipped << " bytes not resent, continued "
            << leading->snapshots_continued << " (" << leading->snapshot_resume_saved_bytes
            << " bytes kept)" << std::endl;
  if (const std::optional<client::NodeStatus> f = cluster.status(follower)) {
    std::cout << "the follower: " << f->snapshot_partials_restored << " partial(s) restored, "
              << f->snapshot_partials_continued << " continued by a new sender, "
              << f->snapshot_partials_spliced << " spliced, " << f->snapshot_splices_refused
              << " splices refused, " << f->snapshot_chunks_refused << " chunks refused"
              << std::endl;
  }
  // The receipt reached the new leader: it resumed (identical bytes), continued the partial after
  // its last complete block (framed data of another encoding: docs/design.md, "Snapshot
  // transfer", *A new leader continues*), or counted why not.
  EXPECT_GE(missed["point"] + missed["bytes"] + missed["head"] + missed["continuation"] +
                static_cast<double>(leading->snapshots_resumed + leading->snapshots_continued),
            1.0)
      << cluster.log_tail(new_leader, 3000);
  EXPECT_EQ(missed["digest"], 0.0) << "both nodes of this build name the data's digest";
  if (leader_first == other_first) {
    EXPECT_EQ(missed["point"], 0.0) << "the same point: only the bytes can differ";
  } else {
    EXPECT_GE(missed["point"], 1.0) << cluster.log_tail(new_leader, 3000);
  }
  EXPECT_EQ(missed["beyond_sent"], 0.0);

  expect_all_converge(cluster, leader, acknowledged, first, 5, ConvergeTimeouts{20s, 20s});
}

}  // namespace
}  // namespace raftlog::testing

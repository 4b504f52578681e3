// Storage faults on real processes (issue 13, item 4): a byte flipped in a follower's synced entries,
// after it acknowledged them. Before, recovery cut the log there as a torn tail and the node aborted
// on the leader's next heartbeat at every restart (commit index beyond the last log index); or,
// with the flip mid-log behind many sealed entries, it started, reported SERVING and failed every read
// covering the entry with INTERNAL. Now the node repairs the range from its peers: every acknowledged
// entry is on every node afterwards, byte for byte.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "cluster_test_support.h"
#include "testing/local_cluster.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;

std::string payload_of(std::uint64_t i) {
  return "storage-fault-entry-" + std::to_string(i) + std::string(600, 'x');
}

// Appends `count` entries through the leader; returns their indexes (acknowledged, so committed).
std::vector<std::uint64_t> append_entries(LocalCluster& cluster, std::uint64_t count) {
  auto client = cluster.client();
  std::vector<std::uint64_t> indexes;
  for (std::uint64_t i = 1; i <= count; ++i) {
    auto result = client->append({payload_of(i)});
    EXPECT_TRUE(result.ok()) << result.status().message();
    if (!result.ok()) break;
    indexes.push_back(result->first_index);
  }
  return indexes;
}

// Flips one payload byte of the entry holding `needle` in the node's segment files (the node is down).
void flip_byte_of(const std::string& data_dir, const std::string& needle) {
  for (const auto& file : std::filesystem::directory_iterator(data_dir + "/log")) {
    // Not an old segment an install set aside (discard-*: the next open removes it unread).
    if (file.path().extension() != ".seg" ||
        file.path().filename().string().starts_with("discard-")) {
      continue;
    }
    std::fstream io(file.path(), std::ios::in | std::ios::out | std::ios::binary);
    std::string bytes(static_cast<std::size_t>(std::filesystem::file_size(file.path())), '\0');
    io.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    const std::size_t at = bytes.find(needle + "x");  // the needle's own entry, not a longer number
    if (at == std::string::npos) continue;
    io.seekp(static_cast<std::streamoff>(at + needle.size() + 10));
    io.put(static_cast<char>(bytes[at + needle.size() + 10] ^ 0x20));
    return;
  }
  FAIL() << needle << " not found under " << data_dir;
}

// Every acknowledged entry, at its index, with its payload, on every node.
void expect_every_node_holds(LocalCluster& cluster, const std::vector<std::uint64_t>& indexes) {
  for (int id = 1; id <= cluster.size(); ++id) {
    ASSERT_TRUE(cluster.wait_for_commit(id, indexes.back(), 20s)) << "node " << id << "\n"
                                                                  << cluster.log_tail(id);
    const std::vector<client::Entry> log = cluster.read_all(id);
    std::map<std::uint64_t, std::string> by_index;
    for (const client::Entry& e : log) by_index[e.index] = e.payload;
    for (std::size_t i = 0; i < indexes.size(); ++i) {
      ASSERT_EQ(by_index[indexes[i]], payload_of(i + 1))
          << "node " << id << " index " << indexes[i];
    }
  }
}

// Starts the cluster, appends `count` entries, waits until a follower holds them all; returns that
// follower (0 on failure, with the test failed).
int fill_and_pick_follower(LocalCluster& cluster, std::uint64_t count,
                           std::vector<std::uint64_t>* indexes) {
  cluster.start_all();
  const int leader = cluster.wait_for_leader();
  EXPECT_NE(leader, 0);
  if (leader == 0) return 0;
  *indexes = append_entries(cluster, count);
  EXPECT_EQ(indexes->size(), count);
  const int follower = leader == 1 ? 2 : 1;
  EXPECT_TRUE(!indexes->empty() && cluster.wait_for_commit(follower, indexes->back(), 10s));
  return ::testing::Test::HasFailure() ? 0 : follower;
}

// Stops the follower with kill -9 and flips a byte of the entry holding `needle` in its segments;
// with `wait_for_checkpoint` first lets a checkpoint (every second) cover everything it holds.
void kill_and_flip(LocalCluster& cluster, int follower, const std::string& needle,
                   bool wait_for_checkpoint) {
  if (wait_for_checkpoint) std::this_thread::sleep_for(1500ms);
  cluster.kill(follower);
  flip_byte_of(cluster.data_dir(follower), needle);
}

// The flipped entry lies in data recovery treats as the tail (not yet covered by a checkpoint) or
// inside checkpointed data, depending on timing: both must end with the node repaired.
void flipped_byte_in_acknowledged_entries(bool wait_for_checkpoint) {
  LocalClusterOptions options;
  options.raftlogd_path = RAFTLOGD_PATH;
  LocalCluster cluster(options);
  std::vector<std::uint64_t> indexes;
  const int follower = fill_and_pick_follower(cluster, 60, &indexes);
  ASSERT_NE(follower, 0);
  ASSERT_NO_FATAL_FAILURE(
      kill_and_flip(cluster, follower, "storage-fault-entry-50", wait_for_checkpoint));
  cluster.start(follower);
  // Before the fix the follower aborted here on the leader's first heartbeat.
  std::this_thread::sleep_for(2s);
  ASSERT_TRUE(cluster.running(follower) && !cluster.wait_for_exit(follower, 1ms).has_value())
      << "the follower stopped\n"
      << cluster.log_tail(follower);
  expect_every_node_holds(cluster, indexes);
  const auto status = cluster.status(follower);
  ASSERT_TRUE(status.has_value());
  EXPECT_FALSE(status->catching_up) << "caught up with the leader's log";
  // New appends still commit with the repaired follower in the quorum.
  const std::vector<std::uint64_t> more = append_entries(cluster, 5);
  EXPECT_EQ(more.size(), 5u);
}

TEST(StorageFault, FlippedByteInTheTailAFollowerAcknowledgedIsRepairedFromTheLeader) {
  flipped_byte_in_acknowledged_entries(/*wait_for_checkpoint=*/false);
}

TEST(StorageFault, FlippedByteInCheckpointedEntriesIsRepairedFromTheLeader) {
  flipped_byte_in_acknowledged_entries(/*wait_for_checkpoint=*/true);
}

// The same repair on a trimmed log (outside test finding F3). A clean stop saves TOPICSTATE up to
// the last entry; the flipped entry is cut at the next start, which left TOPICSTATE ahead of the
// log: on a log that starts at 1 the table was rebuilt from it, on a trimmed one the node refused
// to start ("the offsets of the trimmed entries cannot be recovered") instead of repairing the cut
// entry from its peers. SNAPSHOT, which the trim wrote, holds the table as of the first index - 1.
TEST(StorageFault, FlippedByteOnATrimmedLogIsRepairedFromTheLeader) {
  LocalCluster cluster(small_segment_options(RAFTLOGD_PATH));  // about 90 entries a segment
  std::vector<std::uint64_t> indexes;
  const int follower = fill_and_pick_follower(cluster, 300, &indexes);
  ASSERT_NE(follower, 0);
  auto client = cluster.client();
  for (int id = 1; id <= cluster.size(); ++id) {
    auto trimmed = client->trim(cluster.address(id), indexes[200]);
    ASSERT_TRUE(trimmed.ok()) << trimmed.status().message();
  }
  // A trim answers before its deletion has run (it follows over the node's next loop rounds):
  // the follower's log must start past 1 before it stops.
  ASSERT_TRUE(poll_until([&] {
    const auto status = cluster.status(follower);
    return status.has_value() && status->first_index > 1;
  })) << "the trim removed no segment of the follower";
  ASSERT_EQ(cluster.stop(follower), 0) << cluster.log_tail(follower);
  ASSERT_NO_FATAL_FAILURE(flip_byte_of(cluster.data_dir(follower), "storage-fault-entry-300"));
  cluster.start(follower);
  std::this_thread::sleep_for(2s);
  ASSERT_TRUE(cluster.running(follower) && !cluster.wait_for_exit(follower, 1ms).has_value())
      << "the follower stopped\n"
      << cluster.log_tail(follower);
  for (int id = 1; id <= cluster.size(); ++id) {
    ASSERT_TRUE(cluster.wait_for_commit(id, indexes.back(), 20s)) << "node " << id << "\n"
                                                                  << cluster.log_tail(id);
    // Every acknowledged entry from where the node's log starts now (its trim may have gone on
    // after the answer, and the follower's stop finishes a deletion under way).
    const auto status = cluster.status(id);
    ASSERT_TRUE(status.has_value()) << "node " << id;
    if (id == follower) {
      EXPECT_GT(status->first_index, 1U) << "the repair undid the trim";
    }
    std::map<std::uint64_t, std::string> by_index;
    for (const client::Entry& e : cluster.read_all(id)) by_index[e.index] = e.payload;
    ASSERT_FALSE(by_index.empty()) << "node " << id;
    EXPECT_EQ(by_index.begin()->first, status->first_index) << "node " << id;
    for (std::size_t i = 0; i < indexes.size(); ++i) {
      if (indexes[i] < status->first_index) continue;  // trimmed on this node
      ASSERT_EQ(by_index[indexes[i]], payload_of(i + 1)) << "node " << id << " index " << indexes[i];
    }
  }
  const std::vector<std::uint64_t> more = append_entries(cluster, 5);
  EXPECT_EQ(more.size(), 5u);
}

// A byte flipped in a sealed segment with many entries after it: recovery only spot-checks sealed
// segments, so the node starts. A read covering the entry fails with DATA_LOSS (never the bad bytes),
// the background scrub finds it too, and the node stops; the next start verifies that segment in full,
// cuts the log there and repairs it from the leader.
TEST(StorageFault, CorruptionInTheMiddleOfTheLogIsFoundNeverServedAndRepaired) {
  LocalCluster cluster(small_segment_options(RAFTLOGD_PATH));  // about 90 entries a segment
  std::vector<std::uint64_t> indexes;
  const int follower = fill_and_pick_follower(cluster, 400, &indexes);
  ASSERT_NE(follower, 0);
  // A graceful stop saves TOPICSTATE as of the commit index, so later starts read the log only from
  // there (besides the dedup window): without it the open's scan reads the whole log, finds entry 30
  // itself and repairs it before any read, which this test's read and scrub cases do not exercise.
  cluster.stop(follower);
  cluster.start(follower);
  ASSERT_TRUE(cluster.wait_for_commit(follower, indexes.back(), 10s)) << cluster.log_tail(follower);
  // Checkpointed: the first segments are sealed and trusted.
  ASSERT_NO_FATAL_FAILURE(
      kill_and_flip(cluster, follower, "storage-fault-entry-30", /*wait_for_checkpoint=*/true));
  // The start-up read of the idempotency window (checked) covers only the last 100 entries here, as
  // the default million would leave entry 30 outside it in a longer log; the scrub is off for now.
  cluster.set_node_flags(follower, {"--dedup-rebuild-entries=100", "--scrub-bytes-per-second=0"});
  cluster.start(follower);
  ASSERT_TRUE(cluster.wait_for_commit(follower, indexes.back(), 10s)) << cluster.log_tail(follower);

  // A read of the corrupt entry from that node alone fails; the bad bytes are never served.
  auto only_follower = cluster.client({}, {follower});
  auto read = only_follower->read(indexes[29], 5, 0, /*linearizable=*/false);
  ASSERT_FALSE(read.ok()) << "read " << read->entries.size() << " entries";
  EXPECT_EQ(read.status().code(), client::StatusCode::kDataLoss) << read.status().message();
  EXPECT_NE(read.status().message().find("checksum"), std::string::npos) << read.status().message();
  only_follower.reset();
  // The node stops itself (a supervisor restarts it) rather than keep a corrupt replica, and its next
  // start cuts the log at the entry and repairs the rest from the leader.
  const auto exit_code = cluster.wait_for_exit(follower, 10s);
  ASSERT_TRUE(exit_code.has_value()) << cluster.log_tail(follower);
  EXPECT_NE(*exit_code, 0);
  cluster.start(follower);
  expect_every_node_holds(cluster, indexes);

  // The background scrub finds such an entry by itself (TOPICSTATE saved again by a graceful stop,
  // as above, so that the open's scan does not reach entry 200 first).
  cluster.stop(follower);
  cluster.start(follower);
  ASSERT_TRUE(cluster.wait_for_commit(follower, indexes.back(), 10s)) << cluster.log_tail(follower);
  ASSERT_NO_FATAL_FAILURE(
      kill_and_flip(cluster, follower, "storage-fault-entry-200", /*wait_for_checkpoint=*/true));
  cluster.set_node_flags(follower,
                         {"--dedup-rebuild-entries=100", "--scrub-bytes-per-second=64MiB"});
  cluster.start(follower);
  const auto scrub_exit = cluster.wait_for_exit(follower, 20s);
  ASSERT_TRUE(scrub_exit.has_value()) << "the scrub did not find entry 200\n"
                                      << cluster.log_tail(follower);
  EXPECT_NE(cluster.log_tail(follower).find("is corrupt"), std::string::npos)
      << cluster.log_tail(follower);

  cluster.set_node_flags(follower, {});
  cluster.start(follower);
  expect_every_node_holds(cluster, indexes);
  EXPECT_TRUE(cluster.running(follower)) << cluster.log_tail(follower);
}

// drills6 H1 on real processes: five nodes; nodes A and B stopped; an append acknowledged by the
// leader and two followers; the leader and one of those followers go down; the other follower (W)
// loses its data directory (or only DATA_DIR/log, drills6 H1's second repro: HARDSTATE with its term,
// TOPICSTATE, CONFSTATE and IDENTITY kept) and restarts under its id; A and B come back. Before the
// unvouched guard W voted at once, A or B won with {A, B, W} and the acknowledged entry's index was
// reused by a no-op. Now no leader arises among {A, B, W}, W says why, and once a holder is back the
// entry is on every node and W is caught up.
void lose_a_holders_log_and_check_the_append_survives(bool only_the_log_directory) {
  LocalClusterOptions options;
  options.raftlogd_path = RAFTLOGD_PATH;
  options.nodes = 5;
  LocalCluster cluster(options);
  cluster.start_all();
  const int leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0);
  std::vector<int> others;
  for (int id = 1; id <= 5; ++id) {
    if (id != leader) others.push_back(id);
  }
  const int a = others[0], b = others[1], wiped = others[2], holder = others[3];
  cluster.stop(a);
  cluster.stop(b);
  auto client = cluster.client({}, {leader});
  auto appended = client->append({"AMNESIA-MARKER" + std::string(100, 'a')});
  ASSERT_TRUE(appended.ok()) << appended.status().message();
  const std::uint64_t index = appended->first_index;
  ASSERT_TRUE(cluster.wait_for_commit(wiped, index, 10s));
  cluster.kill(leader);
  cluster.stop(holder);
  cluster.stop(wiped);
  const std::filesystem::path lost = only_the_log_directory
                                         ? std::filesystem::path(cluster.data_dir(wiped)) / "log"
                                         : std::filesystem::path(cluster.data_dir(wiped));
  ASSERT_TRUE(std::filesystem::exists(lost)) << lost;
  std::filesystem::remove_all(lost);
  // A wholly lost directory asks a, b and the others first (the founding check, found6): started
  // before a and b here, nobody answers, and it founds. Whether a or b opened its port in time is
  // timing; the guard this test is about lies past the check, so the check is skipped.
  if (!only_the_log_directory) cluster.set_node_flags(wiped, {"--skip-founding-check"});
  cluster.start(wiped);
  cluster.start(a);
  cluster.start(b);
  // Several election timeouts: without the guard a leader was elected within about one.
  EXPECT_EQ(leader_among(cluster, {a, b, wiped}, 6s), 0)
      << "a leader without any node that held the acknowledged entry\n"
      << cluster.log_tail(wiped);
  const auto waiting = cluster.status(wiped);
  ASSERT_TRUE(waiting.has_value());
  EXPECT_TRUE(waiting->unvouched);
  cluster.start(holder);
  ASSERT_NE(leader_among(cluster, {a, b, wiped, holder}, 20s), 0);
  for (int id : {a, b, wiped, holder}) {
    ASSERT_TRUE(cluster.wait_for_commit(id, index, 20s)) << "node " << id << "\n"
                                                         << cluster.log_tail(id);
    std::string payload;
    for (const client::Entry& e : cluster.read_all(id)) {
      if (e.index == index) payload = e.payload;
    }
    EXPECT_EQ(payload, "AMNESIA-MARKER" + std::string(100, 'a')) << "node " << id;
  }
  EXPECT_TRUE(poll_until([&] {
    const auto status = cluster.status(wiped);
    return status.has_value() && !status->unvouched;
  })) << cluster.log_tail(wiped);
}

TEST(StorageFault, LostDataDirectoryUnderTheSameIdDoesNotHelpLoseAnAcknowledgedAppend) {
  lose_a_holders_log_and_check_the_append_survives(/*only_the_log_directory=*/false);
}

// Review amnesia H1: only DATA_DIR/log lost; the node used to log that TOPICSTATE is far ahead of its
// empty log and vote anyway (its HARDSTATE term was above 0, so it was not taken for an empty one).
TEST(StorageFault, LostLogDirectoryAloneDoesNotHelpLoseAnAcknowledgedAppend) {
  lose_a_holders_log_and_check_the_append_survives(/*only_the_log_directory=*/true);
}

}  // namespace
}  // namespace raftlog::testing

// The running max stamp travels in the leader's snapshot (framed version 6, src/replica/
// snapshot_frames.h; docs/design.md, "Time lookups after a trim"): a follower stranded behind a trim
// whose first retained entry is plain installs the stamp as of the leader's first index - 1 with
// the snapshot, keeps it in SNAPSHOT across a restart and carries it on in its own next trim, as
// the leader does; a peer that says it decodes only version 4 (a node from before stamp5) still
// catches up, from version 4, without it. Production replicas over TestCluster's in-memory disks.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "derived/envelope.h"
#include "replica/snapshot_data.h"
#include "replica/snapshot_frames.h"
#include "store/endian.h"
#include "test_cluster.h"

namespace raftlog::raft {
namespace {

using testing::TestCluster;

void with_snapshots(Config& config) { config.snapshots = true; }
void short_follower_grace(replica::ReplicaConfig& config) {
  config.retention_follower_grace_ms = 5 * config.tick_ms;
}

// One append through the replica as raftlogd's node appends it: a version-2 envelope of `topic`
// (the leader stamps its timestamp and offset), or a plain entry when `topic` is empty. Each fills
// most of a 64 KiB segment, so that trims cut between them.
void propose(TestCluster& c, NodeId id, const std::string& topic) {
  replica::Replica::AppendRequest request;
  std::string payload(40 << 10, 'p');
  if (!topic.empty()) {
    payload.clear();
    derived::encode_envelope(0, topic, {}, std::string(40 << 10, 's'), &payload);
    request.has_envelopes = true;
  }
  request.payloads.push_back(std::move(payload));
  request.deadline = replica::Clock::time_point::max();
  request.done = [](replica::AppendResult) {};
  (void)c.replica(id).append(std::move(request));
  c.process(id);
}

// The leader's heartbeats until the followers it reaches acknowledge everything (and those it does
// not reach are past the retention grace).
void settle(TestCluster& c) {
  c.deliver_all();
  for (int i = 0; i < 6; ++i) {
    c.tick(1);
    c.deliver_all();
  }
}

// The running max of the envelope stamps of `id`'s entries [from, through] (its log holds them).
std::uint64_t stamp_max(const TestCluster& c, NodeId id, Index from, Index through) {
  std::uint64_t max = 0;
  for (Index i = from; i <= through; ++i) {
    const Entry entry = c.node(id).log.entry(i);
    if (!entry.has_envelope) continue;
    derived::DecodedEnvelope envelope;
    EXPECT_EQ(derived::decode_envelope(entry.payload.view(), &envelope),
              derived::EnvelopeDecode::kOk);
    max = std::max(max, envelope.timestamp_ms);
  }
  return max;
}

// The snapshot data node `id` installed (its SNAPSHOT: the bytes it received), and their version.
struct Installed {
  replica::SnapshotData data;
  std::uint32_t version = 0;
};
Installed installed_on(TestCluster& c, NodeId id) {
  Installed out;
  auto bytes = c.node(id).env->read_file(c.node(id).config.data_dir + "/SNAPSHOT", 64 << 20);
  EXPECT_TRUE(bytes.ok());
  if (!bytes.ok() || bytes->size() < 8) return out;
  out.version = store::get_u32(bytes->data() + 4);
  auto data = replica::decode_snapshot_data(*bytes);
  EXPECT_TRUE(data.ok()) << data.status().message();
  if (data.ok()) out.data = std::move(*data);
  return out;
}

// Node 1 leads; node 3 (cut off) misses stamped entries 2..5 ("old"), then plain 6..17, then
// stamped 18..19 ("new"); node 1 trims below 10, so its log starts with a plain entry after the
// stamped ones, and its SNAPSHOT (a trim's, version 5) carries the running max as of 9.
void strand_node_3_after_stamps(TestCluster& c) {
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.isolate(3);
  for (Index i = 2; i <= 19; ++i) propose(c, 1, i <= 5 ? "old" : (i >= 18 ? "new" : ""));
  settle(c);
  ASSERT_EQ(c.raft(1).commit_index(), 19u);
  ASSERT_TRUE(c.trim(1, 10).error.ok());
  ASSERT_EQ(c.node(1).log.first_index(), 10u);
}

// Review of since4, H1. Failed before: node 3's SNAPSHOT carried no stamp (framed version 4,
// stamp_at_index false), so its indexes seeded none; after its restart its own trim over plain
// entries carried 0 (the largest stamp it passed), not the running max the leader's trims carry.
TEST(SnapshotStamp, AFollowerCaughtUpFromASnapshotKeepsTheLeadersRunningMaxStamp) {
  TestCluster c({1, 2, 3}, with_snapshots, short_follower_grace);
  ASSERT_NO_FATAL_FAILURE(strand_node_3_after_stamps(c));
  const std::uint64_t expected = stamp_max(c, 2, 1, 9);  // node 2 holds the whole log
  ASSERT_GT(expected, 0u);
  ASSERT_EQ(expected, stamp_max(c, 2, 1, 5)) << "the plain entries 6..9 carry no stamp";
  auto leaders = replica::read_snapshot_file(c.node(1).env.get(), c.node(1).config.data_dir);
  ASSERT_TRUE(leaders.ok() && leaders->has_value());
  ASSERT_TRUE((*leaders)->stamp_at_index);
  ASSERT_EQ((*leaders)->stamp_max_ms, expected) << "the leader's trim read it";

  c.heal();
  c.tick_all(10);
  ASSERT_EQ(c.replica(3).snapshot_stats().installed, 1u);
  ASSERT_EQ(c.replica(3).snapshot_stats().last_installed_index, 9u);
  const Installed installed = installed_on(c, 3);
  EXPECT_EQ(installed.version, replica::kFramedSnapshotVersionWithStamp);
  EXPECT_TRUE(installed.data.stamp_at_index);
  EXPECT_EQ(installed.data.stamp_max_ms, expected);

  // Before any restart, node 3's own trim over plain entries only (10, 11) carries on the stamp the
  // install kept in memory (review of stamp5, M1): its trim SNAPSHOT (version 5) has the running
  // max as of 11, which no entry it passed holds.
  c.tick_all(3);
  ASSERT_GE(c.raft(3).commit_index(), 11u);
  ASSERT_TRUE(c.trim(3, 12).error.ok());
  ASSERT_EQ(c.node(3).log.first_index(), 12u);
  auto first_trim = replica::read_snapshot_file(c.node(3).env.get(), c.node(3).config.data_dir);
  ASSERT_TRUE(first_trim.ok() && first_trim->has_value());
  EXPECT_EQ((*first_trim)->origin, replica::SnapshotOrigin::kTrim);
  EXPECT_TRUE((*first_trim)->stamp_at_index);
  EXPECT_EQ((*first_trim)->stamp_max_ms, expected);

  // After a power cut its SNAPSHOT still says it; its next trim over plain entries only (12..15)
  // carries it on again: the running max as of 15.
  c.crash_restart(3);
  // An append of the leader's term vouches for node 3's entries after the restart (its commit).
  const auto after = c.propose(1, {"after the restart"});
  c.tick_all(10);
  ASSERT_TRUE(after.answer.answered());
  ASSERT_EQ(c.node(3).log.last_index(), c.node(1).log.last_index());
  ASSERT_EQ(c.raft(3).commit_index(), c.raft(1).commit_index());
  ASSERT_TRUE(c.trim(3, 16).error.ok());
  ASSERT_EQ(c.node(3).log.first_index(), 16u);
  auto trimmed = replica::read_snapshot_file(c.node(3).env.get(), c.node(3).config.data_dir);
  ASSERT_TRUE(trimmed.ok() && trimmed->has_value());
  EXPECT_EQ((*trimmed)->origin, replica::SnapshotOrigin::kTrim);
  EXPECT_TRUE((*trimmed)->stamp_at_index);
  EXPECT_EQ((*trimmed)->stamp_max_ms, stamp_max(c, 2, 1, 15));
}

// A peer that takes only version 4 (a node from before stamp5 says so on its messages) gets
// version 4 and catches up as before, without the stamp; a peer of this build at the same point
// gets version 6. Failed before this change only in its second half (every peer got version 4).
TEST(SnapshotStamp, APeerThatTakesOnlyVersion4StillCatchesUp) {
  TestCluster c({1, 2, 3}, with_snapshots, short_follower_grace);
  c.set_older_snapshot_peer(3);
  ASSERT_NO_FATAL_FAILURE(strand_node_3_after_stamps(c));
  c.heal();
  c.tick_all(10);
  ASSERT_EQ(c.replica(3).snapshot_stats().installed, 1u);
  const Installed older = installed_on(c, 3);
  EXPECT_EQ(older.version, replica::kFramedSnapshotVersion);
  EXPECT_FALSE(older.data.stamp_at_index);
  EXPECT_EQ(older.data.stamp_max_ms, 0u);
  EXPECT_EQ(c.node(3).log.first_index(), 10u);
  const auto after = c.propose(1, {"after"});
  c.tick_all(3);
  ASSERT_TRUE(after.answer.answered());
  const Index last = c.raft(1).last_index();
  ASSERT_EQ(c.raft(3).commit_index(), last);
  for (Index i = 10; i <= last; ++i) {
    EXPECT_EQ(c.node(3).log.entry(i).payload, c.node(1).log.entry(i).payload) << i;
  }

  // Node 2, of this build, stranded behind a later trim: version 6 with the stamp.
  c.isolate(2);
  for (int i = 0; i < 6; ++i) propose(c, 1, "");
  settle(c);
  const Index commit = c.raft(1).commit_index();
  ASSERT_TRUE(c.trim(1, commit - 1).error.ok());
  const Index first = c.node(1).log.first_index();
  ASSERT_GT(first, 10u);
  // Node 3 holds 10 on, node 2 everything up to 9 (and more).
  const std::uint64_t expected = std::max(stamp_max(c, 2, 1, 9), stamp_max(c, 3, 10, first - 1));
  ASSERT_EQ(expected, stamp_max(c, 3, 18, 19)) << "the newest stamps, of 18 and 19";
  c.heal();
  c.tick_all(10);
  ASSERT_EQ(c.replica(2).snapshot_stats().installed, 1u);
  const Installed newer = installed_on(c, 2);
  EXPECT_EQ(newer.version, replica::kFramedSnapshotVersionWithStamp);
  EXPECT_TRUE(newer.data.stamp_at_index);
  EXPECT_EQ(newer.data.stamp_max_ms, expected);
}

}  // namespace
}  // namespace raftlog::raft

// The snapshot point when a configuration change committed above the leader's first index
// (docs/raft.md, "Snapshots"): the leader knows the configuration in force at its first index - 1
// (the replica keeps it across trims, in SNAPSHOT, and across installs), so the snapshot is at that
// point and the caught-up follower's log starts where the leader's does; the configuration entries
// above it reach the follower by replication and it ends with the leader's configuration history.
// A snapshot also carries the ids retired as of its point: a caught-up node that later leads refuses
// to add them again (ID_RETIRED).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "replica/snapshot_data.h"
#include "replica/snapshot_frame_walk.h"
#include "store/endian.h"
#include "test_cluster.h"

namespace raftlog::raft {
namespace {

using testing::TestCluster;

std::string segment_filling_payload(Index index) {
  return "e" + std::to_string(index) + std::string(40 << 10, '.');
}

// Nodes `ids`, of which `voters` form the bootstrap configuration, snapshots on, a short grace for
// silent followers (so that the leader trims what they still need).
TestCluster snapshot_cluster(const std::vector<NodeId>& ids, const std::vector<NodeId>& voters) {
  return TestCluster(
      ids,
      [voters](Config& config) {
        config.snapshots = true;
        config.initial_conf = ConfState{voters};
      },
      [](replica::ReplicaConfig& config) {
        config.retention_follower_grace_ms = 5 * config.tick_ms;
      });
}

void propose_until(TestCluster& c, NodeId leader, Index last) {
  while (c.raft(leader).last_index() < last) {
    const Index next = c.raft(leader).last_index() + 1;
    ASSERT_TRUE(c.propose(leader, {segment_filling_payload(next)}, 9, next).proposed()) << next;
  }
  c.deliver_all();
}

void change(TestCluster& c, NodeId leader, ConfChangeType type, NodeId node) {
  const testing::MembershipRequest request = c.propose_conf_change(leader, ConfChange{type, node});
  ASSERT_TRUE(!request.answered() || request.result().error.ok()) << request.result().error.message;
  c.deliver_all();
  c.tick_all(2);
  ASSERT_TRUE(request.answered() && request.result().error.ok()) << "committed";
}

// Nodes 1..4, voters {1, 2, 3}. Node 1 leads; node 3 is cut off. Learner 4 is added at about 12
// (below the trim point), entries follow, node 4 is promoted at about 21 (above it), and node 1
// trims below 15. Its newest committed configuration lies above its first index - 1, and the one in
// force there (voters 1-3, learner 4) is in none of its configuration records any more.
void strand_node_3_behind_a_configuration(TestCluster& c, Index* promotion) {
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  c.isolate(3);
  ASSERT_NO_FATAL_FAILURE(propose_until(c, 1, 11));
  ASSERT_NO_FATAL_FAILURE(change(c, 1, ConfChangeType::kAddLearner, 4));
  ASSERT_NO_FATAL_FAILURE(propose_until(c, 1, 20));
  c.tick_all(3);
  ASSERT_NO_FATAL_FAILURE(change(c, 1, ConfChangeType::kPromoteLearner, 4));
  *promotion = c.raft(1).conf_history().back().index;
  ASSERT_NO_FATAL_FAILURE(propose_until(c, 1, *promotion + 8));
  for (int i = 0; i < 6; ++i) {
    c.tick(1);
    c.deliver_all();
  }
  ASSERT_TRUE(c.trim(1, 15).error.ok());
  ASSERT_EQ(c.node(1).log.first_index(), 15u);
  ASSERT_GT(*promotion, 15u);
  ASSERT_EQ(c.raft(1).conf_history().front().index, *promotion) << "committed above the trim";
}

// Rewrites node 1's SNAPSHOT (its trim's) as `edit` changes it: what an older binary's trim wrote.
// With `version`, the file's data version must be that one.
void rewrite_trim_snapshot(TestCluster& c, const std::function<void(replica::SnapshotData&)>& edit,
                           std::optional<std::uint32_t> version = std::nullopt) {
  store::Env* const env = c.node(1).env.get();
  const std::string& dir = c.node(1).config.data_dir;
  auto saved = replica::read_snapshot_file(env, dir);
  ASSERT_TRUE(saved.ok() && saved->has_value());
  replica::SnapshotData data = **saved;
  ASSERT_NO_FATAL_FAILURE(edit(data));
  const std::string bytes = replica::encode_snapshot_data(data);
  if (version) {
    ASSERT_EQ(store::get_u32(bytes.data() + 8), *version);
  }
  ASSERT_TRUE(replica::write_snapshot_next(env, dir, bytes).ok());
  ASSERT_TRUE(replica::promote_snapshot_next(env, dir).ok());
}

ConfState voters_and_learner_4() {
  ConfState conf{{1, 2, 3}};
  conf.learners = {4};
  return conf;
}

// Healed, node 3 catches up from node 1: its log starts at node 1's first index and holds every
// entry node 1 holds, and its configuration history after the replay is node 1's.
void heal_then_expect_caught_up_at_the_first_index(TestCluster& c) {
  c.heal();
  c.tick_all(10);
  ASSERT_EQ(c.replica(3).snapshot_stats().installed, 1u);
  const Index leader_first = c.node(1).log.first_index();
  EXPECT_EQ(c.replica(3).snapshot_stats().last_installed_index, leader_first - 1);
  EXPECT_EQ(c.replica(1).snapshot_stats().sent_above_first_index, 0u);
  auto saved = replica::read_snapshot_file(c.node(3).env.get(), c.node(3).config.data_dir);
  ASSERT_TRUE(saved.ok() && saved->has_value());
  EXPECT_EQ((*saved)->index, leader_first - 1);
  EXPECT_TRUE(raft::same_members((*saved)->conf, voters_and_learner_4()))
      << raft::to_string((*saved)->conf);
  EXPECT_EQ(c.node(3).log.first_index(), leader_first);
  ASSERT_EQ(c.node(3).log.last_index(), c.node(1).log.last_index());
  for (Index i = leader_first; i <= c.node(1).log.last_index(); ++i) {
    EXPECT_EQ(c.node(3).log.entry(i).payload, c.node(1).log.entry(i).payload) << i;
    EXPECT_EQ(c.node(3).log.entry(i).type, c.node(1).log.entry(i).type) << i;
  }
  EXPECT_EQ(c.raft(3).commit_index(), c.raft(1).commit_index());
  EXPECT_EQ(c.raft(3).conf_history(), c.raft(1).conf_history());
  EXPECT_EQ(c.raft(3).conf(), c.raft(1).conf());
  // And a restart of node 3 comes back with it (CONFSTATE).
  c.crash_restart(3);
  EXPECT_EQ(c.node(3).log.first_index(), leader_first);
  EXPECT_EQ(c.raft(3).conf(), c.raft(1).conf());
}

TEST(SnapshotConfPoint, AConfigurationCommittedAboveTheFirstIndexKeepsThePointAtTheFirstIndex) {
  TestCluster c = snapshot_cluster({1, 2, 3, 4}, {1, 2, 3});
  Index promotion = 0;
  ASSERT_NO_FATAL_FAILURE(strand_node_3_behind_a_configuration(c, &promotion));
  ASSERT_TRUE(c.replica(1).knows_first_index_conf());
  ASSERT_NO_FATAL_FAILURE(heal_then_expect_caught_up_at_the_first_index(c));
}

// The same with a leader restarted after its trim: what it knows at its first index - 1 comes back
// from its own SNAPSHOT (the trim's, version 3) and CONFSTATE only.
TEST(SnapshotConfPoint, ARestartedLeaderKnowsTheConfigurationAtItsFirstIndexFromItsTrimSnapshot) {
  TestCluster c = snapshot_cluster({1, 2, 3, 4}, {1, 2, 3});
  Index promotion = 0;
  ASSERT_NO_FATAL_FAILURE(strand_node_3_behind_a_configuration(c, &promotion));
  auto trim_snapshot = replica::read_snapshot_file(c.node(1).env.get(), c.node(1).config.data_dir);
  ASSERT_TRUE(trim_snapshot.ok() && trim_snapshot->has_value());
  EXPECT_EQ((*trim_snapshot)->origin, replica::SnapshotOrigin::kTrim);
  EXPECT_TRUE((*trim_snapshot)->conf_at_index);
  EXPECT_TRUE(raft::same_members((*trim_snapshot)->conf, voters_and_learner_4()));
  c.crash_restart(1);
  ASSERT_TRUE(c.replica(1).knows_first_index_conf()) << "loaded from SNAPSHOT";
  ASSERT_EQ(c.elect_then_hand_over_to(1), 1u);
  ASSERT_NO_FATAL_FAILURE(heal_then_expect_caught_up_at_the_first_index(c));
}

// A leader whose SNAPSHOT does not say the configuration at its first index - 1 (a trim's file of
// version 2, as the previous binary wrote it) keeps the previous behaviour: its core names the
// committed configuration's index, the replica falls back to its topic table's committed point
// (counted), and the follower still ends with the leader's configuration history. Its next trim
// across a configuration entry makes the configuration known again.
TEST(SnapshotConfPoint, ALeaderThatDoesNotKnowTheConfigurationAtItsFirstIndexFallsBack) {
  TestCluster c = snapshot_cluster({1, 2, 3, 4}, {1, 2, 3});
  Index promotion = 0;
  ASSERT_NO_FATAL_FAILURE(strand_node_3_behind_a_configuration(c, &promotion));
  // What the previous binary wrote (version 2).
  ASSERT_NO_FATAL_FAILURE(rewrite_trim_snapshot(
      c,
      [](replica::SnapshotData& older) {
        older.conf_at_index = false;
        // The previous binary's trims carried no stamp either (version 5).
        older.stamp_at_index = false;
        older.stamp_max_ms = 0;
      },
      2u));
  c.crash_restart(1);
  ASSERT_TRUE(c.replica(1).knows_first_index_topics());
  ASSERT_FALSE(c.replica(1).knows_first_index_conf());
  ASSERT_EQ(c.elect_then_hand_over_to(1), 1u);
  c.heal();
  c.tick_all(10);
  ASSERT_EQ(c.replica(3).snapshot_stats().installed, 1u);
  const Index point = c.replica(3).snapshot_stats().last_installed_index;
  EXPECT_GE(point, promotion) << "at the committed configuration or above";
  EXPECT_EQ(c.replica(1).snapshot_stats().sent_above_first_index, 1u) << "counted";
  EXPECT_EQ(c.node(3).log.first_index(), point + 1);
  EXPECT_EQ(c.node(3).log.last_index(), c.node(1).log.last_index());
  EXPECT_EQ(c.raft(3).commit_index(), c.raft(1).commit_index());
  // Its history's record is the snapshot's point (the promotion's entry is not in its log), with
  // the leader's configuration.
  ASSERT_EQ(c.raft(3).conf_history().size(), 1u);
  EXPECT_EQ(c.raft(3).conf_history().front().index, point);
  EXPECT_EQ(c.raft(3).conf(), c.raft(1).conf());

  // A trim across the promotion's entry: the configuration there becomes known.
  ASSERT_NO_FATAL_FAILURE(propose_until(c, 1, c.raft(1).last_index() + 4));
  for (int i = 0; i < 6; ++i) {
    c.tick(1);
    c.deliver_all();
  }
  ASSERT_TRUE(c.trim(1, promotion + 3).error.ok());
  ASSERT_GT(c.node(1).log.first_index(), promotion + 1);
  ASSERT_TRUE(c.replica(1).knows_first_index_conf());
  EXPECT_TRUE(raft::same_members(*c.replica(1).first_index_conf(), c.raft(1).conf()));
}

// A leader that knows its topic table and running max stamp at its first index - 1 but not the
// configuration there (a trim SNAPSHOT of version 5 without it) falls back to a point above its
// first index: there it does not know the stamp (nothing reads the stamps between), so its
// snapshot (framed version 6) says "not known" and the follower seeds nothing, never the stamp of
// another index. Failed with the stamp sent whenever the leader knew it at its first index - 1.
TEST(SnapshotConfPoint, AFallbackAboveTheFirstIndexSaysTheStampIsNotKnown) {
  TestCluster c = snapshot_cluster({1, 2, 3, 4}, {1, 2, 3});
  Index promotion = 0;
  ASSERT_NO_FATAL_FAILURE(strand_node_3_behind_a_configuration(c, &promotion));
  ASSERT_NO_FATAL_FAILURE(rewrite_trim_snapshot(
      c,
      [](replica::SnapshotData& without_conf) {
        ASSERT_TRUE(without_conf.stamp_at_index) << "a trim of this version carries the stamp";
        without_conf.conf_at_index = false;
      },
      replica::kSnapshotDataVersionWithStamp));
  c.crash_restart(1);
  ASSERT_TRUE(c.replica(1).knows_first_index_topics());
  ASSERT_FALSE(c.replica(1).knows_first_index_conf());
  ASSERT_EQ(c.elect_then_hand_over_to(1), 1u);
  c.heal();
  c.tick_all(10);
  ASSERT_EQ(c.replica(3).snapshot_stats().installed, 1u);
  EXPECT_EQ(c.replica(1).snapshot_stats().sent_above_first_index, 1u);
  auto bytes_3 = c.node(3).env->read_file(c.node(3).config.data_dir + "/SNAPSHOT", 64 << 20);
  ASSERT_TRUE(bytes_3.ok() && bytes_3->size() > 8);
  EXPECT_EQ(store::get_u32(bytes_3->data() + 4), replica::kFramedSnapshotVersionWithStamp);
  auto installed = replica::decode_snapshot_data(*bytes_3);
  ASSERT_TRUE(installed.ok()) << installed.status().message();
  EXPECT_GT(installed->index + 1, c.node(1).log.first_index()) << "above the first index - 1";
  EXPECT_FALSE(installed->stamp_at_index);
  EXPECT_EQ(installed->stamp_max_ms, 0u);
}

// The upgrade path: a leader whose trim SNAPSHOT the previous binary wrote (version 2, no
// configuration) while no configuration change had committed above its first index learns the
// configuration there from CONFSTATE at its restart (every configuration entry after CONFSTATE's
// base is listed, and none lies between it and the first index - 1). A change that commits later,
// above the first index, then still leaves the snapshot at the first index - 1.
TEST(SnapshotConfPoint, AnOlderTrimSnapshotLearnsTheConfigurationFromConfStateAtTheRestart) {
  TestCluster c = snapshot_cluster({1, 2, 3, 4}, {1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  c.isolate(3);
  ASSERT_NO_FATAL_FAILURE(propose_until(c, 1, 21));
  for (int i = 0; i < 6; ++i) {
    c.tick(1);
    c.deliver_all();
  }
  ASSERT_TRUE(c.trim(1, 15).error.ok());
  ASSERT_EQ(c.node(1).log.first_index(), 15u);
  ASSERT_NO_FATAL_FAILURE(
      rewrite_trim_snapshot(c, [](replica::SnapshotData& older) { older.conf_at_index = false; }));
  c.crash_restart(1);
  ASSERT_TRUE(c.replica(1).knows_first_index_conf()) << "from CONFSTATE";
  EXPECT_EQ(*c.replica(1).first_index_conf(), (ConfState{{1, 2, 3}}));
  ASSERT_EQ(c.elect_then_hand_over_to(1), 1u);
  c.tick_all(3);
  ASSERT_NO_FATAL_FAILURE(change(c, 1, ConfChangeType::kAddLearner, 4));
  ASSERT_GT(c.raft(1).conf_history().front().index, 15u) << "committed above the first index";
  c.heal();
  c.tick_all(10);
  ASSERT_EQ(c.replica(3).snapshot_stats().installed, 1u);
  EXPECT_EQ(c.replica(3).snapshot_stats().last_installed_index, 14u);
  EXPECT_EQ(c.replica(1).snapshot_stats().sent_above_first_index, 0u);
  EXPECT_EQ(c.node(3).log.first_index(), 15u);
  EXPECT_EQ(c.raft(3).conf_history(), c.raft(1).conf_history());
}

// A trim that reads what it deletes in bounded slices (ReplicaConfig::topic_scan_slice_bytes about
// one entry) and deletes only the segments a slice finished: after each partial trim the
// configuration the leader knows at its first index - 1 is the one in force there, before and after
// the configuration entry that adds learner 4 (its own segment or not).
TEST(SnapshotConfPoint, ATrimInBoundedSlicesKnowsTheConfigurationAtEveryPartialStart) {
  TestCluster c(
      {1, 2, 3, 4},
      [](Config& config) {
        config.snapshots = true;
        config.initial_conf = ConfState{{1, 2, 3}};
      },
      [](replica::ReplicaConfig& config) {
        config.retention_follower_grace_ms = 5 * config.tick_ms;
        config.topic_scan_slice_bytes = 50 << 10;
      });
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  c.isolate(3);
  ASSERT_NO_FATAL_FAILURE(propose_until(c, 1, 7));
  ASSERT_NO_FATAL_FAILURE(change(c, 1, ConfChangeType::kAddLearner, 4));
  const Index added = c.raft(1).conf_history().back().index;
  ASSERT_NO_FATAL_FAILURE(propose_until(c, 1, 20));
  for (int i = 0; i < 6; ++i) {
    c.tick(1);
    c.deliver_all();
  }
  const auto conf_at = [&](Index index) {
    return index >= added ? voters_and_learner_4() : ConfState{{1, 2, 3}};
  };
  ASSERT_TRUE(c.trim_call(1, 15).error.ok());
  int below = 0;
  int above = 0;
  for (int round = 0; round < 100; ++round) {
    const Index first = c.node(1).log.first_index();
    ASSERT_TRUE(c.replica(1).knows_first_index_conf()) << "first index " << first;
    EXPECT_TRUE(raft::same_members(*c.replica(1).first_index_conf(), conf_at(first - 1)))
        << "first index " << first << ": " << raft::to_string(*c.replica(1).first_index_conf());
    (first - 1 < added ? below : above)++;
    if (first >= 15) break;
    c.replica(1).apply_retention(replica::Clock::now());
    c.finish_off_loop(1);  // the trim's writes off the loop
    c.persist_one(1);      // the flusher's step: the checkpoint the truncation asked for
  }
  ASSERT_EQ(c.node(1).log.first_index(), 15u);
  EXPECT_GT(below, 1) << "partial starts before the configuration entry";
  EXPECT_GT(above, 1) << "partial starts after it";
}

// The configuration in force on `id`: the newest configuration entry of its log, or, when its log
// holds none, the one of its installed snapshot (SNAPSHOT).
ConfState newest_conf_in_log(const TestCluster& c, NodeId id) {
  for (Index i = c.node(id).log.last_index(); i >= c.node(id).log.first_index() && i > 0; --i) {
    const Entry entry = c.node(id).log.entry(i);
    if (entry.type != EntryType::kConfig) continue;
    std::optional<ConfState> conf = decode_config(entry.payload);
    EXPECT_TRUE(conf.has_value()) << i;
    return conf.value_or(ConfState{});
  }
  auto saved = replica::read_snapshot_file(c.node(id).env.get(), c.node(id).config.data_dir);
  EXPECT_TRUE(saved.ok() && saved->has_value());
  return saved.ok() && saved->has_value() ? (*saved)->conf : ConfState{};
}

// Twenty changes (learners 10-19 added and removed; no such node runs) above the leader's first
// index: node 3 installs the snapshot at the first index - 1 with the bootstrap configuration, then
// replays every change by replication, more than CONFSTATE's 16 pending records in flight
// (hold_back_config_entries takes them in parts). At every step its configuration is the newest in
// its log (never one that is not in force at its log's end), it never campaigns, and it ends with
// the leader's history, retired ids included.
TEST(SnapshotConfPoint, ManyChangesAboveTheFirstIndexReplayOnTheCaughtUpFollower) {
  TestCluster c = snapshot_cluster({1, 2, 3}, {1, 2, 3});
  const auto to_absent_learners = [](const Message& m) { return m.to >= 10; };
  c.add_drop_rule(to_absent_learners);
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  c.isolate(3);
  ASSERT_NO_FATAL_FAILURE(propose_until(c, 1, 15));
  for (NodeId learner = 10; learner < 20; ++learner) {
    ASSERT_NO_FATAL_FAILURE(change(c, 1, ConfChangeType::kAddLearner, learner));
    ASSERT_NO_FATAL_FAILURE(change(c, 1, ConfChangeType::kRemoveNode, learner));
  }
  ASSERT_NO_FATAL_FAILURE(propose_until(c, 1, c.raft(1).last_index() + 4));
  for (int i = 0; i < 6; ++i) {
    c.tick(1);
    c.deliver_all();
  }
  ASSERT_TRUE(c.trim(1, 15).error.ok());
  const Index leader_first = c.node(1).log.first_index();
  ASSERT_GT(leader_first, 1u);
  ASSERT_LE(leader_first, 16u);
  ASSERT_GE(c.raft(1).conf_history().front().index, leader_first + 19) << "twenty changes above";
  const Term term = c.raft(1).term();
  c.heal();
  c.add_drop_rule(to_absent_learners);
  bool restarted = false;
  for (int round = 0; round < 60; ++round) {
    c.tick_all(1);
    if (c.node(3).log.first_index() == 1) continue;  // not installed yet
    ASSERT_EQ(c.raft(3).conf(), newest_conf_in_log(c, 3)) << "round " << round;
    ASSERT_EQ(c.raft(3).role(), Role::kFollower) << "round " << round;
    if (!restarted && c.node(3).log.last_index() > leader_first + 5 &&
        c.node(3).log.last_index() + 5 < c.node(1).log.last_index()) {
      // CONFSTATE now holds the snapshot's retired ids beside pending records that list some of
      // them as learners again: it reopens, and the replay continues.
      c.crash_restart(3);
      restarted = true;
      ASSERT_EQ(c.raft(3).conf(), newest_conf_in_log(c, 3)) << "after the restart";
    }
  }
  EXPECT_TRUE(restarted) << "the replay never stood half-way at a round's end";
  auto saved = replica::read_snapshot_file(c.node(3).env.get(), c.node(3).config.data_dir);
  ASSERT_TRUE(saved.ok() && saved->has_value());
  EXPECT_EQ((*saved)->index, leader_first - 1);
  EXPECT_EQ(c.node(3).log.first_index(), leader_first);
  EXPECT_EQ(c.node(3).log.last_index(), c.node(1).log.last_index());
  EXPECT_EQ(c.raft(3).commit_index(), c.raft(1).commit_index());
  EXPECT_EQ(c.raft(3).conf_history(), c.raft(1).conf_history());
  EXPECT_EQ(c.raft(3).term(), term) << "nobody campaigned";
  std::vector<NodeId> retired = c.replica(3).retired_ids();
  std::sort(retired.begin(), retired.end());
  EXPECT_EQ(retired, (std::vector<NodeId>{10, 11, 12, 13, 14, 15, 16, 17, 18, 19}));
  c.crash_restart(3);
  EXPECT_EQ(c.raft(3).conf_history(), c.raft(1).conf_history());
}

// Node 4 is removed at index 2, node 3 misses it and everything up to the trim point: the snapshot
// it installs carries the retired id, which its CONFSTATE keeps, so once node 3 leads it refuses to
// add node 4 again, also after a restart.
TEST(SnapshotConfPoint, ASnapshotCarriesTheRetiredIdsAndTheFollowerRefusesThemOnceItLeads) {
  TestCluster c = snapshot_cluster({1, 2, 3, 4}, {1, 2, 3, 4});
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  c.isolate(3);
  ASSERT_NO_FATAL_FAILURE(change(c, 1, ConfChangeType::kRemoveNode, 4));
  ASSERT_EQ(c.replica(1).retired_ids(), (std::vector<NodeId>{4}));
  c.isolate(4);
  ASSERT_NO_FATAL_FAILURE(propose_until(c, 1, 21));
  for (int i = 0; i < 6; ++i) {
    c.tick(1);
    c.deliver_all();
  }
  ASSERT_TRUE(c.trim(1, 15).error.ok());
  ASSERT_EQ(c.node(1).log.first_index(), 15u);
  c.heal();
  c.isolate(4);
  c.tick_all(10);
  ASSERT_EQ(c.replica(3).snapshot_stats().installed, 1u);
  auto saved = replica::read_snapshot_file(c.node(3).env.get(), c.node(3).config.data_dir);
  ASSERT_TRUE(saved.ok() && saved->has_value());
  EXPECT_EQ((*saved)->retired_ids, (std::vector<NodeId>{4}));
  EXPECT_EQ(c.replica(3).retired_ids(), (std::vector<NodeId>{4}));
  (void)c.transfer_leadership(1, 3);
  c.tick_all(10);
  ASSERT_EQ(c.leader(), 3u);
  c.tick_all(3);  // its no-op commits: a change may start
  testing::MembershipRequest again =
      c.propose_conf_change(3, ConfChange{ConfChangeType::kAddLearner, 4});
  ASSERT_TRUE(again.answered()) << "refused at once";
  EXPECT_EQ(again.result().error.reason, replica::kReasonIdRetired);
  c.crash_restart(3);
  EXPECT_EQ(c.replica(3).retired_ids(), (std::vector<NodeId>{4})) << "kept in CONFSTATE";
}

}  // namespace
}  // namespace raftlog::raft

// A follower's replica taking membership changes from its leader (src/replica/replica_membership.cpp):
// many configuration entries at once stay within what CONFSTATE holds without stopping the node,
// and CONFSTATE's base moves up with its members' addresses once an entry commits, so that a trim of
// the entry loses no address. Driven by hand as follower 2 of {1, 2, 3} over a stepped store.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "replica/conf_state_file.h"
#include "replica/replica.h"
#include "stepped_follower_config.h"
#include "trim_to_end.h"
#include "store/memory_env.h"

namespace raftlog::replica {
namespace {

using raft::ConfState;

ConfState with_learner_4() {
  ConfState conf{{1, 2, 3}, {4}};
  conf.addresses = {{1, "127.0.0.1:7001"},
                    {2, "127.0.0.1:7002"},
                    {3, "127.0.0.1:7003"},
                    {4, "127.0.0.1:7004"}};
  return conf;
}

ConfState without_4() {
  ConfState conf{{1, 2, 3}};
  conf.addresses = {{1, "127.0.0.1:7001"}, {2, "127.0.0.1:7002"}, {3, "127.0.0.1:7003"}};
  return conf;
}

// The leader's log: entry i is a configuration entry for i <= `changes` (learner 4 added at odd
// indexes, removed at even ones), an ordinary 1 KiB entry after.
raft::Entry leader_entry(raft::Index index, raft::Index changes) {
  raft::Entry entry;
  entry.index = index;
  entry.term = 1;
  if (index <= changes) {
    entry.type = raft::EntryType::kConfig;
    entry.payload = raft::encode_config(index % 2 == 1 ? with_learner_4() : without_4());
  } else {
    entry.payload = std::string(1024, 'x');
  }
  return entry;
}

class FollowerMembershipTest : public ::testing::Test {
 protected:
  void open() {
    NodeError error;
    replica_ = Replica::open(testing::stepped_follower_config(&env_),
                             testing::stepped_follower_deps(&sender_, &disk_), &error);
    ASSERT_NE(replica_, nullptr) << error.message;
  }
  void restart() {
    replica_.reset();
    open();
  }
  // `conf` is in force, and is again after a restart (CONFSTATE kept it).
  void expect_conf_across_a_restart(const ConfState& conf) {
    EXPECT_EQ(replica_->conf(), conf);
    ASSERT_NO_FATAL_FAILURE(restart());
    EXPECT_EQ(replica_->conf(), conf) << "after a restart";
  }
  // After a restart, learner 4 (added by entry 1, which a trim removed) is in force with its
  // address, which only CONFSTATE's base still held; `peers` gets every member's address.
  void expect_learner_4s_address_across_a_restart(std::map<std::uint64_t, std::string>* peers) {
    ASSERT_NO_FATAL_FAILURE(restart());
    EXPECT_EQ(replica_->conf(), with_learner_4());
    *peers = replica_->peer_addresses();
    ASSERT_EQ(peers->count(4), 1U) << "the address of learner 4 was lost";
    EXPECT_EQ(peers->at(4), "127.0.0.1:7004");
  }
  // Leader 1 sends entries from..to after from - 1, telling the follower to commit up to `commit`.
  void receive(raft::Index from, raft::Index to, raft::Index commit, raft::Index changes) {
    step_append(from, to, commit, changes);
    replica_->process();
  }
  // The same append, stepped without the process() after it (raftlogd steps every queued message
  // before one process()).
  void step_append(raft::Index from, raft::Index to, raft::Index commit, raft::Index changes) {
    std::vector<raft::Entry> entries;
    for (raft::Index i = from; i <= to; ++i) entries.push_back(leader_entry(i, changes));
    replica_->step(testing::leader_append(from - 1, std::move(entries), commit));
  }
  void flush() {
    ASSERT_TRUE(replica_->log().run_flush_cycle().ok());
    replica_->process();
  }
  // The leader's side, as raftlogd's leader does it: it sends everything from the follower's end and
  // commits the follower only up to what the follower acknowledged (its log end, once flushed).
  void replicate_until(raft::Index last, raft::Index changes) {
    for (int round = 0; round < 100 && replica_->log().last_index() < last; ++round) {
      const raft::Index end = replica_->log().last_index();
      receive(end + 1, last, end, changes);
      ASSERT_FALSE(replica_->failed()) << "round " << round;
      flush();
    }
    receive(last + 1, last, last, changes);  // the commit index, in a heartbeat-like append
    flush();
  }

  store::MemoryEnv env_;
  testing::RecordingSender sender_;
  testing::RoomyDisk disk_;
  std::unique_ptr<Replica> replica_;
};

TEST_F(FollowerMembershipTest, ManyConfigurationEntriesInOneBatchDoNotStopTheNode) {
  constexpr raft::Index kChanges = 3 * ConfStateFile::kMaxPendingRecords + 1;
  open();
  receive(1, kChanges + 5, 0, kChanges);  // nothing committed yet: the follower acknowledged nothing
  ASSERT_FALSE(replica_->failed()) << "a valid append stopped the node";
  EXPECT_LT(replica_->log().last_index(), kChanges) << "entries beyond the bound wait";
  EXPECT_GE(replica_->log().last_index(), ConfStateFile::kMaxPendingRecords);
  flush();
  replicate_until(kChanges + 5, kChanges);
  ASSERT_FALSE(replica_->failed());
  EXPECT_EQ(replica_->log().last_index(), kChanges + 5);
  EXPECT_EQ(replica_->commit_index(), kChanges + 5);
  ASSERT_NO_FATAL_FAILURE(expect_conf_across_a_restart(with_learner_4()));
  EXPECT_EQ(replica_->core().conf_history().back().index, kChanges);
}

TEST_F(FollowerMembershipTest, ConfigurationEntriesArrivingFasterThanTheFlushDoNotStopTheNode) {
  constexpr raft::Index kChanges = 2 * ConfStateFile::kMaxPendingRecords + 2;
  open();
  // One entry a message, each acknowledged only after a flush that has not run yet; the leader
  // learned of the first ones, so each message commits what came before it.
  for (raft::Index i = 1; i <= kChanges; ++i) {
    receive(i, i, i - 1, kChanges);
    ASSERT_FALSE(replica_->failed()) << "entry " << i;
  }
  EXPECT_EQ(replica_->log().last_index(), kChanges);
  flush();
  replicate_until(kChanges, kChanges);
  ASSERT_NO_FATAL_FAILURE(expect_conf_across_a_restart(without_4()));
}

// raftlogd's leader pipelines appends, each with its whole commit index, and the follower's loop
// steps both before one process(): each append is within the bound, the two together are not, and
// the first one's entries (committed at once) were not written when the second one was taken.
TEST_F(FollowerMembershipTest, TwoAppendsSteppedBeforeOneReadyDoNotStopTheNode) {
  constexpr raft::Index kEach = ConfStateFile::kMaxPendingRecords;
  constexpr raft::Index kChanges = 2 * kEach;
  open();
  step_append(1, kEach, kChanges + 5, kChanges);
  step_append(kEach + 1, kChanges + 5, kChanges + 5, kChanges);
  replica_->process();
  ASSERT_FALSE(replica_->failed()) << "two valid appends stopped the node";
  EXPECT_EQ(replica_->log().last_index(), kChanges + 5) << "nothing needed holding back";
  flush();
  EXPECT_EQ(replica_->commit_index(), kChanges + 5);
  ASSERT_NO_FATAL_FAILURE(expect_conf_across_a_restart(without_4()));
  EXPECT_EQ(replica_->core().conf_history().front().index, kChanges);
}

TEST_F(FollowerMembershipTest, AMembersAddressSurvivesATrimOfItsEntryAndARestart) {
  // Entry 1 adds learner 4 with everyone's address; 300 KiB of entries follow, over several segments.
  constexpr raft::Index kLast = 300;
  open();
  replicate_until(kLast, 1);
  ASSERT_EQ(replica_->commit_index(), kLast);
  ASSERT_TRUE(replica_->log().run_checkpoint().ok());
  ASSERT_TRUE(replica_->log().truncate_prefix(kLast - 10).ok());
  ASSERT_GT(replica_->log().first_index(), 1U) << "the trim removed the configuration entry";
  EXPECT_EQ(replica_->peer_addresses().at(4), "127.0.0.1:7004");
  std::map<std::uint64_t, std::string> peers;
  ASSERT_NO_FATAL_FAILURE(expect_learner_4s_address_across_a_restart(&peers));
  EXPECT_EQ(peers.at(3), "127.0.0.1:7003");
}

// The entry that adds learner 4 is committed but not flushed when process() ends, so CONFSTATE's
// base stays at the bootstrap configuration; a trim then has the log flushed (by the store's
// flusher, asked by the trim: here the test's flush cycles between its rounds) and deletes the
// entry's segment. The base must move before that, or the restart (with no process() in between)
// knows learner 4's role but not its address.
TEST_F(FollowerMembershipTest, ATrimOfAnEntryCommittedButUnflushedAtTheLastReadyKeepsItsAddress) {
  constexpr raft::Index kLast = 300;
  open();
  receive(1, kLast, kLast, 1);
  ASSERT_EQ(replica_->commit_index(), kLast);
  ASSERT_LT(replica_->log().flushed_index(), 1U) << "the test needs the entries unflushed";
  const TrimResult trimmed = testing::trim_to_end(
      *replica_, kLast - 10, [this] { ASSERT_TRUE(replica_->log().run_flush_cycle().ok()); });
  ASSERT_TRUE(trimmed.error.ok()) << trimmed.error.message;
  ASSERT_GT(replica_->log().first_index(), 1U) << "the trim removed the configuration entry";
  std::map<std::uint64_t, std::string> peers;
  ASSERT_NO_FATAL_FAILURE(expect_learner_4s_address_across_a_restart(&peers));
}

}  // namespace
}  // namespace raftlog::replica

// A follower that needs entries its leader trimmed (retention; there are no snapshots) cannot catch
// up by replication. The leader's heartbeats name its first retained index, so the follower knows it
// is stranded (Raft::stranded_below), whether its log simply ends before that index or holds a
// divergent entry just below it, and the node reports NOT_SERVING until it is rebuilt.
#include <gtest/gtest.h>

#include "test_cluster.h"

namespace raftlog::raft {
namespace {

using testing::make_entries;
using testing::payload_entry;
using testing::TestCluster;

TEST(Stranded, AFollowerWhoseLogEndsBeforeTheLeadersFirstIndexKnowsItUntilRebuilt) {
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.isolate(3);
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(c.raft(1).propose({payload_entry("e" + std::to_string(i))}).status,
              ProposeStatus::kOk);
  }
  c.deliver_all();
  const Index last = c.raft(1).commit_index();
  c.tick_all(3);
  EXPECT_EQ(c.raft(2).stranded_below(), 0u) << "a leader that never trimmed strands nobody";
  // Retention on the leader: everything below 15 goes; node 3 holds only the first no-op.
  c.node(1).log.truncate_prefix(15);
  c.node(1).durable_log.truncate_prefix(15);
  c.heal();
  c.tick_all(5);
  EXPECT_EQ(c.raft(3).stranded_below(), 15u);
  EXPECT_EQ(c.raft(2).stranded_below(), 0u) << "a caught-up follower is not stranded";
  EXPECT_EQ(c.raft(1).stranded_below(), 0u) << "a leader is never stranded";

  // Rebuilt from node 2's log (docs/operations.md, "Retention") and restarted: it catches up and is
  // no longer stranded.
  c.node(3).durable_log = c.node(2).durable_log;
  c.crash_restart(3);
  c.tick_all(5);
  EXPECT_EQ(c.node(3).log.last_index(), last);
  EXPECT_EQ(c.raft(3).stranded_below(), 0u);
}

// The follower's log reaches past the leader's first index - 1, but its entry there is a deposed
// leader's: the leader's probe at its first index fails, and it cannot go lower.
TEST(Stranded, AFollowerWithADivergentEntryBelowTheLeadersFirstIndexKnowsIt) {
  std::vector<Entry> quorum_log = make_entries(1, std::vector<Term>(13, 1));
  for (const Entry& e : make_entries(14, std::vector<Term>(7, 3))) quorum_log.push_back(e);
  std::vector<Entry> divergent_log = make_entries(1, std::vector<Term>(13, 1));
  divergent_log.push_back(make_entries(14, {2})[0]);
  const HardState quorum_state{3, 1, 20};
  const HardState divergent_state{3, kNoNode, 13};
  TestCluster c({1, 2, 3}, {quorum_log, quorum_log, divergent_log},
                {quorum_state, quorum_state, divergent_state});
  c.isolate(3);
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  c.node(1).log.truncate_prefix(15);  // the leader still knows entry 14's term (3), not its bytes
  c.node(1).durable_log.truncate_prefix(15);
  c.heal();
  c.tick_all(10);
  EXPECT_EQ(c.node(3).log.term_at(14), 2u) << "the divergent entry is never overwritten";
  EXPECT_EQ(c.raft(3).stranded_below(), 15u);
  EXPECT_EQ(c.raft(2).stranded_below(), 0u);
}

}  // namespace
}  // namespace raftlog::raft

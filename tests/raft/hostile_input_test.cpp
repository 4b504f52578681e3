// Hostile and faulty inputs: messages that contradict the receiver's state (commit beyond its log,
// terms near overflow, entries conflicting with committed ones, contexts never issued) are neutralised
// instead of reaching an assertion, and a node that lost durable entries it had acknowledged catches up
// without voting or counting toward commit (Config::promised_index). Each test here aborted or lost
// safety before the core checked these inputs.
#include <gtest/gtest.h>

#include <limits>

#include "test_cluster.h"
#include "util/prng.h"

namespace raftlog::raft {
namespace {

using testing::TestCluster;

constexpr std::uint64_t kHuge = std::numeric_limits<std::uint64_t>::max();

// A 3-node cluster with leader 1 and `count` committed client entries (indexes 2..count+1).
void elect_and_commit(TestCluster& c, int count) {
  ASSERT_TRUE(c.campaign_until_leader(1));
  for (int i = 0; i < count; ++i) {
    ASSERT_TRUE(c.propose(1, {"p" + std::to_string(i)}).proposed());
    c.deliver_all();
  }
}

Message heartbeat_from(NodeId from, NodeId to, Term term, Index commit) {
  Message m;
  m.type = MessageType::kHeartbeat;
  m.from = from;
  m.to = to;
  m.term = term;
  m.commit = commit;
  return m;
}

TEST(HostileInput, HeartbeatCommitBeyondTheLogIsClampedNotFatal) {
  TestCluster c({1, 2, 3});
  elect_and_commit(c, 3);
  const Index last = c.raft(2).last_index();
  c.step(2, heartbeat_from(1, 2, c.raft(1).term(), kHuge));  // aborted the node before
  EXPECT_EQ(c.raft(2).commit_index(), last);
  EXPECT_EQ(c.raft(2).last_index(), last);
  // The answer says where the log really ends, so the leader can re-send from there.
  bool answered = false;
  for (const Ready& rd : c.node(2).readies) {
    for (const Message& m : rd.messages) {
      if (m.type == MessageType::kHeartbeatResponse && m.reject && m.reject_hint == last)
        answered = true;
    }
  }
  EXPECT_TRUE(answered);
}

TEST(HostileInput, TermsAboveTheLimitAreIgnored) {
  TestCluster c({1, 2, 3});
  elect_and_commit(c, 1);
  const Term before = c.raft(2).term();
  for (Term term : {kHuge, kMaxTerm + 1}) {
    for (MessageType type : {MessageType::kHeartbeat, MessageType::kAppend, MessageType::kVote,
                             MessageType::kPreVote, MessageType::kTimeoutNow}) {
      Message m = heartbeat_from(3, 2, term, 0);
      m.type = type;
      c.step(2, m);
    }
  }
  EXPECT_EQ(c.raft(2).term(), before);
  // The cluster still elects and commits afterwards (before, every node adopted 2^64-1 and the next
  // election's term overflowed).
  c.deliver_all();
  ASSERT_TRUE(c.propose(1, {"after"}).proposed());
  c.deliver_all();
  EXPECT_EQ(c.raft(2).commit_index(), c.raft(1).last_index());
}

TEST(HostileInput, AppendConflictingWithACommittedEntryIsDropped) {
  TestCluster c({1, 2, 3});
  elect_and_commit(c, 3);
  const Index commit = c.raft(2).commit_index();
  ASSERT_GE(commit, 3u);
  Message m;
  m.type = MessageType::kAppend;
  m.from = 1;
  m.to = 2;
  m.term = c.raft(1).term() + 1;  // a later term than the committed entry's: a real conflict
  m.index = commit - 2;
  m.log_term = c.node(2).log.entry(commit - 2).term;
  m.commit = commit;
  Entry forged;
  forged.index = commit - 1;
  forged.term = m.term;
  forged.payload = "forged";
  m.entries = {forged};
  c.step(2, m);  // aborted the node before ("conflict with a committed entry")
  EXPECT_EQ(c.node(2).log.entry(commit - 1).payload, "p" + std::to_string(commit - 1 - 2));
  EXPECT_EQ(c.raft(2).commit_index(), commit);
}

TEST(HostileInput, HeartbeatResponseWithAContextNeverIssuedConfirmsNoRead) {
  TestCluster c({1, 2, 3});
  elect_and_commit(c, 1);
  c.isolate(2);
  c.isolate(3);
  const testing::ReadRequest read = c.read_index(1);
  ASSERT_FALSE(read.answered()) << "refused: " << read.result().error.message;
  Message forged;
  forged.type = MessageType::kHeartbeatResponse;
  forged.from = 2;
  forged.to = 1;
  forged.term = c.raft(1).term();
  forged.context = kHuge;
  c.step(1, forged);
  // One forged answer plus the leader itself would be a majority: the read must still wait.
  EXPECT_TRUE(c.node(1).read_states.empty());
  EXPECT_FALSE(read.answered());
}

// The follower's log loses its tail after acknowledging it (a storage fault). The leader's next
// heartbeat names a commit beyond it: before, the follower aborted on it at every restart.
TEST(HostileInput, FollowerThatLostAcknowledgedEntriesCatchesUpWithoutVoting) {
  TestCluster c({1, 2, 3});
  elect_and_commit(c, 6);
  const Index last = c.raft(1).last_index();
  ASSERT_EQ(c.raft(2).persisted_index(), last);
  // Its durable log is cut below what it acknowledged (the store's truncation also lowers the
  // checkpoint's commit index to the new end).
  c.restart_with_log_cut(2, last - 3);
  ASSERT_EQ(c.raft(2).last_index(), last - 4);
  ASSERT_EQ(c.raft(2).commit_index(), last - 4);
  // Node 3 is away: only node 2 can confirm new entries, and it must not do so before it caught up.
  c.isolate(3);
  c.tick(1, 2);  // heartbeats
  c.deliver_all();
  EXPECT_FALSE(c.raft(2).catching_up()) << "caught up from the leader";
  EXPECT_EQ(c.raft(2).persisted_index(), last);
  EXPECT_EQ(c.node(2).log.entry(last).payload, c.node(1).log.entry(last).payload);
  ASSERT_TRUE(c.propose(1, {"next"}).proposed());
  c.deliver_all();
  EXPECT_EQ(c.raft(1).commit_index(), last + 1);
  EXPECT_EQ(c.raft(2).commit_index(), last + 1);
}

TEST(HostileInput, CatchingUpNodeGrantsNoVotesAndDoesNotCampaign) {
  TestCluster c({1, 2, 3}, [](Config& config) {
    if (config.id == 2) {
      config.promised_index = 50;  // recovery found it may have promised up to 50
      config.promised_term = 5;
    }
  });
  ASSERT_TRUE(c.raft(2).catching_up());
  EXPECT_EQ(c.raft(2).catching_up_to(), 50u);
  // Node 2 never campaigns, however long it waits.
  c.isolate(1);
  c.isolate(3);
  c.tick(2, 100);
  EXPECT_EQ(c.raft(2).role(), Role::kFollower);
  EXPECT_EQ(c.raft(2).term(), 0u);
  c.heal();
  // Node 3 cannot win with node 2's vote alone while node 1 is away.
  c.isolate(1);
  EXPECT_FALSE(c.campaign_until_leader(3, 100));
  c.heal();
  ASSERT_TRUE(c.campaign_until_leader(1, 200));
  // Its log holds nothing of the leader's term 1... until the leader's no-op arrives: an entry of a
  // term above promised_term? No: term 1 < 5. So it stays catching up until it reaches index 50.
  c.deliver_all();
  EXPECT_TRUE(c.raft(2).catching_up());
}

TEST(HostileInput, CatchingUpNodesAcknowledgementsDoNotCountTowardCommit) {
  TestCluster c({1, 2, 3}, [](Config& config) {
    if (config.id == 2) {
      config.promised_index = 6;
      config.promised_term = 1;
    }
  });
  ASSERT_TRUE(c.campaign_until_leader(1));  // node 3 votes
  c.isolate(3);
  ASSERT_TRUE(c.propose(1, {"a"}).proposed());  // index 2
  c.deliver_all();
  EXPECT_EQ(c.raft(1).commit_index(), 1u)
      << "node 2's acknowledgement counted while it was catching up";
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(c.propose(1, {"b"}).proposed());  // up to index 6
    c.deliver_all();
  }
  EXPECT_FALSE(c.raft(2).catching_up());
  EXPECT_EQ(c.raft(1).commit_index(), 6u) << "counted once it had caught up";
}

TEST(HostileInput, AnEntryOfALaterTermEndsCatchingUp) {
  TestCluster c({1, 2, 3}, [](Config& config) {
    if (config.id == 2) {
      config.promised_index = 1000;  // far beyond anything the cluster will write here
      config.promised_term = 0;
    }
  });
  ASSERT_TRUE(c.campaign_until_leader(1));  // the no-op of term 1 > promised_term 0
  c.deliver_all();
  EXPECT_FALSE(c.raft(2).catching_up());
}

// Seeded mutation: honest traffic whose fields are pushed beyond what the receiver can hold (commit
// beyond any log, terms above the limit, indexes and hints beyond the log, contexts never issued).
// Each such value must be neutralised: no abort, and every node's committed prefix stays the same
// log, with every commit index at most what a majority holds.
TEST(HostileInput, SeededMutationsNeverAbortOrBreakCommittedPrefixes) {
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    TestCluster c({1, 2, 3});
    util::SplitMix64Prng prng(seed);
    int mutations = 0;  // the sweep means nothing unless messages really were mutated
    c.set_mutator([&prng, &mutations](Message& m) {
      if (prng.below(4) != 0) return;
      ++mutations;
      switch (prng.below(6)) {
        case 0:
          m.commit = kHuge - prng.below(3);
          break;
        case 1:
          m.term = kMaxTerm + 1 + prng.below(1000);
          break;
        case 2:
          if (m.type == MessageType::kAppendResponse || m.type == MessageType::kHeartbeatResponse) {
            m.index = kHuge;
            m.reject_hint = kHuge;
          }
          break;
        case 3:
          m.context = kHuge;
          break;
        case 4:
          m.reject_hint = kHuge, m.hint_term = kHuge;
          break;
        default:
          m.commit = m.commit + 1000 + prng.below(1000);
          break;
      }
    });
    int proposals = 0;
    for (int round = 0; round < 60; ++round) {
      c.tick_all(1);
      const NodeId leader = c.leader();
      if (leader != kNoNode && prng.below(2) == 0) {
        if (c.propose(leader, {"s" + std::to_string(round)}).proposed()) ++proposals;
      }
      c.deliver_all();
      // Committed prefixes agree: every node's committed entries match the node with the highest commit.
      NodeId top = 1;
      for (NodeId id : c.ids()) {
        ASSERT_LE(c.raft(id).commit_index(), c.raft(id).last_index()) << "seed " << seed;
        ASSERT_LE(c.raft(id).term(), kMaxTerm) << "seed " << seed;
        if (c.raft(id).commit_index() > c.raft(top).commit_index()) top = id;
      }
      const Index top_commit = c.raft(top).commit_index();
      std::size_t holders = 0;
      for (NodeId id : c.ids()) {
        for (Index i = 1; i <= c.raft(id).commit_index(); ++i) {
          ASSERT_EQ(c.node(id).log.entry(i).term, c.node(top).log.entry(i).term) << "seed " << seed;
          ASSERT_EQ(c.node(id).log.entry(i).payload, c.node(top).log.entry(i).payload)
              << "seed " << seed;
        }
        // The entries up to the store's flushed index are what the node holds durably.
        if (c.node(id).log.durable_index() >= top_commit &&
            (top_commit == 0 ||
             c.node(id).log.term_at(top_commit) == c.node(top).log.term_at(top_commit))) {
          ++holders;
        }
      }
      ASSERT_GE(holders, 2u) << "seed " << seed << ": commit " << top_commit
                             << " beyond what a majority holds";
    }
    EXPECT_GT(proposals, 0) << "seed " << seed;
    EXPECT_GT(mutations, 0) << "seed " << seed;
  }
}

}  // namespace
}  // namespace raftlog::raft

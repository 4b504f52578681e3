// Replication: commit by durable majority, conflict truncation, fast backtracking, bounded batches and
// in-flight windows, proposal bounds and results, stale durability reports.
#include <gtest/gtest.h>

#include "test_cluster.h"

namespace raftlog::raft {
namespace {

using testing::make_entries;
using testing::payload_entry;
using testing::TestCluster;
using testing::TestNode;

bool is_append_to(const Message& m, NodeId to) {
  return m.type == MessageType::kAppend && m.to == to;
}

TEST(Replication, ProposalCommitsOnEveryNode) {
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  const ProposeResult result = c.raft(1).propose({payload_entry("a"), payload_entry("b")});
  ASSERT_EQ(result.status, ProposeStatus::kOk);
  EXPECT_EQ(result.first_index, 2u);
  EXPECT_EQ(result.last_index, 3u);
  EXPECT_EQ(result.term, 1u);
  c.deliver_all();
  for (NodeId id : c.ids()) {
    EXPECT_EQ(c.raft(id).commit_index(), 3u) << "node " << id;
    EXPECT_EQ(c.node(id).delivered_commit, 3u);
    EXPECT_EQ(c.node(id).log.entry(3).payload, "b");
  }
}

// A large entry is not copied on the loop thread: the Ready's entries to persist and the appends to
// both followers share the proposed bytes (raft/payload.h), and a follower appends the bytes it was
// sent without copying them again.
TEST(Replication, ALargeEntrySharesOneBufferFromProposalToPersistAndSend) {
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  Entry big;
  big.payload = std::string(16 << 10, 'z');  // within the test config's message bound
  const Payload proposed = big.payload;
  ASSERT_EQ(c.raft(1).propose({big}).status, ProposeStatus::kOk);
  const Ready leader_ready = c.raft(1).ready();
  ASSERT_EQ(leader_ready.entries.size(), 1u);
  EXPECT_TRUE(leader_ready.entries[0].payload.shares_bytes_with(proposed));
  std::size_t appends = 0;
  for (const Message& m : leader_ready.messages) {
    if (m.type != MessageType::kAppend || m.entries.empty()) continue;
    ++appends;
    EXPECT_TRUE(m.entries.back().payload.shares_bytes_with(proposed)) << "append to node " << m.to;
  }
  EXPECT_EQ(appends, 2u);
  for (const Message& m : leader_ready.messages) {
    if (m.type != MessageType::kAppend || m.to != 2) continue;
    c.raft(2).step(m);
    const Ready follower_ready = c.raft(2).ready();
    ASSERT_FALSE(follower_ready.entries.empty());
    EXPECT_TRUE(follower_ready.entries.back().payload.shares_bytes_with(proposed));
  }
}

TEST(Replication, LeadersOwnUnpersistedEntriesDoNotCountTowardQuorum) {
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.isolate(3);
  c.node(1).hold_persistence = true;
  ASSERT_EQ(c.raft(1).propose({payload_entry("a")}).status, ProposeStatus::kOk);
  c.deliver_all();
  // Node 2 acknowledged index 2, but the leader itself has not made it durable: 1 of 3 is no majority.
  EXPECT_EQ(c.raft(1).progress()[1].match_index, 2u);
  EXPECT_EQ(c.raft(1).persisted_index(), 1u);
  EXPECT_EQ(c.raft(1).commit_index(), 1u);
  c.node(1).hold_persistence = false;
  c.persist_all(1);
  c.deliver_all();
  EXPECT_EQ(c.raft(1).commit_index(), 2u);
}

TEST(Replication, FollowerAcksOnlyAfterPersisting) {
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.node(2).hold_persistence = true;
  c.node(3).hold_persistence = true;
  ASSERT_EQ(c.raft(1).propose({payload_entry("a")}).status, ProposeStatus::kOk);
  c.deliver_all();
  EXPECT_EQ(c.raft(1).commit_index(), 1u) << "followers hold their acks until durable";
  EXPECT_EQ(c.node(2).log.last_index(), 2u) << "but the entry was handed out and appended";
  c.persist_all(2);
  c.deliver_all();
  EXPECT_EQ(c.raft(1).commit_index(), 2u);
}

TEST(Replication, ConflictTruncatesOnlyTheUncommittedTail) {
  // Follower 2 has a stale tail (indexes 3-4, term 1) that leader 1 (term 2) never had.
  TestCluster c(
      {1, 2, 3},
      {make_entries(1, {1, 1, 2}), make_entries(1, {1, 1, 1, 1}), make_entries(1, {1, 1, 2})},
      {HardState{2, 0, 2}, HardState{1, 0, 2}, HardState{2, 0, 2}});
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  const TestNode& follower = c.node(2);
  bool saw_truncate = false;
  for (const Ready& rd : follower.readies) {
    if (rd.truncate_from) {
      saw_truncate = true;
      EXPECT_EQ(*rd.truncate_from, 3u);
      EXPECT_GT(*rd.truncate_from, rd.hard_state ? rd.hard_state->commit : 0);
    }
  }
  EXPECT_TRUE(saw_truncate);
  ASSERT_EQ(follower.log.last_index(), 4u);  // 1,1,2 + the leader's no-op of term 3
  EXPECT_EQ(follower.log.entry(3).term, 2u);
  EXPECT_EQ(follower.log.entry(4).type, EntryType::kNoop);
  EXPECT_EQ(c.raft(2).commit_index(), 4u);
}

TEST(Replication, AppendBelowCommitIsAnsweredWithTheCommitIndex) {
  TestCluster c({1, 2, 3}, {make_entries(1, {1}), make_entries(1, {1, 1, 1}), make_entries(1, {1})},
                {HardState{1, 0, 1}, HardState{1, 0, 3}, HardState{1, 0, 1}});
  Message append;
  append.type = MessageType::kAppend;
  append.from = 1;
  append.to = 2;
  append.term = 1;
  append.index = 1;
  append.log_term = 1;
  append.entries = make_entries(2, {1});
  c.raft(2).step(append);
  Ready rd = c.raft(2).ready();
  EXPECT_FALSE(rd.truncate_from.has_value());
  EXPECT_TRUE(rd.entries.empty());
  ASSERT_EQ(rd.messages_after_persist.size(), 1u);
  EXPECT_EQ(rd.messages_after_persist[0].index, 3u);
  EXPECT_FALSE(rd.messages_after_persist[0].reject);
}

TEST(Replication, MalformedAppendIsIgnored) {
  TestCluster c({1, 2, 3});
  Message append;
  append.type = MessageType::kAppend;
  append.from = 1;
  append.to = 2;
  append.term = 1;
  append.index = 0;
  append.entries = make_entries(2, {1});  // should start at index 1
  c.raft(2).step(append);
  Ready rd = c.raft(2).ready();
  EXPECT_TRUE(rd.entries.empty());
  EXPECT_TRUE(rd.messages_after_persist.empty());
  EXPECT_EQ(c.raft(2).last_index(), 0u);
}

TEST(Replication, FastBacktrackingSkipsADivergentTermInOneRoundTrip) {
  // Node 1 holds 50 entries of a stale term 2; nodes 2 and 3 hold 20 entries of term 3.
  std::vector<Term> stale(50, 2);
  stale.insert(stale.begin(), 1);
  std::vector<Term> fresh(20, 3);
  fresh.insert(fresh.begin(), 1);
  TestCluster c({1, 2, 3}, {make_entries(1, stale), make_entries(1, fresh), make_entries(1, fresh)},
                {HardState{3, 0, 1}, HardState{3, 0, 1}, HardState{3, 0, 1}});
  ASSERT_TRUE(c.campaign_until_leader(2));
  c.deliver_all();
  const std::size_t rejections = c.count_delivered([](const Message& m) {
    return m.type == MessageType::kAppendResponse && m.from == 1 && m.reject;
  });
  EXPECT_LE(rejections, 1u) << "one hint should skip all 50 stale entries";
  EXPECT_EQ(c.node(1).log.last_index(), 22u);
  EXPECT_EQ(c.node(1).log.entry(21).term, 3u);
  EXPECT_EQ(c.raft(1).commit_index(), 22u);
}

TEST(Replication, ShortDivergentTailIsReplacedByTheLeadersEntries) {
  // The follower's tail (term 2) is longer than the leader's log: it must shrink to the leader's.
  std::vector<Term> stale(8, 2);
  stale.insert(stale.begin(), 1);
  std::vector<Term> fresh(4, 3);
  fresh.insert(fresh.begin(), 1);
  TestCluster c({1, 2, 3}, {make_entries(1, stale), make_entries(1, fresh), make_entries(1, fresh)},
                {HardState{3, 0, 1}, HardState{3, 0, 1}, HardState{3, 0, 1}});
  ASSERT_TRUE(c.campaign_until_leader(2));
  c.deliver_all();
  EXPECT_EQ(c.node(1).log.last_index(), 6u);
  for (Index i = 2; i <= 5; ++i) EXPECT_EQ(c.node(1).log.entry(i).term, 3u);
}

TEST(Replication, BatchesAreBoundedByEntriesAndBytes) {
  TestCluster c({1, 2, 3}, [](Config& config) {
    config.max_entries_per_message = 3;
    config.max_bytes_per_message = 3 * (Entry::kEntryOverheadBytes + 10);
    config.max_uncommitted_entries = 100;
  });
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.isolate(2);
  c.isolate(3);
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(c.raft(1).propose({payload_entry("0123456789")}).status, ProposeStatus::kOk);
  }
  c.deliver_all();
  c.heal();
  c.tick_all(30);
  for (const Message& m : c.delivered()) {
    if (m.type != MessageType::kAppend) continue;
    EXPECT_LE(m.entries.size(), 3u);
    std::size_t bytes = 0;
    for (const Entry& e : m.entries) bytes += e.byte_size();
    EXPECT_LE(bytes, 3 * (Entry::kEntryOverheadBytes + 10));
  }
  EXPECT_EQ(c.raft(2).commit_index(), 11u);
  EXPECT_EQ(c.raft(3).commit_index(), 11u);
}

TEST(Replication, InflightWindowBoundsUnacknowledgedAppends) {
  TestCluster c({1, 2, 3}, [](Config& config) {
    config.max_inflight_messages = 2;
    config.max_entries_per_message = 1;
  });
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  ASSERT_FALSE(c.raft(1).progress()[1].probing) << "node 2 acked the no-op: replicate state";
  // Node 2's answers are lost from now on.
  c.add_drop_rule([](const Message& m) { return m.from == 2; });
  const std::size_t before =
      c.count_delivered([](const Message& m) { return is_append_to(m, 2) && !m.entries.empty(); });
  for (int i = 0; i < 10; ++i)
    ASSERT_EQ(c.raft(1).propose({payload_entry("p")}).status, ProposeStatus::kOk);
  c.deliver_all();
  const std::size_t sent = c.count_delivered([](const Message& m) {
    return is_append_to(m, 2) && !m.entries.empty();
  }) - before;
  EXPECT_EQ(sent, 2u) << "only max_inflight_messages appends may be unacknowledged";
  EXPECT_EQ(c.raft(1).progress()[1].inflight_messages, 2u);
  EXPECT_EQ(c.raft(1).commit_index(), 11u) << "node 3 keeps the majority going";
}

TEST(Replication, ProbeStateSendsOneAppendUntilAnswered) {
  TestCluster c({1, 2, 3});
  c.isolate(
      2);  // node 2 never answers: its progress stays in probe with the first append outstanding
  ASSERT_TRUE(c.campaign_until_leader(1));
  for (int i = 0; i < 5; ++i)
    ASSERT_EQ(c.raft(1).propose({payload_entry("p")}).status, ProposeStatus::kOk);
  std::size_t appends_to_2 = 0;
  while (c.raft(1).has_ready()) {
    for (const Message& m : c.raft(1).ready().messages) appends_to_2 += is_append_to(m, 2) ? 1 : 0;
  }
  EXPECT_EQ(appends_to_2, 0u) << "the probe sent at election is still outstanding";
  EXPECT_TRUE(c.raft(1).progress()[1].probing);
}

TEST(Proposals, ResultsForEveryRefusal) {
  TestCluster c({1, 2, 3}, [](Config& config) {
    config.max_entries_per_message = 4;
    config.max_uncommitted_entries = 6;
    config.max_bytes_per_message = 1000;
  });
  ASSERT_TRUE(c.campaign_until_leader(1));
  const ProposeResult not_leader = c.raft(2).propose({payload_entry("x")});
  EXPECT_EQ(not_leader.status, ProposeStatus::kNotLeader);
  EXPECT_EQ(not_leader.leader_hint, 1u);
  EXPECT_EQ(c.raft(1).propose({}).status, ProposeStatus::kEmpty);
  Entry config_entry;
  config_entry.type = EntryType::kConfig;
  config_entry.payload = encode_config(ConfState{{1, 2}});
  EXPECT_EQ(c.raft(1).propose({config_entry}).status, ProposeStatus::kInvalidEntry);
  EXPECT_EQ(c.raft(1).propose({payload_entry(std::string(1000, 'x'))}).status,
            ProposeStatus::kTooLarge);
  std::vector<Entry> five(5, payload_entry("x"));
  EXPECT_EQ(c.raft(1).propose(five).status, ProposeStatus::kTooLarge);
  EXPECT_EQ(c.raft(1).last_index(), 1u) << "refused proposals append nothing";
}

TEST(Proposals, UncommittedBoundRefusesThenRecovers) {
  TestCluster c({1, 2, 3}, [](Config& config) {
    config.max_entries_per_message = 4;
    config.max_uncommitted_entries = 6;
  });
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.isolate(2);
  c.isolate(3);
  std::vector<Entry> four(4, payload_entry("x"));
  std::vector<Entry> two(2, payload_entry("x"));
  EXPECT_EQ(c.raft(1).propose(four).status, ProposeStatus::kOk);
  EXPECT_EQ(c.raft(1).propose(four).status, ProposeStatus::kTooManyPending);
  EXPECT_EQ(c.raft(1).propose(two).status, ProposeStatus::kOk);
  EXPECT_EQ(c.raft(1).propose({payload_entry("y")}).status, ProposeStatus::kTooManyPending);
  c.heal();
  c.tick_all(3);
  EXPECT_EQ(c.raft(1).commit_index(), 7u);
  EXPECT_EQ(c.raft(1).propose(four).status, ProposeStatus::kOk);
}

TEST(Proposals, UncommittedByteBound) {
  TestCluster c({1, 2, 3}, [](Config& config) {
    config.max_bytes_per_message = 2 * (Entry::kEntryOverheadBytes + 100);
    config.max_uncommitted_bytes = 3 * (Entry::kEntryOverheadBytes + 100);
  });
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.isolate(2);
  c.isolate(3);
  const Entry big = payload_entry(std::string(100, 'b'));
  EXPECT_EQ(c.raft(1).propose({big, big}).status, ProposeStatus::kOk);
  EXPECT_EQ(c.raft(1).propose({big, big}).status, ProposeStatus::kTooManyPending);
  EXPECT_EQ(c.raft(1).propose({big}).status, ProposeStatus::kOk);
}

TEST(Persistence, StaleReportAfterTruncationIsIgnored) {
  TestCluster c({1, 2, 3},
                {make_entries(1, {1, 1, 2}), make_entries(1, {1, 1}), make_entries(1, {1, 1, 2})},
                {HardState{2, 0, 2}, HardState{1, 0, 2}, HardState{2, 0, 2}});
  // Node 2 receives entries 3-4 of term 1 from an old leader, holds them unpersisted...
  c.node(2).hold_persistence = true;
  Message old_append;
  old_append.type = MessageType::kAppend;
  old_append.from = 3;
  old_append.to = 2;
  old_append.term = 1;
  old_append.index = 2;
  old_append.log_term = 1;
  old_append.entries = make_entries(3, {1, 1});
  c.raft(2).step(old_append);
  c.process(2);
  EXPECT_EQ(c.raft(2).last_index(), 4u);
  EXPECT_EQ(c.raft(2).persisted_index(), 2u);
  // ...then the real leader of term 2 overwrites index 3.
  Message append = old_append;
  append.from = 1;
  append.term = 2;
  append.entries = make_entries(3, {2});
  c.raft(2).step(append);
  c.process(2);
  EXPECT_EQ(c.raft(2).last_index(), 3u);
  c.raft(2).on_persisted(4, 1);  // the old batch's report arrives late
  EXPECT_EQ(c.raft(2).persisted_index(), 2u) << "a report about replaced entries must be ignored";
  c.raft(2).on_persisted(3, 2);
  EXPECT_EQ(c.raft(2).persisted_index(), 3u);
}

}  // namespace
}  // namespace raftlog::raft

namespace raftlog::raft {
namespace {

// A peer that needs entries the leader trimmed (no snapshots) is probed at the leader's first index
// once per heartbeat answer, never in a tight loop; once it holds those entries (rebuilt from a copy
// of a healthy node's log), the probe succeeds and it catches up.
TEST(Replication, PeerBehindTheFirstIndexIsReprobedPerHeartbeatAndCatchesUpOnceRebuilt) {
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.isolate(3);
  for (int i = 0; i < 20; ++i)
    ASSERT_EQ(c.raft(1).propose({payload_entry("e" + std::to_string(i))}).status,
              ProposeStatus::kOk);
  c.deliver_all();
  const Index last = c.raft(1).commit_index();
  ASSERT_EQ(last, 21u);
  // The leader trims everything below 15 (retention); node 3 holds only the first no-op.
  c.node(1).log.truncate_prefix(15);
  c.node(1).durable_log.truncate_prefix(15);
  c.heal();
  const std::size_t delivered_before = c.delivered().size();
  c.tick_all(10);  // 10 heartbeat rounds
  std::size_t appends_to_3 = 0;
  for (std::size_t i = delivered_before; i < c.delivered().size(); ++i) {
    if (is_append_to(c.delivered()[i], 3)) ++appends_to_3;
  }
  EXPECT_GE(appends_to_3, 1u) << "the stranded peer is never probed";
  EXPECT_LE(appends_to_3, 12u) << "probing faster than once per heartbeat";
  EXPECT_EQ(c.node(3).log.last_index(), 1u);
  EXPECT_LT(c.raft(1).progress()[2].next_index, 15u);

  // Rebuild node 3 from node 2's log (as an operator copies a healthy follower's log/), restart it.
  c.node(3).durable_log = c.node(2).durable_log;
  c.crash_restart(3);
  c.tick_all(5);
  EXPECT_EQ(c.raft(1).progress()[2].match_index, last);
  EXPECT_EQ(c.node(3).log.last_index(), last);
  EXPECT_EQ(c.node(3).log.entry(last).payload, "e19");
}

}  // namespace
}  // namespace raftlog::raft

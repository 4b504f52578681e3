// Replication: commit by durable majority, conflict truncation, fast backtracking, bounded batches and
// in-flight windows, proposal bounds and results, stale durability reports.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>

#include "raft/memory_log.h"
#include "test_cluster.h"

namespace raftlog::raft {
namespace {

using testing::make_entries;
using testing::TestCluster;
using testing::TestNode;
using ErrorCode = replica::ErrorCode;

bool is_append_to(const Message& m, NodeId to) {
  return m.type == MessageType::kAppend && m.to == to;
}

TEST(Replication, ProposalCommitsOnEveryNode) {
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  const testing::Proposal result = c.propose(1, {"a", "b"});
  ASSERT_TRUE(result.proposed());
  EXPECT_EQ(result.placement.first, 2u);
  EXPECT_EQ(result.placement.last, 3u);
  EXPECT_EQ(result.placement.term, 1u);
  c.deliver_all();
  for (NodeId id : c.ids()) {
    EXPECT_EQ(c.raft(id).commit_index(), 3u) << "node " << id;
    EXPECT_EQ(c.node(id).delivered_commit, 3u);
    EXPECT_EQ(c.node(id).log.entry(3).payload, "b");
  }
  // The client's answer came once the entries committed, with the same placement.
  ASSERT_TRUE(result.answer.answered());
  EXPECT_TRUE(result.answer.result().error.ok());
  EXPECT_EQ(result.answer.result().first_index, 2u);
  EXPECT_EQ(result.answer.result().last_index, 3u);
}

// A large entry is not copied on the loop thread: the Ready's entries to persist and the appends to
// both followers share the proposed bytes (raft/payload.h), and a follower appends the bytes it was
// sent without copying them again. The payload's buffer is moved from the client's string into the
// core (the replica's append takes the strings by value), so the Ready's entry still points at it.
TEST(Replication, ALargeEntrySharesOneBufferFromProposalToPersistAndSend) {
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  std::vector<std::string> payloads;
  payloads.emplace_back(16 << 10, 'z');  // within the test config's message bound
  const char* const proposed = payloads[0].data();
  const std::size_t mark = c.node(1).readies.size();
  c.node(2).hold_persistence = true;  // so that its first Ready is the one of this append
  ASSERT_TRUE(c.propose(1, std::move(payloads)).proposed());
  ASSERT_GT(c.node(1).readies.size(), mark);
  const Ready leader_ready = c.node(1).readies[mark];
  ASSERT_EQ(leader_ready.entries.size(), 1u);
  const Payload& persisted = leader_ready.entries[0].payload;
  EXPECT_EQ(persisted.data(), proposed) << "the proposed bytes were copied";
  std::size_t appends = 0;
  for (const Message& m : leader_ready.messages) {
    if (m.type != MessageType::kAppend || m.entries.empty()) continue;
    ++appends;
    EXPECT_TRUE(m.entries.back().payload.shares_bytes_with(persisted)) << "append to node " << m.to;
  }
  EXPECT_EQ(appends, 2u);
  // The follower's side: without an append to node 2 in the network nothing would be checked here.
  bool follower_checked = false;
  for (std::size_t i = 0; i < c.network_size() && !follower_checked; ++i) {
    if (!is_append_to(c.in_flight()[i], 2)) continue;
    const std::size_t follower_mark = c.node(2).readies.size();
    c.deliver_at(i);
    ASSERT_GT(c.node(2).readies.size(), follower_mark);
    const Ready& follower_ready = c.node(2).readies[follower_mark];
    ASSERT_FALSE(follower_ready.entries.empty());
    EXPECT_TRUE(follower_ready.entries.back().payload.shares_bytes_with(persisted));
    follower_checked = true;
  }
  EXPECT_TRUE(follower_checked) << "no append to node 2 was in flight";
}

// The proposals a driver makes in one round (the Node steps its whole input batch, then drains the
// core) leave as one Append per follower, not one each. Each append still gets its own range and its
// own answer, and a refused one in the middle of the round does not fail its neighbours.
TEST(Replication, ProposalsOfOneRoundShareOneAppendPerFollower) {
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  const std::size_t mark = c.node(1).readies.size();
  std::vector<std::shared_ptr<std::optional<replica::AppendResult>>> answers;
  std::vector<replica::Replica::AppendPlacement> placements;
  const auto append = [&](std::string payload, std::uint64_t client_id, std::uint64_t sequence) {
    replica::Replica::AppendRequest request;
    request.payloads = {std::move(payload)};
    request.client_id = client_id;
    request.sequence = sequence;
    request.deadline = replica::Clock::time_point::max();
    auto slot = std::make_shared<std::optional<replica::AppendResult>>();
    request.done = [slot](replica::AppendResult result) { *slot = std::move(result); };
    answers.push_back(slot);
    placements.push_back(c.replica(1).append(std::move(request)));
  };
  append("a", 7, 1);
  append("b", 8, 1);
  append("refused", 9, 0);  // sequence 0 with a client id: refused at once
  append("c", 7, 2);
  ASSERT_TRUE(answers[2]->has_value());
  EXPECT_EQ((*answers[2])->error.code, ErrorCode::kInvalidArgument);
  EXPECT_FALSE(placements[2].proposed);
  c.process(1);
  ASSERT_GT(c.node(1).readies.size(), mark);
  std::map<NodeId, int> appends_to;
  for (std::size_t r = mark; r < c.node(1).readies.size(); ++r) {
    for (const Message& m : c.node(1).readies[r].messages) {
      if (m.type != MessageType::kAppend || m.entries.empty()) continue;
      ++appends_to[m.to];
      ASSERT_EQ(m.entries.size(), 3u) << "to node " << m.to;
      EXPECT_EQ(m.entries.front().payload, "a");
      EXPECT_EQ(m.entries.back().payload, "c");
    }
  }
  EXPECT_EQ(appends_to, (std::map<NodeId, int>{{2, 1}, {3, 1}}));
  c.deliver_all();
  const std::vector<std::pair<std::size_t, std::string>> accepted = {{0, "a"}, {1, "b"}, {3, "c"}};
  for (const auto& [i, payload] : accepted) {
    ASSERT_TRUE(placements[i].proposed) << payload;
    ASSERT_TRUE(answers[i]->has_value()) << payload;
    const replica::AppendResult& result = **answers[i];
    EXPECT_TRUE(result.error.ok()) << payload;
    EXPECT_EQ(result.first_index, placements[i].first) << payload;
    EXPECT_EQ(result.last_index, placements[i].first) << payload;
    EXPECT_EQ(c.node(2).log.entry(result.first_index).payload, payload);
  }
  EXPECT_EQ(placements[1].first, placements[0].first + 1);
  EXPECT_EQ(placements[3].first, placements[1].first + 1);
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
  c.step(2, append);
  ASSERT_EQ(c.node(2).readies.size(), 1u);
  const Ready& rd = c.node(2).readies[0];
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
  c.step(2, append);
  for (const Ready& rd : c.node(2).readies) {
    EXPECT_TRUE(rd.entries.empty());
    EXPECT_TRUE(rd.messages_after_persist.empty());
  }
  EXPECT_EQ(c.raft(2).last_index(), 0u);
  EXPECT_EQ(c.node(2).log.last_index(), 0u);
}

// Nodes 1-3 in term 3, all holding entry 1 of term 1; after it node 1 holds `stale` entries of a
// stale term 2, nodes 2 and 3 `fresh` entries of term 3.
TestCluster cluster_with_node_1_divergent(std::size_t stale, std::size_t fresh) {
  std::vector<Term> stale_terms(stale, 2);
  stale_terms.insert(stale_terms.begin(), 1);
  std::vector<Term> fresh_terms(fresh, 3);
  fresh_terms.insert(fresh_terms.begin(), 1);
  return TestCluster({1, 2, 3},
                     {make_entries(1, stale_terms), make_entries(1, fresh_terms),
                      make_entries(1, fresh_terms)},
                     {HardState{3, 0, 1}, HardState{3, 0, 1}, HardState{3, 0, 1}});
}

TEST(Replication, FastBacktrackingSkipsADivergentTermInOneRoundTrip) {
  // Node 1 holds 50 entries of a stale term 2; nodes 2 and 3 hold 20 entries of term 3.
  TestCluster c = cluster_with_node_1_divergent(50, 20);
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
  TestCluster c = cluster_with_node_1_divergent(8, 4);
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
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(c.propose(1, {"0123456789"}).proposed());
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
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(c.propose(1, {"p"}).proposed());
  c.deliver_all();
  const std::size_t sent = c.count_delivered([](const Message& m) {
    return is_append_to(m, 2) && !m.entries.empty();
  }) - before;
  EXPECT_EQ(sent, 2u) << "only max_inflight_messages appends may be unacknowledged";
  EXPECT_EQ(c.raft(1).progress()[1].inflight_messages, 2u);
  EXPECT_EQ(c.raft(1).commit_index(), 11u) << "node 3 keeps the majority going";
}

// Issue 15, drills F6: a follower thousands of entries behind (a new learner, a follower back after
// a long absence) once cost its leader max_inflight_messages full appends in one round (64 x 8 MiB
// read from the store and handed to the transport in raftlogd): seconds of loop time, heartbeats
// late, elections. The in-flight window is bounded in bytes too (Config::max_inflight_bytes, 16 MiB
// by default), so each round reads and sends at most that much (plus one entry) to it.
TEST(Replication, AFollowerFarBehindCostsTheLeaderAtMostTheByteWindowPerRound) {
  constexpr std::size_t kWindowBytes = 16 << 20;  // Config's default max_inflight_bytes
  constexpr std::size_t kPayloadBytes = 48 << 10;
  constexpr int kEntries = 800;  // 37.5 MiB behind: more than twice the window
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  const Term term = c.raft(1).term();
  c.isolate(3);
  for (int i = 0; i < kEntries; ++i) {
    ASSERT_TRUE(
        c.propose(1, {std::string(kPayloadBytes, static_cast<char>('a' + i % 26))}).proposed());
    if (i % 32 == 31) c.deliver_all();  // node 2 keeps the majority going
  }
  c.deliver_all();
  const Index last = c.raft(1).commit_index();
  ASSERT_GE(last, static_cast<Index>(kEntries));
  ASSERT_LT(c.node(3).log.last_index(), 3u);

  c.heal();
  const std::size_t mark = c.node(1).readies.size();
  for (int round = 0; round < 400 && c.node(3).log.last_index() < last; ++round) c.tick_all(1);
  ASSERT_EQ(c.node(3).log.last_index(), last) << "node 3 did not catch up";
  EXPECT_EQ(c.raft(3).commit_index(), last);
  EXPECT_EQ(c.leader(), 1u);
  EXPECT_EQ(c.raft(1).term(), term) << "the catch-up cost an election";

  std::size_t largest_ready_bytes = 0;
  std::size_t total_bytes = 0;
  for (std::size_t i = mark; i < c.node(1).readies.size(); ++i) {
    std::size_t ready_bytes = 0;
    for (const Message& m : c.node(1).readies[i].messages) {
      if (!is_append_to(m, 3)) continue;
      for (const Entry& e : m.entries) ready_bytes += e.byte_size();
    }
    largest_ready_bytes = std::max(largest_ready_bytes, ready_bytes);
    total_bytes += ready_bytes;
  }
  EXPECT_GE(total_bytes, static_cast<std::size_t>(kEntries) * kPayloadBytes);
  EXPECT_LE(largest_ready_bytes, kWindowBytes + kPayloadBytes + Entry::kEntryOverheadBytes)
      << "one round read and sent more than the in-flight byte window to the follower behind";
}

// While a follower far behind receives and syncs a full window, its heartbeat answers (the control
// lane) keep coming: each once freed a slot of the full window and sent another append, so sending
// was paced by heartbeats, not acknowledgements, past the byte window (and in raftlogd past the
// append lane's queue, which then dropped what the leader had read). A slot is freed only after an
// election timeout without any append response.
TEST(Replication, HeartbeatAnswersDoNotOpenAFullWindowWhileItsAppendsAreUnanswered) {
  constexpr std::size_t kWindowBytes = 256 << 10;
  constexpr std::size_t kPayloadBytes = 40 << 10;
  TestCluster c({1, 2, 3}, [](Config& config) {
    config.max_inflight_bytes = kWindowBytes;
    config.max_bytes_per_message = 128 << 10;
  });
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE(c.propose(1, {std::string(kPayloadBytes, 'h')}).proposed());
  }
  // Node 3's append responses are held back (slow disk, a backed-up append lane); its heartbeat
  // responses are not. Fewer ticks than an election timeout (10).
  c.add_drop_rule([](const Message& m) {
    return m.from == 3 && m.type == MessageType::kAppendResponse;
  });
  const std::size_t mark = c.delivered().size();
  c.deliver_all();
  c.tick_all(8);
  std::size_t sent_bytes = 0;
  for (std::size_t i = mark; i < c.delivered().size(); ++i) {
    if (!is_append_to(c.delivered()[i], 3)) continue;
    for (const Entry& e : c.delivered()[i].entries) sent_bytes += e.byte_size();
  }
  EXPECT_GT(sent_bytes, 0u);
  EXPECT_LE(sent_bytes, kWindowBytes + kPayloadBytes + Entry::kEntryOverheadBytes)
      << "heartbeat answers opened the full window while its appends were unanswered";
  // Once the answers flow again, node 3 catches up.
  c.heal();
  c.tick_all(30);
  EXPECT_EQ(c.node(3).log.last_index(), c.raft(1).commit_index());
}

TEST(Replication, ProbeStateSendsOneAppendUntilAnswered) {
  TestCluster c({1, 2, 3});
  c.isolate(
      2);  // node 2 never answers: its progress stays in probe with the first append outstanding
  ASSERT_TRUE(c.campaign_until_leader(1));
  const std::size_t mark = c.node(1).readies.size();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(c.propose(1, {"p"}).proposed());
  std::size_t appends_to_2 = 0;
  for (std::size_t i = mark; i < c.node(1).readies.size(); ++i) {
    for (const Message& m : c.node(1).readies[i].messages)
      appends_to_2 += is_append_to(m, 2) ? 1 : 0;
  }
  EXPECT_EQ(appends_to_2, 0u) << "the probe sent at election is still outstanding";
  EXPECT_TRUE(c.raft(1).progress()[1].probing);
}

// The core's refusals reach the client as the replica's answers (replica/results.h): NOT_LEADER with
// the leader, INVALID_ARGUMENT naming the core's status, RESOURCE_EXHAUSTED for its bounds.
bool refused_by_core_as(const testing::Proposal& p, ProposeStatus status) {
  return !p.proposed() && p.refusal() == ErrorCode::kInvalidArgument &&
         p.answer.result().error.message.find(to_string(status)) != std::string::npos;
}

bool refused_as_too_many_pending(const testing::Proposal& p) {
  return !p.proposed() && p.refusal() == ErrorCode::kResourceExhausted &&
         p.answer.result().error.reason == replica::kReasonTooManyPending;
}

TEST(Proposals, ResultsForEveryRefusal) {
  TestCluster c({1, 2, 3}, [](Config& config) {
    config.max_entries_per_message = 4;
    config.max_uncommitted_entries = 6;
    config.max_bytes_per_message = 1000;
  });
  ASSERT_TRUE(c.campaign_until_leader(1));
  const testing::Proposal not_leader = c.propose(2, {"x"});
  EXPECT_EQ(not_leader.refusal(), ErrorCode::kNotLeader);
  EXPECT_EQ(not_leader.answer.result().error.leader_id, 1u);
  const testing::Proposal empty = c.propose(1, {});
  EXPECT_TRUE(refused_by_core_as(empty, ProposeStatus::kEmpty));
  EXPECT_EQ(empty.answer.result().error.reason, replica::kReasonEmptyAppend);
  EXPECT_TRUE(refused_by_core_as(c.propose(1, {std::string(1000, 'x')}), ProposeStatus::kTooLarge));
  EXPECT_TRUE(
      refused_by_core_as(c.propose(1, std::vector<std::string>(5, "x")), ProposeStatus::kTooLarge));
  EXPECT_EQ(c.raft(1).last_index(), 1u) << "refused proposals append nothing";
  EXPECT_EQ(c.node(1).log.last_index(), 1u);

  // The replica proposes kNormal entries only, so the core's refusal of a kConfig entry from its
  // driver is checked on a bare single-voter core (no driver needed to make it leader).
  Entry config_entry;
  config_entry.type = EntryType::kConfig;
  config_entry.payload = encode_config(ConfState{{1, 2}});
  testing::SoloLeader solo;
  ASSERT_EQ(solo.core.role(), Role::kLeader);
  EXPECT_EQ(solo.core.propose({config_entry}).status, ProposeStatus::kInvalidEntry);
}

TEST(Proposals, UncommittedBoundRefusesThenRecovers) {
  TestCluster c({1, 2, 3}, [](Config& config) {
    config.max_entries_per_message = 4;
    config.max_uncommitted_entries = 6;
  });
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.isolate(2);
  c.isolate(3);
  const std::vector<std::string> four(4, "x");
  const std::vector<std::string> two(2, "x");
  EXPECT_TRUE(c.propose(1, four).proposed());
  EXPECT_TRUE(refused_as_too_many_pending(c.propose(1, four)));
  EXPECT_TRUE(c.propose(1, two).proposed());
  EXPECT_TRUE(refused_as_too_many_pending(c.propose(1, {"y"})));
  c.heal();
  c.tick_all(3);
  EXPECT_EQ(c.raft(1).commit_index(), 7u);
  EXPECT_TRUE(c.propose(1, four).proposed());
}

TEST(Proposals, UncommittedByteBound) {
  TestCluster c({1, 2, 3}, [](Config& config) {
    config.max_bytes_per_message = 2 * (Entry::kEntryOverheadBytes + 100);
    config.max_uncommitted_bytes = 3 * (Entry::kEntryOverheadBytes + 100);
  });
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.isolate(2);
  c.isolate(3);
  const std::string big(100, 'b');
  EXPECT_TRUE(c.propose(1, {big, big}).proposed());
  EXPECT_TRUE(refused_as_too_many_pending(c.propose(1, {big, big})));
  EXPECT_TRUE(c.propose(1, {big}).proposed());
}

// Node 2 receives entries 3-4 of term 1 from an old leader and holds them unflushed; then the real
// leader of term 2 overwrites index 3. Through the replica the durability report always comes from
// the store's current log (replica_ready.cpp, report_durability), so the only report is (3, term 2);
// the core's own rule for a late report about replaced entries is checked on a bare core below.
TEST(Persistence, StaleReportAfterTruncationIsIgnored) {
  TestCluster c({1, 2, 3},
                {make_entries(1, {1, 1, 2}), make_entries(1, {1, 1}), make_entries(1, {1, 1, 2})},
                {HardState{2, 0, 2}, HardState{1, 0, 2}, HardState{2, 0, 2}});
  c.node(2).hold_persistence = true;
  Message old_append;
  old_append.type = MessageType::kAppend;
  old_append.from = 3;
  old_append.to = 2;
  old_append.term = 1;
  old_append.index = 2;
  old_append.log_term = 1;
  old_append.entries = make_entries(3, {1, 1});
  c.step(2, old_append);
  EXPECT_EQ(c.raft(2).last_index(), 4u);
  EXPECT_EQ(c.raft(2).persisted_index(), 2u);
  Message append = old_append;
  append.from = 1;
  append.term = 2;
  append.entries = make_entries(3, {2});
  c.step(2, append);
  EXPECT_EQ(c.raft(2).last_index(), 3u);
  EXPECT_EQ(c.node(2).log.last_index(), 3u);
  c.persist_one(2);
  EXPECT_EQ(c.raft(2).persisted_index(), 3u);
  EXPECT_EQ(c.node(2).log.entry(3).term, 2u);

  // The same on a bare core, whose driver reports late.
  MemoryLog log;
  log.append(make_entries(1, {1, 1}));
  Config config;
  config.id = 2;
  config.initial_conf.voters = {1, 2, 3};
  Raft core(config, log, HardState{1, 0, 2});
  core.step(old_append);
  log.apply(core.ready());
  EXPECT_EQ(core.persisted_index(), 2u);
  core.step(append);
  log.apply(core.ready());
  EXPECT_EQ(core.last_index(), 3u);
  core.on_persisted(4, 1);  // the old batch's report arrives late
  EXPECT_EQ(core.persisted_index(), 2u) << "a report about replaced entries must be ignored";
  core.on_persisted(3, 2);
  EXPECT_EQ(core.persisted_index(), 3u);
}

}  // namespace
}  // namespace raftlog::raft

namespace raftlog::raft {
namespace {

// A peer that needs entries the leader trimmed (no snapshots) is probed at the leader's first index
// once per heartbeat answer, never in a tight loop; once it holds those entries (rebuilt from a copy
// of a healthy node's log), the probe succeeds and it catches up.
//
// The store trims whole segments only: each payload here fills most of a (minimum-size) segment, so
// that every entry has a segment of its own and the trim lands exactly where the test asks.
std::string segment_filling_payload(int i) {
  return "e" + std::to_string(i) + std::string(40 << 10, '.');
}

TEST(Replication, PeerBehindTheFirstIndexIsReprobedPerHeartbeatAndCatchesUpOnceRebuilt) {
  // The leader's retention waits for a follower silent for less than 5 ticks only.
  TestCluster c({1, 2, 3}, {}, [](replica::ReplicaConfig& config) {
    config.retention_follower_grace_ms = 5 * config.tick_ms;
  });
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.isolate(3);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(c.propose(1, {segment_filling_payload(i)}).proposed());
  c.deliver_all();
  const Index last = c.raft(1).commit_index();
  ASSERT_EQ(last, 21u);
  // The leader trims everything below 15 (retention); node 3 holds only the first no-op.
  for (int i = 0; i < 6; ++i) {
    c.tick(1);
    c.deliver_all();
  }
  const replica::TrimResult trimmed = c.trim(1, 15);
  ASSERT_TRUE(trimmed.error.ok()) << trimmed.error.message;
  ASSERT_EQ(trimmed.first_index, 15u);
  ASSERT_EQ(c.node(1).log.first_index(), 15u);
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
  c.restart_from_copy_of(3, 2);
  c.tick_all(5);
  EXPECT_EQ(c.raft(1).progress()[2].match_index, last);
  EXPECT_EQ(c.node(3).log.last_index(), last);
  EXPECT_EQ(c.node(3).log.entry(last).payload, segment_filling_payload(19));
}

}  // namespace
}  // namespace raftlog::raft

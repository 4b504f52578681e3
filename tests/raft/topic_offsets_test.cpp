// Topic offsets assigned by the leader (docs/design.md, "Topic offsets"), on production replicas
// over simulated disks: offsets are dense per topic and the same on every node across leader
// changes that cut an uncommitted tail, crashes, restarts and retention; replicated timestamps
// raise the timestamp floor by at most Replica::kMaxTimestampSkewMs.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <random>
#include <sstream>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "derived/envelope.h"
#include "shared/v1_envelope.h"
#include "store/memory_env.h"
#include "test_cluster.h"

namespace raftlog::raft {
namespace {

using testing::Proposal;
using testing::TestCluster;

// One append of one entry per topic in `topics` (a version-2 envelope each, as raftlogd's node
// builds them), through the replica like TestCluster::propose.
Proposal propose_topics(TestCluster& c, NodeId id, const std::vector<std::string>& topics,
                        std::size_t body_bytes = 8) {
  Proposal proposal;
  replica::Replica::AppendRequest request;
  for (const std::string& topic : topics) {
    std::string payload;
    derived::encode_envelope(0, topic, {}, std::string(body_bytes, 'b'), &payload);
    request.payloads.push_back(std::move(payload));
  }
  request.has_envelopes = true;
  request.deadline = replica::Clock::time_point::max();
  request.done = [slot = proposal.answer.slot](replica::AppendResult result) {
    *slot = std::move(result);
  };
  proposal.placement = c.replica(id).append(std::move(request));
  c.process(id);
  return proposal;
}

// Every committed topic entry of `id`'s log, in log order: "topic:offset" per index.
std::map<Index, std::string> committed_offsets(const TestCluster& c, NodeId id) {
  std::map<Index, std::string> out;
  const auto& log = c.node(id).log;
  for (Index i = log.first_index(); i <= c.raft(id).commit_index(); ++i) {
    const Entry entry = log.entry(i);
    if (!entry.has_envelope) continue;
    derived::DecodedEnvelope envelope;
    EXPECT_EQ(derived::decode_envelope(entry.payload.view(), &envelope),
              derived::EnvelopeDecode::kOk);
    if (envelope.topic.empty()) continue;
    EXPECT_TRUE(envelope.has_topic_offset) << "entry " << i;
    out[i] = std::string(envelope.topic) + ":" + std::to_string(envelope.topic_offset);
  }
  return out;
}

// Each topic's offsets are 0, 1, 2, ... in log order (none skipped, none repeated).
void expect_dense(const std::map<Index, std::string>& offsets,
                  std::map<std::string, std::uint64_t> next = {}) {
  for (const auto& [index, topic_offset] : offsets) {
    const std::size_t colon = topic_offset.rfind(':');
    const std::string topic = topic_offset.substr(0, colon);
    EXPECT_EQ(std::stoull(topic_offset.substr(colon + 1)), next[topic]++)
        << "entry " << index << " (" << topic_offset << ")";
  }
}

// Ticks every node until one of `candidates` leads (bounded); kNoNode if none did.
NodeId elect_one_of(TestCluster& c, const std::vector<NodeId>& candidates) {
  for (int round = 0; round < 300; ++round) {
    for (NodeId id : candidates) {
      if (c.raft(id).role() == Role::kLeader) return id;
    }
    c.tick_all();
    c.deliver_all();
  }
  return kNoNode;
}

// Issue 16, defect 1: the leader writes each entry's offset; a new leader continues from its own
// log, and the old leader's uncommitted tail, cut, leaves no hole.
TEST(TopicOffsets, ALeaderChangeThatCutsAnUncommittedTailLeavesNoHole) {
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  ASSERT_TRUE(propose_topics(c, 1, {"t", "u", "t"}).proposed());
  c.deliver_all();
  c.isolate(1);
  // Old leader 1's tail, never committed: t:2, t:3, u:1.
  ASSERT_TRUE(propose_topics(c, 1, {"t", "t"}).proposed());
  ASSERT_TRUE(propose_topics(c, 1, {"u"}).proposed());
  EXPECT_EQ(c.replica(1).topic_offsets().next_offset("t"), 4U);
  const NodeId leader = elect_one_of(c, {2, 3});
  ASSERT_NE(leader, kNoNode);
  const Proposal next = propose_topics(c, leader, {"t", "v", "t"});  // one round: consecutive
  ASSERT_TRUE(next.proposed());
  c.deliver_all();
  c.heal();
  for (int i = 0; i < 30; ++i) {
    c.tick_all();
    c.deliver_all();
  }
  ASSERT_EQ(c.raft(1).leader(), leader);
  ASSERT_TRUE(propose_topics(c, leader, {"u"}).proposed());
  c.deliver_all();
  const std::map<Index, std::string> on_leader = committed_offsets(c, leader);
  ASSERT_EQ(on_leader.size(), 7U);
  expect_dense(on_leader);
  for (NodeId id : {1, 2, 3}) {
    EXPECT_EQ(c.raft(id).commit_index(), c.raft(leader).commit_index());
    EXPECT_EQ(committed_offsets(c, id), on_leader) << "node " << id;
  }
  for (NodeId id : {1, 2, 3}) {
    EXPECT_EQ(c.replica(id).topic_offsets().next_offset("t"), 4U) << "node " << id;
    EXPECT_EQ(c.replica(id).topic_offsets().next_offset("u"), 2U) << "node " << id;
    EXPECT_EQ(c.replica(id).topic_offsets().next_offset("v"), 1U) << "node " << id;
  }
}

// A restart rebuilds the table from TOPICSTATE and the log after it; every node's next leader
// continues where the committed log stopped, also after retention removed every entry of a topic.
TEST(TopicOffsets, RestartsAndRetentionKeepTheNextOffsets) {
  TestCluster c({1, 2, 3}, {}, [](replica::ReplicaConfig& config) {
    config.topic_state_save_entries = 4;  // also saved between restarts, not only at close
  });
  ASSERT_TRUE(c.campaign_until_leader(1));
  // Entries of 40 KiB fill a minimum-size segment each, so a trim lands where the test asks.
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(propose_topics(c, 1, {"old"}, 40 << 10).proposed());
  ASSERT_TRUE(propose_topics(c, 1, {"new"}, 40 << 10).proposed());
  c.deliver_all();
  const Index commit = c.raft(1).commit_index();
  // Every node trims everything "old" was in: only TOPICSTATE remembers its next offset.
  for (NodeId id : {1, 2, 3}) {
    const replica::TrimResult trimmed = c.trim(id, commit);
    ASSERT_TRUE(trimmed.error.ok()) << trimmed.error.message;
    ASSERT_EQ(c.node(id).log.first_index(), commit) << "node " << id;
  }
  for (NodeId id : {1, 2, 3}) c.crash_restart(id);
  for (NodeId id : {1, 2, 3}) {
    EXPECT_EQ(c.replica(id).topic_offsets().next_offset("old"), 6U) << "node " << id;
    EXPECT_EQ(c.replica(id).topic_offsets().next_offset("new"), 1U) << "node " << id;
  }
  const NodeId leader = elect_one_of(c, {1, 2, 3});
  ASSERT_NE(leader, kNoNode);
  ASSERT_TRUE(propose_topics(c, leader, {"old", "new"}).proposed());
  c.deliver_all();
  const std::map<Index, std::string> offsets = committed_offsets(c, leader);
  ASSERT_EQ(offsets.size(), 3U);  // "new":0 at the first retained index, then the two above
  EXPECT_EQ(offsets.begin()->second, "new:0");
  EXPECT_EQ(std::next(offsets.begin())->second, "old:6");
  EXPECT_EQ(offsets.rbegin()->second, "new:1");
  for (NodeId id : {1, 2, 3}) EXPECT_EQ(committed_offsets(c, id), offsets) << "node " << id;
}

std::uint64_t wall_now_ms() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

// Issue 16, defect 2: an entry whose envelope claims a far-future time (a forged or badly skewed
// peer) raised the follower's floor without bound, and once it led, every entry carried that time.
TEST(TopicOffsets, AFarFutureReplicatedTimestampPinsLaterOnesForAtMostTheSkewBound) {
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  const std::uint64_t year_3000_ms = 32'503'680'000'000;
  c.set_mutator([&](Message& message) {
    for (Entry& entry : message.entries) {
      if (!entry.has_envelope) continue;
      std::string payload(entry.payload.view());
      // Rewritten in place of the leader's stamp (the entry's CRC is computed by the receiver).
      for (int i = 0; i < 8; ++i) {
        payload[derived::kTimestampOffset + i] =
            static_cast<char>((year_3000_ms >> (8 * i)) & 0xFF);
      }
      entry.payload = std::move(payload);
    }
  });
  ASSERT_TRUE(propose_topics(c, 1, {"t"}).proposed());
  c.deliver_all();
  c.set_mutator({});
  (void)c.transfer_leadership(1, 2);
  c.deliver_all();
  ASSERT_EQ(elect_one_of(c, {2}), 2U);
  const std::uint64_t before = wall_now_ms();
  ASSERT_TRUE(propose_topics(c, 2, {"t"}).proposed());
  c.deliver_all();
  const Index last = c.raft(2).commit_index();
  derived::EnvelopeHeader header;
  ASSERT_EQ(derived::decode_envelope_header(c.node(2).log.entry(last).payload.view(), &header),
            derived::EnvelopeDecode::kOk);
  EXPECT_GE(header.timestamp_ms, before);
  EXPECT_LE(header.timestamp_ms, wall_now_ms() + replica::Replica::kMaxTimestampSkewMs);
  EXPECT_EQ(header.topic_offset, 1U);
}

// A version-1 envelope (written by binaries from before topic offsets: no offset field) of
// `topic` with `body_bytes` bytes after it.
std::string v1_envelope(std::string_view topic, std::size_t body_bytes) {
  return raftlog::testing::v1_envelope(topic, std::string(body_bytes, 'b'));
}

Entry envelope_entry(Index index, std::string payload) {
  Entry entry;
  entry.index = index;
  entry.term = 1;
  entry.has_envelope = true;
  entry.payload = std::move(payload);
  return entry;
}

// Review finding 3: a node upgraded last, whose log an old binary trimmed (so it has no
// TOPICSTATE) and which then replicated version-2 entries, refused to start, and so did the
// documented remedy (removing TOPICSTATE). Its oldest envelope is of version 1: no version-2
// entry can have been trimmed before it, so it opens, counting version-1 entries from the first
// retained one; topics with a version-2 entry are exact.
TEST(TopicOffsets, AnUpgradedNodeWhoseOldBinaryTrimmedItsLogStarts) {
  std::vector<Entry> log;
  for (Index i = 1; i <= 3; ++i) log.push_back(envelope_entry(i, v1_envelope("old", 40 << 10)));
  log.push_back(envelope_entry(4, v1_envelope("both", 40 << 10)));
  for (const auto& [topic, offset] :
       std::vector<std::pair<std::string, std::uint64_t>>{{"both", 1}, {"new", 0}}) {
    std::string payload;
    derived::encode_envelope(0, topic, {}, std::string(8, 'b'), &payload);
    ASSERT_TRUE(derived::stamp_envelope(&payload, 1, offset));
    log.push_back(envelope_entry(log.size() + 1, std::move(payload)));
  }
  TestCluster c({1, 2, 3}, std::vector<std::vector<Entry>>(3, log),
                std::vector<HardState>(3, HardState{1, 0, 6}));
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  // A heartbeat of the leader's after every follower answered: its retention hold (the other
  // follower's match + 1) lets follower 2 trim; the election's first messages held it at 1.
  c.tick(1, 3);
  c.deliver_all();
  // The old binary's retention: entries 1 and 2 are gone, and it never wrote TOPICSTATE, nor a
  // SNAPSHOT with a topic table (a SNAPSHOT naming the first index - 1 with one would restore the
  // table exactly: TimestampFloorTest.ATrimmedLogNeedsTopicStateOrSnapshotForItsTopicsNextOffsets).
  ASSERT_TRUE(c.trim(2, 3).error.ok());
  ASSERT_EQ(c.node(2).log.first_index(), 3U);
  store::MemoryEnv& disk = *c.node(2).env;
  ASSERT_TRUE(disk.remove(c.node(2).config.data_dir + "/TOPICSTATE").ok());
  ASSERT_TRUE(disk.remove(c.node(2).config.data_dir + "/SNAPSHOT").ok());
  ASSERT_TRUE(disk.sync_dir(c.node(2).config.data_dir).ok());
  c.crash_restart(2);
  if (::testing::Test::HasFatalFailure()) return;
  const replica::TopicOffsets& table = c.replica(2).topic_offsets();
  EXPECT_EQ(table.next_offset("old"), 1U);  // counted from the first retained entry
  EXPECT_EQ(table.next_offset("both"), 2U);
  EXPECT_EQ(table.next_offset("new"), 1U);
}

// Review finding 4: in async flush mode TOPICSTATE was saved as of the commit index, which can run
// ahead of what any node flushed. After a cluster-wide power cut the logs ended below the file's
// point, and the table kept offsets of entries that no longer existed: the leader refused
// envelope appends or handed out holes. The file follows the flushed log.
TEST(TopicOffsets, AClusterWidePowerCutInAsyncModeLeavesNoOffsetOfALostEntry) {
  TestCluster c({1, 2, 3}, {}, [](replica::ReplicaConfig& config) {
    config.store.flush_mode = store::FlushMode::kAsync;
    config.topic_state_save_entries = 1;  // saved as soon as anything commits
  });
  ASSERT_TRUE(c.campaign_until_leader(1));
  ASSERT_TRUE(propose_topics(c, 1, {"t"}).proposed());
  c.deliver_all();
  for (NodeId id : {1, 2, 3}) c.node(id).hold_persistence = true;  // nothing more is flushed
  ASSERT_TRUE(propose_topics(c, 1, {"t", "t"}).proposed());
  c.deliver_all();
  c.tick_all(3);  // the followers learn the commit index too
  ASSERT_GT(c.raft(1).commit_index(), c.node(1).log.durable_index());
  for (NodeId id : {1, 2, 3}) c.node(id).hold_persistence = false;
  for (NodeId id : {1, 2, 3}) c.crash_restart(id);
  if (::testing::Test::HasFatalFailure()) return;
  for (NodeId id : {1, 2, 3}) {
    EXPECT_LE(c.replica(id).topic_offsets().through(), c.node(id).log.last_index()) << id;
    EXPECT_EQ(c.replica(id).topic_offsets().next_offset("t"), 1U) << "node " << id;
  }
  const NodeId leader = elect_one_of(c, {1, 2, 3});
  ASSERT_NE(leader, kNoNode);
  const Proposal next = propose_topics(c, leader, {"t"});
  ASSERT_TRUE(next.proposed()) << next.answer.result().error.message;
  for (int round = 0; round < 10; ++round) {
    c.tick_all();
    c.deliver_all();
  }
  const std::map<Index, std::string> offsets = committed_offsets(c, leader);
  ASSERT_EQ(offsets.size(), 2U);
  expect_dense(offsets);
}

// Review finding 8: the line naming an entry whose topic is beyond kMaxTopics compared the index
// with through() after record() had moved it there, so it never printed; printed now, at most once
// a minute. The log (a leader refuses such appends) comes from an older or forged peer, here
// seeded: kMaxTopics + 3 topics, read by the open scan.
TEST(TopicOffsets, AnUntrackedTopicIsReportedOnceAMinute) {
  std::vector<Entry> log;
  const std::size_t topics = replica::TopicOffsets::kMaxTopics + 3;
  log.reserve(topics);
  for (std::size_t i = 0; i < topics; ++i) {
    std::string payload;
    derived::encode_envelope(0, "t" + std::to_string(i), {}, "b", &payload);
    ASSERT_TRUE(derived::stamp_envelope(&payload, 1, 0));
    log.push_back(envelope_entry(i + 1, std::move(payload)));
  }
  std::ostringstream lines;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(lines);
  spdlog::default_logger()->sinks().push_back(sink);
  {
    TestCluster c({1}, {log}, {HardState{1, 0, topics}}, {}, [](replica::ReplicaConfig& config) {
      config.store.max_batch_entries = 1 << 17;  // the seeded log is written in one batch
      // TestCluster turns the log off before it adds the nodes: errors on again for the open.
      spdlog::set_level(spdlog::level::err);
    });
    EXPECT_EQ(c.replica(1).topic_offsets().topic_count(), replica::TopicOffsets::kMaxTopics);
  }
  spdlog::set_level(spdlog::level::off);
  auto& sinks = spdlog::default_logger()->sinks();
  sinks.erase(std::remove(sinks.begin(), sinks.end(), sink), sinks.end());
  const std::string text = lines.str();
  const std::string line = "adds a topic beyond the";
  const std::size_t first = text.find(line);
  ASSERT_NE(first, std::string::npos) << "the line never printed";
  EXPECT_NE(text.find("entry " + std::to_string(replica::TopicOffsets::kMaxTopics + 1)),
            std::string::npos);
  EXPECT_EQ(text.find(line, first + 1), std::string::npos) << "printed more than once a minute";
}

// The table is a function of the node's own log: one more than the newest offset of each topic in
// it (uncommitted tail included).
void expect_table_matches_log(TestCluster& c, NodeId id) {
  const auto& log = c.node(id).log;
  const replica::TopicOffsets& table = c.replica(id).topic_offsets();
  if (table.through() != log.last_index()) return;  // entries not handed out yet
  std::map<std::string, std::uint64_t> expected;
  for (Index i = log.first_index(); i <= log.last_index(); ++i) {
    const Entry entry = log.entry(i);
    derived::DecodedEnvelope envelope;
    if (!entry.has_envelope ||
        derived::decode_envelope(entry.payload.view(), &envelope) != derived::EnvelopeDecode::kOk ||
        envelope.topic.empty()) {
      continue;
    }
    expected[std::string(envelope.topic)] = envelope.topic_offset + 1;
  }
  for (const auto& [topic, next] : expected) {
    EXPECT_EQ(table.next_offset(topic), next) << "node " << id << " topic " << topic;
  }
}

// Seeded faults (partitions, crashes that lose unsynced writes, leader changes) with topic appends
// on any node: afterwards every node's committed offsets are dense and the same, and each node's
// table describes its log after every step. Bounded: fixed seeds and step counts.
TEST(TopicOffsets, SeededFaultsKeepOffsetsDenseAndTheSameOnEveryNode) {
  for (std::uint32_t seed : {1U, 2U, 3U, 4U}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    TestCluster c({1, 2, 3});
    ASSERT_TRUE(c.campaign_until_leader(1));
    const std::vector<std::string> names = {"a", "b", "c"};
    for (int step = 0; step < 250; ++step) {
      const NodeId node = 1 + rng() % 3;
      switch (rng() % 10) {
        case 0:
        case 1:
        case 2:
        case 3: {
          std::vector<std::string> topics(1 + rng() % 3);
          for (std::string& topic : topics) topic = names[rng() % names.size()];
          (void)propose_topics(c, node, topics);
          break;
        }
        case 4:
          c.isolate(node);
          break;
        case 5:
          c.heal();
          break;
        case 6:
          c.crash_restart(node);
          break;
        default:
          c.tick_all();
          c.deliver_all();
          break;
      }
      for (NodeId id : {1, 2, 3}) expect_table_matches_log(c, id);
      if (::testing::Test::HasFailure()) return;
    }
    c.heal();
    NodeId leader = kNoNode;
    for (int round = 0; round < 200 && leader == kNoNode; ++round) {
      c.tick_all();
      c.deliver_all();
      for (NodeId id : {1, 2, 3}) {
        if (c.raft(id).role() == Role::kLeader) leader = id;
      }
    }
    ASSERT_NE(leader, kNoNode);
    ASSERT_TRUE(propose_topics(c, leader, {"a", "b", "c"}).proposed());
    for (int round = 0; round < 20; ++round) {
      c.tick_all();
      c.deliver_all();
    }
    const std::map<Index, std::string> offsets = committed_offsets(c, leader);
    expect_dense(offsets);
    for (NodeId id : {1, 2, 3}) {
      ASSERT_EQ(c.raft(id).commit_index(), c.raft(leader).commit_index()) << "node " << id;
      EXPECT_EQ(committed_offsets(c, id), offsets) << "node " << id;
      expect_table_matches_log(c, id);
    }
  }
}

}  // namespace
}  // namespace raftlog::raft

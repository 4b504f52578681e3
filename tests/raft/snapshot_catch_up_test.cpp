// A follower stranded behind its leader's retention catches up by itself through the replicas'
// snapshots (src/replica/replica_snapshot.cpp, docs/raft.md "Snapshots"): the leader fills the data,
// the follower installs it and replication continues after it; the installed dedup table answers
// retries of appends the follower never held, and a power cut after the install keeps it.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "derived/envelope.h"
#include "replica/snapshot_data.h"
#include "test_cluster.h"
#include "util/crc32c.h"

namespace raftlog::raft {
namespace {

using testing::TestCluster;
using TopicTable = std::vector<replica::TopicOffsets::TopicNext>;

std::string segment_filling_payload(Index index) {
  return "e" + std::to_string(index) + std::string(40 << 10, '.');
}

void with_snapshots(Config& config) { config.snapshots = true; }
void short_follower_grace(replica::ReplicaConfig& config) {
  config.retention_follower_grace_ms = 5 * config.tick_ms;
}

// Node 1, the leader, appends entries `from`..`to` (each fills a segment), lets the followers it
// reaches acknowledge them (six heartbeat rounds, which also pass the retention grace of the
// followers it does not reach) and trims its log below `before`.
void append_segments_then_trim(TestCluster& c, Index from, Index to, Index before) {
  for (Index i = from; i <= to; ++i) {
    ASSERT_TRUE(c.propose(1, {segment_filling_payload(i)}, 9, i).proposed()) << i;
  }
  c.deliver_all();
  for (int i = 0; i < 6; ++i) {
    c.tick(1);
    c.deliver_all();
  }
  const replica::TrimResult trimmed = c.trim(1, before);
  ASSERT_TRUE(trimmed.error.ok()) << trimmed.error.message;
}

// Node 3 misses 2..21 (client 9's appends, sequence = index), the leader trims below 15.
void strand_node_3(TestCluster& c) {
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.isolate(3);
  ASSERT_NO_FATAL_FAILURE(append_segments_then_trim(c, 2, 21, 15));
  ASSERT_EQ(c.raft(1).commit_index(), 21u);
  ASSERT_EQ(c.node(1).log.first_index(), 15u);
}

TEST(SnapshotCatchUp, AStrandedFollowerInstallsTheLeadersSnapshotAndCatchesUp) {
  TestCluster c({1, 2, 3}, with_snapshots, short_follower_grace);
  ASSERT_NO_FATAL_FAILURE(strand_node_3(c));
  c.heal();
  c.tick_all(10);
  EXPECT_EQ(c.replica(1).snapshot_stats().sent, 1u);
  EXPECT_EQ(c.replica(3).snapshot_stats().installed, 1u);
  EXPECT_EQ(c.raft(3).stranded_below(), 0u);
  // The leader's snapshot point is its first index - 1 (14): node 3's log starts where the
  // leader's does.
  const Index point = c.replica(3).snapshot_stats().last_installed_index;
  EXPECT_EQ(point, 14u);
  EXPECT_EQ(c.node(3).log.first_index(), point + 1);
  // Replication continues after the snapshot: a new entry commits on every node, the same there.
  const auto proposal = c.propose(1, {"after"}, 9, 100);
  c.tick_all(3);
  ASSERT_TRUE(proposal.answer.answered());
  const Index last = c.raft(1).last_index();
  EXPECT_EQ(c.node(3).log.last_index(), last);
  EXPECT_EQ(c.raft(3).commit_index(), last);
  EXPECT_EQ(c.node(3).log.entry(last).payload, c.node(1).log.entry(last).payload);
  // The installed dedup table answers retries of appends node 3 never held.
  for (std::uint64_t sequence = 2; sequence <= point; ++sequence) {
    replica::DedupTable::Range range;
    EXPECT_EQ(c.replica(3).dedup_lookup(9, sequence, {segment_filling_payload(sequence)}, &range),
              replica::DedupTable::Lookup::kFound)
        << sequence;
    EXPECT_EQ(range.first, sequence);
  }
  // A power cut keeps it: the open loads SNAPSHOT before it rebuilds from the log.
  c.crash_restart(3);
  replica::DedupTable::Range range;
  EXPECT_EQ(c.replica(3).dedup_lookup(9, 5, {segment_filling_payload(5)}, &range),
            replica::DedupTable::Lookup::kFound);
  EXPECT_EQ(c.node(3).log.first_index(), point + 1);
  EXPECT_EQ(c.replica(3).snapshot_stats().installed, 0u) << "nothing installed again";
  // A follower commits on heartbeats only what an append of this leader proved (the core's rule),
  // so the next entry brings the commit index along.
  ASSERT_TRUE(c.propose(1, {"after the restart"}).proposed());
  c.tick_all(5);
  EXPECT_EQ(c.node(3).log.last_index(), c.raft(1).last_index());
  EXPECT_EQ(c.raft(3).commit_index(), c.raft(1).commit_index());
}

TEST(SnapshotCatchUp, AMangledSnapshotIsRefusedUntilAnIntactOneArrives) {
  TestCluster c({1, 2, 3}, with_snapshots, short_follower_grace);
  ASSERT_NO_FATAL_FAILURE(strand_node_3(c));
  int mangled = 0;
  c.set_mutator([&](Message& m) {
    if (m.type == MessageType::kSnapshot && mangled < 2) {
      ++mangled;
      std::string data(m.snapshot->data.view());
      data[data.size() / 2] = static_cast<char>(data[data.size() / 2] ^ 0x40);
      m.snapshot->data = data;
    }
  });
  c.heal();
  c.tick_all(10);
  EXPECT_EQ(mangled, 1);
  EXPECT_EQ(c.replica(3).snapshot_stats().refused, 1u);
  EXPECT_EQ(c.replica(3).snapshot_stats().installed, 0u);
  EXPECT_EQ(c.node(3).log.first_index(), 1u) << "nothing of a refused snapshot is installed";
  // The leader sends another after Config::snapshot_retry_ticks; this one is mangled too, the next
  // one is not.
  for (int i = 0; i < 3 && c.replica(3).snapshot_stats().installed == 0; ++i) {
    c.tick_all(static_cast<int>(c.replica(1).config().raft.snapshot_retry_ticks) + 5);
  }
  EXPECT_EQ(c.replica(3).snapshot_stats().refused, 2u);
  EXPECT_EQ(c.replica(3).snapshot_stats().installed, 1u);
  EXPECT_EQ(c.raft(3).commit_index(), c.raft(1).commit_index());
}

// The leader encodes a point's snapshot data once (replica/snapshot_encoding.h): a second follower
// stranded at the same point and a retry after a lost snapshot get the same bytes (and CRC), so a
// transfer can resume and the Raft loop does not encode them again. A trim invalidates it.
TEST(SnapshotCatchUp, ARetryAndASecondFollowerReuseTheLeadersEncodedSnapshot) {
  TestCluster c({1, 2, 3, 4, 5}, with_snapshots, short_follower_grace);
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.isolate(4);
  c.isolate(5);
  ASSERT_NO_FATAL_FAILURE(append_segments_then_trim(c, 2, 21, 15));
  ASSERT_EQ(c.raft(1).commit_index(), 21u);
  c.heal();
  int dropped = 0;
  c.add_drop_rule([&](const Message& m) {
    if (m.type != MessageType::kSnapshot || m.to != 5 || dropped > 0) return false;
    ++dropped;
    return true;  // node 5's first snapshot is lost: the leader retries after its timeout
  });
  const int retry_ticks = c.replica(1).config().raft.snapshot_retry_ticks;
  for (int i = 0; i < 3 * retry_ticks && c.replica(5).snapshot_stats().installed == 0; ++i) {
    c.tick_all(1);
  }
  EXPECT_EQ(dropped, 1);
  EXPECT_EQ(c.replica(4).snapshot_stats().installed, 1u);
  EXPECT_EQ(c.replica(5).snapshot_stats().installed, 1u);
  const replica::SnapshotStats& leader = c.replica(1).snapshot_stats();
  EXPECT_EQ(leader.sent, 3u);
  EXPECT_EQ(leader.encodes, 1u);
  EXPECT_EQ(leader.encodings_reused, 2u);
  std::vector<Message> sent;
  for (const Message& m : c.delivered()) {
    if (m.type == MessageType::kSnapshot) sent.push_back(m);
  }
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_TRUE(sent[0].snapshot->data.shares_bytes_with(sent[1].snapshot->data))
      << "the same buffer, not a second encoding";
  ASSERT_TRUE(sent[0].snapshot->data_crc32c.has_value());
  EXPECT_EQ(*sent[0].snapshot->data_crc32c, util::crc32c::value(sent[0].snapshot->data.view()));
  EXPECT_EQ(c.node(4).log.first_index(), 15u);
  EXPECT_EQ(c.node(5).log.first_index(), 15u);

  // A trim moves the point: the next stranded follower's snapshot is encoded anew (the key differs;
  // the invalidation at the trim itself is SnapshotEncoding's, tested in snapshot_encoding_test).
  c.isolate(4);
  ASSERT_NO_FATAL_FAILURE(append_segments_then_trim(c, 22, 41, 35));
  ASSERT_GT(c.node(1).log.first_index(), 15u);
  c.heal();
  for (int i = 0; i < retry_ticks && c.replica(4).snapshot_stats().installed < 2; ++i) {
    c.tick_all(1);
  }
  EXPECT_EQ(c.replica(4).snapshot_stats().installed, 2u);
  EXPECT_EQ(c.replica(1).snapshot_stats().encodes, 2u);
  EXPECT_EQ(c.replica(1).snapshot_stats().encodings_reused, 2u);
}

// Review S1: a snapshot whose transfer takes longer than the leader's retry timeout (a slow link)
// used to start over at every timeout and never arrive. The transport's progress (the bytes gone
// out) restarts the timer, so it arrives, once, and installs.
TEST(SnapshotCatchUp, ASnapshotSlowerToSendThanTheRetryTimeoutArrivesWhole) {
  TestCluster c({1, 2, 3}, with_snapshots, short_follower_grace);
  ASSERT_NO_FATAL_FAILURE(strand_node_3(c));
  const int retry_ticks = c.replica(1).config().raft.snapshot_retry_ticks;
  c.set_snapshot_link_rate(1);
  c.heal();
  c.tick_all(3);
  const std::uint64_t size = c.slow_snapshot_bytes(1, 3);
  ASSERT_GT(size, static_cast<std::uint64_t>(2 * retry_ticks)) << "no (large enough) snapshot";
  // Three retry timeouts to carry it whole.
  c.set_snapshot_link_rate(std::max<std::uint64_t>(1, size / (3 * retry_ticks)));
  for (int i = 0; i < 6 * retry_ticks && c.replica(3).snapshot_stats().installed == 0; ++i) {
    c.tick_all(1);
  }
  EXPECT_EQ(c.replica(3).snapshot_stats().installed, 1u);
  EXPECT_EQ(c.replica(1).snapshot_stats().sent, 1u) << "sent again while it was still moving";
  c.tick_all(5);
  EXPECT_EQ(c.raft(3).stranded_below(), 0u);
  EXPECT_EQ(c.raft(3).commit_index(), c.raft(1).commit_index());
}

// One append of a version-2 envelope with `topic` (sized so that a few fill a segment), through the
// replica as raftlogd's node appends it: the leader stamps the topic offset.
void propose_topic(TestCluster& c, NodeId id, const std::string& topic) {
  replica::Replica::AppendRequest request;
  std::string payload;
  derived::encode_envelope(0, topic, {}, std::string(40 << 10, 'b'), &payload);
  request.payloads.push_back(std::move(payload));
  request.has_envelopes = true;
  request.deadline = replica::Clock::time_point::max();
  request.done = [](replica::AppendResult) {};
  (void)c.replica(id).append(std::move(request));
  c.process(id);
}

// The topic table as of `through`: `base` (the table as of `from` - 1) and the entries [from,
// through] of `id`'s log (which must hold them all), one past each topic's last stamped offset.
TopicTable table_from_log(const TestCluster& c, NodeId id, Index through, Index from = 1,
                          const TopicTable& base = {}) {
  std::map<std::string, std::uint64_t> next;
  for (const auto& topic : base) next[topic.topic] = topic.next_offset;
  for (Index i = from; i <= through; ++i) {
    const Entry entry = c.node(id).log.entry(i);
    if (!entry.has_envelope) continue;
    derived::DecodedEnvelope envelope;
    EXPECT_EQ(derived::decode_envelope(entry.payload.view(), &envelope),
              derived::EnvelopeDecode::kOk);
    if (!envelope.topic.empty()) next[std::string(envelope.topic)] = envelope.topic_offset + 1;
  }
  TopicTable table;
  for (const auto& [topic, offset] : next) table.push_back({topic, offset});
  return table;
}

// Node 1 leads and commits entries 2..21 of topics ("gone" only below 10, trimmed whole; "a" and
// "b" throughout) while node 3 is cut off and silent past the grace period.
void strand_node_3_behind_topics(TestCluster& c) {
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.isolate(3);
  for (Index i = 2; i <= 21; ++i) {
    propose_topic(c, 1, i < 10 && i % 3 == 0 ? "gone" : (i % 2 == 0 ? "a" : "b"));
  }
  c.deliver_all();
  ASSERT_EQ(c.raft(1).commit_index(), 21u);
  for (int i = 0; i < 6; ++i) {
    c.tick(1);
    c.deliver_all();
  }
}

// After catch-up the follower's log starts at the leader's first index and holds every entry the
// leader holds, received by replication after the install at the leader's first index - 1; the
// installed topic table is the leader's there (a topic whose entries were all trimmed included),
// and the tables agree at the commit index. The leader keeps the table at its first index - 1
// across a restart (SNAPSHOT, version 2) and advances it with its next trim: a second follower
// stranded after that catches up the same way.
TEST(SnapshotCatchUp, TheFollowersLogStartsAtTheLeadersFirstIndex) {
  TestCluster c({1, 2, 3}, with_snapshots, short_follower_grace);
  ASSERT_NO_FATAL_FAILURE(strand_node_3_behind_topics(c));
  ASSERT_TRUE(c.trim(1, 15).error.ok());
  const Index leader_first = c.node(1).log.first_index();
  ASSERT_EQ(leader_first, 15u);
  c.heal();
  c.tick_all(10);
  ASSERT_EQ(c.replica(3).snapshot_stats().installed, 1u);
  EXPECT_EQ(c.replica(3).snapshot_stats().last_installed_index, leader_first - 1);
  EXPECT_EQ(c.replica(1).snapshot_stats().sent_above_first_index, 0u);
  // The installed data (SNAPSHOT) holds the leader's table as of 14, counted from node 2's whole
  // log: "gone" is in it although none of its entries is retained anywhere but on node 2.
  auto saved = replica::read_snapshot_file(c.node(3).env.get(), c.node(3).config.data_dir);
  ASSERT_TRUE(saved.ok() && saved->has_value());
  EXPECT_EQ((*saved)->index, leader_first - 1);
  const TopicTable at_point = table_from_log(c, 2, leader_first - 1);
  ASSERT_EQ(at_point.size(), 3u);
  EXPECT_EQ((*saved)->topics, at_point);
  // Node 3 holds every entry node 1 holds, the same.
  EXPECT_EQ(c.node(3).log.first_index(), leader_first);
  EXPECT_EQ(c.node(3).log.last_index(), c.node(1).log.last_index());
  for (Index i = leader_first; i <= c.node(1).log.last_index(); ++i) {
    EXPECT_EQ(c.node(3).log.entry(i).payload, c.node(1).log.entry(i).payload) << i;
  }
  const Index commit = c.raft(1).commit_index();
  ASSERT_EQ(c.raft(3).commit_index(), commit);
  EXPECT_EQ(c.replica(3).topic_offsets().table_at(commit),
            c.replica(1).topic_offsets().table_at(commit));
  EXPECT_EQ(c.replica(3).topic_offsets().table_at(commit), table_from_log(c, 2, commit));

  // The leader restarts (its table at 14 comes back from SNAPSHOT), node 2 is cut off, the leader
  // appends and trims again: node 2 catches up at the new first index - 1.
  c.crash_restart(1);
  ASSERT_EQ(c.elect_then_hand_over_to(1), 1u);
  ASSERT_TRUE(c.replica(1).knows_first_index_topics()) << "loaded from SNAPSHOT";
  c.isolate(2);
  for (int i = 0; i < 10; ++i) propose_topic(c, 1, i % 2 == 0 ? "a" : "c");
  c.deliver_all();
  for (int i = 0; i < 6; ++i) {
    c.tick(1);
    c.deliver_all();
  }
  const Index second_commit = c.raft(1).commit_index();
  ASSERT_TRUE(c.trim(1, second_commit - 2).error.ok());
  const Index second_first = c.node(1).log.first_index();
  ASSERT_GT(second_first, leader_first);
  // Counted on node 3, which holds everything from 15 on: node 2 missed the new entries.
  const TopicTable expected_second = table_from_log(c, 3, second_first - 1, leader_first, at_point);
  c.heal();
  c.tick_all(10);
  ASSERT_EQ(c.replica(2).snapshot_stats().installed, 1u);
  EXPECT_EQ(c.replica(2).snapshot_stats().last_installed_index, second_first - 1);
  auto second = replica::read_snapshot_file(c.node(2).env.get(), c.node(2).config.data_dir);
  ASSERT_TRUE(second.ok() && second->has_value());
  EXPECT_EQ((*second)->topics, expected_second);
  EXPECT_EQ(c.node(2).log.first_index(), second_first);
  ASSERT_EQ(c.raft(2).commit_index(), c.raft(1).commit_index());
  const Index end = c.raft(1).commit_index();
  EXPECT_EQ(c.replica(2).topic_offsets().table_at(end), c.replica(1).topic_offsets().table_at(end));
  EXPECT_EQ(c.replica(1).snapshot_stats().sent_above_first_index, 0u);
}

// Node 3 installed one snapshot, at node 1's first index - 1 (14), never above it, with the topic
// table as of 14 (node 2 kept the entries to count it from), and its log starts at 15.
void expect_node_3_installed_node_1s_first_index_minus_one(TestCluster& c) {
  ASSERT_EQ(c.replica(3).snapshot_stats().installed, 1u);
  EXPECT_EQ(c.replica(3).snapshot_stats().last_installed_index, 14u);
  EXPECT_EQ(c.replica(1).snapshot_stats().sent_above_first_index, 0u);
  auto saved = replica::read_snapshot_file(c.node(3).env.get(), c.node(3).config.data_dir);
  ASSERT_TRUE(saved.ok() && saved->has_value());
  EXPECT_EQ((*saved)->topics, table_from_log(c, 2, 14));
  EXPECT_EQ(c.node(3).log.first_index(), 15u);
}

// A leader whose trim a power cut stopped after some of its segments went (a journaling file system
// keeps the unlinks done before the cut): its open finishes the deletion SNAPSHOT.next planned, so
// it knows its topic table at its first index - 1 again, and a stranded follower catches up from a
// snapshot there, not above it. Every committed entry survives. Before, the leader's log started
// between the two points and its snapshot fell back to its commit index.
TEST(SnapshotCatchUp, ALeaderWhoseTrimWasCutSendsASnapshotAtItsFirstIndex) {
  TestCluster c({1, 2, 3}, with_snapshots, short_follower_grace);
  ASSERT_NO_FATAL_FAILURE(strand_node_3_behind_topics(c));
  std::size_t doomed_segments = 0;
  for (const store::CommitLog::SegmentInfo& segment : c.replica(1).log().segments()) {
    if (!segment.active && segment.last_index < 15) ++doomed_segments;
  }
  ASSERT_GE(doomed_segments, 3u) << "the trim must delete several segments";
  const Index commit = c.raft(1).commit_index();
  c.node(1).env->crash_after_removes(3);  // the first segment's two files, the second's data file
  (void)c.trim(1, 15);
  ASSERT_TRUE(c.node(1).env->crashed());
  c.crash_restart(1);
  if (::testing::Test::HasFatalFailure()) return;
  ASSERT_EQ(c.node(1).log.first_index(), 15u) << "the open did not finish the trim";
  ASSERT_TRUE(c.replica(1).knows_first_index_topics());
  EXPECT_FALSE(c.node(1).env->exists(c.node(1).config.data_dir + "/SNAPSHOT.next"));
  ASSERT_EQ(c.elect_then_hand_over_to(1), 1u);
  ASSERT_GE(c.raft(1).commit_index(), commit);
  c.heal();
  c.tick_all(10);
  ASSERT_NO_FATAL_FAILURE(expect_node_3_installed_node_1s_first_index_minus_one(c));
  // Every entry from 15 on, on the restarted leader and the caught-up follower, as node 2 holds it.
  const Index end = c.raft(1).commit_index();
  ASSERT_EQ(c.raft(3).commit_index(), end);
  for (Index i = 15; i <= end; ++i) {
    EXPECT_EQ(c.node(1).log.entry(i).payload, c.node(2).log.entry(i).payload) << i;
    EXPECT_EQ(c.node(3).log.entry(i).payload, c.node(2).log.entry(i).payload) << i;
  }
  EXPECT_EQ(c.replica(3).topic_offsets().table_at(end), table_from_log(c, 2, end));
}

// A trim reads the entries it deletes (for the topic table as of the new first index - 1) at most
// ReplicaConfig::topic_scan_slice_bytes at a time: one call deletes only the segments that one slice
// finished, and the rest of the trim follows, a slice per loop round (apply_retention), until the
// log starts where it was asked to. The table the snapshot then carries is still exact.
void small_topic_scan(replica::ReplicaConfig& config) {
  short_follower_grace(config);
  config.topic_scan_slice_bytes = 50 << 10;  // about one 40 KiB entry and a bit
}

TEST(SnapshotCatchUp, ATrimReadsWhatItDeletesInBoundedSlices) {
  TestCluster c({1, 2, 3}, with_snapshots, small_topic_scan);
  ASSERT_NO_FATAL_FAILURE(strand_node_3_behind_topics(c));
  const replica::TrimResult first_call = c.trim_call(1, 15);
  ASSERT_TRUE(first_call.error.ok());
  EXPECT_LT(c.node(1).log.first_index(), 15u) << "one slice cannot have read 13 entries";
  // The rest follows, a slice per loop round (the trim's writes off the loop between rounds).
  int rounds = 0;
  while (c.node(1).log.first_index() < 15 && rounds < 100) {
    c.replica(1).apply_retention(replica::Clock::now());
    c.finish_off_loop(1);
    c.persist_one(1);  // the flusher's step: the checkpoint the truncation asked for
    ++rounds;
  }
  ASSERT_EQ(c.node(1).log.first_index(), 15u);
  EXPECT_GE(rounds, 3) << "13 entries of 40 KiB need several 50 KiB slices";
  c.heal();
  c.tick_all(10);
  ASSERT_NO_FATAL_FAILURE(expect_node_3_installed_node_1s_first_index_minus_one(c));
  const Index commit = c.raft(1).commit_index();
  ASSERT_EQ(c.raft(3).commit_index(), commit);
  EXPECT_EQ(c.replica(3).topic_offsets().table_at(commit), table_from_log(c, 2, commit));
}

// Beyond the sender's budget the least recently used dedup clients are left out; a snapshot whose
// mandatory part does not fit is not sent at all, and the follower stays stranded.
TEST(SnapshotCatchUp, TheDataIsBoundedByTheSendersBudget) {
  TestCluster c({1, 2, 3}, with_snapshots, [](replica::ReplicaConfig& config) {
    short_follower_grace(config);
    config.max_snapshot_data_bytes = 64;  // less than the configuration alone
  });
  ASSERT_NO_FATAL_FAILURE(strand_node_3(c));
  c.heal();
  c.tick_all(10);
  EXPECT_EQ(c.replica(1).snapshot_stats().sent, 0u);
  EXPECT_GE(c.replica(1).snapshot_stats().too_large, 1u);
  EXPECT_EQ(c.raft(3).stranded_below(), 15u);
}


std::size_t snapshots_delivered_from(const TestCluster& c, NodeId from) {
  return c.count_delivered(
      [&](const Message& m) { return m.type == MessageType::kSnapshot && m.from == from; });
}

// A send the kept encoding serves (a second follower at the same point, a retry after a lost
// snapshot) takes its bytes without gathering the data again: the dedup table is walked once per
// point (replica_snapshot_send.cpp). Before, every send walked it, tens of MiB on the Raft loop.
// The walks are counted by the table itself (DedupTable::walks()), so a walk on the reuse path from
// anywhere shows (review F5: a counter of gathers started could not see one).
TEST(SnapshotCatchUp, ASendTheKeptEncodingServesDoesNotGatherTheDataAgain) {
  TestCluster c({1, 2, 3, 4, 5}, with_snapshots, short_follower_grace);
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.isolate(4);
  c.isolate(5);
  ASSERT_NO_FATAL_FAILURE(append_segments_then_trim(c, 2, 21, 15));
  // The trims walked the table too (their SNAPSHOT files): the sends' walks count from here.
  const std::uint64_t walks_before_sends = c.replica(1).snapshot_stats().dedup_walks;
  EXPECT_GT(walks_before_sends, 0u) << "a trim's SNAPSHOT file carries the dedup table";
  // Node 4 first: its snapshot is gathered and encoded.
  c.heal();
  c.isolate(5);
  for (int i = 0; i < 20 && c.replica(4).snapshot_stats().installed == 0; ++i) c.tick_all(1);
  ASSERT_EQ(c.replica(4).snapshot_stats().installed, 1u);
  EXPECT_EQ(c.replica(1).snapshot_stats().dedup_walks, walks_before_sends + 1);
  // Node 5, whose first snapshot is lost, then its retry: both served by the kept encoding.
  c.heal();
  int dropped = 0;
  c.add_drop_rule([&](const Message& m) {
    if (m.type != MessageType::kSnapshot || m.to != 5 || dropped > 0) return false;
    ++dropped;
    return true;
  });
  const int retry_ticks = c.replica(1).config().raft.snapshot_retry_ticks;
  for (int i = 0; i < 3 * retry_ticks && c.replica(5).snapshot_stats().installed == 0; ++i) {
    c.tick_all(1);
  }
  EXPECT_EQ(dropped, 1);
  EXPECT_EQ(c.replica(5).snapshot_stats().installed, 1u);
  const replica::SnapshotStats& leader = c.replica(1).snapshot_stats();
  EXPECT_EQ(leader.sent, 3u);
  EXPECT_EQ(leader.dedup_walks, walks_before_sends + 1)
      << "the retry and the second follower's send walked the dedup table";
  EXPECT_EQ(leader.encodes, 1u);
  EXPECT_EQ(leader.encodings_reused, 2u);
  std::vector<Message> sent;
  for (const Message& m : c.delivered()) {
    if (m.type == MessageType::kSnapshot) sent.push_back(m);
  }
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_TRUE(sent[0].snapshot->data.shares_bytes_with(sent[1].snapshot->data));
  EXPECT_EQ(sent[0].snapshot->data_crc32c, sent[1].snapshot->data_crc32c);
}

// Node 3 stranded behind node 1's trim, healed, and node 1's encoding of its snapshot started on
// the (test's) off-loop worker and held there: the kSnapshot waits in node 1's replica.
void strand_node_3_with_node_1s_encoding_held(TestCluster& c) {
  ASSERT_NO_FATAL_FAILURE(strand_node_3(c));
  c.node(1).hold_off_loop = true;
  c.heal();
  c.tick_all(3);
  ASSERT_EQ(c.node(1).off_loop_jobs.size(), 1u);
}

// `leader`'s encoding of node 3's snapshot, held on the off-loop worker, finishes: the snapshot
// leaves, and node 3 installs it at the trim's point (14) and catches up with `leader`.
void finish_encoding_then_expect_node_3_installed(TestCluster& c, NodeId leader) {
  c.finish_off_loop(leader);
  EXPECT_EQ(c.replica(leader).snapshot_stats().encoding_in_flight, 0u);
  EXPECT_EQ(c.replica(leader).snapshot_stats().sent, 1u);
  c.node(leader).hold_off_loop = false;
  c.tick_all(5);
  EXPECT_EQ(c.replica(3).snapshot_stats().installed, 1u);
  EXPECT_EQ(c.replica(3).snapshot_stats().last_installed_index, 14u);
  EXPECT_EQ(c.raft(3).commit_index(), c.raft(leader).commit_index());
}

// The leader's encoding runs off its loop (ReplicaDeps::off_loop): the kSnapshot waits in the
// replica until the job's result comes back, then leaves with it, and the follower installs it.
TEST(SnapshotCatchUp, TheSnapshotLeavesOnlyOnceItsEncodingIsDoneOffTheLoop) {
  TestCluster c({1, 2, 3}, with_snapshots, short_follower_grace);
  ASSERT_NO_FATAL_FAILURE(strand_node_3_with_node_1s_encoding_held(c));
  EXPECT_EQ(c.replica(1).snapshot_stats().encoding_in_flight, 1u);
  c.tick_all(10);  // well within the core's snapshot retry timeout
  EXPECT_EQ(c.node(1).off_loop_jobs.size(), 1u) << "one encoding in flight, not one per send";
  EXPECT_EQ(c.replica(1).snapshot_stats().sent, 0u);
  EXPECT_EQ(snapshots_delivered_from(c, 1), 0u);
  ASSERT_NO_FATAL_FAILURE(finish_encoding_then_expect_node_3_installed(c, 1));
  EXPECT_EQ(snapshots_delivered_from(c, 1), 1u);
}

// A trim while the encoding runs moves the log's start the data was taken from: the waiting
// message is dropped at the trim (its late result ignored), and the core's retry sends the new
// point.
TEST(SnapshotCatchUp, ATrimWhileTheEncodingRunsDropsTheWaitingSnapshot) {
  TestCluster c({1, 2, 3}, with_snapshots, short_follower_grace);
  ASSERT_NO_FATAL_FAILURE(strand_node_3_with_node_1s_encoding_held(c));
  // Node 3 goes silent again (its contact would hold the trim back), more entries, a trim.
  c.isolate(3);
  ASSERT_NO_FATAL_FAILURE(append_segments_then_trim(c, 22, 41, 35));
  const Index first = c.node(1).log.first_index();
  ASSERT_GT(first, 15u);
  EXPECT_EQ(c.replica(1).snapshot_stats().sends_dropped, 1u);
  c.finish_off_loop(1);  // the abandoned encoding's result: ignored
  EXPECT_EQ(c.replica(1).snapshot_stats().sent, 0u);
  EXPECT_EQ(c.replica(1).snapshot_stats().encodes, 0u);
  c.node(1).hold_off_loop = false;
  c.heal();
  const int retry_ticks = c.replica(1).config().raft.snapshot_retry_ticks;
  for (int i = 0; i < 2 * retry_ticks && c.replica(3).snapshot_stats().installed == 0; ++i) {
    c.tick_all(1);
  }
  EXPECT_EQ(c.replica(3).snapshot_stats().installed, 1u);
  // The trim's deletion went on over the rounds (at most trim_segments_per_round segments each,
  // driven by apply_retention as in raftlogd's loop) to the point it planned, while node 3 was
  // still cut off: the snapshot is of that point, not above it.
  const Index final_first = c.node(1).log.first_index();
  EXPECT_GE(final_first, first);
  EXPECT_EQ(c.replica(1).snapshot_stats().sent_above_first_index, 0u);
  EXPECT_EQ(c.replica(3).snapshot_stats().last_installed_index, final_first - 1);
  EXPECT_EQ(snapshots_delivered_from(c, 1), 1u);
  EXPECT_EQ(c.raft(3).commit_index(), c.raft(1).commit_index());
}

// A leader that steps down (here: hands leadership over) while its encoding runs drops the waiting
// message (its term is gone); the new leader catches the follower up.
TEST(SnapshotCatchUp, ALeaderThatStepsDownWhileTheEncodingRunsDropsTheWaitingSnapshot) {
  TestCluster c({1, 2, 3}, with_snapshots, short_follower_grace);
  ASSERT_NO_FATAL_FAILURE(strand_node_3_with_node_1s_encoding_held(c));
  const Term term = c.raft(1).term();
  c.transfer_leadership(1, 2);
  for (int i = 0; i < 20 && c.leader() != 2; ++i) c.tick_all(1);
  ASSERT_EQ(c.leader(), 2u);
  ASSERT_GT(c.raft(2).term(), term);
  EXPECT_EQ(c.replica(1).snapshot_stats().sends_dropped, 1u);
  EXPECT_EQ(c.replica(1).snapshot_stats().encoding_in_flight, 0u);
  c.finish_off_loop(1);  // ignored: the term it was for is over
  EXPECT_EQ(c.replica(1).snapshot_stats().sent, 0u);
  c.tick_all(20);
  EXPECT_EQ(snapshots_delivered_from(c, 1), 0u);
  EXPECT_EQ(c.node(3).log.last_index(), c.raft(2).last_index());
  EXPECT_EQ(c.raft(3).commit_index(), c.raft(2).commit_index());
}


// Node 1's kSnapshot to node 2 in node 1's term, of a point above node 2's log (its data describes
// that point): node 2 would install it, so it prepares it off its loop first.
Message snapshot_from_node_1_to_node_2_at(const TestCluster& c, Index index) {
  replica::SnapshotData data;
  data.index = index;
  data.term = c.raft(1).term();
  data.conf = c.raft(1).conf();
  Snapshot snapshot;
  snapshot.index = index;
  snapshot.term = data.term;
  snapshot.conf = data.conf;
  snapshot.data = replica::encode_snapshot_data(data);
  Message m;
  m.type = MessageType::kSnapshot;
  m.from = 1;
  m.to = 2;
  m.term = c.raft(1).term();
  m.commit = index;
  m.snapshot = std::move(snapshot);
  return m;
}

// Review F2 (installoff): a replica keeps one off-loop job at a time, a follower's preparation or a
// leader's encoding. Node 2's preparation is dropped when it takes over (a newer term), its job
// still out; as leader it gathers a snapshot for stranded node 3, whose encoding waits for that
// job. The preparation's result must start it: nothing else would until a trim or another leader.
TEST(SnapshotCatchUp, AnEncodingThatWaitedForADroppedPreparationStartsWithItsResult) {
  TestCluster c({1, 2, 3}, with_snapshots, short_follower_grace);
  ASSERT_NO_FATAL_FAILURE(strand_node_3(c));
  // Node 2 trims as node 1 did, so that as leader it has to send node 3 a snapshot too.
  const replica::TrimResult trimmed = c.trim(2, 15);
  ASSERT_TRUE(trimmed.error.ok()) << trimmed.error.message;
  ASSERT_EQ(c.node(2).log.first_index(), 15u);
  c.node(2).hold_off_loop = true;
  c.step(2, snapshot_from_node_1_to_node_2_at(c, 40));
  ASSERT_EQ(c.node(2).off_loop_jobs.size(), 1u) << "the preparation, held";
  ASSERT_EQ(c.replica(2).snapshot_stats().install_preparing, 1u);
  c.transfer_leadership(1, 2);
  for (int i = 0; i < 20 && c.leader() != 2; ++i) c.tick_all(1);
  ASSERT_EQ(c.leader(), 2u);
  EXPECT_EQ(c.replica(2).snapshot_stats().install_preparations_dropped, 1u);
  c.heal();
  c.tick_all(3);
  ASSERT_EQ(c.replica(2).snapshot_stats().encoding_in_flight, 1u) << "node 3's snapshot gathered";
  ASSERT_EQ(c.node(2).off_loop_jobs.size(), 1u) << "only the dropped preparation's job is out";
  // The dropped job's result; then the encoding it started, and its result.
  ASSERT_NO_FATAL_FAILURE(finish_encoding_then_expect_node_3_installed(c, 2));
}


// The follower decodes the snapshot's data once: its admission's decode (before the core sees the
// message) is what the install uses. Before, the install decoded the same tens of MiB again on the
// loop.
TEST(SnapshotCatchUp, TheFollowerDecodesTheSnapshotOnce) {
  TestCluster c({1, 2, 3}, with_snapshots, short_follower_grace);
  ASSERT_NO_FATAL_FAILURE(strand_node_3(c));
  c.heal();
  c.tick_all(10);
  ASSERT_EQ(c.replica(3).snapshot_stats().installed, 1u);
  EXPECT_EQ(c.replica(3).snapshot_stats().decodes, 1u);
  EXPECT_EQ(c.raft(3).commit_index(), c.raft(1).commit_index());
}


// Review W1: a leader gathers its dedup table in slices, one per loop round (here one client per
// round), and the table changes between them: new appends, sequences forgotten, clients evicted.
// The gather spans many rounds; what the follower installs never answers a retry with a wrong
// range, and it catches up (replaying what came after the point).
TEST(SnapshotCatchUp, AGatherInSlicesWhileTheTableChangesInstallsOnlyTrueAnswers) {
  TestCluster c({1, 2, 3}, with_snapshots, [](replica::ReplicaConfig& config) {
    short_follower_grace(config);
    config.snapshot_gather_slice_bytes = 1;  // one client per round
    config.dedup_max_clients = 48;
    config.dedup_sequences_per_client = 2;
  });
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.isolate(3);
  struct Placed {
    std::uint64_t client;
    std::uint64_t sequence;
    std::string payload;
    Index index;
  };
  std::vector<Placed> placed;
  auto append = [&](std::uint64_t client, std::uint64_t sequence) {
    const Index index = c.raft(1).last_index() + 1;
    std::string payload = segment_filling_payload(index);
    const auto proposal = c.propose(1, {payload}, client, sequence);
    ASSERT_TRUE(proposal.proposed());
    placed.push_back({client, sequence, std::move(payload), proposal.placement.first});
  };
  for (std::uint64_t client = 1; client <= 40; ++client) ASSERT_NO_FATAL_FAILURE(append(client, 1));
  c.deliver_all();
  for (int i = 0; i < 6; ++i) {
    c.tick(1);
    c.deliver_all();
  }
  ASSERT_TRUE(c.trim(1, 30).error.ok());
  ASSERT_GT(c.node(1).log.first_index(), 2u);
  c.node(1).hold_off_loop = true;  // so that the end of the gather shows as a queued job
  const std::uint64_t walks_before_gather = c.replica(1).snapshot_stats().dedup_walks;
  c.heal();
  c.tick_all(1);
  ASSERT_EQ(c.replica(1).snapshot_stats().dedup_walks, walks_before_gather + 1);
  ASSERT_EQ(c.replica(1).snapshot_stats().encoding_in_flight, 1u);
  ASSERT_TRUE(c.node(1).off_loop_jobs.empty()) << "the gather is not finished after one round";
  // Between slices: new sequences of gathered and not yet gathered clients (the table keeps two:
  // older ones are forgotten), and new clients (the least recently used are evicted).
  for (std::uint64_t client = 1; client <= 40; client += 3)
    ASSERT_NO_FATAL_FAILURE(append(client, 2));
  for (std::uint64_t client = 2; client <= 40; client += 3)
    ASSERT_NO_FATAL_FAILURE(append(client, 3));
  for (std::uint64_t client = 41; client <= 50; ++client)
    ASSERT_NO_FATAL_FAILURE(append(client, 1));
  c.node(1).hold_off_loop = false;
  for (int i = 0; i < 100 && c.replica(3).snapshot_stats().installed == 0; ++i) c.tick_all(1);
  ASSERT_EQ(c.replica(3).snapshot_stats().installed, 1u);
  EXPECT_EQ(c.replica(1).snapshot_stats().dedup_walks, walks_before_gather + 1)
      << "one walk, in slices";
  c.tick_all(5);
  ASSERT_EQ(c.raft(3).commit_index(), c.raft(1).commit_index());
  const Index point = c.replica(3).snapshot_stats().last_installed_index;
  std::size_t found = 0;
  for (const Placed& p : placed) {
    replica::DedupTable::Range range;
    const auto lookup = c.replica(3).dedup_lookup(p.client, p.sequence, {p.payload}, &range);
    if (lookup == replica::DedupTable::Lookup::kFound) {
      ++found;
      EXPECT_EQ(range.first, p.index) << "client " << p.client << " sequence " << p.sequence;
    }
    EXPECT_NE(lookup, replica::DedupTable::Lookup::kReused)
        << "client " << p.client << " sequence " << p.sequence;
    // The leader's answer is the reference: the follower knows at least what it knows above the
    // point (it replayed those entries).
    replica::DedupTable::Range leader_range;
    if (p.index > point &&
        c.replica(1).dedup_lookup(p.client, p.sequence, {p.payload}, &leader_range) ==
            replica::DedupTable::Lookup::kFound) {
      EXPECT_EQ(lookup, replica::DedupTable::Lookup::kFound)
          << "client " << p.client << " sequence " << p.sequence;
    }
  }
  EXPECT_GT(found, 0u);
}

}  // namespace
}  // namespace raftlog::raft

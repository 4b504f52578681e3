// Snapshots in the core (docs/raft.md, "Snapshots"): a leader sends one to a follower that needs
// entries it trimmed, at most one in flight per follower, again after a timeout or under a new
// leader; a follower installs one only when that is safe and answers it once it is durable. Checked
// on bare cores (a MemoryLog as the driver's log), since the replica's install is the driver's job:
// what the core asks for and answers is the contract pinned here.
#include <gtest/gtest.h>

#include <algorithm>

#include "raft/memory_log.h"
#include "raft/raft.h"
#include "bare_node.h"
#include "test_cluster.h"

namespace raftlog::raft {
namespace {

using testing::BareNode;
using testing::make_entries;
using testing::response;

Config snapshot_config(NodeId id) {
  Config config;
  config.id = id;
  config.initial_conf.voters = {1, 2, 3};
  config.snapshots = true;
  config.snapshot_retry_ticks = 30;
  return config;
}

// Node 1 with entries 1..20 (term 1, all committed), trimmed below 15, elected by node 2's votes:
// leader of term 2 with its no-op at 21.
std::unique_ptr<BareNode> trimmed_leader(const Config& config = snapshot_config(1),
                                         Index commit = 20) {
  auto node = std::make_unique<BareNode>(config, make_entries(1, std::vector<Term>(20, 1)), 15,
                                         HardState{1, kNoNode, commit});
  for (int i = 0; i < 100 && node->raft->role() == Role::kFollower; ++i) node->raft->tick();
  node->drain();
  for (MessageType type : {MessageType::kPreVoteResponse, MessageType::kVoteResponse}) {
    for (const Message& request : node->sent) {
      if (request.to != 2 ||
          (request.type != MessageType::kPreVote && request.type != MessageType::kVote)) {
        continue;
      }
      node->raft->step(response(type, 2, 1, request.term));
    }
    node->drain();
  }
  node->sent.clear();
  return node;
}

// Node 3 answers the leader's probe with its log ending at `last` (term 1): the leader looks for a
// match below its first index and, finding none it can send, sends a snapshot.
void reject_probe(BareNode& leader, Index last) {
  Message reject = response(MessageType::kAppendResponse, 3, 1, leader.raft->term());
  for (const PeerProgress& p : leader.raft->progress()) {
    if (p.id == 3) reject.index = p.next_index - 1;  // the probe's previous index
  }
  reject.reject = true;
  reject.reject_hint = last;
  reject.hint_term = 1;
  leader.raft->step(reject);
  leader.drain();
}

// A follower that went silent in replicate state: the leader's next index for it moved on with
// every append it sent (optimistically), so it stays above a later trim's first index, but the
// follower holds only what it acknowledged. Status, metrics and the disk handover's choice of a
// target must count it behind (the retention cluster test's silent follower was not, now and then).
TEST(Snapshot, ASilentFollowerWhoseMatchIsBelowTheFirstIndexNeedsTrimmedEntries) {
  PeerProgress silent;
  silent.id = 3;
  silent.probing = false;
  silent.heard_this_term = true;  // it answered this leader before it went silent
  silent.answered_append = true;  // an acknowledgement of 11
  silent.match_index = 11;
  silent.next_index = 80;  // appends sent after it went silent
  EXPECT_TRUE(silent.needs_trimmed_entries(66));
  EXPECT_FALSE(silent.needs_trimmed_entries(12)) << "it holds 11: the first index is next";
  EXPECT_FALSE(silent.needs_trimmed_entries(1));
  PeerProgress probing = silent;  // a probe's guess below the first index needs them too
  probing.probing = true;
  probing.match_index = 70;
  probing.next_index = 60;
  EXPECT_TRUE(probing.needs_trimmed_entries(66));
  PeerProgress not_heard = silent;  // no append answer yet: its match and next say nothing
  not_heard.answered_append = false;
  EXPECT_FALSE(not_heard.needs_trimmed_entries(66));
  not_heard.heard_this_term = false;
  EXPECT_FALSE(not_heard.needs_trimmed_entries(66));
  PeerProgress probing_unmatched = probing;  // a rejection: next counts, the unknown match not
  probing_unmatched.match_index = 0;
  probing_unmatched.next_index = 70;
  EXPECT_FALSE(probing_unmatched.needs_trimmed_entries(66));
}

// A new leader knows no follower's match (all 0) and guesses every next index just past its own
// log. Followers holding the whole retained log, and one that is down, must not count as needing
// trimmed entries then (status, the behind-first-index metric behind a critical alert, the disk
// handover's choice): only an answer showing it (a reject hint below the first index) does.
TEST(Snapshot, ANewLeaderCountsNoFollowerBehindItsFirstIndexBeforeItsAnswer) {
  auto leader = trimmed_leader();
  ASSERT_EQ(leader->raft->role(), Role::kLeader);
  const auto progress = [&](NodeId id) {
    for (const PeerProgress& p : leader->raft->progress()) {
      if (p.id == id) return p;
    }
    return PeerProgress{};
  };
  for (NodeId id : {2, 3}) {
    EXPECT_FALSE(progress(id).needs_trimmed_entries(15)) << "node " << id << " before any answer";
  }
  // Node 2 answers that it holds everything: still not behind.
  Message ack = response(MessageType::kAppendResponse, 2, 1, leader->raft->term());
  ack.index = leader->raft->last_index();
  leader->raft->step(ack);
  leader->drain();
  EXPECT_FALSE(progress(2).needs_trimmed_entries(15));
  // Node 3 answers that its log ends at 5, below the first index 15: now it is.
  reject_probe(*leader, 5);
  EXPECT_TRUE(progress(3).needs_trimmed_entries(15));
  EXPECT_FALSE(progress(2).needs_trimmed_entries(15));
}

TEST(Snapshot, ALeaderSendsOneSnapshotToAFollowerBehindItsFirstIndexThenReplicatesAfterIt) {
  auto leader = trimmed_leader();
  ASSERT_EQ(leader->raft->role(), Role::kLeader);
  ASSERT_EQ(leader->raft->last_index(), 21u);
  reject_probe(*leader, 5);
  std::vector<Message> snapshots = leader->take(MessageType::kSnapshot, 3);
  ASSERT_EQ(snapshots.size(), 1u);
  const Message& m = snapshots[0];
  ASSERT_TRUE(m.snapshot);
  EXPECT_EQ(m.snapshot->index, 14u) << "the entry before the first retained one";
  EXPECT_EQ(m.snapshot->term, 1u);
  EXPECT_EQ(m.snapshot->conf.voters, (std::vector<NodeId>{1, 2, 3}));
  EXPECT_TRUE(m.snapshot->data.empty()) << "the driver fills the data";
  EXPECT_EQ(m.commit, leader->raft->commit_index());
  EXPECT_EQ(m.term, leader->raft->term());
  const auto progress = [&] {
    for (const PeerProgress& p : leader->raft->progress()) {
      if (p.id == 3) return p;
    }
    return PeerProgress{};
  };
  EXPECT_EQ(progress().snapshot_index, 14u);
  EXPECT_TRUE(progress().needs_trimmed_entries(15));

  // One in flight: proposals, heartbeat answers and stale rejections send node 3 nothing more.
  ASSERT_EQ(leader->raft->propose({Entry{}}).status, ProposeStatus::kOk);
  leader->drain();
  leader->raft->step(response(MessageType::kHeartbeatResponse, 3, 1, leader->raft->term()));
  leader->drain();
  reject_probe(*leader, 5);
  EXPECT_TRUE(leader->take(MessageType::kSnapshot, 3).empty());
  EXPECT_TRUE(leader->take(MessageType::kAppend, 3).empty());

  // Installed: the acknowledgement of its index moves the follower on, with appends after it.
  Message ack = response(MessageType::kAppendResponse, 3, 1, leader->raft->term());
  ack.index = 14;
  leader->raft->step(ack);
  leader->drain();
  EXPECT_EQ(progress().snapshot_index, 0u);
  EXPECT_EQ(progress().match_index, 14u);
  const std::vector<Message> appends = leader->take(MessageType::kAppend, 3);
  ASSERT_FALSE(appends.empty());
  EXPECT_EQ(appends[0].index, 14u);
  EXPECT_EQ(appends[0].log_term, 1u);
  ASSERT_FALSE(appends[0].entries.empty());
  EXPECT_EQ(appends[0].entries.front().index, 15u);
  EXPECT_TRUE(leader->take(MessageType::kSnapshot, 3).empty());
}

TEST(Snapshot, ALostSnapshotIsSentAgainAfterTheRetryTimeoutAndByANewLeader) {
  auto leader = trimmed_leader();
  reject_probe(*leader, 5);
  ASSERT_EQ(leader->take(MessageType::kSnapshot, 3).size(), 1u);
  // Node 3 keeps answering heartbeats (so the leader keeps its quorum) but never the snapshot.
  for (int tick = 0; tick < 29; ++tick) {
    leader->raft->tick();
    leader->raft->step(response(MessageType::kHeartbeatResponse, 2, 1, leader->raft->term()));
    leader->drain();
  }
  EXPECT_TRUE(leader->take(MessageType::kSnapshot, 3).empty()) << "not before the timeout";
  leader->raft->tick();
  leader->drain();
  EXPECT_EQ(leader->take(MessageType::kSnapshot, 3).size(), 1u) << "sent again after 30 ticks";

  // A new leader (here: the same node in a later term) starts again: its first probe of node 3
  // ends in a new snapshot, however far the old one got.
  leader->raft->step(response(MessageType::kHeartbeat, 2, 1, leader->raft->term() + 1));
  leader->drain();
  ASSERT_EQ(leader->raft->role(), Role::kFollower);
  leader->sent.clear();
  for (int i = 0; i < 100 && leader->raft->role() == Role::kFollower; ++i) {
    leader->raft->tick();
    leader->raft->step(response(MessageType::kHeartbeatResponse, 2, 1, leader->raft->term()));
  }
  leader->drain();
  for (MessageType type : {MessageType::kPreVoteResponse, MessageType::kVoteResponse}) {
    for (const Message& request : std::vector<Message>(leader->sent)) {
      if (request.to == 2 &&
          (request.type == MessageType::kPreVote || request.type == MessageType::kVote)) {
        leader->raft->step(response(type, 2, 1, request.term));
      }
    }
    leader->drain();
  }
  ASSERT_EQ(leader->raft->role(), Role::kLeader);
  reject_probe(*leader, 5);
  const std::vector<Message> again = leader->take(MessageType::kSnapshot, 3);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].term, leader->raft->term());
}

// Review S1: the retry timer bounds the time without progress, not the whole transfer. While the
// driver reports the transfer moving (Raft::snapshot_progress), a snapshot that takes several
// timeouts to send is not sent again; once the reports stop, it is, one timeout later.
TEST(Snapshot, ProgressReportsKeepASlowTransferFromBeingSentAgain) {
  auto leader = trimmed_leader();
  reject_probe(*leader, 5);
  ASSERT_EQ(leader->take(MessageType::kSnapshot, 3).size(), 1u);
  auto tick_with_quorum = [&] {
    leader->raft->tick();
    leader->raft->step(response(MessageType::kHeartbeatResponse, 2, 1, leader->raft->term()));
    leader->drain();
  };
  for (int tick = 1; tick <= 5 * 30; ++tick) {  // five timeouts, a progress report every 20 ticks
    if (tick % 20 == 0) leader->raft->snapshot_progress(3);
    tick_with_quorum();
  }
  EXPECT_TRUE(leader->take(MessageType::kSnapshot, 3).empty()) << "restarted while still moving";
  // A report about a peer without a snapshot in flight changes nothing.
  leader->raft->snapshot_progress(2);
  // The last report came before tick 140: ticks 140..150 counted 11, 18 more make 29.
  for (int tick = 0; tick < 18; ++tick) tick_with_quorum();
  EXPECT_TRUE(leader->take(MessageType::kSnapshot, 3).empty()) << "not before the timeout";
  tick_with_quorum();
  EXPECT_EQ(leader->take(MessageType::kSnapshot, 3).size(), 1u) << "stalled: sent again";
}

// Node 1 with entries 1..20 (term 1, all committed) whose entry 17 is a configuration adding
// learner 4, trimmed below 15, elected by node 2's votes.
ConfState conf_with_learner_4() {
  ConfState conf;
  conf.voters = {1, 2, 3};
  conf.learners = {4};
  return conf;
}

std::unique_ptr<BareNode> leader_with_conf_above_trim_point() {
  std::vector<Entry> entries = make_entries(1, std::vector<Term>(20, 1));
  entries[16].type = EntryType::kConfig;
  entries[16].payload = encode_config(conf_with_learner_4());
  auto node =
      std::make_unique<BareNode>(snapshot_config(1), entries, 15, HardState{1, kNoNode, 20});
  for (int i = 0; i < 100 && node->raft->role() == Role::kFollower; ++i) node->raft->tick();
  node->drain();
  for (MessageType type : {MessageType::kPreVoteResponse, MessageType::kVoteResponse}) {
    for (const Message& request : std::vector<Message>(node->sent)) {
      if (request.to == 2 &&
          (request.type == MessageType::kPreVote || request.type == MessageType::kVote)) {
        node->raft->step(response(type, 2, 1, request.term));
      }
    }
    node->drain();
  }
  node->sent.clear();
  return node;
}

TEST(Snapshot, TheSnapshotPointIsTheNewestCommittedConfigurationWhenItIsAboveTheTrimPoint) {
  // A configuration entry at 17 (committed): the driver did not tell the configuration in force at
  // 14 (set_trim_point_conf), so the snapshot describes the log up to 17 instead.
  auto node = leader_with_conf_above_trim_point();
  ASSERT_EQ(node->raft->role(), Role::kLeader);
  reject_probe(*node, 5);
  const std::vector<Message> snapshots = node->take(MessageType::kSnapshot, 3);
  ASSERT_EQ(snapshots.size(), 1u);
  EXPECT_EQ(snapshots[0].snapshot->index, 17u);
  EXPECT_EQ(snapshots[0].snapshot->conf, conf_with_learner_4());
}

// The driver knows the configuration in force at its trim point 14: the snapshot describes the log
// up to 14 with it, although a newer configuration committed at 17, and the follower's
// acknowledgement of 14 ends the snapshot state (the entries from 15 on, the configuration at 17
// among them, follow by AppendEntries). A configuration told for another point (a trim or an
// install moved the log's start since) is not used.
TEST(Snapshot, TheSnapshotPointIsTheTrimPointWhenTheDriverKnowsTheConfigurationThere) {
  auto node = leader_with_conf_above_trim_point();
  ASSERT_EQ(node->raft->role(), Role::kLeader);
  const ConfState bootstrap{{1, 2, 3}};
  node->raft->set_trim_point_conf(13, bootstrap);  // stale: the log starts at 15
  reject_probe(*node, 5);
  std::vector<Message> snapshots = node->take(MessageType::kSnapshot, 3);
  ASSERT_EQ(snapshots.size(), 1u);
  EXPECT_EQ(snapshots[0].snapshot->index, 17u) << "a configuration told for another point";

  auto fresh = leader_with_conf_above_trim_point();
  fresh->raft->set_trim_point_conf(14, bootstrap);
  reject_probe(*fresh, 5);
  snapshots = fresh->take(MessageType::kSnapshot, 3);
  ASSERT_EQ(snapshots.size(), 1u);
  EXPECT_EQ(snapshots[0].snapshot->index, 14u);
  EXPECT_EQ(snapshots[0].snapshot->term, 1u);
  EXPECT_EQ(snapshots[0].snapshot->conf, bootstrap);
  auto peer_3 = [&] {
    for (const PeerProgress& p : fresh->raft->progress()) {
      if (p.id == 3) return p;
    }
    return PeerProgress{};
  };
  EXPECT_EQ(peer_3().snapshot_index, 14u);
  Message ack = response(MessageType::kAppendResponse, 3, 1, fresh->raft->term());
  ack.index = 14;
  fresh->raft->step(ack);
  fresh->drain();
  EXPECT_EQ(peer_3().snapshot_index, 0u) << "acknowledged at the point the core chose";
  EXPECT_EQ(peer_3().match_index, 14u);
  const std::vector<Message> appends = fresh->take(MessageType::kAppend, 3);
  ASSERT_FALSE(appends.empty());
  EXPECT_EQ(appends.front().index, 14u) << "replication continues right after the point";
  ASSERT_FALSE(appends.front().entries.empty());
  EXPECT_EQ(appends.front().entries.front().index, 15u);

  // Forgotten (the driver lost it): the committed configuration's index again.
  auto forgotten = leader_with_conf_above_trim_point();
  forgotten->raft->set_trim_point_conf(14, bootstrap);
  forgotten->raft->forget_trim_point_conf();
  reject_probe(*forgotten, 5);
  snapshots = forgotten->take(MessageType::kSnapshot, 3);
  ASSERT_EQ(snapshots.size(), 1u);
  EXPECT_EQ(snapshots[0].snapshot->index, 17u);
}

// Restarted from a hard state whose commit index lags its trim point, a new leader cannot describe
// the trimmed entries as committed until its no-op commits: it sends nothing, then the snapshot.
TEST(Snapshot, ALeaderWhoseCommitIndexLagsItsTrimPointWaitsForItsNoop) {
  auto leader = trimmed_leader(snapshot_config(1), 10);
  ASSERT_EQ(leader->raft->role(), Role::kLeader);
  ASSERT_EQ(leader->raft->commit_index(), 10u);
  reject_probe(*leader, 5);
  EXPECT_TRUE(leader->take(MessageType::kSnapshot, 3).empty());
  Message ack = response(MessageType::kAppendResponse, 2, 1, leader->raft->term());
  ack.index = 21;
  leader->raft->step(ack);
  leader->drain();
  ASSERT_EQ(leader->raft->commit_index(), 21u);
  leader->raft->step(response(MessageType::kHeartbeatResponse, 3, 1, leader->raft->term()));
  leader->drain();
  const std::vector<Message> snapshots = leader->take(MessageType::kSnapshot, 3);
  ASSERT_EQ(snapshots.size(), 1u);
  EXPECT_EQ(snapshots[0].snapshot->index, 14u);
}

TEST(Snapshot, WithoutSnapshotsTheLeaderSendsNoneAndAFollowerIgnoresThem) {
  Config config = snapshot_config(1);
  config.snapshots = false;
  auto leader = trimmed_leader(config);
  ASSERT_EQ(leader->raft->role(), Role::kLeader);
  reject_probe(*leader, 5);
  EXPECT_TRUE(leader->take(MessageType::kSnapshot, 3).empty());

  Config follower_config = snapshot_config(3);
  follower_config.snapshots = false;
  BareNode follower(follower_config, make_entries(1, std::vector<Term>(5, 1)), 1,
                    HardState{1, kNoNode, 5});
  Message m = response(MessageType::kSnapshot, 1, 3, 2);
  m.snapshot = Snapshot{14, 1, ConfState{{1, 2, 3}}, Payload("dedup")};
  follower.raft->step(m);
  follower.drain();
  EXPECT_TRUE(follower.snapshots.empty());
  EXPECT_EQ(follower.raft->last_index(), 5u);
}

// A follower of term 2 with entries 1..`last` of term 1, `commit` of them committed.
std::unique_ptr<BareNode> follower(Index last, Index commit, std::vector<Term> terms = {}) {
  if (terms.empty()) terms.assign(last, 1);
  return std::make_unique<BareNode>(snapshot_config(3), make_entries(1, terms), 1,
                                    HardState{2, kNoNode, commit});
}

Message snapshot_message(Term term, Index index, Term snapshot_term) {
  Message m = response(MessageType::kSnapshot, 1, 3, term);
  m.commit = index + 2;
  ConfState conf;
  conf.voters = {1, 2, 3};
  m.snapshot = Snapshot{index, snapshot_term, conf, Payload("dedup-state")};
  return m;
}

TEST(Snapshot, AFollowerInstallsItAndAnswersOnlyOnceItIsDurable) {
  auto node = follower(5, 3);
  node->raft->step(snapshot_message(2, 14, 1));
  ASSERT_TRUE(node->raft->has_ready());
  Ready rd = node->raft->ready();
  ASSERT_TRUE(rd.snapshot);
  EXPECT_EQ(rd.snapshot->index, 14u);
  EXPECT_EQ(rd.snapshot->term, 1u);
  EXPECT_EQ(rd.snapshot->data, "dedup-state") << "handed to the driver as sent";
  EXPECT_TRUE(rd.must_sync);
  EXPECT_FALSE(rd.truncate_from) << "the snapshot replaces the whole log";
  EXPECT_TRUE(rd.entries.empty());
  ASSERT_TRUE(rd.hard_state);
  EXPECT_EQ(rd.hard_state->commit, 14u);
  ASSERT_TRUE(rd.commit_index);
  EXPECT_EQ(*rd.commit_index, 14u);
  EXPECT_TRUE(rd.messages.empty()) << "nothing vouching for it leaves before it is durable";
  ASSERT_EQ(rd.messages_after_persist.size(), 1u);
  EXPECT_EQ(rd.messages_after_persist[0].type, MessageType::kAppendResponse);
  EXPECT_EQ(rd.messages_after_persist[0].index, 14u);
  EXPECT_FALSE(rd.messages_after_persist[0].reject);
  // Until the driver reports it, the core's view is the snapshot's, not the driver's old log.
  EXPECT_EQ(node->raft->last_index(), 14u);
  EXPECT_EQ(node->raft->commit_index(), 14u);
  ASSERT_TRUE(node->raft->installing_snapshot());
  EXPECT_TRUE(node->raft->installing_snapshot()->data.empty()) << "the core keeps no copy of it";
  EXPECT_EQ(node->raft->conf().voters, (std::vector<NodeId>{1, 2, 3}));
  ASSERT_EQ(node->raft->conf_history().size(), 1u);
  EXPECT_EQ(node->raft->conf_history()[0].index, 14u);
  // An append continuing it may arrive before the driver installed it.
  Message append = response(MessageType::kAppend, 1, 3, 2);
  append.index = 14;
  append.log_term = 1;
  append.commit = 16;
  append.entries = make_entries(15, {2, 2});
  node->raft->step(append);
  node->log.apply(rd);
  node->raft->on_persisted(14, 1);
  EXPECT_FALSE(node->raft->installing_snapshot());
  node->drain();
  EXPECT_EQ(node->log.first_index(), 15u);
  EXPECT_EQ(node->log.last_index(), 16u);
  EXPECT_EQ(node->raft->commit_index(), 16u);
}

TEST(Snapshot, OneAtOrBelowTheCommitIndexIsAnsweredWithTheCommitIndexAndNotInstalled) {
  auto node = follower(20, 16);
  node->raft->step(snapshot_message(2, 14, 1));
  node->drain();
  EXPECT_TRUE(node->snapshots.empty());
  EXPECT_EQ(node->log.last_index(), 20u);
  const std::vector<Message> answers = node->take(MessageType::kAppendResponse, 1);
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].index, 16u);
}

TEST(Snapshot, AFollowerHoldingItsLastEntryKeepsItsLogAndCommitsUpToIt) {
  auto node = follower(20, 5);
  node->raft->step(snapshot_message(2, 14, 1));
  node->drain();
  EXPECT_TRUE(node->snapshots.empty()) << "its matching entries, committed or not, stay";
  EXPECT_EQ(node->log.first_index(), 1u);
  EXPECT_EQ(node->log.last_index(), 20u);
  EXPECT_EQ(node->raft->commit_index(), 14u);
  const std::vector<Message> answers = node->take(MessageType::kAppendResponse, 1);
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].index, 14u);
  EXPECT_FALSE(answers[0].reject);
}

TEST(Snapshot, AnUncommittedDivergentTailIsReplaced) {
  // Entries 6..16 are a deposed leader's (term 1); the snapshot's entry 14 is of term 2.
  auto node = follower(16, 5);
  node->raft->step(snapshot_message(3, 14, 2));
  node->drain();
  ASSERT_EQ(node->snapshots.size(), 1u);
  EXPECT_EQ(node->log.first_index(), 15u);
  EXPECT_EQ(node->log.last_index(), 14u);
  EXPECT_EQ(*node->log.term_at(14), 2u);
  EXPECT_EQ(node->raft->term(), 3u);
  EXPECT_EQ(node->raft->leader(), 1u);
}

TEST(Snapshot, StaleOrForgedSnapshotsAreDroppedNeverFatal) {
  auto node = follower(5, 3);
  const auto unchanged = [&](const char* what) {
    node->drain();
    EXPECT_TRUE(node->snapshots.empty()) << what;
    EXPECT_EQ(node->log.last_index(), 5u) << what;
    EXPECT_EQ(node->raft->commit_index(), 3u) << what;
    EXPECT_EQ(node->raft->last_index(), 5u) << what;
  };
  node->raft->step(snapshot_message(1, 14, 1));  // an older term's leader
  unchanged("stale term");
  EXPECT_EQ(node->take(MessageType::kAppendResponse, 1).size(), 1u) << "told our term";
  node->raft->step(snapshot_message(2, 14, 3));  // the entry's term above the leader's term
  unchanged("term above the message's");
  node->raft->step(snapshot_message(2, 0, 1));
  unchanged("index 0");
  node->raft->step(snapshot_message(2, 14, 0));
  unchanged("term 0");
  Message no_voters = snapshot_message(2, 14, 1);
  no_voters.snapshot->conf.voters.clear();
  node->raft->step(no_voters);
  unchanged("a configuration without voters");
  Message duplicate_member = snapshot_message(2, 14, 1);
  duplicate_member.snapshot->conf.learners = {3};
  node->raft->step(duplicate_member);
  unchanged("a learner that is also a voter");
  Message empty = snapshot_message(2, 14, 1);
  empty.snapshot.reset();
  node->raft->step(empty);
  unchanged("no snapshot at all");
  // A later, honest one is still installed.
  node->raft->step(snapshot_message(2, 14, 1));
  node->drain();
  EXPECT_EQ(node->snapshots.size(), 1u);
}

TEST(Snapshot, TwoInOneRoundInstallTheNewerAndAnOlderOneAfterItIsAnsweredNotInstalled) {
  auto node = follower(5, 3);
  node->raft->step(snapshot_message(2, 14, 1));
  node->raft->step(snapshot_message(2, 18, 2));
  node->raft->step(snapshot_message(2, 16, 1));  // delayed: below the new commit index
  node->drain();
  ASSERT_EQ(node->snapshots.size(), 1u);
  EXPECT_EQ(node->snapshots[0].index, 18u);
  EXPECT_EQ(node->log.first_index(), 19u);
  EXPECT_EQ(*node->log.term_at(18), 2u);
  EXPECT_EQ(node->raft->commit_index(), 18u);
}

TEST(Snapshot, ACatchingUpNodeMarksItsAnswerUntilTheSnapshotReachesItsPromise) {
  Config config = snapshot_config(3);
  config.promised_index = 20;
  config.promised_term = 1;
  BareNode node(config, make_entries(1, std::vector<Term>(5, 1)), 1, HardState{2, kNoNode, 3});
  ASSERT_TRUE(node.raft->catching_up());
  node.raft->step(snapshot_message(2, 14, 1));  // below the promise: still catching up
  node.drain();
  std::vector<Message> answers = node.take(MessageType::kAppendResponse, 1);
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].context, kCatchingUpContext);
  EXPECT_TRUE(node.raft->catching_up());
  node.raft->step(snapshot_message(2, 22, 1));  // reaches it
  node.drain();
  answers = node.take(MessageType::kAppendResponse, 1);
  ASSERT_FALSE(answers.empty());
  EXPECT_EQ(answers.back().index, 22u);
  EXPECT_NE(answers.back().context, kCatchingUpContext);
  EXPECT_FALSE(node.raft->catching_up());
}

}  // namespace
}  // namespace raftlog::raft

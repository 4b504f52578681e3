// Nodes that never found a cluster (docs/raft.md, "Unvouched nodes", "Nodes that never found a
// cluster"; src/replica/not_founder_marker.h): a node created outside its bootstrap voters (it
// joined), or one that knew a commit index above 0, records DATA_DIR/NOT_FOUNDER; with it, it grants
// no (pre-)vote to an empty candidate and never campaigns with an empty log, also after losing its
// log/. Without it, such a node that lost its log granted an empty candidate (an unvouched node does
// until a leader names a commit above 0), and a founder restarted empty with its bootstrap
// configuration after the membership changed was elected (raftlog-sim --wipe --reconfigure).
// Also here: the membership rules an unvouched node relies on (a removed node still has peers; a
// catching-up voter does not count toward a change's reachable quorum).
#include <gtest/gtest.h>

#include <memory>
#include <optional>

#include "bare_node.h"
#include "replica/marker_record.h"
#include "replica/not_founder_marker.h"
#include "replica/unvouched_marker.h"
#include "store/endian.h"
#include "store/memory_env.h"
#include "test_cluster.h"
#include "unvouched_messages.h"

namespace raftlog::raft {
namespace {

using replica::NotFounderMarker;
using testing::TestCluster;
using namespace testing::unvouched;

bool not_founder_recorded(TestCluster& c, NodeId id) {
  return c.node(id).env->exists(c.node(id).config.data_dir + "/" + NotFounderMarker::kFileName);
}

// Whether `id` sent a pre-vote or vote request in any Ready since `mark`.
bool campaigned_since(const TestCluster& c, NodeId id, std::size_t mark) {
  const std::vector<Ready>& readies = c.node(id).readies;
  for (std::size_t i = mark; i < readies.size(); ++i) {
    for (const std::vector<Message>* queue :
         {&readies[i].messages, &readies[i].messages_after_persist}) {
      for (const Message& m : *queue) {
        if (m.type == MessageType::kPreVote || m.type == MessageType::kVote) return true;
      }
    }
  }
  return false;
}

TEST(NotFounder, ANodeOutsideItsBootstrapVotersRecordsItAndRefusesAnEmptyCandidate) {
  // Node 4 starts with the founders' configuration {1, 2, 3}, as raftlogd --join does.
  TestCluster c({1, 2, 3, 4}, [](Config& config) { config.initial_conf.voters = {1, 2, 3}; });
  EXPECT_TRUE(not_founder_recorded(c, 4));
  EXPECT_FALSE(not_founder_recorded(c, 1)) << "a founder of a new cluster records nothing yet";
  ASSERT_TRUE(c.raft(4).unvouched());
  for (NodeId id : {1, 2, 3}) c.isolate(id);
  // An empty candidate: refused, pre-vote and vote (an unvouched node without the record grants it
  // while no leader named a commit above 0).
  EXPECT_EQ(answer_to(c, vote_request(1, 4, 1, 0, 0, /*pre_vote=*/true)), false);
  EXPECT_EQ(answer_to(c, vote_request(1, 4, 1, 0, 0, /*pre_vote=*/false)), false);
  // The founders' own empty logs still elect each other: a brand-new cluster is unaffected.
  EXPECT_EQ(answer_to(c, vote_request(1, 2, 1, 0, 0, /*pre_vote=*/true)), true);
}

TEST(NotFounder, AFounderRecordsItOnceItKnowsACommitAndKeepsItAcrossARestart) {
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  ASSERT_TRUE(c.propose(1, {"x"}).proposed());
  c.deliver_all();
  ASSERT_GT(c.raft(3).commit_index(), 0u);
  EXPECT_TRUE(not_founder_recorded(c, 3));
  c.crash_restart(3);
  auto found = NotFounderMarker::find(c.node(3).env.get(), c.node(3).config.data_dir);
  ASSERT_TRUE(found.ok());
  EXPECT_TRUE(found->present);
  EXPECT_TRUE(found->damage.empty()) << found->damage;
  EXPECT_EQ(found->why, NotFounderMarker::Why::kCommitted);
}

TEST(NotFounder, AfterLosingItsLogItNeitherGrantsNorCampaignsEmpty) {
  TestCluster c({1, 2, 3});
  ASSERT_TRUE(c.campaign_until_leader(1));
  ASSERT_TRUE(c.propose(1, {"x"}).proposed());
  c.deliver_all();
  ASSERT_TRUE(not_founder_recorded(c, 3));
  c.restart_log_wiped(3);
  ASSERT_TRUE(c.raft(3).unvouched());
  ASSERT_EQ(c.raft(3).last_index(), 0u);
  EXPECT_TRUE(not_founder_recorded(c, 3)) << "the record lives beside log/, not in it";
  c.isolate(1);
  c.isolate(2);
  const Term term = c.raft(3).term();
  EXPECT_EQ(answer_to(c, vote_request(2, 3, term + 1, 0, 0, /*pre_vote=*/true)), false);
  EXPECT_EQ(answer_to(c, vote_request(2, 3, term + 1, 0, 0, /*pre_vote=*/false)), false);
  // Alone with its empty log for many election timeouts: it never asks for a vote.
  const std::size_t mark = c.node(3).readies.size();
  c.tick(3, 100);
  EXPECT_FALSE(campaigned_since(c, 3, mark));
  EXPECT_EQ(c.raft(3).role(), Role::kFollower);
}

TEST(NotFounder, ADamagedRecordCountsAsPresent) {
  store::MemoryEnv env;
  ASSERT_TRUE(env.create_dir("/d").ok());
  ASSERT_TRUE(NotFounderMarker::write(&env, "/d", 7, NotFounderMarker::Why::kJoined).ok());
  auto found = NotFounderMarker::find(&env, "/d");
  ASSERT_TRUE(found.ok());
  EXPECT_TRUE(found->present);
  EXPECT_EQ(found->why, NotFounderMarker::Why::kJoined);
  // Both slots zeroed: a file that holds no valid record.
  ASSERT_TRUE(env.write_file("/d/NOT_FOUNDER", std::string(8192, '\0')).ok());
  found = NotFounderMarker::find(&env, "/d");
  ASSERT_TRUE(found.ok());
  EXPECT_TRUE(found->present);
  EXPECT_FALSE(found->damage.empty());
  EXPECT_FALSE(NotFounderMarker::find(&env, "/elsewhere")->present);
}

// A record of another format (another version, size or reason) counts as present with its damage
// said, for both markers (review amnesia3: no test read one); UNVOUCHED's word is then unknown (0, 0).
TEST(NotFounder, ARecordOfAnUnknownFormatCountsAsPresentWithItsDamageSaid) {
  store::MemoryEnv env;
  ASSERT_TRUE(env.create_dir("/d").ok());
  std::string reason_9 = NotFounderMarker::encode(7, NotFounderMarker::Why::kJoined);
  store::put_u32(reason_9.data() + 12, 9);
  std::string version_2 = NotFounderMarker::encode(7, NotFounderMarker::Why::kJoined);
  store::put_u32(version_2.data(), 2);
  for (const std::string& payload : {reason_9, version_2, std::string(20, '\1')}) {
    ASSERT_TRUE(
        replica::write_marker_record(&env, "/d", NotFounderMarker::kFileName, payload).ok());
    auto found = NotFounderMarker::find(&env, "/d");
    ASSERT_TRUE(found.ok());
    EXPECT_TRUE(found->present);
    EXPECT_NE(found->damage.find("unknown format"), std::string::npos) << found->damage;
    EXPECT_EQ(found->why, NotFounderMarker::Why::kUnknown);
  }
  std::string word_version_2 = replica::UnvouchedMarker::encode(7, 5, 40);
  store::put_u32(word_version_2.data(), 2);
  for (const std::string& payload : {word_version_2, std::string(16, '\1')}) {
    ASSERT_TRUE(replica::write_marker_record(&env, "/d", replica::UnvouchedMarker::kFileName,
                                             payload)
                    .ok());
    auto found = replica::UnvouchedMarker::find(&env, "/d");
    ASSERT_TRUE(found.ok());
    EXPECT_TRUE(found->present);
    EXPECT_NE(found->damage.find("unknown format"), std::string::npos) << found->damage;
    EXPECT_EQ(found->vouching_term, 0u);
    EXPECT_EQ(found->vouching_index, 0u);
  }
  ASSERT_TRUE(replica::UnvouchedMarker::write(&env, "/d", 7, 5, 40).ok());
  auto found = replica::UnvouchedMarker::find(&env, "/d");
  ASSERT_TRUE(found.ok());
  EXPECT_TRUE(found->damage.empty()) << found->damage;
  EXPECT_EQ(found->vouching_term, 5u);
  EXPECT_EQ(found->vouching_index, 40u);
}

// A sole member ignores the record (review amnesia3 M4): with an empty log it could otherwise never
// lead again; it has nobody to lose an entry against.
TEST(NotFounder, ASoleMemberThatLostItsLogStillLeads) {
  TestCluster c({1});
  ASSERT_TRUE(c.campaign_until_leader(1));
  ASSERT_TRUE(c.propose(1, {"x"}).proposed());
  c.deliver_all();
  ASSERT_TRUE(not_founder_recorded(c, 1));
  c.restart_log_wiped(1);
  ASSERT_EQ(c.raft(1).last_index(), 0u);
  EXPECT_TRUE(c.campaign_until_leader(1));
}

// A node removed from a configuration of one other member still has that member for a peer: after
// losing its log it is unvouched. It took itself for a sole member before (its configuration's
// size), voted at once, and two leaders of one term followed (raftlog-sim --wipe --reconfigure, seed
// 54 with 3 nodes).
TEST(NotFounder, ANodeRemovedFromAOneMemberConfigurationIsUnvouchedAfterLosingItsLog) {
  TestCluster c({1, 2});
  ASSERT_TRUE(c.campaign_until_leader(1));
  c.deliver_all();
  testing::MembershipRequest removed = c.propose_conf_change(1, {ConfChangeType::kRemoveNode, 2});
  c.deliver_all();
  ASSERT_TRUE(removed.answered());
  ASSERT_EQ(removed.code(), replica::ErrorCode::kOk) << removed.result().error.message;
  ASSERT_EQ(c.raft(2).conf(), (ConfState{{1}}));
  c.restart_log_wiped(2);
  EXPECT_TRUE(c.raft(2).unvouched());
}

// A change whose new configuration needs a voter that is still catching up (its acknowledgements
// not counted) for a quorum is refused like one that needs an unreachable voter: removing node 2
// left {1, 3} with node 3 wiped, and once leader 1 was gone nobody could be elected (node 3 grants no
// candidate with entries before a leader's word; raftlog-sim --wipe --reconfigure, seed 27).
TEST(NotFounder, ACatchingUpVoterDoesNotCountTowardAChangesReachableQuorum) {
  Config config;
  config.id = 1;
  config.initial_conf.voters = {1, 2, 3};
  testing::BareNode leader(config, {}, 0, HardState{});
  for (int i = 0; i < 200 && leader.raft->role() == Role::kFollower; ++i) leader.raft->tick();
  leader.drain();
  for (MessageType type : {MessageType::kPreVoteResponse, MessageType::kVoteResponse}) {
    const MessageType request = type == MessageType::kPreVoteResponse ? MessageType::kPreVote
                                                                      : MessageType::kVote;
    for (const Message& m : leader.take(request, 2)) {
      leader.raft->step(testing::response(type, 2, 1, m.term));
    }
    leader.drain();
  }
  ASSERT_EQ(leader.raft->role(), Role::kLeader);
  const Term term = leader.raft->term();
  const Index noop = leader.raft->last_index();
  Message ack2 = testing::response(MessageType::kAppendResponse, 2, 1, term);
  ack2.index = noop;
  leader.raft->step(ack2);
  Message ack3 = testing::response(MessageType::kAppendResponse, 3, 1, term);
  ack3.index = noop;
  ack3.context = kCatchingUpContext;
  leader.raft->step(ack3);
  leader.drain();
  ASSERT_EQ(leader.raft->commit_index(), noop);
  const ConfChangeResult refused = leader.raft->propose_conf_change({ConfChangeType::kRemoveNode, 2});
  EXPECT_EQ(refused.status, ConfChangeStatus::kWouldLoseQuorum);
  // It says which voter did not count, and why (drills7 L6).
  EXPECT_EQ(refused.quorum, 2u);
  EXPECT_EQ(refused.reachable, 1u);
  ASSERT_EQ(refused.uncounted.size(), 1u);
  EXPECT_EQ(refused.uncounted[0].node, 3u);
  EXPECT_EQ(refused.uncounted[0].why, UncountedVoter::Why::kCatchingUp);
  EXPECT_EQ(leader.raft->propose_conf_change({ConfChangeType::kRemoveNode, 3}).status,
            ConfChangeStatus::kOk)
      << "{1, 2} has its quorum without the catching-up node";
}

// A leader of {1, 2, 3} whose no-op node 2 acknowledged plainly (node 3 silent so far).
std::unique_ptr<testing::BareNode> leader_of_three() {
  Config config;
  config.id = 1;
  config.initial_conf.voters = {1, 2, 3};
  auto leader = std::make_unique<testing::BareNode>(config, std::vector<Entry>{}, 0, HardState{});
  for (int i = 0; i < 200 && leader->raft->role() == Role::kFollower; ++i) leader->raft->tick();
  leader->drain();
  for (MessageType type : {MessageType::kPreVoteResponse, MessageType::kVoteResponse}) {
    const MessageType request = type == MessageType::kPreVoteResponse ? MessageType::kPreVote
                                                                      : MessageType::kVote;
    for (const Message& m : leader->take(request, 2)) {
      leader->raft->step(testing::response(type, 2, 1, m.term));
    }
    leader->drain();
  }
  Message ack2 = testing::response(MessageType::kAppendResponse, 2, 1, leader->raft->term());
  ack2.index = leader->raft->last_index();
  leader->raft->step(ack2);
  leader->drain();
  return leader;
}

// Review amnesia3 H1 (a): a voter heard only through heartbeat answers (or rejections) may be one
// that lost its log; only an accepted, unmarked append response of this term makes it count. The
// simulator's --wipe --reconfigure seeds 1125 and 1377 (5 nodes) made a two-voter configuration
// with such a node, and nobody was elected again.
TEST(NotFounder, AVoterHeardOnlyThroughHeartbeatsDoesNotCountTowardAChangesQuorum) {
  std::unique_ptr<testing::BareNode> leader = leader_of_three();
  ASSERT_EQ(leader->raft->role(), Role::kLeader);
  ASSERT_EQ(leader->raft->commit_index(), leader->raft->last_index());
  leader->raft->step(
      testing::response(MessageType::kHeartbeatResponse, 3, 1, leader->raft->term()));
  leader->drain();
  EXPECT_EQ(leader->raft->propose_conf_change({ConfChangeType::kRemoveNode, 2}).status,
            ConfChangeStatus::kWouldLoseQuorum);
  // Once it acknowledged an append plainly, it counts.
  Message ack3 = testing::response(MessageType::kAppendResponse, 3, 1, leader->raft->term());
  ack3.index = leader->raft->last_index();
  leader->raft->step(ack3);
  leader->drain();
  EXPECT_EQ(leader->raft->propose_conf_change({ConfChangeType::kRemoveNode, 2}).status,
            ConfChangeStatus::kOk);
}

// An acknowledgement from before the node lost its log, still in flight when it restarted (limit 3),
// counts it in; its next rejection (the leader's append finds its log empty) counts it out again
// (5 nodes, seeds 1125 and 1377).
TEST(NotFounder, ARejectionUndoesAnEarlierAcknowledgementForAChangesQuorum) {
  std::unique_ptr<testing::BareNode> leader = leader_of_three();
  ASSERT_EQ(leader->raft->role(), Role::kLeader);
  const Term term = leader->raft->term();
  Message ack3 = testing::response(MessageType::kAppendResponse, 3, 1, term);
  ack3.index = leader->raft->last_index();
  leader->raft->step(ack3);
  Message reject3 = testing::response(MessageType::kAppendResponse, 3, 1, term);
  reject3.index = leader->raft->last_index();
  reject3.reject = true;
  reject3.reject_hint = 0;
  leader->raft->step(reject3);
  leader->drain();
  EXPECT_EQ(leader->raft->propose_conf_change({ConfChangeType::kRemoveNode, 2}).status,
            ConfChangeStatus::kWouldLoseQuorum);
}

// Review amnesia3 M1, H1 (b): an unvouched node catching up answers an append below its commit
// index (a leader's retransmission) marked, like every other acknowledgement; unmarked, the leader
// counted its match toward commit and toward a change's quorum again (seed 1766, 3 nodes).
TEST(NotFounder, ACatchingUpNodeMarksItsAnswerToAnAppendBelowItsCommit) {
  Config config;
  config.id = 3;
  config.initial_conf.voters = {1, 2, 3};
  config.unvouched = true;
  testing::BareNode node(config, {}, 0, HardState{});
  node.raft->step(heartbeat_from(1, 3, 5, /*commit=*/4));
  node.raft->step(append_from(1, 3, 5, 0, 0, 2, {entry_at(1, 5), entry_at(2, 5)}));
  node.drain();
  ASSERT_TRUE(node.raft->catching_up());
  ASSERT_EQ(node.raft->commit_index(), 2u);
  node.take(MessageType::kAppendResponse, 1);
  node.raft->step(append_from(1, 3, 5, 0, 0, 2, {entry_at(1, 5)}));  // a retransmission
  node.drain();
  const std::vector<Message> answers = node.take(MessageType::kAppendResponse, 1);
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].index, 2u);
  EXPECT_EQ(answers[0].context, kCatchingUpContext);
}

}  // namespace
}  // namespace raftlog::raft

// The founding check's decision (server/founding_check.h, decide_founding) on the answers of the
// other members: a node on an empty directory founds only beside members that are empty too or do
// not answer, and a late founder of a cluster whose bootstrap leader never replicated to it starts.
#include "server/founding_check.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace raftlog::server {
namespace {

FoundingAnswer empty_member(std::uint64_t id) {
  FoundingAnswer answer;
  answer.member = id;
  answer.address = "127.0.0.1:700" + std::to_string(id);
  answer.answered = true;
  answer.node_id = id;
  answer.cluster_id = "c";
  return answer;
}

FoundingAnswer silent_member(std::uint64_t id) {
  FoundingAnswer answer;
  answer.member = id;
  answer.address = "127.0.0.1:700" + std::to_string(id);
  answer.failure = "gRPC status 14: connection refused";
  return answer;
}

TEST(FoundingCheck, EmptyOrSilentMembersLetANewClusterFound) {
  EXPECT_EQ(decide_founding(1, "c", {}).refusal, "");
  EXPECT_EQ(decide_founding(1, "c", {silent_member(2), silent_member(3)}).refusal, "");
  const FoundingDecision decision = decide_founding(1, "c", {empty_member(2), silent_member(3)});
  EXPECT_EQ(decision.refusal, "");
  EXPECT_EQ(decision.note, "");
}

TEST(FoundingCheck, AMemberHoldingTheClustersStateRefusesAndIsNamed) {
  for (int what = 0; what < 3; ++what) {
    FoundingAnswer holder = empty_member(3);
    if (what == 0) holder.term = 4;
    if (what == 1) holder.last_index = 17;
    if (what == 2) {
      holder.last_index = 9;
      holder.config_index = 9;
    }
    const FoundingDecision decision = decide_founding(1, "c", {silent_member(2), holder});
    ASSERT_NE(decision.refusal, "") << what;
    EXPECT_NE(decision.refusal.find("member 3 (127.0.0.1:7003)"), std::string::npos)
        << decision.refusal;
    EXPECT_NE(decision.refusal.find("members replace 1"), std::string::npos) << decision.refusal;
    EXPECT_NE(decision.refusal.find("--skip-founding-check"), std::string::npos)
        << decision.refusal;
  }
}

TEST(FoundingCheck, ARetiredIdAnotherClusterOrAnotherNodeAtTheAddressRefuse) {
  FoundingAnswer retired = empty_member(3);
  retired.self_retired = true;
  EXPECT_NE(decide_founding(1, "c", {retired}).refusal.find("retired"), std::string::npos);
  FoundingAnswer other_cluster = empty_member(3);
  other_cluster.cluster_id = "d";
  EXPECT_NE(decide_founding(1, "c", {other_cluster}).refusal.find("cluster 'd'"),
            std::string::npos);
  FoundingAnswer other_node = empty_member(3);
  other_node.node_id = 5;
  EXPECT_NE(decide_founding(1, "c", {other_node}).refusal.find("node 5 answers there"),
            std::string::npos);
}

TEST(FoundingCheck, ALateFounderStartsWhenTheBootstrapLeaderNeverReplicatedToIt) {
  FoundingAnswer leader = empty_member(2);
  leader.term = 1;
  leader.last_index = 1;
  leader.leader = true;
  FoundingAnswer follower = empty_member(3);
  follower.term = 1;
  follower.last_index = 1;
  const FoundingDecision late = decide_founding(1, "c", {leader, follower});
  EXPECT_EQ(late.refusal, "");
  EXPECT_NE(late.note.find("late founder"), std::string::npos) << late.note;
  // The leader replicated to it in its term: this node held entries and lost them.
  leader.self_match_index = 1;
  EXPECT_NE(decide_founding(1, "c", {leader, follower}).refusal, "");
  // A changed configuration: the founders' --members no longer describe the cluster.
  leader.self_match_index = 0;
  follower.config_index = 1;
  EXPECT_NE(decide_founding(1, "c", {leader, follower}).refusal, "");
  // No leader among the answers (a data node that lost its quorum): refused.
  follower.config_index = 0;
  leader.leader = false;
  EXPECT_NE(decide_founding(1, "c", {leader, follower}).refusal, "");
}

// Review of found6 M1: a node that is no founder (its --members adds itself to the founders' list,
// --join forgotten) was let in as a "late founder", the leader's match index 0 meaning "never
// replicated to" and "not tracked" alike. The founders each member names must be this node's.
TEST(FoundingCheck, ANodeThatIsNoFounderIsRefusedAndNotTakenForALateFounder) {
  FoundingAnswer leader = empty_member(2);
  leader.term = 1;
  leader.last_index = 1;
  leader.leader = true;
  leader.bootstrap_voters = {1, 2, 3};
  const FoundingDecision decision = decide_founding(4, "c", {leader}, {1, 2, 3, 4});
  EXPECT_EQ(decision.note, "");
  EXPECT_NE(decision.refusal.find("founded by {1, 2, 3}, but this node's --members names {1, 2, 3, "
                                  "4}"),
            std::string::npos)
      << decision.refusal;
  EXPECT_NE(decision.refusal.find("--join"), std::string::npos) << decision.refusal;
  // Without its own --members to compare (an older caller), the leader's founders still decide.
  EXPECT_NE(decide_founding(4, "c", {leader}).refusal, "");
  // An empty member of a new cluster with another founders' list: the flags disagree.
  FoundingAnswer other_list = empty_member(2);
  other_list.bootstrap_voters = {1, 2};
  EXPECT_NE(decide_founding(1, "c", {other_list}, {1, 2, 3}).refusal, "");
  // The same list: founds (the late founder with its leader's list too).
  other_list.bootstrap_voters = {1, 2, 3};
  EXPECT_EQ(decide_founding(1, "c", {other_list}, {1, 2, 3}).refusal, "");
  EXPECT_EQ(decide_founding(3, "c", {leader}, {1, 2, 3}).refusal, "");
}

// Review of found6 L1, L2: a refusal that an election in a new cluster could explain (holders of
// the unchanged bootstrap configuration, no leader among the answers) asks to be asked again and
// says so; a retired id is told to stop for good, not to run a replace that would fail.
TEST(FoundingCheck, ARefusalWithoutALeaderAsksAgainAndARetiredIdIsToldToStop) {
  FoundingAnswer follower = empty_member(2);
  follower.term = 1;
  follower.last_index = 1;
  const FoundingDecision no_leader = decide_founding(3, "c", {follower});
  EXPECT_NE(no_leader.refusal, "");
  EXPECT_TRUE(no_leader.ask_again);
  EXPECT_NE(no_leader.refusal.find("no leader while it asked"), std::string::npos);
  follower.config_index = 1;  // a changed configuration: no election explains it
  EXPECT_FALSE(decide_founding(3, "c", {follower}).ask_again);
  FoundingAnswer retired = empty_member(2);
  retired.self_retired = true;
  const std::string refusal = decide_founding(1, "c", {retired}).refusal;
  EXPECT_NE(refusal.find("Stop this node for good"), std::string::npos) << refusal;
  EXPECT_EQ(refusal.find("members replace"), std::string::npos) << refusal;
}

TEST(FoundingCheck, MalformedAnswersAreNoAnswers) {
  FoundingAnswer answer = empty_member(2);
  EXPECT_EQ(check_probe_answer(answer), "");
  answer.node_id = 0;
  EXPECT_NE(check_probe_answer(answer), "");
  answer = empty_member(2);
  answer.cluster_id = "";
  EXPECT_NE(check_probe_answer(answer), "");
  answer.cluster_id = std::string(257, 'x');
  EXPECT_NE(check_probe_answer(answer), "");
  answer = empty_member(2);
  answer.term = (std::uint64_t{1} << 62) + 1;
  EXPECT_NE(check_probe_answer(answer), "");
  answer = empty_member(2);
  answer.bootstrap_voters = {0, 1};
  EXPECT_NE(check_probe_answer(answer), "");
  answer.bootstrap_voters.assign(65, 1);
  EXPECT_NE(check_probe_answer(answer), "");
  // A configuration entry past the log's end is odd but not malformed: it still shows state.
  answer = empty_member(2);
  answer.config_index = 3;
  answer.last_index = 2;
  EXPECT_EQ(check_probe_answer(answer), "");
  EXPECT_NE(decide_founding(1, "c", {answer}).refusal, "");
}

}  // namespace
}  // namespace raftlog::server

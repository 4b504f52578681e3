// What a node's health says and why (server/health_reporter.h): SERVING only for a full replica that
// knows its leader; every other state names its reason, the most serious first.
#include <gtest/gtest.h>

#include "server/health_reporter.h"

namespace raftlog::server {
namespace {

replica::NodeStatus serving_follower() {
  replica::NodeStatus status;
  status.node_id = 2;
  status.leader_id = 1;
  return status;
}

TEST(HealthReason, AFullReplicaThatKnowsItsLeaderIsServing) {
  EXPECT_EQ(not_serving_reason(serving_follower()), "");
}

TEST(HealthReason, EachStateThatIsNotAFullReplicaNamesItsReason) {
  replica::NodeStatus no_leader = serving_follower();
  no_leader.leader_id = 0;
  EXPECT_EQ(not_serving_reason(no_leader), "no leader known");

  replica::NodeStatus stranded = serving_follower();
  stranded.stranded_below_index = 15;
  EXPECT_NE(not_serving_reason(stranded).find("stranded: needs entries below index 15"),
            std::string::npos);

  replica::NodeStatus learner = serving_follower();
  learner.learner_catching_up_to_index = 40;
  EXPECT_EQ(not_serving_reason(learner), "learner catching up to the leader's commit index 40");

  replica::NodeStatus catching_up = serving_follower();
  catching_up.catching_up = true;
  catching_up.catching_up_to_index = 9;
  EXPECT_NE(not_serving_reason(catching_up).find("catching up to index 9"), std::string::npos);

  replica::NodeStatus corrupt = serving_follower();
  corrupt.corrupt_index = 7;
  corrupt.catching_up = true;
  corrupt.leader_id = 0;
  EXPECT_NE(not_serving_reason(corrupt).find("entry 7 is corrupt"), std::string::npos)
      << "a corrupt entry is named before anything else";
}

}  // namespace
}  // namespace raftlog::server

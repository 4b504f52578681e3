// What a node's health says and why (server/health_reporter.h): SERVING only for a full replica that
// knows its leader; every other state names its reason, the most serious first.
#include <grpcpp/health_check_service_interface.h>
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>

#include "server/health_reporter.h"
#include "shared/captured_log.h"

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

// drills7 H4: an unvouched node that has waited long without a leader says it may be waiting for
// an operator, after the reason it is unvouched.
TEST(HealthReason, AnUnvouchedNodeWaitingLongForALeaderSaysAnOperatorMayBeNeeded) {
  replica::NodeStatus status = serving_follower();
  status.leader_id = 0;
  status.unvouched = true;
  status.unvouched_reason = replica::kUnvouchedLogLostReason;
  EXPECT_EQ(not_serving_reason(status), replica::kUnvouchedLogLostReason);
  status.unvouched_hint = "no leader has caught it up, or moved its log, for 12 s: ...";
  const std::string reason = not_serving_reason(status);
  EXPECT_EQ(reason, std::string(replica::kUnvouchedLogLostReason) + "; " +
                        replica::kUnvouchedHintHealth);
  // A second later the hint counts 13 s; health's reason, which is logged at every change, does
  // not (review of bootstrap5, M1: one log line a second).
  status.unvouched_hint = "no leader has caught it up, or moved its log, for 13 s: ...";
  EXPECT_EQ(not_serving_reason(status), reason);
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
  learner.learners = {2};
  learner.learner_catching_up_to_index = 40;
  learner.catching_up_to_leader_commit = 40;
  EXPECT_EQ(not_serving_reason(learner), std::string("learner ") + kCatchingUpToLeaderReason);
  learner.catching_up_to_leader_commit = 0;  // a status from before the field: the learner's alone
  EXPECT_EQ(not_serving_reason(learner), std::string("learner ") + kCatchingUpToLeaderReason);

  replica::NodeStatus catching_up = serving_follower();
  catching_up.catching_up = true;
  catching_up.catching_up_to_index = 9;
  EXPECT_NE(not_serving_reason(catching_up).find("catching up to index 9"), std::string::npos);

  // drills6 M3: a removed node (its own log holds its committed removal, or a member said its id is
  // retired) still knew a leader and answered SERVING, reads from a log that no longer moves.
  replica::NodeStatus removed = serving_follower();
  removed.removed = true;
  removed.stranded_below_index = 15;
  EXPECT_NE(not_serving_reason(removed).find("removed from the configuration"), std::string::npos)
      << "named before the states a member can leave by itself";

  // Review of nonce6, M2: a leader refused as its own id with another leadership nonce is the
  // fork (it lost its state), unlike one refused by another id (it cannot tell which is which).
  replica::NodeStatus refused = serving_follower();
  refused.leader_id = 2;
  refused.node_id = 2;
  refused.leadership_refused = "node 3 refuses this node's leadership of term 1: ...";
  EXPECT_EQ(not_serving_reason(refused), "");
  refused.leads_term_twice = true;
  EXPECT_NE(not_serving_reason(refused).find("lost its state and leads a term a second time"),
            std::string::npos);
  EXPECT_NE(not_serving_reason(refused, SnapshotTransfers{}).find("a second time"),
            std::string::npos);

  replica::NodeStatus corrupt = serving_follower();
  corrupt.corrupt_index = 7;
  corrupt.catching_up = true;
  corrupt.leader_id = 0;
  EXPECT_NE(not_serving_reason(corrupt).find("entry 7 is corrupt"), std::string::npos)
      << "a corrupt entry is named before anything else";
}

// drills7 L1: a voter restarted 15,000 entries behind its leader was SERVING as soon as it knew the
// leader. Its reason stays the same sentence while the indexes move (health logs each change).
TEST(HealthReason, AVoterCatchingUpToItsLeadersCommitIsNotServing) {
  replica::NodeStatus voter = serving_follower();
  voter.voters = {1, 2, 3};
  voter.catching_up_to_leader_commit = 15189;
  voter.behind_leader_commit_entries = 15152;
  const std::string reason = not_serving_reason(voter);
  EXPECT_EQ(reason, kCatchingUpToLeaderReason);
  voter.catching_up_to_leader_commit = 15300;
  voter.behind_leader_commit_entries = 40;
  EXPECT_EQ(not_serving_reason(voter), reason);
  voter.catching_up_to_leader_commit = 0;
  voter.behind_leader_commit_entries = 40;  // caught up, a few batches behind under load
  EXPECT_EQ(not_serving_reason(voter), "");
  // Before "no leader known" cannot happen (the rule reports 0 without a leader), but a stranded
  // follower is named as such first.
  voter.catching_up_to_leader_commit = 15189;
  voter.stranded_below_index = 900;
  EXPECT_NE(not_serving_reason(voter).find("stranded"), std::string::npos);
}

// Records what the reporter publishes (the real service needs a running gRPC server).
class RecordingHealthService final : public grpc::HealthCheckServiceInterface {
 public:
  void SetServingStatus(const std::string&, bool serving) override { serving_ = serving; }
  void SetServingStatus(bool serving) override { serving_ = serving; }
  std::atomic<bool> serving_{true};
};

// drills6 L2: a node NOT_SERVING from its start (catching up, stranded) until it became SERVING
// logged only "health: SERVING": the state it started in was published but never logged.
TEST(HealthReporter, TheStateANodeStartsInIsLoggedWithItsReason) {
  const raftlog::testing::CapturedLog log;
  RecordingHealthService service;
  {
    HealthReporter reporter(4, &service, [] { return std::string("no leader known"); },
                            /*poll_interval_ms=*/1000);
    EXPECT_FALSE(service.serving_);
  }
  const bool logged =
      log.text().find("node 4: health: NOT_SERVING (no leader known)") != std::string::npos;
  EXPECT_TRUE(logged) << "the reason of the state at start is logged";
}

}  // namespace
}  // namespace raftlog::server

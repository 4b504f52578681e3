// Disk-aware leadership, run through the production replicas of the simulator: a leader whose disk
// passes the high watermark hands leadership to a follower with room, and the cluster takes writes
// again; when every disk is past it, leadership stays where it is (no bouncing), and appends are
// refused with a clear reason.
#include <gtest/gtest.h>

#include "sim/cluster.h"

namespace raftlog::sim {
namespace {

constexpr double kOverHighWatermark = 0.95;  // the replicas' default high watermark is 0.90

class DiskHandover : public ::testing::Test {
 protected:
  DiskHandover() : checker_(3), cluster_(ClusterConfig{}, 7, prng_, checker_, trace_) {}

  raft::NodeId run_until_leader(std::uint64_t max_ticks) {
    for (std::uint64_t i = 0; i < max_ticks; ++i) {
      cluster_.run_tick();
      if (cluster_.leader() != raft::kNoNode) return cluster_.leader();
    }
    return raft::kNoNode;
  }
  void run_ticks(std::uint64_t ticks) {
    for (std::uint64_t i = 0; i < ticks; ++i) cluster_.run_tick();
  }
  // Appends one entry at `target` and runs until it is answered (bounded); true if acknowledged.
  std::optional<replica::AppendResult> append_once(raft::NodeId target, std::uint64_t sequence) {
    std::optional<replica::AppendResult> answer;
    cluster_.append(target, ClientAppend{1, sequence, cluster_.make_payloads(1, sequence, 1)},
                    [&](const replica::AppendResult& result) { answer = result; });
    for (int i = 0; i < 200 && !answer; ++i) cluster_.run_tick();
    return answer;
  }

  std::string violation() const {
    return checker_.failed() ? checker_.violation()->invariant + ": " + checker_.violation()->detail
                             : "";
  }

  util::Prng prng_{7};
  Checker checker_;
  Trace trace_ = Trace::off();
  Cluster cluster_;
};

TEST_F(DiskHandover, ALeaderPastTheWatermarkHandsLeadershipToAFollowerWithRoom) {
  const raft::NodeId first = run_until_leader(500);
  ASSERT_NE(first, raft::kNoNode);
  const auto first_answer = append_once(first, 1);
  ASSERT_TRUE(first_answer.has_value() && first_answer->error.ok());
  // One follower's disk fills and the leader hears of it (its next answers say so); then the
  // leader's. (Filling at the same moment, the leader may first hand over to the full follower, whose
  // last answer still said room; that one hands on to the roomy node: two handovers.)
  const raft::NodeId full_follower = first == 1 ? 2 : 1;
  cluster_.set_disk_used_ratio(full_follower, kOverHighWatermark);
  run_ticks(20);
  cluster_.set_disk_used_ratio(first, kOverHighWatermark);
  const raft::NodeId roomy = 6 - first - full_follower;
  const raft::Term term = cluster_.soft_state(first).term;
  run_ticks(100);  // 2 s of simulated time: probes every 100 ms, one handover
  EXPECT_EQ(cluster_.leader(), roomy) << "leadership must go to the only node with room";
  EXPECT_EQ(cluster_.soft_state(roomy).term, term + 1) << "one handover, straight to it";
  const auto answer = append_once(roomy, 2);
  ASSERT_TRUE(answer.has_value());
  EXPECT_TRUE(answer->error.ok()) << answer->error.message;
  EXPECT_FALSE(checker_.failed()) << violation();
}

TEST_F(DiskHandover, WhenEveryDiskIsPastTheWatermarkLeadershipStaysAndAppendsAreRefused) {
  const raft::NodeId first = run_until_leader(500);
  ASSERT_NE(first, raft::kNoNode);
  // The followers' disks fill first and the leader hears of it; then its own. (Filling at the same
  // moment, the leader may still hand over once to a follower whose answer predates its disk
  // filling: that one then keeps leadership, as below.)
  for (raft::NodeId id = 1; id <= 3; ++id) {
    if (id != first) cluster_.set_disk_used_ratio(id, kOverHighWatermark);
  }
  run_ticks(20);
  cluster_.set_disk_used_ratio(first, kOverHighWatermark);
  const raft::Term term = cluster_.soft_state(first).term;
  run_ticks(1500);  // 30 s of simulated time: three handover intervals
  EXPECT_EQ(cluster_.leader(), first);
  EXPECT_EQ(cluster_.soft_state(first).term, term) << "leadership bounced between full disks";
  const auto answer = append_once(first, 1);
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->error.code, replica::ErrorCode::kResourceExhausted) << answer->error.message;
  EXPECT_FALSE(checker_.failed()) << violation();
}

}  // namespace
}  // namespace raftlog::sim

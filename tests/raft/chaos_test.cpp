// A small randomized stress test of the core through the test driver: random message delivery order,
// drops, duplicates, partitions, delayed persistence, crash-restarts (losing unpersisted state),
// proposals, reads and transfers, with the Raft safety properties checked after every step and a
// liveness check once faults stop. The full simulator (src/sim) goes much further; this suite exists so
// that core regressions fail close to the core. Bounded: fixed seeds, fixed step counts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "test_cluster.h"

namespace raftlog::raft {
namespace {

using testing::TestCluster;

class SafetyChecker {
 public:
  explicit SafetyChecker(TestCluster& cluster) : c_(cluster) {
    for (NodeId id : c_.ids()) checked_commit_[id] = c_.node(id).delivered_commit;
  }

  void on_restart(NodeId id) { checked_commit_[id] = c_.node(id).delivered_commit; }

  void check() {
    for (NodeId id : c_.ids()) {
      const Raft& raft = c_.raft(id);
      const testing::TestNode& node = c_.node(id);
      // Election safety: at most one leader per term.
      if (raft.role() == Role::kLeader) {
        const auto [it, inserted] = leaders_.emplace(raft.term(), id);
        ASSERT_EQ(it->second, id) << "two leaders in term " << raft.term();
        // Leader completeness: a new leader holds every entry committed in an earlier term.
        if (was_leader_term_[id] != raft.term()) {
          was_leader_term_[id] = raft.term();
          for (const auto& [index, committed] : committed_) {
            if (committed.commit_term >= raft.term()) continue;
            ASSERT_LE(index, node.log.last_index())
                << "leader " << id << " lacks committed index " << index;
            ASSERT_EQ(node.log.entry(index), committed.entry)
                << "leader " << id << " differs at " << index;
          }
        }
      }
      // State machine safety: every index is committed with one entry only, everywhere.
      for (Index index = checked_commit_[id] + 1; index <= node.delivered_commit; ++index) {
        ASSERT_LE(index, node.log.last_index());
        const Entry& entry = node.log.entry(index);
        const auto [it, inserted] = committed_.emplace(index, Committed{entry, raft.term()});
        ASSERT_EQ(it->second.entry, entry)
            << "node " << id << " committed a different entry at " << index;
      }
      checked_commit_[id] = node.delivered_commit;
    }
  }

  Index max_committed() const { return committed_.empty() ? 0 : committed_.rbegin()->first; }

 private:
  struct Committed {
    Entry entry;
    Term commit_term = 0;  // term of the first node that reported it committed
  };
  TestCluster& c_;
  std::map<Term, NodeId> leaders_;
  std::map<NodeId, Term> was_leader_term_;
  std::map<Index, Committed> committed_;
  std::map<NodeId, Index> checked_commit_;
};

// Every append made, with its payload: one acknowledged (answered OK) must be in the final log at
// the index it was answered with, whatever crashes and cuts came after. At most one per step.
using Appends = std::vector<std::pair<testing::Proposal, std::string>>;

// Nodes `ids` with short timeouts and small windows; the seed picks the election options.
TestCluster chaos_cluster(std::uint64_t seed, const std::vector<NodeId>& ids) {
  return TestCluster(ids, [seed](Config& config) {
    config.random_seed = seed;
    config.election_ticks = 8;
    config.heartbeat_ticks = 2;
    config.max_entries_per_message = 3;
    config.max_inflight_messages = 4;
    config.max_uncommitted_entries = 64;
    // Every combination of the two election options across seeds.
    config.pre_vote = seed % 2 == 0;
    config.check_quorum = (seed / 2) % 2 == 0;
  });
}

// The fault phase: each step one random action (ticks, deliveries, drops, duplicates, proposals,
// reads, transfers, persistence held and released, crash-restarts, partitions), drawn from the
// seed.
class ChaosFaults {
 public:
  ChaosFaults(std::uint64_t seed, const std::vector<NodeId>& ids, TestCluster& c,
              SafetyChecker& checker)
      : rng_(seed), ids_(ids), c_(c), checker_(checker) {}

  void step() {
    const std::uint64_t action = below(100);
    if (action < 25) {
      c_.tick(random_node());
    } else if (action < 60) {
      if (c_.network_size() > 0) {
        c_.deliver_at(below(std::min<std::size_t>(c_.network_size(), 4)));
      }
    } else if (action < 64) {
      if (c_.network_size() > 0) c_.drop_at(below(c_.network_size()));
    } else if (action < 66) {
      if (c_.network_size() > 0) c_.duplicate_at(below(c_.network_size()));
    } else if (action < 74) {
      std::string payload = "p" + std::to_string(next_payload_++);
      appends_.emplace_back(c_.propose(random_node(), {payload}), payload);
    } else if (action < 77) {
      (void)c_.read_index(random_node());
    } else if (action < 78) {
      const NodeId id = random_node();
      (void)c_.transfer_leadership(id, random_node());
    } else if (action < 86) {
      const NodeId id = random_node();
      c_.persist_one(id);
      c_.process(id);
    } else if (action < 89) {
      const NodeId id = random_node();
      c_.node(id).hold_persistence = !c_.node(id).hold_persistence;
      if (!c_.node(id).hold_persistence) c_.persist_all(id);
    } else if (action < 91) {
      const NodeId id = random_node();
      c_.crash_restart(id);
      checker_.on_restart(id);
      c_.process(id);
    } else if (action < 93) {
      c_.isolate(random_node());
    } else if (action < 96) {
      c_.heal();
    } else {
      for (NodeId id : ids_) c_.tick(id);
    }
  }

  const Appends& appends() const { return appends_; }

 private:
  std::uint64_t below(std::uint64_t n) { return rng_() % n; }
  NodeId random_node() { return ids_[below(ids_.size())]; }

  std::mt19937_64 rng_;
  const std::vector<NodeId>& ids_;
  TestCluster& c_;
  SafetyChecker& checker_;
  std::uint64_t next_payload_ = 0;
  Appends appends_;
};

// Liveness: faults stop, the network heals, persistence catches up; a leader must emerge and every
// node must converge on one commit index covering everything committed so far, every acknowledged
// append in it.
void expect_live_once_healed(TestCluster& c, SafetyChecker& checker, const Appends& appends,
                             std::uint64_t seed) {
  c.heal();
  for (NodeId id : c.ids()) {
    c.node(id).hold_persistence = false;
    c.persist_all(id);
  }
  c.deliver_all();
  for (int round = 0; round < 200; ++round) {
    c.tick_all(1);
    checker.check();
    if (::testing::Test::HasFatalFailure()) return;
  }
  const NodeId leader = c.leader();
  ASSERT_NE(leader, kNoNode) << "no leader after healing";
  ASSERT_TRUE(c.propose(leader, {"final"}).proposed());
  c.tick_all(20);
  checker.check();
  for (NodeId id : c.ids()) {
    EXPECT_EQ(c.raft(id).commit_index(), c.raft(leader).last_index())
        << "node " << id << " did not converge";
  }
  EXPECT_GE(c.raft(leader).commit_index(), checker.max_committed());
  std::size_t acknowledged = 0;
  for (const auto& [proposal, payload] : appends) {
    if (!proposal.answer.answered() || !proposal.answer.result().error.ok()) continue;
    ++acknowledged;
    const Index index = proposal.answer.result().first_index;
    ASSERT_LE(index, c.raft(leader).commit_index()) << payload;
    EXPECT_EQ(c.node(leader).log.entry(index).payload, payload)
        << "acknowledged append lost or replaced at index " << index;
  }
  if (std::getenv("CHAOS_STATS") != nullptr) {
    std::printf("seed %llu nodes %zu: acknowledged %zu commit %llu term %llu delivered %zu\n",
                static_cast<unsigned long long>(seed), c.ids().size(), acknowledged,
                static_cast<unsigned long long>(c.raft(leader).commit_index()),
                static_cast<unsigned long long>(c.raft(leader).term()), c.delivered().size());
  }
}

void run_chaos(std::uint64_t seed, std::size_t node_count) {
  std::vector<NodeId> ids;
  for (NodeId id = 1; id <= node_count; ++id) ids.push_back(id);
  TestCluster c = chaos_cluster(seed, ids);
  SafetyChecker checker(c);
  ChaosFaults faults(seed, ids, c, checker);
  for (int step = 0; step < 1500; ++step) {
    faults.step();
    checker.check();
    if (::testing::Test::HasFatalFailure()) return;
  }
  expect_live_once_healed(c, checker, faults.appends(), seed);
}

TEST(Chaos, ThreeNodesStaySafeAndLive) {
  const std::uint64_t seeds = std::getenv("CHAOS_SEEDS") != nullptr
                                  ? std::strtoull(std::getenv("CHAOS_SEEDS"), nullptr, 10)
                                  : 120;
  for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    run_chaos(seed, 3);
    if (HasFailure()) return;
  }
}

TEST(Chaos, FiveNodesStaySafeAndLive) {
  const std::uint64_t seeds = std::getenv("CHAOS_SEEDS") != nullptr
                                  ? std::strtoull(std::getenv("CHAOS_SEEDS"), nullptr, 10)
                                  : 80;
  for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    run_chaos(seed, 5);
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace raftlog::raft

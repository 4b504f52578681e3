#include "sim/network.h"

#include <gtest/gtest.h>

#include <vector>

namespace raftlog::sim {
namespace {

raft::Message message(raft::NodeId from, raft::NodeId to, raft::Term term) {
  raft::Message m;
  m.type = raft::MessageType::kHeartbeat;
  m.from = from;
  m.to = to;
  m.term = term;
  return m;
}

// Pops everything due by `step`, separating delivered and partition-dropped messages.
void drain(Network& network, std::uint64_t step, std::vector<raft::Message>* delivered,
           std::vector<raft::Message>* cut) {
  bool dropped = false;
  for (int guard = 0; guard < 10'000; ++guard) {
    std::optional<raft::Message> m = network.pop_due(step, dropped);
    if (!m) return;
    (dropped ? cut : delivered)->push_back(*m);
  }
  FAIL() << "network did not drain";
}

NetworkConditions fixed_delay(std::uint64_t steps) {
  NetworkConditions conditions;
  conditions.min_delay_steps = steps;
  conditions.max_delay_steps = steps;
  return conditions;
}

TEST(SimNetwork, DeliversAfterTheDelayInSendOrder) {
  Network network(3);
  util::Prng prng(1);
  network.set_conditions(fixed_delay(2));
  for (raft::Term term = 1; term <= 3; ++term)
    EXPECT_EQ(network.send(message(1, 2, term), 10, prng), 1);
  std::vector<raft::Message> delivered;
  std::vector<raft::Message> cut;
  drain(network, 11, &delivered, &cut);
  EXPECT_TRUE(delivered.empty());
  drain(network, 12, &delivered, &cut);
  ASSERT_EQ(delivered.size(), 3U);
  EXPECT_EQ(delivered[0].term, 1U);
  EXPECT_EQ(delivered[2].term, 3U);
  EXPECT_TRUE(cut.empty());
  EXPECT_EQ(network.in_flight(), 0U);
}

TEST(SimNetwork, RandomDelaysReorder) {
  Network network(2);
  util::Prng prng(3);
  NetworkConditions conditions;
  conditions.min_delay_steps = 1;
  conditions.max_delay_steps = 20;
  network.set_conditions(conditions);
  for (raft::Term term = 1; term <= 50; ++term) network.send(message(1, 2, term), 0, prng);
  std::vector<raft::Message> delivered;
  std::vector<raft::Message> cut;
  drain(network, 100, &delivered, &cut);
  ASSERT_EQ(delivered.size(), 50U);
  bool reordered = false;
  for (std::size_t i = 1; i < delivered.size(); ++i)
    reordered |= delivered[i].term < delivered[i - 1].term;
  EXPECT_TRUE(reordered);
}

TEST(SimNetwork, DropAndDuplicateRates) {
  Network network(2);
  util::Prng prng(5);
  NetworkConditions all_dropped = fixed_delay(1);
  all_dropped.drop_per_million = 1'000'000;
  network.set_conditions(all_dropped);
  EXPECT_EQ(network.send(message(1, 2, 1), 0, prng), 0);
  EXPECT_EQ(network.in_flight(), 0U);

  NetworkConditions all_duplicated = fixed_delay(1);
  all_duplicated.duplicate_per_million = 1'000'000;
  network.set_conditions(all_duplicated);
  EXPECT_EQ(network.send(message(1, 2, 1), 0, prng), 2);
  EXPECT_EQ(network.in_flight(), 2U);
}

TEST(SimNetwork, SymmetricSplitCutsBothWaysOnly) {
  Network network(5);
  network.split({1, 2});
  EXPECT_FALSE(network.link_up(1, 3));
  EXPECT_FALSE(network.link_up(4, 2));
  EXPECT_TRUE(network.link_up(1, 2));
  EXPECT_TRUE(network.link_up(3, 5));
  EXPECT_FALSE(network.fully_connected());
  network.heal_all();
  EXPECT_TRUE(network.fully_connected());
}

TEST(SimNetwork, PartitionDropsMessagesAtDeliveryTime) {
  Network network(3);
  util::Prng prng(1);
  network.set_conditions(fixed_delay(1));
  network.send(message(1, 2, 1), 0, prng);
  network.send(message(1, 3, 1), 0, prng);
  network.set_link(1, 2, false);  // one-way: 2 still reaches 1
  network.send(message(2, 1, 1), 0, prng);
  std::vector<raft::Message> delivered;
  std::vector<raft::Message> cut;
  drain(network, 1, &delivered, &cut);
  ASSERT_EQ(cut.size(), 1U);
  EXPECT_EQ(cut[0].to, 2U);
  EXPECT_EQ(delivered.size(), 2U);
}

TEST(SimNetwork, BridgeNodeSeesBothSides) {
  Network network(5);
  network.bridge({2, 3}, {4, 5});
  EXPECT_FALSE(network.link_up(2, 4));
  EXPECT_FALSE(network.link_up(5, 3));
  EXPECT_TRUE(network.link_up(1, 2));
  EXPECT_TRUE(network.link_up(4, 1));
  EXPECT_TRUE(network.link_up(2, 3));
}

TEST(SimNetwork, HeldMessagesArriveAtTheirStep) {
  Network network(2);
  network.hold_until(message(1, 2, 9), 40);
  std::vector<raft::Message> delivered;
  std::vector<raft::Message> cut;
  drain(network, 39, &delivered, &cut);
  EXPECT_TRUE(delivered.empty());
  drain(network, 40, &delivered, &cut);
  ASSERT_EQ(delivered.size(), 1U);
  EXPECT_EQ(delivered[0].term, 9U);
}

}  // namespace
}  // namespace raftlog::sim

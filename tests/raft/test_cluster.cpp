#include "test_cluster.h"

#include <gtest/gtest.h>

#include <string>

namespace raftlog::raft::testing {

Entry payload_entry(const std::string& payload) {
  Entry e;
  e.payload = payload;
  return e;
}

std::vector<Entry> make_entries(Index first, const std::vector<Term>& terms) {
  std::vector<Entry> out;
  for (std::size_t i = 0; i < terms.size(); ++i) {
    Entry e;
    e.index = first + i;
    e.term = terms[i];
    e.payload = "e" + std::to_string(e.index);
    out.push_back(e);
  }
  return out;
}

TestCluster::TestCluster(const std::vector<NodeId>& ids, const Tweak& tweak) {
  for (NodeId id : ids) add_node(id, ids, {}, HardState{}, tweak);
}

TestCluster::TestCluster(const std::vector<NodeId>& ids,
                         const std::vector<std::vector<Entry>>& logs,
                         const std::vector<HardState>& hard_states, const Tweak& tweak) {
  for (std::size_t i = 0; i < ids.size(); ++i)
    add_node(ids[i], ids, logs[i], hard_states[i], tweak);
}

void TestCluster::add_node(NodeId id, const std::vector<NodeId>& ids, const std::vector<Entry>& log,
                           const HardState& hard_state, const Tweak& tweak) {
  auto node = std::make_unique<TestNode>();
  node->config.id = id;
  node->config.initial_conf.voters = ids;
  node->config.election_ticks = 10;
  node->config.heartbeat_ticks = 1;
  node->config.random_seed = 42;
  if (tweak) tweak(node->config);
  node->log.append(log);
  node->hard_state = hard_state;
  node->durable_log = node->log;
  node->durable_hard_state = hard_state;
  node->delivered_commit = hard_state.commit;
  node->raft = std::make_unique<Raft>(node->config, node->log, node->hard_state);
  nodes_.emplace(id, std::move(node));
}

std::vector<NodeId> TestCluster::ids() const {
  std::vector<NodeId> out;
  for (const auto& [id, node] : nodes_) out.push_back(id);
  return out;
}

void TestCluster::process(NodeId id) {
  TestNode& n = node(id);
  for (int round = 0; round < 1000 && n.raft->has_ready(); ++round) {
    Ready rd = n.raft->ready();
    n.log.apply(rd);
    if (rd.hard_state) n.hard_state = *rd.hard_state;
    for (Message& m : rd.messages) network_.push_back(m);
    if (rd.commit_index) {
      EXPECT_GE(*rd.commit_index, n.delivered_commit)
          << "commit index went backwards on node " << id;
      n.delivered_commit = *rd.commit_index;
    }
    n.read_states.insert(n.read_states.end(), rd.read_states.begin(), rd.read_states.end());
    n.aborted_reads.insert(n.aborted_reads.end(), rd.aborted_reads.begin(), rd.aborted_reads.end());
    TestNode::HeldBatch batch{n.log.last_index(), *n.log.term_at(n.log.last_index()),
                              rd.truncate_from,   rd.entries,
                              rd.hard_state,      rd.messages_after_persist};
    n.readies.push_back(std::move(rd));
    n.unpersisted.push_back(std::move(batch));
    if (!n.hold_persistence) persist_all(id);
  }
  ASSERT_FALSE(n.raft->has_ready()) << "node " << id << " never stopped producing Ready batches";
}

void TestCluster::persist_one(NodeId id) {
  TestNode& n = node(id);
  if (n.unpersisted.empty()) return;
  TestNode::HeldBatch batch = std::move(n.unpersisted.front());
  n.unpersisted.pop_front();
  if (batch.truncate_from) n.durable_log.truncate_suffix(*batch.truncate_from);
  n.durable_log.append(batch.entries);
  if (batch.hard_state) n.durable_hard_state = *batch.hard_state;
  n.raft->on_persisted(batch.last_index, batch.last_term);
  for (Message& m : batch.after_persist) network_.push_back(m);
}

void TestCluster::persist_all(NodeId id) {
  TestNode& n = node(id);
  while (!n.unpersisted.empty()) persist_one(id);
  if (n.raft->has_ready() && !n.hold_persistence) process(id);
}

void TestCluster::crash_restart(NodeId id) {
  TestNode& n = node(id);
  n.raft.reset();
  n.unpersisted.clear();
  n.log = n.durable_log;
  n.hard_state = n.durable_hard_state;
  n.delivered_commit = n.hard_state.commit;
  n.raft = std::make_unique<Raft>(n.config, n.log, n.hard_state);
}

void TestCluster::deliver_at(std::size_t position) {
  Message m = network_[position];
  network_.erase(network_.begin() + static_cast<std::ptrdiff_t>(position));
  if (dropped(m)) return;
  if (mutator_) mutator_(m);
  delivered_.push_back(m);
  raft(m.to).step(m);
  process(m.to);
}

void TestCluster::drop_at(std::size_t position) {
  network_.erase(network_.begin() + static_cast<std::ptrdiff_t>(position));
}

void TestCluster::duplicate_at(std::size_t position) { network_.push_back(network_[position]); }

void TestCluster::tick(NodeId id, int times) {
  for (int i = 0; i < times; ++i) {
    raft(id).tick();
    process(id);
  }
}

void TestCluster::tick_all(int times) {
  for (int i = 0; i < times; ++i) {
    for (auto& [id, n] : nodes_) tick(id);
    deliver_all();
  }
}

bool TestCluster::dropped(const Message& m) const {
  if (isolated_.count(m.from) != 0 || isolated_.count(m.to) != 0) return true;
  for (const DropRule& rule : drop_rules_) {
    if (rule(m)) return true;
  }
  return false;
}

std::size_t TestCluster::deliver_all(std::size_t max_messages) {
  // Inputs given directly to a core (propose, read_index, ...) leave their outputs in its Ready.
  for (auto& [id, n] : nodes_) {
    if (n->raft->has_ready()) process(id);
  }
  std::size_t count = 0;
  while (!network_.empty()) {
    Message m = std::move(network_.front());
    network_.pop_front();
    if (dropped(m)) continue;
    if (++count > max_messages) {
      std::string last;
      for (std::size_t i = delivered_.size() >= 6 ? delivered_.size() - 6 : 0;
           i < delivered_.size(); ++i) {
        const Message& d = delivered_[i];
        last += std::string("\n  ") + to_string(d.type) + " " + std::to_string(d.from) + "->" +
                std::to_string(d.to) + " term=" + std::to_string(d.term) +
                " index=" + std::to_string(d.index) + " log_term=" + std::to_string(d.log_term) +
                " entries=" + std::to_string(d.entries.size()) +
                " reject=" + std::to_string(d.reject) + " hint=" + std::to_string(d.reject_hint) +
                "/" + std::to_string(d.hint_term);
      }
      ADD_FAILURE() << "network did not quiesce within " << max_messages
                    << " messages; last ones:" << last;
      network_.clear();
      break;
    }
    if (mutator_) mutator_(m);
    delivered_.push_back(m);
    raft(m.to).step(m);
    process(m.to);
  }
  return count;
}

bool TestCluster::campaign_until_leader(NodeId id, int max_ticks) {
  for (int i = 0; i < max_ticks; ++i) {
    if (raft(id).role() == Role::kLeader) return true;
    tick(id);
    deliver_all();
  }
  return raft(id).role() == Role::kLeader;
}

std::size_t TestCluster::count_delivered(const std::function<bool(const Message&)>& match) const {
  std::size_t count = 0;
  for (const Message& m : delivered_) count += match(m) ? 1 : 0;
  return count;
}

NodeId TestCluster::leader() const {
  NodeId found = kNoNode;
  Term best = 0;
  for (const auto& [id, n] : nodes_) {
    if (isolated_.count(id) != 0 || n->raft->role() != Role::kLeader) continue;
    if (found == kNoNode || n->raft->term() > best) {
      found = id;
      best = n->raft->term();
    }
  }
  return found;
}

}  // namespace raftlog::raft::testing

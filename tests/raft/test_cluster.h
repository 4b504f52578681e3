// A tiny in-test driver for Raft cores: routes messages between them through a FIFO "network" with
// drop filters, applies every Ready to a MemoryLog and reports durability, optionally holding a node's
// persistence back so tests can control exactly what is durable. Deterministic; loops are bounded.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "raft/memory_log.h"
#include "raft/raft.h"

namespace raftlog::raft::testing {

struct TestNode {
  Config config;
  MemoryLog log;  // the driver's log (every handed-out entry appended at once)
  HardState hard_state;
  std::unique_ptr<Raft> raft;

  // What survives a crash: the log and hard state as of the last persisted batch.
  MemoryLog durable_log;
  HardState durable_hard_state;

  bool hold_persistence = false;  // when set, batches wait in `unpersisted` until persist_all()
  struct HeldBatch {
    Index last_index = 0;
    Term last_term = 0;
    std::optional<Index> truncate_from;
    std::vector<Entry> entries;
    std::optional<HardState> hard_state;
    std::vector<Message> after_persist;
  };
  std::deque<HeldBatch> unpersisted;

  std::vector<Ready> readies;  // every Ready this node produced, in order
  std::vector<ReadState> read_states;
  std::vector<std::uint64_t> aborted_reads;
  Index delivered_commit = 0;  // highest Ready::commit_index seen
};

class TestCluster {
 public:
  using Tweak = std::function<void(Config&)>;
  using DropRule = std::function<bool(const Message&)>;

  // Nodes with ids `ids`, all empty logs, voter set = ids.
  explicit TestCluster(const std::vector<NodeId>& ids, const Tweak& tweak = {});
  // Nodes restored from the given logs and hard states (same order as ids).
  TestCluster(const std::vector<NodeId>& ids, const std::vector<std::vector<Entry>>& logs,
              const std::vector<HardState>& hard_states, const Tweak& tweak = {});

  TestNode& node(NodeId id) { return *nodes_.at(id); }
  Raft& raft(NodeId id) { return *nodes_.at(id)->raft; }
  std::vector<NodeId> ids() const;

  // Drains `id`'s Ready batches: applies log changes, queues messages, persists unless held.
  void process(NodeId id);
  // Makes every held batch of `id` durable (in order) and releases its after-persist messages.
  void persist_all(NodeId id);
  // Makes only the oldest held batch durable (if any).
  void persist_one(NodeId id);
  // Crash and restart: everything not persisted is lost; a new core starts from the durable state.
  void crash_restart(NodeId id);

  // Delivers (or drops) the queued message at `position` (< network_size()), then processes.
  void deliver_at(std::size_t position);
  void drop_at(std::size_t position);
  void duplicate_at(std::size_t position);
  std::size_t network_size() const { return network_.size(); }

  void tick(NodeId id, int times = 1);
  void tick_all(int times = 1);  // ticks every node once per round and delivers after each round
  // Processes every node's pending Ready, then delivers queued messages (and everything they cause)
  // until the network is empty. Returns how many
  // were delivered. Asserts (test failure) after `max_messages`.
  std::size_t deliver_all(std::size_t max_messages = 100000);

  // Ticks `id` alone (delivering after each tick) until it is leader or `max_ticks` pass.
  bool campaign_until_leader(NodeId id, int max_ticks = 200);

  // Network faults. A message is dropped if either end is isolated or a drop rule matches.
  void isolate(NodeId id) { isolated_.insert(id); }
  void heal() {
    isolated_.clear();
    drop_rules_.clear();
  }
  void add_drop_rule(DropRule rule) { drop_rules_.push_back(std::move(rule)); }
  // Every delivered message passes through `mutator` first (a faulty or hostile network); empty: none.
  void set_mutator(std::function<void(Message&)> mutator) { mutator_ = std::move(mutator); }

  // Every message delivered (not dropped), in order.
  const std::vector<Message>& delivered() const { return delivered_; }
  std::size_t count_delivered(const std::function<bool(const Message&)>& match) const;

  // The unique leader among non-isolated nodes with the highest term, or kNoNode.
  NodeId leader() const;

 private:
  void add_node(NodeId id, const std::vector<NodeId>& ids, const std::vector<Entry>& log,
                const HardState& hard_state, const Tweak& tweak);
  bool dropped(const Message& m) const;

  std::map<NodeId, std::unique_ptr<TestNode>> nodes_;
  std::deque<Message> network_;
  std::vector<Message> delivered_;
  std::set<NodeId> isolated_;
  std::vector<DropRule> drop_rules_;
  std::function<void(Message&)> mutator_;
};

// Entries [first, first + terms.size()) with the given terms (kNormal, payload "e<index>").
std::vector<Entry> make_entries(Index first, const std::vector<Term>& terms);
// A kNormal entry carrying `payload`, for propose() (which assigns index and term).
Entry payload_entry(const std::string& payload);

}  // namespace raftlog::raft::testing

// What the Node tests share: a Node driven directly (no gRPC), in a single-node cluster or in a
// two-node cluster whose second member is played by the test's MessageSender (FakePeers: it grants
// votes and answers heartbeats, and acknowledges appends only when told to, which is how a test keeps
// an append waiting for commit).
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/node.h"
#include "temp_dir.h"

namespace raftlog::server::testing {

using namespace std::chrono_literals;

inline constexpr auto kWait = 3s;  // longest any single step may take before the test fails

// Plays every member other than node 1: votes for it, answers its heartbeats, and acknowledges its
// appends while `ack_appends` is set. Records every message node 1 sends.
class FakePeers final : public MessageSender {
 public:
  void send(raft::Message message) override {
    Node* node = nullptr;
    {
      std::lock_guard lock(mu_);
      sent_.push_back(message);
      node = node_;
    }
    if (node == nullptr) return;
    raft::Message reply;
    reply.from = message.to;
    reply.to = message.from;
    reply.term = message.term;
    switch (message.type) {
      case raft::MessageType::kPreVote:
        reply.type = raft::MessageType::kPreVoteResponse;
        break;
      case raft::MessageType::kVote:
        reply.type = raft::MessageType::kVoteResponse;
        break;
      case raft::MessageType::kHeartbeat:
        reply.type = raft::MessageType::kHeartbeatResponse;
        reply.context = message.context;
        break;
      case raft::MessageType::kAppend:
        if (!ack_appends.load()) return;
        reply.type = raft::MessageType::kAppendResponse;
        reply.index = message.index + message.entries.size();
        break;
      default:
        return;
    }
    node->receive(std::move(reply));  // thread-safe: only queues an input
  }

  void attach(Node* node) {
    std::lock_guard lock(mu_);
    node_ = node;
  }
  std::vector<raft::Message> sent() const {
    std::lock_guard lock(mu_);
    return sent_;
  }

  std::atomic<bool> ack_appends{true};

 private:
  mutable std::mutex mu_;
  Node* node_ = nullptr;
  std::vector<raft::Message> sent_;
};

inline NodeConfig test_config(const std::string& dir, std::size_t members) {
  NodeConfig config;
  config.node_id = 1;
  for (std::uint64_t id = 1; id <= members; ++id)
    config.members[id] = "127.0.0.1:" + std::to_string(40000 + id);
  config.data_dir = dir + "/node1";
  config.cluster_id = "node-test";  // a multi-node cluster may not keep the shared default
  config.tick_ms = 10;
  config.election_ticks = 5;  // 50-100 ms election timeout
  config.heartbeat_ticks = 1;
  config.store.segment_size_bytes = 1 << 20;
  config.store.max_entry_size_bytes = 64 << 10;
  config.store.preallocate_next_segment = false;
  config.max_entries_per_append = 8;
  config.max_append_bytes = 256 << 10;
  // The shared disk these tests run on may be fuller than the default 90 % high watermark; only the
  // watermark test sets its own.
  config.disk_high_watermark = 1.0;
  config.disk_low_watermark = 0.99;
  return config;
}

inline std::unique_ptr<Node> open_node(const NodeConfig& config, MessageSender* sender) {
  NodeError error;
  std::unique_ptr<Node> node = Node::open(config, sender, &error);
  EXPECT_NE(node, nullptr) << error.message;
  return node;
}

inline bool wait_until(const std::function<bool()>& condition,
                       std::chrono::milliseconds timeout = kWait) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

inline bool wait_for_leader(const Node& node) {
  return wait_until([&] { return node.status().role == raft::Role::kLeader; });
}

// The setup most tests share: node 1 opened on FakePeers that play the other members. Members are
// destroyed in reverse order, so the node goes before the peers it sends to.
struct FakeCluster {
  FakePeers sender;
  std::unique_ptr<Node> node;

  // Opens node 1, lets the fake peers answer it (a one-member cluster never sends them anything), starts
  // it and waits until it leads. A fatal failure ends only this function: call it through
  // ASSERT_NO_FATAL_FAILURE.
  void start_leader(const NodeConfig& config, NodeEvents* events = nullptr) {
    NodeError error;
    node = Node::open(config, &sender, &error, events);
    ASSERT_NE(node, nullptr) << error.message;
    sender.attach(node.get());
    node->start();
    ASSERT_TRUE(wait_for_leader(*node));
  }
  ~FakeCluster() { sender.attach(nullptr); }  // no reply may reach a node that is being destroyed
};

// An append whose callback may run later; `calls` catches a second completion.
struct AsyncAppend {
  std::shared_ptr<std::promise<AppendResult>> promise =
      std::make_shared<std::promise<AppendResult>>();
  std::shared_ptr<std::atomic<int>> calls = std::make_shared<std::atomic<int>>(0);
  std::future<AppendResult> future = promise->get_future();

  Node::AppendCallback callback() {
    return [promise = promise, calls = calls](AppendResult result) {
      if (calls->fetch_add(1) == 0) promise->set_value(std::move(result));
    };
  }
  bool done() const { return future.wait_for(0s) == std::future_status::ready; }
  AppendResult get() {
    if (future.wait_for(kWait) != std::future_status::ready) {
      ADD_FAILURE() << "append did not complete";
      return AppendResult{};
    }
    return future.get();
  }
};

inline AsyncAppend start_append(Node& node, std::vector<std::string> payloads,
                                std::uint64_t client_id = 0, std::uint64_t sequence = 0) {
  AsyncAppend append;
  node.append(std::move(payloads), client_id, sequence, append.callback());
  return append;
}

inline AppendResult append_and_wait(Node& node, std::vector<std::string> payloads,
                                    std::uint64_t client_id = 0, std::uint64_t sequence = 0) {
  AsyncAppend append = start_append(node, std::move(payloads), client_id, sequence);
  AppendResult result = append.get();
  EXPECT_EQ(append.calls->load(), 1);
  return result;
}

inline std::vector<raft::Entry> read_all(const Node& node, std::uint64_t from) {
  std::vector<raft::Entry> entries;
  const NodeError error = node.read_committed(from, 1000, 1 << 20, &entries);
  EXPECT_TRUE(error.ok()) << error.message;
  return entries;
}

}  // namespace raftlog::server::testing

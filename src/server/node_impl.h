// Node::Impl and the Raft loop's input types: shared by node.cpp (the loop, opening and stopping,
// status, committed reads) and node_requests.cpp (the requests gRPC threads queue for the loop).
// Private to src/server: include only from those two files.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "replica/replica.h"
#include "server/node.h"
#include "server/off_loop_worker.h"
#include "server/scrubber.h"

namespace raftlog::server {

using Clock = std::chrono::steady_clock;
using replica::Replica;

namespace node_detail {


// The scrubber's pace: one chunk every interval (NodeConfig::scrub_bytes_per_second sets its size).
constexpr std::uint32_t kScrubIntervalMs = 100;

// Bounds of the node's own queue (docs/configuration.md): payload bytes waiting in the input queue.
// validate() caps max_append_bytes at it, so an append the node accepts fits an empty queue.
constexpr std::uint64_t kMaxQueuedAppendBytes = config_limits::kMaxQueuedAppendBytes;

// --- inputs to the Raft loop ---------------------------------------------------------------------
using AppendInput = Replica::AppendRequest;
using ReadIndexInput = Replica::ReadIndexRequest;
using TransferInput = Replica::TransferRequest;
using MembershipInput = Replica::MembershipRequest;
struct MessageInput {
  raft::Message message;
};
struct FlushedInput {
  std::uint64_t flushed_index = 0;
};
// The result of work the replica handed off its loop (server/off_loop_worker.h): `done` runs on
// the loop. Never refused by the queue's bound, like a flush notice: the replica waits for it.
struct OffLoopDoneInput {
  std::function<void()> done;
};
struct TrimInput {
  std::uint64_t before_index = 0;
  Node::TrimCallback done;
};
// A reader or the scrubber found the durable entry at `index` corrupt.
struct CorruptionInput {
  std::uint64_t index = 0;
  std::string message;
};
using Input = std::variant<AppendInput, ReadIndexInput, TransferInput, MessageInput, FlushedInput,
                           TrimInput, CorruptionInput, MembershipInput, OffLoopDoneInput>;

// Answers an input that will never reach the loop (queue full, node stopped).
void reject(Input& input, const NodeError& error);

}  // namespace node_detail

using namespace node_detail;  // the input types name the loop's vocabulary in both files

class Node::Impl {
 public:
  Impl(NodeConfig config, MessageSender* sender, NodeEvents* events)
      : config_(std::move(config)),
        sender_(sender),
        events_(events),
        disk_probe_(config_.data_dir) {}

  bool open(NodeError* error);
  void start();
  void stop();

  void push(Input input, bool droppable);
  // Client appends, all queued in one critical section so that the loop takes them in one round;
  // each that does not fit the queue's bounds is refused as push() would refuse it.
  void push_all(std::vector<Input> inputs);
  // Validates an append (answering `done` at once when it is refused); the input to queue if valid.
  std::optional<Input> prepare_append(std::vector<std::string> payloads, std::uint64_t client_id,
                                      std::uint64_t sequence, AppendCallback done,
                                      std::vector<EntryAttributes> attributes);
  void loop();
  // Ticks the core for the tick period(s) due at `now` and advances *next_tick.
  void tick_due(Clock::time_point now, Clock::time_point* next_tick);
  void handle_input(Input& input);
  void handle_corruption(const CorruptionInput& in);  // loop thread
  // The replica hit an error it cannot continue from: refuse everything from now on.
  void stop_after_failure();
  void fail_queued(ErrorCode code, const std::string& message);
  void publish_status();
  void publish_commit(std::uint64_t commit);
  // Hands the transport the peers of the configurations in the log whenever they change (appended,
  // rolled back, committed), so that it dials a new member and accepts it (loop thread).
  void update_peers();

  NodeError read_committed(std::uint64_t from_index, std::size_t max_entries, std::size_t max_bytes,
                           std::vector<raft::Entry>* out);
  ScrubChunk scrub_chunk(std::uint64_t from, std::uint64_t max_bytes);
  void report_corruption(std::uint64_t index, std::string message);  // any thread
  std::uint64_t wait_for_commit(std::uint64_t after_index, Clock::time_point deadline) const;

  NodeConfig config_;
  MessageSender* sender_;
  NodeEvents* events_;  // nullable
  replica::StatvfsDiskProbe disk_probe_;
  // Touched by the Raft loop thread only, except its store: see store_mu_.
  std::unique_ptr<Replica> replica_;
  // Runs the replica's off-loop jobs; declared after replica_ so that it stops (and joins) first.
  std::unique_ptr<OffLoopWorker> off_loop_;
  store::CommitLog* log_ = nullptr;  // replica_'s store
  std::unique_ptr<Scrubber> scrubber_;
  std::atomic<bool> corruption_reported_{false};  // one CorruptionInput is enough
  std::atomic<std::uint64_t> corrupt_index_{0};

  // Input queue.
  mutable std::mutex input_mu_;
  std::condition_variable input_cv_;
  // True while the Raft loop is blocked (or about to block) on input_cv_: push() notifies only then,
  // so a busy loop costs its producers no futex wake-up per input. Set and read under input_mu_ only
  // (see push() for why that rules out a lost wake-up); atomic so that a data race would be a
  // harmless stale read rather than undefined behaviour if that rule were ever broken.
  std::atomic<bool> loop_sleeping_{false};
  std::deque<Input> inputs_;
  std::uint64_t queued_append_bytes_ = 0;  // payload bytes of AppendInputs in inputs_ (bounded)

  std::function<void(NodeStatus*)> status_extension_;  // set before start (Node::set_status_extension)
  Node::SnapshotSection snapshot_section_;  // set before start (Node::set_snapshot_section)

  // The store is shared with gRPC threads (reads, flush); close() must not race with them.
  mutable std::shared_mutex store_mu_;
  bool store_closed_ = false;

  // Published state.
  mutable std::mutex status_mu_;
  NodeStatus status_;
  std::atomic<std::uint64_t> commit_{0};
  mutable std::mutex commit_mu_;
  mutable std::condition_variable commit_cv_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> removed_{false};  // status_.removed, readable without status_mu_ (Node::removed)
  std::atomic<std::uint64_t> removed_by_{0};  // status_.removed_by, likewise (removed_refusal)
  std::atomic<bool> failed_{false};
  std::atomic<bool> loop_exit_{false};
  bool started_ = false;
  bool stopped_ = false;
  std::thread loop_thread_;
  std::map<std::uint64_t, std::string> peers_;  // last handed to sender_->set_peers (loop thread)
  // The configuration history peers_ was computed from: size, oldest index, newest index and term.
  using ConfHistoryKey = std::array<std::uint64_t, 4>;
  std::optional<ConfHistoryKey> peers_key_;
};

}  // namespace raftlog::server

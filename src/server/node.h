// Node: one raftlog replica as raftlogd runs it. The replica's logic (Raft core, CommitLog, hard
// state, dedup, durability rules) is src/replica/replica.h, single-threaded; Node is its shell: it
// runs the replica on a thread of its own, the *Raft loop*, feeds it from a bounded input queue and
// publishes what other threads may read. No gRPC here: the gRPC services (client_services.cpp) and
// the peer transport call this class's thread-safe methods, and it sends Raft messages through the
// MessageSender it is given.
//
// THREADS
//   - Raft loop thread: the only thread that touches the replica (the Raft core, the dedup table, the
//     pending appends and reads), and so the only writer of the CommitLog. It sleeps on the input queue until an
//     input arrives or the next tick is due.
//   - Any thread: append(), read_index(), transfer_leadership(), receive() push an input into the
//     bounded input queue (full queue => the call fails at once with kResourceExhausted / the message
//     is dropped, which Raft tolerates). read_committed(), wait_for_commit(), status() read state
//     published by the loop under a mutex or atomics.
//   - The store's flusher thread calls back with the new flushed index; that too becomes an input.
//   Completion callbacks run on the Raft loop thread and must be quick (they hand the result to a gRPC
//   reactor; they never call back into the Node synchronously).
//
// DURABILITY: see src/replica/replica.h and docs/durability.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "raft/types.h"
#include "server/node_config.h"
#include "server/node_types.h"
#include "store/commit_log.h"

namespace raftlog::server {

class Node {
 public:
  using AppendCallback = std::function<void(AppendResult)>;
  using ReadIndexCallback = std::function<void(ReadIndexResult)>;
  using TransferCallback = std::function<void(TransferResult)>;
  using TrimCallback = std::function<void(TrimResult)>;
  using MembershipCallback = std::function<void(MembershipResult)>;

  // Recovers the CommitLog and the hard state from config.data_dir and rebuilds the dedup table.
  // Does not start the loop.
  // `events` (optional, not owned, must outlive the Node) hears about proposals, commits, elections
  // and flushes, for metrics.
  static std::unique_ptr<Node> open(const NodeConfig& config, MessageSender* sender,
                                    NodeError* error, NodeEvents* events = nullptr);
  ~Node();  // stop()
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  void start();
  // Graceful stop: refuse new requests, fail pending ones with kUnavailable, stop the loop, flush,
  // checkpoint (with the commit index) and close the store (removing the abort marker). Idempotent.
  void stop();

  // --- inputs (any thread) ---------------------------------------------------------------------
  // Appends `payloads` atomically as one contiguous range; `done` runs once they are committed (or
  // failed). client_id 0 disables deduplication. `attributes`: none, or one per payload (topic and
  // keys, validated here; each entry then carries an envelope with the leader's timestamp, and the
  // envelope's bytes count toward the entry and append size bounds).
  void append(std::vector<std::string> payloads, std::uint64_t client_id, std::uint64_t sequence,
              AppendCallback done, std::vector<EntryAttributes> attributes = {});
  // Leader only: appends one consumer group offset commit (`payload`: encoded and validated by the
  // caller, src/derived/group_commit.h) as an entry flagged is_group_commit, never deduplicated;
  // `done` runs once it is committed (or failed), like append().
  void append_group_commit(std::string payload, AppendCallback done);
  // Retention never trims at or above `index` (0: no hold); any thread (Replica::hold_log_from).
  void hold_log_from(std::uint64_t index);
  // One append of append_all().
  struct AppendCall {
    std::vector<std::string> payloads;
    std::uint64_t client_id = 0;
    std::uint64_t sequence = 0;
    AppendCallback done;
    std::vector<EntryAttributes> attributes;
  };
  // Several appends as append() would take them one by one (each its own range, answer, dedup
  // record and atomicity), queued in one step: the loop steps them in the same round, so they
  // leave in one proposal round (one AppendEntries per follower). An invalid one is answered at
  // once without holding back the others.
  void append_all(std::vector<AppendCall> calls);
  // Linearizable read barrier: `done` gets an index such that every append completed before this call
  // is at or below it, once this node has committed up to it.
  void read_index(ReadIndexCallback done);
  // `done` runs once this node hears from `target` as leader, or fails after two election timeouts.
  void transfer_leadership(std::uint64_t target_id, TransferCallback done);
  // Deletes whole segments whose entries all lie below min(before_index, limit), where the limit is
  // commit + 1 and, on the leader, what every follower heard from within retention_follower_grace_ms
  // still needs (docs/operations.md, "Retention"). The active segment is never deleted, so the first
  // index may stay below before_index.
  void trim(std::uint64_t before_index, TrimCallback done);
  // Leader only: one membership change (`address`: the new member's, for an add), answered once its
  // configuration entry committed or at `deadline` (CONF_CHANGE_TIMEOUT), or refused at once
  // (replica_membership.cpp names each reason).
  void change_membership(raft::ConfChange change, std::string address,
                         std::chrono::steady_clock::time_point deadline, MembershipCallback done);
  // A Raft message from a peer (transport thread).
  void receive(raft::Message message);

  // --- committed log (any thread) --------------------------------------------------------------
  // Committed entries from `from_index` (copies of the payloads). kOutOfRange below the first
  // retained index or past commit + 1; an empty result when from_index == commit + 1.
  NodeError read_committed(std::uint64_t from_index, std::size_t max_entries, std::size_t max_bytes,
                           std::vector<raft::Entry>* out) const;
  // Blocks until commit_index() > after_index, the deadline passes, or the node stops. Returns the
  // commit index seen.
  std::uint64_t wait_for_commit(std::uint64_t after_index,
                                std::chrono::steady_clock::time_point deadline) const;
  std::uint64_t commit_index() const;
  // The log as the derived indexes check it at open (src/server/dispatcher.h): first and last
  // index and the term at an index (nullopt outside the log, or once the store closed).
  struct LogBounds {
    std::uint64_t first = 1;
    std::uint64_t last = 0;
  };
  LogBounds log_bounds() const;
  // Adds what the server knows about the node to status() (the derived indexes' progress). Set
  // before start(); it must stay callable until the Node is destroyed.
  void set_status_extension(std::function<void(NodeStatus*)> extend);
  // The node's section of its snapshots (replica::ReplicaDeps, docs/raft.md "Snapshots"): raftlogd's
  // consumer group table. Set before start(); each runs on the node's loop thread.
  struct SnapshotSection {
    std::function<std::string(std::uint64_t index)> provide;
    std::function<std::string(std::string_view section, std::uint64_t index)> check;
    std::function<void(std::uint64_t index, const std::string& section)> installed;
  };
  void set_snapshot_section(SnapshotSection section);
  std::optional<std::uint64_t> term_at(std::uint64_t index) const;
  bool stopping() const;
  // A committed change removed this node (NodeStatus::removed, as last published): its log stops
  // at its removal for good, so reads and tails refuse with removed_refusal() instead of serving a
  // frozen log (clients then ask a member).
  bool removed() const;
  // UNAVAILABLE, NODE_REMOVED, naming the node and its commit index; ok() when not removed.
  NodeError removed_refusal() const;
  // True once the node hit an error it cannot continue from (e.g. the store refused a write it had
  // already promised to Raft): the process should exit and be restarted, recovery takes over.
  bool failed() const;

  NodeStatus status() const;
  // True while the leader refuses appends because disk use passed the high watermark (it is checked
  // on the leader's append path at most every 100 ms).
  bool disk_watermark_exceeded() const;
  store::Status flush_store();  // the manual flush trigger (Admin.Flush)
  std::uint64_t flushed_index() const;

  const NodeConfig& config() const;

  class Impl;

 private:
  explicit Node(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace raftlog::server

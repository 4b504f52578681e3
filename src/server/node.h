// Node: one raftlog replica. It owns the Raft core, the CommitLog and the Raft hard state, and drives
// them from a single thread, the *Raft loop*. No gRPC here: the gRPC services (client_services.cpp) and
// the peer transport call this class's thread-safe methods, and it sends Raft messages through the
// MessageSender it is given.
//
// THREADS
//   - Raft loop thread: the only thread that touches the Raft core, the dedup table, the pending
//     appends and reads, and the only writer of the CommitLog. It sleeps on the input queue until an
//     input arrives or the next tick is due.
//   - Any thread: append(), read_index(), transfer_leadership(), receive() push an input into the
//     bounded input queue (full queue => the call fails at once with kResourceExhausted / the message
//     is dropped, which Raft tolerates). read_committed(), wait_for_commit(), status() read state
//     published by the loop under a mutex or atomics.
//   - The store's flusher thread calls back with the new flushed index; that too becomes an input.
//   Completion callbacks run on the Raft loop thread and must be quick (they hand the result to a gRPC
//   reactor; they never call back into the Node synchronously).
//
// DURABILITY (docs/durability.md)
//   Hard state (term, vote) is written durably before any message that depends on it leaves.
//   Entries are appended to the CommitLog without waiting; in sync flush mode a message that
//   acknowledges them (a follower's append response, a vote) is held until the store reports them
//   flushed, and the leader counts its own entries toward the quorum only once flushed. In async mode
//   an entry counts as soon as it is written to the mapped segment.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "raft/types.h"
#include "server/node_config.h"
#include "server/node_events.h"
#include "server/node_status.h"
#include "store/commit_log.h"

namespace raftlog::server {

// Outcome codes shared by every client-facing operation; client_services.cpp maps them to gRPC codes.
enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,    // empty append, too many entries, entry too large, bad range
  kNotLeader,          // leader_id/leader_address name the leader when known
  kNoLeader,           // no leader known yet (election in progress)
  kOutOfRange,         // read below the first retained index or past the committed end
  kResourceExhausted,  // too many pending requests, input queue full, disk full
  kUnavailable,        // shutting down, or leadership lost with the outcome unknown (retry idempotently)
  kDeadlineExceeded,   // not committed in time (outcome unknown: retry idempotently)
  kFailedPrecondition, // e.g. an idempotency sequence too old to be checked
  kInternal,           // a store error the node cannot continue from
  kDataLoss,           // a stored entry failed its checksum (corrupt); it is never served
};

const char* to_string(ErrorCode code);

struct NodeError {
  ErrorCode code = ErrorCode::kOk;
  std::string message;
  std::string reason;           // machine-readable word (api_errors/error_details.h), "" when none
  std::uint64_t leader_id = 0;  // for kNotLeader
  std::string leader_address;
  bool ok() const { return code == ErrorCode::kOk; }
};

struct AppendResult {
  NodeError error;
  std::uint64_t first_index = 0;
  std::uint64_t last_index = 0;
  std::uint64_t term = 0;
  bool duplicate = false;  // answered from the dedup table: nothing new was written
};

struct TransferResult {
  NodeError error;
  std::uint64_t leader_id = 0;  // on success: the new leader (the target)
  std::uint64_t term = 0;       // the term it leads
};

struct TrimResult {
  NodeError error;
  std::uint64_t first_index = 0;  // the node's first retained index afterwards
  std::uint64_t limit = 0;        // the highest before_index allowed at the time (see trim())
};

struct ReadIndexResult {
  NodeError error;
  std::uint64_t read_index = 0;  // every entry up to here is committed and readable on this node
};

class MessageSender {
 public:
  virtual ~MessageSender() = default;
  // Non-blocking; may drop (Raft retransmits).
  virtual void send(raft::Message message) = 0;
};

class Node {
 public:
  using AppendCallback = std::function<void(AppendResult)>;
  using ReadIndexCallback = std::function<void(ReadIndexResult)>;
  using TransferCallback = std::function<void(TransferResult)>;
  using TrimCallback = std::function<void(TrimResult)>;

  // Recovers the CommitLog and the hard state from config.data_dir and rebuilds the dedup table.
  // Does not start the loop.
  // `events` (optional, not owned, must outlive the Node) hears about proposals, commits, elections
  // and flushes, for metrics.
  static std::unique_ptr<Node> open(const NodeConfig& config, MessageSender* sender, NodeError* error,
                                    NodeEvents* events = nullptr);
  ~Node();  // stop()
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  void start();
  // Graceful stop: refuse new requests, fail pending ones with kUnavailable, stop the loop, flush,
  // checkpoint (with the commit index) and close the store (removing the abort marker). Idempotent.
  void stop();

  // --- inputs (any thread) ---------------------------------------------------------------------
  // Appends `payloads` atomically as one contiguous range; `done` runs once they are committed (or
  // failed). client_id 0 disables deduplication.
  void append(std::vector<std::string> payloads, std::uint64_t client_id, std::uint64_t sequence,
              AppendCallback done);
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
  bool stopping() const;
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

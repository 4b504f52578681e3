// What a node says about snapshot transfers (docs/operations.md, "Catching up from a snapshot"): on a
// leader, each follower's snapshot in flight (sending its chunks, or sent and not yet acknowledged);
// on a follower, a snapshot being received in chunks or handed to the core and not yet installed.
// Computed from the transport's counters and the node's status whenever they are read (Status RPC,
// metrics scrape, health poll), so the Raft loop does no work for it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "server/node_types.h"
#include "server/transport.h"

namespace raftlog::server {

// A snapshot handed to the core is reported as installing until the node's commit index reaches its
// index, for at most this long (a snapshot the core dropped as stale leaves nothing to install; the
// leader then sends a new one after its snapshot retry timeout, which the node reports anew).
inline constexpr std::chrono::seconds kSnapshotInstallReportWindow{60};

struct SnapshotTransfer {
  enum class State : std::uint8_t {
    kSending,     // leader: chunks left to send to `peer`
    kSent,        // leader: every chunk sent, `peer` has not acknowledged the index yet
    kReceiving,   // follower: chunks from `peer` being reassembled
    kInstalling,  // follower: the whole snapshot went to the core; the log does not reach it yet
  };
  std::uint64_t peer = 0;  // the follower it goes to, or the leader it comes from
  std::uint64_t index = 0;
  std::uint64_t term = 0;        // of the messages carrying it
  std::uint64_t bytes_done = 0;  // sent or received (a resumed send: with bytes_skipped)
  std::uint64_t bytes_total = 0;
  State state = State::kSending;
  // Leader: a resumed transfer started after the bytes the follower acknowledged holding.
  std::uint64_t bytes_skipped = 0;
  // Leader: started at 0 although the follower's receipt named a partial; why it could not resume
  // (to_string(ResumeMiss)), "" otherwise.
  std::string resume_missed;
};
const char* to_string(SnapshotTransfer::State state);

struct SnapshotTransfers {
  std::vector<SnapshotTransfer> sending;      // leader: one per follower with a snapshot in flight
  std::optional<SnapshotTransfer> receiving;  // follower: receiving or installing
  // Totals since start: snapshots this node sent, whole or in chunks (started, wholly sent, abandoned) and
  // the receiving side's reassembly counters.
  std::uint64_t snapshots_started = 0;
  std::uint64_t snapshots_sent = 0;
  std::uint64_t snapshots_abandoned = 0;
  // Chunked snapshots this node resumed at a follower's receipt, and the data bytes not resent.
  std::uint64_t snapshots_resumed = 0;
  std::uint64_t snapshot_bytes_skipped = 0;
  // Chunked snapshots this node started at 0 although the follower's receipt named a partial.
  ResumeMissCounts snapshot_resume_missed;
  // Continuations this node sent (its data after a follower's splice point) and the bytes saved.
  std::uint64_t snapshots_continued = 0;
  std::uint64_t snapshot_resume_saved_bytes = 0;
  SnapshotReceiveCounters received;
};

SnapshotTransfers snapshot_transfers(const NodeStatus& status, const std::vector<PeerStats>& peers,
                                     const SnapshotReceiveStatus& receive,
                                     std::chrono::steady_clock::time_point now);
// Reads the transport; `transport` must outlive the function.
std::function<SnapshotTransfers(const NodeStatus&)> snapshot_transfers_source(
    const PeerTransport* transport);

// "" unless this node is receiving or installing a snapshot, else why it is not serving.
std::string snapshot_not_serving_reason(const SnapshotTransfers& transfers);

}  // namespace raftlog::server

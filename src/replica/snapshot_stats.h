// SnapshotStats: one replica's snapshot counters and the timing of its last install, as
// Replica::snapshot_stats() reports them (status, metrics, tests).
#pragma once

#include <chrono>
#include <cstdint>

namespace raftlog::replica {

// Snapshot counters of one replica (status, metrics, tests).
struct SnapshotStats {
  std::uint64_t sent = 0;        // kSnapshot messages this leader filled and sent
  std::uint64_t too_large = 0;   // not sent: the data without the dedup part exceeds the budget
  std::uint64_t clients_left_out = 0;  // dedup clients beyond the budget, over every sent snapshot
  std::uint64_t installed = 0;   // snapshots this follower installed
  std::uint64_t refused = 0;     // received snapshots whose data did not validate (dropped)
  std::uint64_t last_installed_index = 0;
  // Sent snapshots whose point lies above the leader's first index - 1, so the follower's log
  // starts above the leader's: the core named a newer committed configuration's index (the
  // configuration at the first index - 1 not known), or the topic table as of the first index - 1
  // is not known (a log trimmed by an older binary, SNAPSHOT lost); the leader then sends the state
  // as of its topic table's committed point (replica_snapshot.cpp).
  std::uint64_t sent_above_first_index = 0;
  // Sent snapshots whose data this leader encoded, and those that reused the last encoding
  // (snapshot_encoding.h): a retry, or another follower stranded at the same point.
  std::uint64_t encodes = 0;
  std::uint64_t encodings_reused = 0;
  // Walks of the whole dedup table (DedupTable::walks()): one per snapshot a leader gathers for a
  // send (a send the kept encoding serves makes none), and one per trim (its SNAPSHOT file).
  std::uint64_t dedup_walks = 0;
  // kSnapshot messages that waited for an encoding and were dropped: their point was overtaken
  // (a trim, an install, a loss of leadership) or another point's encoding was in flight; the core
  // sends another after its snapshot retry timeout, as for a lost one.
  std::uint64_t sends_dropped = 0;
  // An encoding gathered or running off the loop now (0 or 1), and how long the last one took on
  // its worker.
  std::uint64_t encoding_in_flight = 0;
  std::chrono::microseconds last_encoding_duration{0};
  // Snapshot data this follower decoded (its preparation's; the install reuses it).
  std::uint64_t decodes = 0;
  // A received snapshot being prepared off the loop now (0 or 1: replica_snapshot_receive.cpp);
  // preparations dropped before their install (a newer term or snapshot, the worker's refusal);
  // preparations whose write of SNAPSHOT.install failed (a full disk: the old state is kept and the
  // leader sends the snapshot again); the same snapshot received again while it was prepared; and
  // appends from its leader dropped meanwhile (they would be matched against the log it replaces).
  std::uint64_t install_preparing = 0;
  std::uint64_t install_preparations_dropped = 0;
  std::uint64_t install_write_failures = 0;
  std::uint64_t install_retries_ignored = 0;
  std::uint64_t appends_dropped_while_preparing = 0;
  // How long the parts of this follower's last install took (replica_snapshot.cpp, "THE
  // INSTALL"), wall time: status, the install's log line and raftlog-bench snapshot-loop.
  // The parts up to snapshot_file and `tables` run off the loop when the replica has an executor
  // (prepared_off_loop is their sum there), on it without one.
  struct InstallTimes {
    std::chrono::microseconds decode{0};         // the data decoded and checked
    std::chrono::microseconds snapshot_file{0};  // SNAPSHOT.install written and synced
    std::chrono::microseconds prepared_off_loop{0};
    std::chrono::microseconds rename{0};         // SNAPSHOT.install -> SNAPSHOT.next, dir fsync
    std::chrono::microseconds log_reset{0};      // CommitLog::reset, then SNAPSHOT.next renamed
    std::chrono::microseconds conf_state{0};     // CONFSTATE rewritten
    std::chrono::microseconds topic_state{0};    // TOPICSTATE written
    std::chrono::microseconds tables{0};         // the dedup and topic tables built
    std::chrono::microseconds swap{0};           // the prepared tables moved in (on the loop)
    std::chrono::microseconds node_section{0};   // ReplicaDeps::snapshot_installed
    std::chrono::microseconds install{0};        // the whole install (Ready step 0)
  };
  InstallTimes last_install;
};

}  // namespace raftlog::replica

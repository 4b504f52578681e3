// ReplicaTestAccess: single steps of a replica's snapshot hand-off, for tests that need an order of
// events its public inputs do not produce, and where a trim's topic scan stands (Replica befriends
// it; nothing in src/ uses it).
#pragma once

#include <cstdint>
#include <utility>

#include "raft/types.h"
#include "replica/replica.h"

namespace raftlog::replica {

class ReplicaTestAccess {
 public:
  // A kSnapshot straight into the Raft core, past receive_snapshot: what the core would get if
  // Replica::core_would_install ever drifted from its rules (the install then prepares the data
  // itself: replica_snapshot.cpp's fallback).
  static void step_into_core(Replica& replica, raft::Message message) {
    (void)replica.guard_core([&] { replica.raft_->step(std::move(message)); });
  }
  // A kSnapshot queued for its preparation without the process() that receive_snapshot runs first:
  // what receive_snapshot does when that process() stopped before the pending install.
  static void queue_incoming_snapshot(Replica& replica, raft::Message message) {
    replica.queue_incoming_snapshot(std::move(message));
  }
  // The last entry a trim's topic scan has read (0: no scan under way).
  static std::uint64_t topic_scan_read_through(const Replica& replica) {
    return replica.trim_.topic_scan ? replica.trim_.topic_scan->running.through() : 0;
  }
  // The last index of the newest segment the scan finished and copied the table at (0: no scan).
  static std::uint64_t topic_scan_boundary(const Replica& replica) {
    return replica.trim_.topic_scan ? replica.trim_.topic_scan->boundary : 0;
  }
};

}  // namespace raftlog::replica

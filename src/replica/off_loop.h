// OffLoopExecutor: work the replica hands off its loop (docs/design.md, "Snapshot transfer"): a job
// that needs none of the replica's state (it owns what it reads), whose result comes back on the
// loop. Two kinds, each at most one at a time: a snapshot job (a leader's snapshot data encoded with
// its CRC-32C, replica_snapshot_send.cpp, or a follower's received snapshot prepared,
// replica_snapshot_receive.cpp: tens of MiB take longer than an election timeout) and a durable
// file write (TOPICSTATE, a trim's SNAPSHOT.next: replica_off_loop_write.cpp), so at most two live
// jobs of one replica are out at once (a write dropped unstarted stays queued as a no-op).
//
// raftlogd runs the job on a worker thread and hands `done` to the node's input queue, which wakes
// the loop like a flush notice (server/off_loop_worker.h); the simulator runs both at a later
// simulated step drawn from its seed, and tests/raft's TestCluster after the replica's process(),
// or when the test says. Without an executor (ReplicaDeps::off_loop null) the replica does the work
// inline, on its loop, as before.
#pragma once

#include <functional>

namespace raftlog::replica {

class OffLoopExecutor {
 public:
  virtual ~OffLoopExecutor() = default;
  // Called on the replica's loop. Runs `job` off it, then `done` on it, between the replica's
  // inputs (never inside one of its calls); the loop's next round calls process() as after any
  // input. False: refused (the executor is stopping or full), neither will run. Both may be dropped
  // unrun when the node stops or restarts; a `done` that runs after its replica is gone does
  // nothing (the replica guards it), and one whose work was overtaken is ignored. The replica keeps
  // at most two live jobs outstanding (one of each kind above; dropped writes stay queued, no-ops).
  virtual bool run(std::function<void()> job, std::function<void()> done) = 0;
};

}  // namespace raftlog::replica

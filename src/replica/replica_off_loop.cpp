// Replica: the one hand-off of work to the off-loop executor (off_loop.h), shared by the leader's
// snapshot encoding (replica_snapshot_send.cpp) and the follower's snapshot preparation
// (replica_snapshot_receive.cpp). Both keep to the same rules: at most one job outstanding
// (off_loop_outstanding_, an abandoned one included), inline without an executor, a `done` that
// runs after the replica is gone does nothing, and after each `done` the work that waited for the
// executor gets its turn.
#include <memory>
#include <utility>

#include "replica/replica.h"

namespace raftlog::replica {

bool Replica::hand_off(std::function<void()> job, std::function<void()> done) {
  auto finish = [alive = std::weak_ptr<int>(alive_), this, done = std::move(done)] {
    if (alive.expired()) return;  // the replica is gone
    --off_loop_outstanding_;
    done();
    start_waiting_off_loop_work();
  };
  ++off_loop_outstanding_;
  if (deps_.off_loop == nullptr) {
    job();
    finish();
    return true;
  }
  if (!deps_.off_loop->run(std::move(job), std::move(finish))) {
    --off_loop_outstanding_;
    return false;
  }
  return true;
}

void Replica::start_waiting_off_loop_work() {
  // A leader's snapshot gathered while another job was out (an abandoned encoding, or a
  // preparation from before this node began to lead). `done` may have handed off a job already
  // (an abandoned preparation's starts the one that replaced it): then this one waits for that.
  // A follower's waiting preparation starts in process() (replica_ready.cpp) or, after an
  // abandoned preparation, in finish_snapshot_preparation.
  if (outgoing_snapshot_ && outgoing_snapshot_->gathered && !outgoing_snapshot_->encoding &&
      off_loop_outstanding_ == 0 && !failed_) {
    start_snapshot_encoding();
  }
}

}  // namespace raftlog::replica

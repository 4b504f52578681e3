// Replica: durable file writes off the Raft loop (off_loop_write.h). TOPICSTATE with 99,020 topics
// took 0.5-0.6 s on a loaded machine (outside test M4 of drills4), past the election timeout, when
// the loop wrote it in a trim round or an install round; a trim's SNAPSHOT.next 0.06-0.18 s. The
// loop now takes a copy of what is to be written (the table as of the save's point, the gathered
// snapshot data), a job encodes, writes and syncs it, and its `done` publishes the outcome on the
// loop, where the next step waits for it (docs/design.md, "Known limits").
//
// WHY THE ORDER STAYS SAFE. Each file is still written whole before anything that relies on it:
//   - TOPICSTATE: topic_state_saved_through_ moves only when the write came back ok, and a trim
//     deletes nothing its TOPICSTATE does not cover (it waits for the write, then trims no further
//     than it reaches). What the file holds is a function of the committed prefix it names
//     (topic_state_file.h), so a copy taken rounds before it lands is still right.
//   - a trim's SNAPSHOT.next: the deletion (trim_.deletion) exists from the hand-off, so no other
//     trim step runs meanwhile, but it unlinks nothing before next_written; a power cut before
//     that leaves the disk of crash case "no unlink yet" (a SNAPSHOT.next, whole or not, that the
//     open deletes, or none).
//   - an install's TOPICSTATE (its step 5) after the commit point, as before: a cut before it lands
//     is completed by the open from SNAPSHOT (load_snapshot_state).
// Only one write is out at a time, and every other writer of these files runs on the loop after
// settle_pending_write (an install, a stop: the job dropped if not started, else waited for), so
// no two writers share a temporary file and no older TOPICSTATE lands after a newer one.
#include <spdlog/spdlog.h>

#include <memory>
#include <utility>

#include "replica/replica.h"

namespace raftlog::replica {

void Replica::hand_off_write(PendingWrite pending, std::function<store::Status()> write) {
  auto shared = std::make_shared<OffLoopWrite>();
  pending.write = shared;
  pending_write_ = std::move(pending);
  auto job = [shared, write = std::move(write)] { shared->run(write); };
  auto done = [alive = std::weak_ptr<int>(alive_), this, shared] {
    if (alive.expired()) return;  // the replica is gone
    finish_pending_write(shared);
  };
  if (deps_.off_loop == nullptr || !deps_.off_loop->run(job, done)) {
    // Inline: without an executor (tests, as before), or refused (stopping, or full): the loop
    // writes it itself rather than lose the step.
    job();
    done();
  }
}

void Replica::finish_pending_write(const std::shared_ptr<OffLoopWrite>& write) {
  // Taken back already (an install or a stop settled it): nothing left to publish.
  if (!pending_write_ || pending_write_->write != write) return;
  RoundProfile::Scope part(round_, RoundPart::kOffLoopResults);
  PendingWrite pending = std::move(*pending_write_);
  pending_write_.reset();
  publish_write(pending, write->settle());  // done: settle() returns at once
}

void Replica::settle_pending_write() {
  if (!pending_write_) return;
  // A wait for a running write is the worker's result taken on the loop: charged as such.
  RoundProfile::Scope part(round_, RoundPart::kOffLoopResults);
  PendingWrite pending = std::move(*pending_write_);
  pending_write_.reset();
  publish_write(pending, pending.write->settle());
}

void Replica::publish_write(const PendingWrite& pending,
                            const std::optional<store::Status>& outcome) {
  if (pending.kind == PendingWrite::Kind::kTopicState) {
    if (outcome && outcome->ok()) {
      topic_state_saved_through_ = std::max(topic_state_saved_through_, pending.through);
      return;
    }
    if (!outcome) return;  // dropped: the previous TOPICSTATE stays right
    // Not fatal: the previous TOPICSTATE stays right, only a restart reads more of the log. Tried
    // again after another interval; a trim refuses to delete without it.
    spdlog::warn("node {}: saving TOPICSTATE: {}", config_.node_id, outcome->to_string());
    topic_state_retry_at_ = pending.through + config_.topic_state_save_entries;
    if (pending.for_trim) trim_.write_failure = *outcome;
    return;
  }
  if (!trim_.deletion || trim_.deletion->next_written) return;  // not expected: one at a time
  if (outcome && outcome->ok()) {
    trim_.deletion->next_written = true;
    // A snapshot planned while the file was written names the log's start the unlinks move.
    snapshot_encoding_.invalidate();
    abandon_outgoing_snapshot("a trim moves the log's start it was taken against");
    return;
  }
  // Nothing was deleted: a SNAPSHOT.next the failed write may have left goes (the open would
  // delete it too), and the trim stops; the retention check or a new request starts it again.
  if (outcome) {
    spdlog::error("node {}: not trimming before {}: saving the dedup table: {}", config_.node_id,
                  trim_.deletion->new_first, outcome->to_string());
    trim_.write_failure = *outcome;
    finish_trim_snapshot(trim_.deletion->first_before, trim_.deletion->new_first);
  }
  // The trim's next call (its continuation, trim_.pending_before) reports the failure and stops.
  trim_.deletion.reset();
}

bool Replica::start_topic_state_save(bool for_trim) {
  if (pending_write_) return false;
  RoundProfile::Scope part(round_, RoundPart::kTopicState);
  // The copy (the table at its point, built for the save): what the loop still does itself.
  return start_topic_state_save(topic_state_to_save(), for_trim);
}

bool Replica::start_topic_state_save(TopicState topic_state, bool for_trim) {
  if (pending_write_) return false;
  auto state = std::make_shared<const TopicState>(std::move(topic_state));
  store::Env* const env = config_.store.env;
  hand_off_write(
      PendingWrite{PendingWrite::Kind::kTopicState, state->through_index, for_trim, nullptr},
      [env, dir = config_.data_dir, state] { return write_topic_state(env, dir, *state); });
  return true;
}

}  // namespace raftlog::replica

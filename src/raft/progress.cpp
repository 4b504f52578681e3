#include "raft/progress.h"

#include <algorithm>

#include "raft/assert.h"

namespace raftlog::raft {

Inflights::Inflights(std::size_t capacity, std::size_t max_bytes)
    : capacity_(capacity), max_bytes_(max_bytes) {
  RAFT_ASSERT(capacity_ > 0, "the in-flight window holds at least one append");
  RAFT_ASSERT(max_bytes_ > 0, "the in-flight window holds at least one byte");
}

void Inflights::add(Index last_index, std::size_t bytes) {
  RAFT_ASSERT(!full(), "in-flight window overflow: the caller must check is_paused() first");
  RAFT_ASSERT(appends_.empty() || appends_.back().last_index < last_index,
              "in-flight appends must advance");
  appends_.push_back(InflightAppend{last_index, bytes});
  bytes_ += bytes;
}

void Inflights::free_up_to(Index index) {
  while (!appends_.empty() && appends_.front().last_index <= index) free_first();
}

void Inflights::free_first() {
  if (appends_.empty()) return;
  bytes_ -= appends_.front().bytes;
  appends_.pop_front();
}

void Inflights::reset() {
  appends_.clear();
  bytes_ = 0;
}

void Progress::become_probe() {
  state = ReplicationState::kProbe;
  pending_snapshot = 0;
  next = match + 1;
  probe_sent = false;
  inflights.reset();
}

void Progress::become_replicate() {
  state = ReplicationState::kReplicate;
  pending_snapshot = 0;
  next = match + 1;
  probe_sent = false;
  inflights.reset();
}

void Progress::become_snapshot(Index index) {
  state = ReplicationState::kSnapshot;
  pending_snapshot = index;
  snapshot_ticks = 0;
  probe_sent = false;
  inflights.reset();
}

bool Progress::is_paused() const {
  switch (state) {
    case ReplicationState::kProbe:
      return probe_sent;
    case ReplicationState::kReplicate:
      return inflights.full();
    case ReplicationState::kSnapshot:
      return true;
  }
  return true;
}

bool Progress::on_ack(Index index) {
  bool advanced = false;
  if (index > match) {
    match = index;
    advanced = true;
    probe_sent = false;
  }
  next = std::max(next, index + 1);
  return advanced;
}

void Progress::on_entries_sent(Index last_sent_index, std::size_t bytes) {
  if (state == ReplicationState::kReplicate) {
    next = last_sent_index + 1;
    inflights.add(last_sent_index, bytes);
  } else {
    probe_sent = true;
  }
}

bool Progress::on_reject(Index rejected_index, Index match_hint) {
  // An append sent before the snapshot: the snapshot's acknowledgement (or its timeout) decides.
  if (state == ReplicationState::kSnapshot) return false;
  if (state == ReplicationState::kReplicate) {
    if (rejected_index <= match)
      return false;  // stale: answers an append sent before match advanced
    next = match + 1;
    return true;
  }
  if (next == 0 || next - 1 != rejected_index)
    return false;  // stale: not the probe outstanding now
  const Index new_next = std::max(std::min(rejected_index, match_hint + 1), match + 1);
  // Rejected at our own match point: the follower contradicts an acknowledgement it made, which only a
  // broken safety rule or lost durable state can cause. Resending at once would ping-pong forever; the
  // probe stays outstanding and the next heartbeat answer retries at heartbeat pace instead.
  if (new_next == next) return false;
  next = new_next;
  probe_sent = false;
  return true;
}

}  // namespace raftlog::raft

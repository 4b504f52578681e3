#include "server/peer_queue.h"

#include <utility>

#include "server/check.h"

namespace raftlog::server {

Lane lane_for(const raft::Message& message) {
  // A snapshot's data can be as large as an append: it must not hold heartbeats up either.
  const bool bulk = message.type == raft::MessageType::kAppend ||
                    message.type == raft::MessageType::kSnapshot || !message.entries.empty();
  return bulk ? Lane::kAppend : Lane::kControl;
}

const char* lane_name(Lane lane) { return lane == Lane::kAppend ? "append" : "control"; }

std::size_t queued_bytes(const raft::Message& message) {
  std::size_t bytes = kQueuedMessageHeaderBytes;
  for (const raft::Entry& entry : message.entries) bytes += entry.byte_size();
  if (message.snapshot) bytes += message.snapshot->data.size() + raft::kMaxConfigBytes;
  return bytes;
}

std::size_t control_lane_max_bytes(std::size_t max_messages) {
  return max_messages * kQueuedMessageHeaderBytes;
}

BatchPlan::Verdict BatchPlan::add(std::size_t encoded_bytes) {
  RAFTLOG_CHECK(verdicts_.empty() || verdicts_.back() != Verdict::kFull,
                "BatchPlan::add after the batch was full");
  Verdict verdict = Verdict::kAdd;
  if (encoded_bytes > max_message_bytes_) {
    verdict = Verdict::kOversize;
  } else if (kept_ > 0 && batch_bytes_ + encoded_bytes + framing_bytes_ > max_message_bytes_) {
    // A write stays within max_message_bytes, except one message alone (the receiver's gRPC limit has
    // headroom above max_message_bytes for the framing).
    verdict = Verdict::kFull;
  } else {
    batch_bytes_ += encoded_bytes + framing_bytes_;
    ++kept_;
  }
  verdicts_.push_back(verdict);
  return verdict;
}

LaneQueue::LaneQueue(const LaneQueueLimits& limits) : limits_(limits) {
  RAFTLOG_CHECK(limits_.max_messages > 0 && limits_.max_batch_messages > 0,
                "LaneQueue needs positive bounds");
}

LaneQueue::Admission LaneQueue::push(raft::Message message, Clock::time_point now) {
  if (closed_) return Admission::kClosed;
  const std::size_t bytes = queued_bytes(message);
  // The exact encoded size is checked when the message is written; payloads alone over the bound
  // cannot fit.
  if (bytes - kQueuedMessageHeaderBytes > limits_.max_message_bytes) {
    ++counters_.dropped_oversize;
    return Admission::kOversize;
  }
  if (held_messages() >= limits_.max_messages || held_bytes_ + bytes > limits_.max_bytes) {
    ++counters_.dropped_queue_full;
    return Admission::kFull;
  }
  queue_.push_back(QueuedMessage{std::move(message), now, bytes});
  held_bytes_ += bytes;
  return Admission::kQueued;
}

void LaneQueue::expire(Clock::time_point now) {
  const Clock::time_point oldest_allowed = now - limits_.max_age;
  // The queue is in arrival order (requeued messages are older than the rest), so the stale messages
  // are a prefix.
  while (!queue_.empty() && queue_.front().enqueued_at < oldest_allowed) {
    held_bytes_ -= queue_.front().bytes;
    queue_.pop_front();
    ++counters_.dropped_expired;
  }
}

bool LaneQueue::next_batch_exceeds(std::size_t bytes) const {
  std::size_t batch_bytes = 0;
  std::size_t messages = 0;
  for (const QueuedMessage& item : queue_) {
    batch_bytes += item.bytes;
    if (batch_bytes > bytes) return true;
    if (++messages == limits_.max_batch_messages) break;
  }
  return false;
}

const std::vector<QueuedMessage>& LaneQueue::take_batch() {
  RAFTLOG_CHECK(writing_.empty(), "LaneQueue::take_batch with a write in progress");
  // Everything queued, up to a batch: what piled up while the previous write was in flight leaves in
  // one write.
  while (!queue_.empty() && writing_.size() < limits_.max_batch_messages) {
    writing_.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  return writing_;
}

void LaneQueue::settle_batch(const BatchPlan& plan) {
  const std::vector<BatchPlan::Verdict>& verdicts = plan.verdicts();
  RAFTLOG_CHECK(verdicts.size() <= writing_.size(),
                "a batch plan with more verdicts than messages");
  std::vector<QueuedMessage> carried;
  std::vector<QueuedMessage> overflow;
  carried.reserve(plan.kept());
  for (std::size_t i = 0; i < writing_.size(); ++i) {
    const bool assessed = i < verdicts.size();
    if (!assessed || verdicts[i] == BatchPlan::Verdict::kFull) {
      overflow.push_back(std::move(writing_[i]));
    } else if (verdicts[i] == BatchPlan::Verdict::kOversize) {
      ++counters_.dropped_oversize;
      held_bytes_ -= writing_[i].bytes;
    } else {
      carried.push_back(std::move(writing_[i]));
    }
  }
  writing_ = std::move(carried);
  requeue_front(overflow);
}

void LaneQueue::write_sent(Clock::time_point now) { count_sent(writing_, now); }

void LaneQueue::write_unconfirmed() {
  RAFTLOG_CHECK(unconfirmed_.empty(), "a second unconfirmed batch");
  unconfirmed_ = std::move(writing_);
  writing_.clear();
}

void LaneQueue::write_failed() { requeue_front(writing_); }

void LaneQueue::unconfirmed_sent(Clock::time_point now) { count_sent(unconfirmed_, now); }

void LaneQueue::unconfirmed_failed() { requeue_front(unconfirmed_); }

void LaneQueue::close() { closed_ = true; }

void LaneQueue::clear() {
  queue_.clear();
  writing_.clear();
  unconfirmed_.clear();
  held_bytes_ = 0;
}

void LaneQueue::requeue_front(std::vector<QueuedMessage>& items) {
  // held_bytes_ and held_messages() already count the messages, so they fit within the bounds.
  for (auto it = items.rbegin(); it != items.rend(); ++it) {
    if (closed_) {
      ++counters_.dropped_send_failed;
      held_bytes_ -= it->bytes;
      continue;
    }
    queue_.push_front(std::move(*it));
  }
  items.clear();
}

void LaneQueue::count_sent(std::vector<QueuedMessage>& items, Clock::time_point now) {
  if (items.empty()) return;
  counters_.sent_messages += items.size();
  counters_.last_send_ok = now;
  for (const QueuedMessage& item : items) held_bytes_ -= item.bytes;
  items.clear();
}

}  // namespace raftlog::server

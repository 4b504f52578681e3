#include "server/peer_queue.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "server/check.h"
#include "util/crc32c.h"

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

const char* to_string(SnapshotSendProgress::State state) {
  switch (state) {
    case SnapshotSendProgress::State::kSending:
      return "sending";
    case SnapshotSendProgress::State::kSent:
      return "sent";
    case SnapshotSendProgress::State::kAbandoned:
      return "abandoned";
  }
  return "unknown";
}

const char* to_string(ResumeMiss reason) {
  switch (reason) {
    case ResumeMiss::kPoint:
      return "point";
    case ResumeMiss::kBytes:
      return "bytes";
    case ResumeMiss::kBeyondSent:
      return "beyond_sent";
    case ResumeMiss::kHead:
      return "head";
    case ResumeMiss::kContinuation:
      return "continuation";
    case ResumeMiss::kDigest:
      return "digest";
  }
  return "unknown";
}

namespace {

// What one chunk counts against its lane's byte bound: its data, the configuration it repeats and
// the message's fixed fields.
std::size_t chunk_queued_bytes(std::size_t length) {
  return kQueuedMessageHeaderBytes + length + raft::kMaxConfigBytes;
}

}  // namespace

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
  std::optional<QueuedChunk> whole_snapshot;
  if (message.type == raft::MessageType::kSnapshot && message.snapshot) {
    // A snapshot small enough for one message: tracked like a transfer of one chunk, for status.
    if (snapshot_ && snapshot_->state == SnapshotSendProgress::State::kSending) abandon_snapshot();
    OutgoingSnapshot& outgoing = snapshot_.emplace();
    outgoing.message = message;
    outgoing.message.snapshot->data = raft::Payload();  // the queued message holds it
    outgoing.transfer = next_transfer_++;
    const std::uint64_t total = message.snapshot->data.size();
    outgoing.place = SnapshotChunkPlace{0, total, 0};
    outgoing.next_offset = total;
    outgoing.window_bytes = total;
    ++counters_.snapshots_started;
    whole_snapshot = QueuedChunk{outgoing.transfer, outgoing.place, total, /*whole=*/true};
  }
  queue_.push_back(QueuedMessage{std::move(message), now, bytes, whole_snapshot});
  held_bytes_ += bytes;
  return Admission::kQueued;
}

void LaneQueue::expire(Clock::time_point now) {
  if (kept_continuation_ && now - kept_continuation_->last_used > limits_.kept_continuation_idle) {
    kept_continuation_.reset();
  }
  const Clock::time_point oldest_allowed = now - limits_.max_age;
  // The queue is in arrival order (requeued messages are older than the rest), so the stale messages
  // are a prefix.
  while (!queue_.empty() && queue_.front().enqueued_at < oldest_allowed) {
    QueuedMessage item = std::move(queue_.front());
    queue_.pop_front();
    held_bytes_ -= item.bytes;
    ++counters_.dropped_expired;
    chunk_left(item, /*sent=*/false);
  }
}

bool LaneQueue::next_batch_exceeds(std::size_t bytes) const {
  std::size_t batch_bytes = 0;
  std::size_t messages = 0;
  for (const QueuedMessage& item : queue_) {
    batch_bytes += item.bytes;
    if (batch_bytes > bytes) return true;
    if (++messages == limits_.max_batch_messages) return false;
  }
  if (can_make_chunk()) batch_bytes += chunk_queued_bytes(next_chunk_length());
  return batch_bytes > bytes;
}

const std::vector<QueuedMessage>& LaneQueue::take_batch() {
  RAFTLOG_CHECK(writing_.empty(), "LaneQueue::take_batch with a write in progress");
  // Everything queued, up to a batch: what piled up while the previous write was in flight leaves in
  // one write.
  while (!queue_.empty() && writing_.size() < limits_.max_batch_messages) {
    writing_.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  // Chunks are made only now, as the lane's writes go out: the snapshot never sits in the queue
  // whole, and what it holds stays within kSnapshotWindowBytes.
  const Clock::time_point now = Clock::now();
  while (writing_.size() < limits_.max_batch_messages && can_make_chunk()) {
    writing_.push_back(make_chunk(now));
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
      chunk_left(writing_[i], /*sent=*/false);
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
  snapshot_.reset();
  kept_continuation_.reset();
}

void LaneQueue::requeue_front(std::vector<QueuedMessage>& items) {
  // held_bytes_ and held_messages() already count the messages, so they fit within the bounds.
  for (auto it = items.rbegin(); it != items.rend(); ++it) {
    if (closed_) {
      ++counters_.dropped_send_failed;
      held_bytes_ -= it->bytes;
      chunk_left(*it, /*sent=*/false);
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
  for (const QueuedMessage& item : items) {
    held_bytes_ -= item.bytes;
    chunk_left(item, /*sent=*/true);
  }
  items.clear();
}

std::size_t LaneQueue::snapshot_chunk_bytes() const {
  // A chunk with its headers always fits one write, whatever the message bound.
  return std::min(kSnapshotChunkBytes, limits_.max_message_bytes / 2);
}

SnapshotContinuation make_snapshot_continuation(const raft::Payload& data,
                                                const replica::FramedSplicePoint& point) {
  replica::FramedContinuation made = replica::make_framed_continuation(data.view(), point);
  const std::uint32_t crc =
      util::crc32c::extend(point.kept_crc32c, made.bytes.data(), made.bytes.size());
  const std::optional<std::uint32_t> digest =
      point.kept_digest && made.outcome == replica::FramedContinuation::Outcome::kMade
          ? replica::extend_frames_digest(*point.kept_digest, made.bytes)
          : std::nullopt;
  return SnapshotContinuation{point, made.outcome, raft::Payload(std::move(made.bytes)), crc,
                              digest};
}

bool LaneQueue::resumes_continuation(const SnapshotIdentity& data,
                                     const std::optional<SnapshotReceipt>& receipt,
                                     const SnapshotContinuation* continuation) {
  if (!receipt || continuation == nullptr ||
      continuation->outcome != replica::FramedContinuation::Outcome::kMade ||
      continuation->bytes.empty()) {
    return false;
  }
  return receipt->snapshot == continuation->spliced_identity(data.index, data.term) &&
         receipt->received_bytes >= continuation->point.kept_bytes &&
         receipt->received_bytes < receipt->snapshot.total_bytes;
}

std::optional<SnapshotContinuation> LaneQueue::kept_continuation(
    const SnapshotIdentity& data, const SnapshotReceipt& receipt) const {
  if (!kept_continuation_ || kept_continuation_->source != data ||
      !resumes_continuation(data, receipt, &kept_continuation_->continuation)) {
    return std::nullopt;
  }
  return kept_continuation_->continuation;  // its bytes shared, not copied
}

bool LaneQueue::usable_continuation(const std::optional<SnapshotReceipt>& receipt,
                                    const SnapshotContinuation* continuation,
                                    std::optional<ResumeMiss>* missed) {
  using Outcome = replica::FramedContinuation::Outcome;
  if (!receipt->splice) return false;  // not framed, or its head incomplete: kBytes stays
  if (continuation == nullptr || continuation->point != *receipt->splice) {
    *missed = ResumeMiss::kContinuation;
    return false;
  }
  if (continuation->outcome == Outcome::kOtherHead) {
    *missed = ResumeMiss::kHead;
    return false;
  }
  if (continuation->outcome != Outcome::kMade || continuation->bytes.empty() ||
      continuation->point.kept_bytes + continuation->bytes.size() >
          replica::kMaxFramedSnapshotBytes) {
    *missed = ResumeMiss::kContinuation;
    return false;
  }
  // The point names no digest of the kept frames: the spliced data would have none, and the
  // follower refuses such a splice (replica::check_splice_point).
  if (!continuation->spliced_digest) {
    *missed = ResumeMiss::kDigest;
    return false;
  }
  missed->reset();
  return true;
}

LaneQueue::Admission LaneQueue::push_snapshot(raft::Message message, std::uint32_t data_crc32c,
                                              Clock::time_point now,
                                              const std::optional<SnapshotReceipt>& receipt,
                                              const SnapshotContinuation* continuation) {
  if (closed_) return Admission::kClosed;
  RAFTLOG_CHECK(message.snapshot && message.snapshot->data.size() > snapshot_chunk_bytes(),
                "push_snapshot of a snapshot that fits one message");
  const std::uint64_t total = message.snapshot->data.size();
  if (total > kMaxSnapshotBytes) {
    ++counters_.dropped_oversize;
    return Admission::kOversize;
  }
  const SnapshotIdentity identity{
      message.snapshot->index, message.snapshot->term, total, data_crc32c,
      replica::snapshot_data_digest(message.snapshot->data.view(), data_crc32c)};
  // What this lane made of a data as leader in an earlier term says nothing about the follower's
  // bytes now: another leader may have sent it the same data meanwhile (an identical encoding), so
  // a leader again in a later term trusts a receipt as a leader that sent none does.
  if (made_term_ != message.term) {
    made_identity_.reset();
    made_through_ = 0;
    made_term_ = message.term;
  }
  std::optional<ResumeMiss> missed;
  std::uint64_t start = resume_offset(identity, receipt, &missed);
  SnapshotIdentity sent_identity = identity;
  std::optional<replica::FramedSplicePoint> splice;
  bool resumed_continuation = false;
  if (missed == ResumeMiss::kBytes && resumes_continuation(identity, receipt, continuation)) {
    // The peer spliced this continuation and holds part of what followed its point (review M5):
    // resumed by offset like any data, with the same check of what this lane made of it.
    const SnapshotIdentity spliced = continuation->spliced_identity(identity.index, identity.term);
    start = resume_offset(spliced, receipt, &missed);
    if (!missed) {
      resumed_continuation = true;
      splice = continuation->point;
      sent_identity = spliced;
      message.snapshot->data = continuation->bytes;
    }
  } else if (missed == ResumeMiss::kBytes && usable_continuation(receipt, continuation, &missed)) {
    // The peer keeps its bytes through the point; this lane sends what follows them.
    splice = continuation->point;
    start = splice->kept_bytes;
    sent_identity = continuation->spliced_identity(identity.index, identity.term);
    message.snapshot->data = continuation->bytes;
    spdlog::info(
        "snapshot to node {} at index {} (term {}): continuing its partial after byte {} (client "
        "{}): {} bytes to send of {}",
        message.to, identity.index, identity.term, start, splice->last_client_id,
        continuation->bytes.size(), sent_identity.total_bytes);
  }
  if (splice) {
    kept_continuation_ = KeptContinuation{identity, *continuation, now};
  } else {
    kept_continuation_.reset();
  }
  if (missed) {
    ++counters_.snapshot_resume_missed[*missed];
    if (const std::optional<std::uint64_t> held_back = resume_miss_log_.admit(now)) {
      spdlog::info(
          "snapshot to node {} at index {} (term {}, {} bytes): sending from 0, not resuming the "
          "partial its receipt names (index {}, term {}, {} of {} bytes): reason {}{}",
          message.to, identity.index, identity.term, identity.total_bytes,
          receipt->snapshot.index, receipt->snapshot.term, receipt->received_bytes,
          receipt->snapshot.total_bytes, to_string(*missed),
          *held_back > 0 ? fmt::format(" ({} more since the last line)", *held_back) : "");
    }
  }
  if (!made_identity_ || *made_identity_ != sent_identity) {
    made_identity_ = sent_identity;
    made_through_ = 0;
  }
  made_through_ = std::max(made_through_, start);
  if (snapshot_ && snapshot_->state == SnapshotSendProgress::State::kSending) abandon_snapshot();
  OutgoingSnapshot& outgoing = snapshot_.emplace();
  outgoing.message = std::move(message);
  outgoing.transfer = next_transfer_++;
  outgoing.place = SnapshotChunkPlace{0, sent_identity.total_bytes, sent_identity.data_crc32c,
                                      sent_identity.data_digest};
  outgoing.next_offset = start;
  outgoing.skipped_bytes = start;
  outgoing.resume_missed = missed;
  outgoing.splice = splice;
  ++counters_.snapshots_started;
  if (splice && !resumed_continuation) {
    ++counters_.snapshots_continued;
    counters_.snapshot_resume_saved_bytes += start;
  } else if (start > 0) {
    ++counters_.snapshots_resumed;
    counters_.snapshot_bytes_skipped += start;
  }
  return Admission::kQueued;
}

std::uint64_t LaneQueue::resume_offset(const SnapshotIdentity& identity,
                                       const std::optional<SnapshotReceipt>& receipt,
                                       std::optional<ResumeMiss>* missed) const {
  missed->reset();
  if (!receipt) return 0;
  if (receipt->snapshot.index != identity.index || receipt->snapshot.term != identity.term) {
    *missed = ResumeMiss::kPoint;
    return 0;
  }
  // A follower from before digests: its partial may be another encoding of this layout (the same
  // total and CRC), so its offset is not taken, nor is a continuation cut for it.
  if (!receipt->snapshot.data_digest) {
    *missed = ResumeMiss::kDigest;
    return 0;
  }
  if (receipt->snapshot != identity) {
    *missed = ResumeMiss::kBytes;
    return 0;
  }
  // The codec refuses both (a receipt names 0 < received < total): nothing to resume, no miss.
  if (receipt->received_bytes == 0 || receipt->received_bytes >= identity.total_bytes) return 0;
  // Compared with every transfer of this data, not only the latest: a retry that started at a stale
  // receipt and was abandoned early (its peer was down) must not hide what an earlier one sent,
  // which a follower that restarted from its SNAPSHOT.partial may hold.
  if (made_identity_ && *made_identity_ == identity && receipt->received_bytes > made_through_) {
    *missed = ResumeMiss::kBeyondSent;
    return 0;  // more than this lane ever made of it: not an acknowledgement of what it sent
  }
  return receipt->received_bytes;
}

std::optional<SnapshotSendProgress> LaneQueue::snapshot_progress() const {
  if (!snapshot_) return std::nullopt;
  return SnapshotSendProgress{snapshot_->message.term,
                              snapshot_->message.snapshot->index,
                              snapshot_->place.total_bytes,
                              snapshot_->sent_bytes,
                              snapshot_->state,
                              snapshot_->skipped_bytes,
                              snapshot_->resume_missed};
}

std::size_t LaneQueue::next_chunk_length() const {
  return static_cast<std::size_t>(std::min<std::uint64_t>(
      snapshot_chunk_bytes(), snapshot_->place.total_bytes - snapshot_->next_offset));
}

bool LaneQueue::can_make_chunk() const {
  if (closed_ || !snapshot_ || snapshot_->state != SnapshotSendProgress::State::kSending ||
      snapshot_->next_offset >= snapshot_->place.total_bytes) {
    return false;
  }
  const std::size_t length = next_chunk_length();
  // One chunk always fits an empty window, so a window smaller than a chunk still makes progress.
  if (snapshot_->window_bytes > 0 && snapshot_->window_bytes + length > kSnapshotWindowBytes) {
    return false;
  }
  return held_messages() < limits_.max_messages &&
         held_bytes_ + chunk_queued_bytes(length) <= limits_.max_bytes;
}

QueuedMessage LaneQueue::make_chunk(Clock::time_point now) {
  OutgoingSnapshot& outgoing = *snapshot_;
  const std::size_t length = next_chunk_length();
  QueuedMessage item{
      outgoing.message, now, chunk_queued_bytes(length),
      QueuedChunk{outgoing.transfer,
                  SnapshotChunkPlace{outgoing.next_offset, outgoing.place.total_bytes,
                                     outgoing.place.data_crc32c, outgoing.place.data_digest},
                  length, /*whole=*/false, outgoing.splice}};
  outgoing.next_offset += length;
  made_through_ = std::max(made_through_, outgoing.next_offset);
  if (outgoing.splice && kept_continuation_) kept_continuation_->last_used = now;
  outgoing.window_bytes += length;
  held_bytes_ += item.bytes;
  return item;
}

void LaneQueue::chunk_left(const QueuedMessage& item, bool sent) {
  if (!item.chunk || !snapshot_ || item.chunk->transfer != snapshot_->transfer) return;
  OutgoingSnapshot& outgoing = *snapshot_;
  outgoing.window_bytes -= item.chunk->length;
  if (outgoing.state != SnapshotSendProgress::State::kSending) return;
  if (!sent) {
    // The receiver will see a gap: nothing after it can be used.
    abandon_snapshot();
    return;
  }
  outgoing.sent_bytes += item.chunk->length;
  if (outgoing.skipped_bytes + outgoing.sent_bytes == outgoing.place.total_bytes ||
      item.chunk->whole) {
    outgoing.state = SnapshotSendProgress::State::kSent;
    outgoing.message.snapshot->data = raft::Payload();  // the chunks in flight hold their own
    // Every byte went out: nothing left to resume (a retry cuts a new continuation, whose spliced
    // data is the same as long as this node's encoding is, and resumes that by offset).
    if (outgoing.splice) kept_continuation_.reset();
    ++counters_.snapshots_sent;
  }
}

void LaneQueue::abandon_snapshot() {
  OutgoingSnapshot& outgoing = *snapshot_;
  outgoing.state = SnapshotSendProgress::State::kAbandoned;
  outgoing.message.snapshot->data = raft::Payload();
  ++counters_.snapshots_abandoned;
  // Its chunks still queued (back from a failed write) are of no use to the receiver any more.
  const std::uint64_t transfer = outgoing.transfer;
  const auto useless = [transfer](const QueuedMessage& item) {
    return item.chunk && !item.chunk->whole && item.chunk->transfer == transfer;
  };
  for (const QueuedMessage& item : queue_) {
    if (useless(item)) held_bytes_ -= item.bytes;
  }
  queue_.erase(std::remove_if(queue_.begin(), queue_.end(), useless), queue_.end());
}

}  // namespace raftlog::server

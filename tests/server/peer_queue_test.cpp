// The peer transport's queueing policy on its own (server/peer_queue.h), without gRPC or threads:
// lanes, bounds, drops, batches, age and order.
#include "server/peer_queue.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace raftlog::server {
namespace {

using namespace std::chrono_literals;
using Admission = LaneQueue::Admission;
using Verdict = BatchPlan::Verdict;

const LaneQueue::Clock::time_point kT0 = LaneQueue::Clock::time_point(1000s);

LaneQueueLimits test_limits(std::size_t max_messages, std::size_t max_bytes = 1u << 20) {
  LaneQueueLimits limits;
  limits.max_messages = max_messages;
  limits.max_bytes = max_bytes;
  limits.max_message_bytes = 4096;
  limits.max_batch_messages = 2;
  limits.batch_framing_bytes = 6;
  limits.max_age = 1000ms;
  return limits;
}

// `context` identifies a message in the order checks.
raft::Message control_message(raft::MessageType type, std::uint64_t context) {
  raft::Message message;
  message.type = type;
  message.from = 1;
  message.to = 2;
  message.context = context;
  return message;
}

// An append with one entry of `payload_bytes`.
raft::Message append_message(std::uint64_t context, std::size_t payload_bytes = 0) {
  raft::Message message = control_message(raft::MessageType::kAppend, context);
  raft::Entry entry;
  entry.index = 1;
  entry.term = 1;
  entry.payload = std::string(payload_bytes, 'x');
  message.entries.push_back(std::move(entry));
  return message;
}

std::vector<std::uint64_t> contexts(const std::vector<QueuedMessage>& items) {
  std::vector<std::uint64_t> result;
  for (const QueuedMessage& item : items) result.push_back(item.message.context);
  return result;
}

// Takes the next batch, "encodes" every message of it at `encoded_bytes` and settles it: what the
// write carries.
std::vector<std::uint64_t> take_and_settle(LaneQueue& queue, std::size_t encoded_bytes = 100) {
  queue.take_batch();
  BatchPlan plan(queue.limits());
  for (std::size_t i = 0; i < queue.writing().size(); ++i) {
    if (plan.add(encoded_bytes) == Verdict::kFull) break;
  }
  queue.settle_batch(plan);
  return contexts(queue.writing());
}

// Writes every batch until the queue is empty: the contexts in the order they were sent.
std::vector<std::uint64_t> drain(LaneQueue& queue) {
  std::vector<std::uint64_t> sent;
  while (queue.has_queued()) {
    for (std::uint64_t context : take_and_settle(queue)) sent.push_back(context);
    queue.write_sent(kT0);
  }
  return sent;
}

TEST(PeerQueueLanes, EntryLessMessagesTakeTheControlLaneAndAnythingWithEntriesTheAppendLane) {
  for (const raft::MessageType type :
       {raft::MessageType::kPreVote, raft::MessageType::kPreVoteResponse, raft::MessageType::kVote,
        raft::MessageType::kVoteResponse, raft::MessageType::kAppendResponse,
        raft::MessageType::kHeartbeat, raft::MessageType::kHeartbeatResponse,
        raft::MessageType::kTimeoutNow}) {
    EXPECT_EQ(lane_for(control_message(type, 1)), Lane::kControl)
        << "type " << static_cast<int>(type);
    raft::Message with_entries = control_message(type, 1);
    with_entries.entries.push_back(raft::Entry{});
    EXPECT_EQ(lane_for(with_entries), Lane::kAppend)
        << "type " << static_cast<int>(type) << " with entries";
  }
  // A probe (an append without entries) is still an append.
  EXPECT_EQ(lane_for(control_message(raft::MessageType::kAppend, 1)), Lane::kAppend);
  EXPECT_EQ(lane_for(append_message(1)), Lane::kAppend);
  EXPECT_STREQ(lane_name(Lane::kControl), "control");
  EXPECT_STREQ(lane_name(Lane::kAppend), "append");
}

TEST(PeerQueueLanes, ControlMessagesNeverWaitBehindOrAreDroppedForAFullAppendLane) {
  constexpr std::size_t kControlBound = 8;
  LaneQueue control(test_limits(kControlBound, control_lane_max_bytes(kControlBound)));
  LaneQueue append(test_limits(4));
  auto route = [&](const raft::Message& message) -> LaneQueue& {
    return lane_for(message) == Lane::kAppend ? append : control;
  };
  // The append lane at its bound with a write in flight.
  for (std::uint64_t i = 1; i <= 4; ++i) {
    const raft::Message message = append_message(i, 1000);
    ASSERT_EQ(route(message).push(message, kT0), Admission::kQueued);
  }
  append.take_batch();
  ASSERT_EQ(append.push(append_message(5, 1000), kT0), Admission::kFull);

  // Every control message is accounted one header, so the control lane takes exactly its message
  // bound of them, whatever else waits.
  const std::vector<raft::MessageType> types = {
      raft::MessageType::kHeartbeat,      raft::MessageType::kVote,
      raft::MessageType::kPreVote,        raft::MessageType::kVoteResponse,
      raft::MessageType::kAppendResponse, raft::MessageType::kHeartbeatResponse,
      raft::MessageType::kTimeoutNow,     raft::MessageType::kPreVoteResponse};
  ASSERT_EQ(types.size(), kControlBound);
  for (std::size_t i = 0; i < types.size(); ++i) {
    const raft::Message message = control_message(types[i], 100 + i);
    EXPECT_EQ(route(message).push(message, kT0), Admission::kQueued)
        << "type " << static_cast<int>(types[i]);
  }
  EXPECT_EQ(control.push(control_message(raft::MessageType::kHeartbeat, 200), kT0),
            Admission::kFull);
  EXPECT_EQ(control.counters().dropped_queue_full, 1u);
  EXPECT_EQ(append.counters().dropped_queue_full, 1u);  // only the append that did not fit

  // The control lane's next write is its own first messages, while the append write is still out.
  EXPECT_EQ(take_and_settle(control), (std::vector<std::uint64_t>{100, 101}));
  EXPECT_EQ(append.writing().size(), 2u);
}

TEST(LaneQueue, CountBoundIncludesTheWriteInFlightAndTheUnconfirmedBatch) {
  LaneQueue queue(test_limits(6));
  for (std::uint64_t i = 1; i <= 2; ++i)
    ASSERT_EQ(queue.push(append_message(i), kT0), Admission::kQueued);
  ASSERT_EQ(take_and_settle(queue), (std::vector<std::uint64_t>{1, 2}));
  queue.write_unconfirmed();  // a stream's first write, not yet accepted
  for (std::uint64_t i = 3; i <= 6; ++i)
    ASSERT_EQ(queue.push(append_message(i), kT0), Admission::kQueued);
  EXPECT_EQ(queue.held_messages(), 6u);
  EXPECT_EQ(queue.push(append_message(7), kT0), Admission::kFull);

  queue.unconfirmed_sent(kT0 + 1ms);  // accepted: two leave
  EXPECT_EQ(queue.counters().sent_messages, 2u);
  EXPECT_EQ(queue.counters().last_send_ok, kT0 + 1ms);
  ASSERT_EQ(take_and_settle(queue), (std::vector<std::uint64_t>{3, 4}));
  for (std::uint64_t i = 8; i <= 9; ++i)
    ASSERT_EQ(queue.push(append_message(i), kT0), Admission::kQueued);
  EXPECT_EQ(queue.push(append_message(10), kT0), Admission::kFull);  // 3, 4 are being written
  EXPECT_EQ(queue.counters().dropped_queue_full, 2u);

  queue.write_sent(kT0);
  EXPECT_EQ(queue.push(append_message(11), kT0), Admission::kQueued);
  EXPECT_EQ(drain(queue), (std::vector<std::uint64_t>{5, 6, 8, 9, 11}));
  EXPECT_EQ(queue.held_messages(), 0u);
  EXPECT_EQ(queue.held_bytes(), 0u);
}

TEST(LaneQueue, ByteBoundCountsEveryEntryAndHeader) {
  const std::size_t one = kQueuedMessageHeaderBytes + raft::Entry::kEntryOverheadBytes + 100;
  EXPECT_EQ(queued_bytes(append_message(1, 100)), one);
  LaneQueue queue(test_limits(100, 2 * one));
  ASSERT_EQ(queue.push(append_message(1, 100), kT0), Admission::kQueued);
  ASSERT_EQ(queue.push(append_message(2, 100), kT0), Admission::kQueued);
  EXPECT_EQ(queue.held_bytes(), 2 * one);
  // Not even an entry-less message fits now, while the message bound is far away.
  EXPECT_EQ(queue.push(control_message(raft::MessageType::kAppend, 3), kT0), Admission::kFull);
  EXPECT_EQ(queue.counters().dropped_queue_full, 1u);
  EXPECT_EQ(drain(queue), (std::vector<std::uint64_t>{1, 2}));
  EXPECT_EQ(queue.held_bytes(), 0u);
}

TEST(LaneQueue, FullQueueDropsTheNewMessageAndKeepsTheQueuedOnes) {
  LaneQueue queue(test_limits(3));
  for (std::uint64_t i = 1; i <= 5; ++i) queue.push(append_message(i), kT0);
  EXPECT_EQ(queue.counters().dropped_queue_full, 2u);
  EXPECT_EQ(drain(queue), (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_EQ(queue.counters().sent_messages, 3u);
}

TEST(LaneQueue, EntriesLargerThanAMessageAreRefusedAsOversize) {
  LaneQueue queue(test_limits(10));
  const std::size_t largest = queue.limits().max_message_bytes - raft::Entry::kEntryOverheadBytes;
  EXPECT_EQ(queue.push(append_message(1, largest + 1), kT0), Admission::kOversize);
  EXPECT_EQ(queue.counters().dropped_oversize, 1u);
  EXPECT_EQ(queue.held_messages(), 0u);
  EXPECT_EQ(queue.held_bytes(), 0u);
  EXPECT_EQ(queue.push(append_message(2, largest), kT0), Admission::kQueued);
  EXPECT_EQ(queue.counters().dropped_queue_full, 0u);
}

TEST(BatchPlan, AWriteStaysWithinTheMessageSizeUnlessOneMessageAloneIsLarger) {
  LaneQueueLimits limits = test_limits(10);
  limits.max_message_bytes = 100;
  limits.batch_framing_bytes = 6;
  BatchPlan two(limits);
  EXPECT_EQ(two.add(44), Verdict::kAdd);  // 50 with framing
  EXPECT_EQ(two.add(44), Verdict::kAdd);  // 100: exactly the bound
  EXPECT_EQ(two.add(0), Verdict::kFull);  // 106
  EXPECT_EQ(two.kept(), 2u);

  BatchPlan alone(limits);
  EXPECT_EQ(alone.add(101), Verdict::kOversize);  // larger than any write may be
  EXPECT_EQ(alone.add(100), Verdict::kAdd);       // alone it may exceed the bound by its framing
  EXPECT_EQ(alone.add(1), Verdict::kFull);
  EXPECT_EQ(alone.kept(), 1u);
  EXPECT_EQ(alone.verdicts(),
            (std::vector<Verdict>{Verdict::kOversize, Verdict::kAdd, Verdict::kFull}));
}

TEST(LaneQueue, SettlingABatchDropsTheOversizeAndPutsTheRestBackInOrder) {
  LaneQueueLimits limits = test_limits(10);
  limits.max_batch_messages = 5;
  limits.max_message_bytes = 1000;
  LaneQueue queue(limits);
  for (std::uint64_t i = 1; i <= 6; ++i)
    ASSERT_EQ(queue.push(append_message(i), kT0), Admission::kQueued);
  const std::size_t held_before = queue.held_bytes();
  ASSERT_EQ(contexts(queue.take_batch()), (std::vector<std::uint64_t>{1, 2, 3, 4, 5}));
  BatchPlan plan(queue.limits());
  ASSERT_EQ(plan.add(400), Verdict::kAdd);        // 1
  ASSERT_EQ(plan.add(5000), Verdict::kOversize);  // 2: encoded larger than a message may be
  ASSERT_EQ(plan.add(400), Verdict::kAdd);        // 3
  ASSERT_EQ(plan.add(400), Verdict::kFull);       // 4, and 5 unread, wait for the next write
  queue.settle_batch(plan);
  EXPECT_EQ(contexts(queue.writing()), (std::vector<std::uint64_t>{1, 3}));
  EXPECT_EQ(queue.counters().dropped_oversize, 1u);
  EXPECT_EQ(queue.held_messages(), 5u);
  EXPECT_EQ(queue.held_bytes(), held_before - queued_bytes(append_message(2)));
  queue.write_sent(kT0);
  EXPECT_EQ(drain(queue), (std::vector<std::uint64_t>{4, 5, 6}));
}

TEST(LaneQueue, KeepsArrivalOrderAcrossFailedWritesAndRefusedStreams) {
  LaneQueue queue(test_limits(10));
  for (std::uint64_t i = 1; i <= 3; ++i) queue.push(append_message(i), kT0);
  ASSERT_EQ(take_and_settle(queue), (std::vector<std::uint64_t>{1, 2}));
  queue.write_unconfirmed();
  queue.push(append_message(4), kT0);
  queue.unconfirmed_failed();  // the peer refused the stream
  ASSERT_EQ(take_and_settle(queue), (std::vector<std::uint64_t>{1, 2}));
  queue.write_failed();  // the next stream broke during the write
  queue.push(append_message(5), kT0);
  EXPECT_EQ(queue.counters().sent_messages, 0u);
  EXPECT_EQ(queue.held_messages(), 5u);
  EXPECT_EQ(drain(queue), (std::vector<std::uint64_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(queue.counters().sent_messages, 5u);
}

TEST(LaneQueue, ExpiresTheMessagesOlderThanTheAgeBoundRequeuedOnesFirst) {
  LaneQueue queue(test_limits(10));
  queue.push(append_message(1), kT0);
  queue.push(append_message(2), kT0 + 600ms);
  queue.expire(kT0 + 1000ms);  // exactly the bound: still young enough
  EXPECT_EQ(queue.held_messages(), 2u);
  queue.expire(kT0 + 1001ms);
  EXPECT_EQ(queue.held_messages(), 1u);
  EXPECT_EQ(queue.counters().dropped_expired, 1u);

  ASSERT_EQ(take_and_settle(queue), (std::vector<std::uint64_t>{2}));
  queue.push(append_message(3), kT0 + 1500ms);
  queue.write_failed();  // 2 goes back in front of 3, and is the older one
  queue.expire(kT0 + 1601ms);
  EXPECT_EQ(queue.counters().dropped_expired, 2u);
  EXPECT_EQ(queue.held_bytes(), queued_bytes(append_message(3)));
  EXPECT_EQ(drain(queue), (std::vector<std::uint64_t>{3}));
}

TEST(LaneQueue, NextBatchExceedsCountsOnlyTheNextBatch) {
  LaneQueue queue(test_limits(10));  // two messages per batch
  const std::size_t one = queued_bytes(append_message(1, 100));
  EXPECT_FALSE(queue.next_batch_exceeds(0));  // nothing queued
  for (std::uint64_t i = 1; i <= 3; ++i) queue.push(append_message(i, 100), kT0);
  EXPECT_FALSE(queue.next_batch_exceeds(2 * one));
  EXPECT_TRUE(queue.next_batch_exceeds(2 * one - 1));
}

TEST(LaneQueue, AfterCloseNewMessagesAreRefusedUncountedAndReturnedOnesDropped) {
  LaneQueue queue(test_limits(10));
  for (std::uint64_t i = 1; i <= 3; ++i) queue.push(append_message(i), kT0);
  ASSERT_EQ(take_and_settle(queue), (std::vector<std::uint64_t>{1, 2}));
  queue.close();
  EXPECT_TRUE(queue.closed());
  EXPECT_EQ(queue.push(append_message(4), kT0), Admission::kClosed);
  EXPECT_EQ(queue.counters().dropped_queue_full, 0u);
  queue.write_failed();
  EXPECT_EQ(queue.counters().dropped_send_failed, 2u);
  EXPECT_EQ(queue.held_messages(), 1u);  // 3 was never written
  EXPECT_EQ(queue.held_bytes(), queued_bytes(append_message(3)));
  queue.clear();
  EXPECT_EQ(queue.held_messages(), 0u);
  EXPECT_EQ(queue.held_bytes(), 0u);
  EXPECT_FALSE(queue.has_queued());
}

}  // namespace
}  // namespace raftlog::server

// Helpers of the snapshot chunk tests (snapshot_chunks_test.cpp, snapshot_resume_test.cpp,
// snapshot_splice_*_test.cpp, snapshot_partial_file_test.cpp): snapshot messages with distinct
// bytes, a lane's limits, and chunks as a receiver decodes them.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "raftlog/peer/v1/peer.pb.h"
#include "server/message_codec.h"
#include "server/peer_queue.h"
#include "server/snapshot_chunks.h"
#include "util/crc32c.h"
#include "util/prng.h"

namespace raftlog::server::snapshot_testing {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
namespace pb = raftlog::peer::v1;

inline const Clock::time_point kT0 = Clock::time_point(1000s);

// Bytes that differ at every position, so a chunk at the wrong offset cannot pass for another.
inline std::string snapshot_data(std::size_t size, std::uint64_t seed) {
  util::SplitMix64Prng prng(seed);
  std::string data(size, '\0');
  for (char& c : data) c = static_cast<char>(prng.below(256));
  return data;
}

inline raft::Message snapshot_message(raft::NodeId from, raft::Term term, raft::Index index,
                                      std::string data) {
  raft::Message message;
  message.type = raft::MessageType::kSnapshot;
  message.from = from;
  message.to = 2;
  message.term = term;
  message.commit = index;
  raft::Snapshot& snapshot = message.snapshot.emplace();
  snapshot.index = index;
  snapshot.term = term;
  snapshot.conf.voters = {1, 2, 3};
  snapshot.conf.addresses = {{1, "127.0.0.1:7001"}, {3, "127.0.0.1:7003"}};
  snapshot.data = std::move(data);
  return message;
}

inline LaneQueueLimits append_lane_limits() {
  LaneQueueLimits limits;
  limits.max_messages = 4096;
  limits.max_bytes = 64u << 20;
  limits.max_message_bytes = 8u << 20;
  limits.max_batch_messages = 64;
  limits.batch_framing_bytes = 6;
  limits.max_age = 2000ms;
  return limits;
}

// What a receiver decodes from one queued item after it crossed the wire.
inline SnapshotChunk through_the_wire(const QueuedMessage& item) {
  pb::RaftMessage wire;
  encode_snapshot_chunk(item.message, item.chunk->place, item.chunk->length, "c", &wire,
                        item.chunk->splice);
  pb::RaftMessage parsed;
  EXPECT_TRUE(parsed.ParseFromString(wire.SerializeAsString()));
  EXPECT_TRUE(is_snapshot_chunk(parsed));
  SnapshotChunk chunk;
  EXPECT_EQ(decode_snapshot_chunk(std::move(parsed), MessageLimits(), &chunk), "");
  return chunk;
}

// Sends every chunk the lane makes through the wire (each write succeeds) and returns them as the
// receiver decodes them.
inline std::vector<SnapshotChunk> drain(LaneQueue& lane) {
  std::vector<SnapshotChunk> chunks;
  for (int write = 0; write < 1000 && lane.has_queued(); ++write) {
    lane.take_batch();
    for (const QueuedMessage& item : lane.writing()) chunks.push_back(through_the_wire(item));
    BatchPlan plan(lane.limits());
    for (std::size_t i = 0; i < lane.writing().size(); ++i) plan.add(kSnapshotChunkBytes + 4096);
    lane.settle_batch(plan);
    lane.write_sent(kT0);
  }
  return chunks;
}

// Sends `message` through a lane (every write succeeds) and returns its chunks as the receiver
// decodes them; checks the window on the way.
inline std::vector<SnapshotChunk> chunks_of(const raft::Message& message) {
  LaneQueue lane(append_lane_limits());
  const std::uint32_t crc = util::crc32c::value(message.snapshot->data.view());
  EXPECT_EQ(lane.push_snapshot(message, crc, kT0), LaneQueue::Admission::kQueued);
  std::vector<SnapshotChunk> chunks;
  for (int write = 0; write < 1000 && lane.has_queued(); ++write) {
    lane.take_batch();
    std::size_t window = 0;
    for (const QueuedMessage& item : lane.writing()) {
      EXPECT_TRUE(item.chunk.has_value());
      window += item.chunk->length;
      chunks.push_back(through_the_wire(item));
    }
    EXPECT_LE(window, kSnapshotWindowBytes);
    BatchPlan plan(lane.limits());
    for (std::size_t i = 0; i < lane.writing().size(); ++i) plan.add(kSnapshotChunkBytes + 4096);
    lane.settle_batch(plan);
    lane.write_sent(kT0);
  }
  EXPECT_FALSE(lane.has_queued());
  EXPECT_EQ(lane.held_bytes(), 0u);
  const std::optional<SnapshotSendProgress> progress = lane.snapshot_progress();
  EXPECT_TRUE(progress.has_value());
  if (progress) {
    EXPECT_EQ(progress->state, SnapshotSendProgress::State::kSent);
    EXPECT_EQ(progress->sent_bytes, message.snapshot->data.size());
  }
  return chunks;
}

}  // namespace raftlog::server::snapshot_testing

// Helpers of the tests of a new leader's continuation (snapshot_splice_transfer_test.cpp,
// snapshot_splice_restart_test.cpp): two leaders' framed encodings of one snapshot point, a
// follower holding the old leader's first chunks, and what the new leader's lane sends it.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "replica/snapshot_frames.h"
#include "server/peer_queue.h"
#include "server/snapshot_chunks.h"
#include "snapshot_chunk_support.h"
#include "util/crc32c.h"

namespace raftlog::server::snapshot_testing {

inline constexpr raft::Index kPoint = 90'000;

// One leader's encoding at the point: the same head as every leader's, its own clients (ids from
// `first_id` by `step`), digests (`salt`) and trailer. About 3.5 MB: four chunks, fourteen blocks.
// `version`: framed 4, or 6 (the head also carries the running max stamp as of the point).
inline std::string leader_encoding(std::uint64_t first_id, std::uint64_t step, std::uint32_t salt,
                                   const std::string& extra_topic = "",
                                   std::uint32_t version = replica::kFramedSnapshotVersion) {
  replica::SnapshotData data;
  data.index = kPoint;
  data.term = 2;
  data.conf.voters = {1, 2, 3};
  data.conf.addresses = {{1, "127.0.0.1:7001"}, {3, "127.0.0.1:7003"}};
  data.topics = {{"orders", 44}};
  if (!extra_topic.empty()) data.topics.push_back({extra_topic, 1});
  data.timestamp_floor_ms = 1'700'000'000'000 + salt;
  data.stamp_at_index = true;  // left out of version 4
  data.stamp_max_ms = 1'699'999'999'000;
  data.section = "leader " + std::to_string(salt);
  data.dedup_view_start = 100 + salt;
  for (std::uint64_t c = 0; c < 3000; ++c) {
    replica::DedupTable::ClientState client{first_id + c * step, 1, {}};
    for (std::uint64_t a = 0; a < 32; ++a) {
      const std::uint64_t at = 1 + (c * 32 + a) % 80'000;
      client.appends.push_back({a + 1, {at, at, 2}, static_cast<std::uint32_t>(c + a) ^ salt});
    }
    data.dedup_clients.push_back(std::move(client));
  }
  return replica::encode_framed_snapshot_data(data, replica::kSnapshotBlockBytes, version).bytes;
}

// A snapshot message at the point (its last entry of term 2) carrying `data`, sent at `term`.
inline raft::Message at_point(raft::NodeId from, raft::Term term, std::string data) {
  raft::Message message = snapshot_message(from, term, kPoint, std::move(data));
  message.snapshot->term = 2;
  return message;
}

// The old leader (node 1, term 2) sent the follower its first `chunks` chunks.
struct FollowerWithPartial {
  std::string old_data;
  SnapshotReassembler reassembler;
  std::string problem;

  explicit FollowerWithPartial(std::size_t chunks = 2,
                               std::uint32_t version = replica::kFramedSnapshotVersion)
      : old_data(leader_encoding(2, 3, 0, "", version)) {
    const std::vector<SnapshotChunk> sent = chunks_of(at_point(1, 2, old_data));
    for (std::size_t i = 0; i < chunks; ++i) {
      EXPECT_FALSE(reassembler.add(sent[i], kT0, &problem).has_value());
    }
  }
};

// The new leader (node 3, term 3) sends its own data to a follower whose receipt is `receipt`:
// what its lane sends.
struct NewLeaderSend {
  LaneQueue lane{append_lane_limits()};
  std::vector<SnapshotChunk> chunks;
  NewLeaderSend(const std::string& data, const std::optional<SnapshotReceipt>& receipt,
                bool with_continuation = true) {
    const raft::Message message = at_point(3, 3, data);
    const std::uint32_t crc = util::crc32c::value(data);
    std::optional<SnapshotContinuation> continuation;
    if (with_continuation && receipt && receipt->splice) {
      continuation = make_snapshot_continuation(message.snapshot->data, *receipt->splice);
    }
    EXPECT_EQ(
        lane.push_snapshot(message, crc, kT0, receipt, continuation ? &*continuation : nullptr),
        LaneQueue::Admission::kQueued);
    chunks = drain(lane);
  }
};

// A new leader's continuation for a follower holding the old leader's first chunks: the follower,
// its receipt (naming a splice point), the new leader's message at the point, the identity of its
// data and the continuation cut for that receipt (none when the receipt names no splice point:
// tests assert `first` before they use it).
struct ContinuationSetUp {
  FollowerWithPartial follower;
  std::optional<SnapshotReceipt> receipt = follower.reassembler.receipt();
  raft::Message message = at_point(3, 3, leader_encoding(3, 4, 99));
  SnapshotIdentity data{
      kPoint, 2, message.snapshot->data.size(), util::crc32c::value(message.snapshot->data.view()),
      replica::snapshot_data_digest(message.snapshot->data.view(),
                                    util::crc32c::value(message.snapshot->data.view()))};
  std::optional<SnapshotContinuation> first =
      receipt && receipt->splice
          ? std::optional(make_snapshot_continuation(message.snapshot->data, *receipt->splice))
          : std::nullopt;
};

}  // namespace raftlog::server::snapshot_testing

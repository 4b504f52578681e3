// The set-up the trim-round and round-profile tests share: a single-voter replica (node 1) over a
// directory and an Env of the test's, async flushes (the store's own flusher), small segments, no
// preallocation, ticked to leadership; and its load: entries of many topics, or of plain bytes.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "derived/envelope.h"
#include "replica/replica.h"
#include "store/env.h"

namespace raftlog::replica::testing {

// A single node sends nothing.
struct NullSender final : MessageSender {
  void send(raft::Message) override {}
};

inline ReplicaConfig single_node_leader_config(const std::string& dir, store::Env* env,
                                               std::uint64_t segment_size_bytes,
                                               std::size_t max_entry_size_bytes) {
  ReplicaConfig c;
  c.node_id = 1;
  c.members = {{1, "127.0.0.1:1"}};
  c.data_dir = dir;
  c.store.env = env;
  c.store.flush_mode = store::FlushMode::kAsync;
  c.store.segment_size_bytes = segment_size_bytes;
  c.store.preallocate_next_segment = false;
  c.store.max_entry_size_bytes = max_entry_size_bytes;
  c.raft.id = 1;
  c.raft.initial_conf.voters = {1};
  return c;
}

// Opens it into *out and ticks it to leadership (call with ASSERT_NO_FATAL_FAILURE).
inline void open_single_node_leader(ReplicaConfig config, ReplicaDeps deps,
                                    std::unique_ptr<Replica>* out) {
  NodeError error;
  *out = Replica::open(std::move(config), std::move(deps), &error);
  ASSERT_NE(*out, nullptr) << error.message;
  Replica& replica = **out;
  for (int tick = 0; tick < 100 && replica.role() != raft::Role::kLeader; ++tick) {
    replica.tick();
    replica.process();
  }
  ASSERT_EQ(replica.role(), raft::Role::kLeader);
}

// One append of `payloads` (envelopes or not), answered ok before it returns (bounded rounds).
inline void append_and_wait(Replica& replica, std::vector<std::string> payloads, bool has_envelopes,
                            Clock::time_point deadline) {
  Replica::AppendRequest request;
  request.payloads = std::move(payloads);
  request.has_envelopes = has_envelopes;
  std::optional<AppendResult> answer;
  request.done = [&answer](AppendResult result) { answer = std::move(result); };
  request.deadline = deadline;
  replica.append(std::move(request));
  for (int round = 0; round < 100 && !answer; ++round) replica.process();
  ASSERT_TRUE(answer.has_value()) << "no answer to the append";
  ASSERT_TRUE(answer->error.ok()) << answer->error.message;
}

// The store flusher's checkpoint after a load, as its periodic one comes on an idle log: asked
// (CommitLog::request_checkpoint) and waited for, bounded by 5 s, so that a trim before `before`
// finds it covering its truncation and does not wait rounds for it (TrimCheckpointTest is about
// that wait). A store with its own flusher thread.
inline void checkpoint_by_the_flusher(Replica& replica, std::uint64_t before) {
  replica.log().request_checkpoint();
  for (int wait = 0; wait < 5000 && !replica.log().prefix_checkpointed(before); ++wait) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(replica.log().prefix_checkpointed(before)) << "no checkpoint from the flusher";
}

// `topics` entries, each of its own topic ("topic-<i>" and 100 't's) with a `body_bytes` body, in
// appends of 100.
inline void append_topics(Replica& replica, int topics, std::size_t body_bytes,
                          Clock::time_point deadline) {
  for (int from = 0; from < topics; from += 100) {
    std::vector<std::string> payloads;
    for (int i = from; i < from + 100 && i < topics; ++i) {
      std::string payload;
      const std::string topic = "topic-" + std::to_string(i) + std::string(100, 't');
      derived::encode_envelope(0, topic, {}, std::string(body_bytes, 'x'), &payload);
      payloads.push_back(std::move(payload));
    }
    ASSERT_NO_FATAL_FAILURE(append_and_wait(replica, std::move(payloads), true, deadline))
        << "the append at " << from;
  }
}

// Where a trim of every sealed segment makes the log start.
inline std::uint64_t sealed_end(const Replica& replica) {
  std::uint64_t end = 0;
  for (const store::CommitLog::SegmentInfo& segment : replica.log().segments()) {
    if (!segment.active) end = segment.last_index + 1;
  }
  return end;
}

}  // namespace raftlog::replica::testing

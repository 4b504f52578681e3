// The settings of a replica that tests drive by hand as follower 2 of a 3-node cluster {1, 2, 3}:
// sync flushes over a stepped store (the test takes every flush cycle), minimum-size segments, over
// `env`. Callers adjust what their test is about. Also what such a follower runs with (a sender, a
// disk with room, a clock that stands still) and leader 1's AppendEntries to it.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "replica/replica.h"
#include "store/env.h"

namespace raftlog::replica::testing {

inline ReplicaConfig stepped_follower_config(store::Env* env) {
  ReplicaConfig c;
  c.node_id = 2;
  c.members = {{1, "n1"}, {2, "n2"}, {3, "n3"}};
  c.data_dir = "/data";
  c.store.flush_mode = store::FlushMode::kSync;
  c.store.background_work = store::BackgroundWork::kStepped;
  c.store.segment_size_bytes = store::Options::kMinSegmentSizeBytes;
  c.store.max_entry_size_bytes = 16 << 10;
  c.store.env = env;
  c.raft.id = 2;
  c.raft.initial_conf.voters = {1, 2, 3};
  return c;
}

// Keeps every message the follower sends.
struct RecordingSender final : MessageSender {
  void send(raft::Message message) override { sent.push_back(std::move(message)); }
  std::vector<raft::Message> sent;
};

// A disk with room to spare: no watermark is ever crossed.
struct RoomyDisk final : DiskProbe {
  std::optional<DiskSpace> probe() override { return DiskSpace{1ULL << 40, 0.10}; }
};

// The follower's dependencies: `sender`, `disk` (neither owned) and a clock that stands still an
// hour past its epoch (the tests step the replica; nothing may time out by itself).
inline ReplicaDeps stepped_follower_deps(MessageSender* sender, DiskProbe* disk) {
  ReplicaDeps deps;
  deps.sender = sender;
  deps.disk = disk;
  deps.clock = [] { return Clock::time_point() + std::chrono::hours(1); };
  return deps;
}

// Entry `index` of term 1: client 100 + index's append (sequence 1) of `payload`, as the logs the
// trim and install tests build hold.
inline raft::Entry client_entry(raft::Index index, std::string payload) {
  raft::Entry entry;
  entry.index = index;
  entry.term = 1;
  entry.client_id = 100 + index;
  entry.sequence = 1;
  entry.payload = std::move(payload);
  return entry;
}

// Leader 1's AppendEntries of term 1 to follower 2: `entries` after `prev_index` (of term 1, or 0
// at the log's start), with the leader's commit index `commit`.
inline raft::Message leader_append(raft::Index prev_index, std::vector<raft::Entry> entries,
                                   raft::Index commit) {
  raft::Message append;
  append.type = raft::MessageType::kAppend;
  append.from = 1;
  append.to = 2;
  append.term = 1;
  append.index = prev_index;
  append.log_term = prev_index > 0 ? 1 : 0;
  append.commit = commit;
  append.entries = std::move(entries);
  return append;
}

}  // namespace raftlog::replica::testing

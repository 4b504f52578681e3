// The settings of a replica that tests drive by hand as follower 2 of a 3-node cluster {1, 2, 3}:
// sync flushes over a stepped store (the test takes every flush cycle), minimum-size segments, over
// `env`. Callers adjust what their test is about.
#pragma once

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

}  // namespace raftlog::replica::testing

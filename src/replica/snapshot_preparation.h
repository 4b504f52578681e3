// A follower's received snapshot on its way to the install (replica_snapshot_receive.cpp,
// replica_snapshot.cpp): what the off-loop preparation makes of it, and the kSnapshot message
// that waits for it. The Replica holds at most one of each (moved out of replica.h to keep it
// well under the project's ~800 lines: review of offloop4 L5).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "raft/types.h"
#include "replica/dedup_table.h"
#include "replica/snapshot_data.h"
#include "replica/snapshot_stats.h"
#include "replica/topic_offsets.h"
#include "store/status.h"

namespace raftlog::replica {

// What the off-loop job made of a received snapshot: its data decoded and checked (problem: why
// not installable), SNAPSHOT.install written and synced (write), the new tables built; the
// install (install_snapshot) takes it for the same buffer only. At most one, dropped (its file
// removed) at the end of the process() that stepped its message when the core did not install it.
struct PreparedSnapshot {
  raft::Payload bytes;  // the message's data buffer, shared
  std::string problem;
  bool file_written = false;  // SNAPSHOT.install may exist (whole when `write` is ok)
  store::Status write;
  SnapshotData data;  // without its dedup clients: they are in `dedup`
  std::unique_ptr<DedupTable> dedup;
  TopicOffsets topics;
  // `topics` as of the point (table_at), what the install's TOPICSTATE holds: copied here, off
  // the loop, and moved into the install's write (review offloop L10: the install round copied
  // the whole table on the loop, 4-34 ms with 90,000 topics).
  std::vector<TopicOffsets::TopicNext> topic_state_table;
  SnapshotStats::InstallTimes times;
};

// The kSnapshot being prepared, stepped into the core once its preparation is back; at most one
// (a newer one replaces it).
struct IncomingSnapshot {
  std::uint64_t generation = 0;  // a late `done` of an abandoned preparation is ignored
  raft::Message message;
  bool started = false;  // handed off (else it waits for the outstanding job's `done`)
  // Set when abandoned: a job not started yet skips its work.
  std::shared_ptr<std::atomic<bool>> cancelled = std::make_shared<std::atomic<bool>>(false);
};

}  // namespace raftlog::replica

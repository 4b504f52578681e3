// What a node's dispatcher (src/server/dispatcher.h) spent its thread on since it started: the
// metrics raftlog_derived_persist* and raftlog_derived_apply_seconds_total (docs/metrics.md), and
// raftlog-bench topics --phases live, which reads them to say where a lagging dispatcher's time goes.
#pragma once

#include <cstdint>

namespace raftlog::server {

struct DispatchStats {
  std::uint64_t persists = 0;       // persists of the indexes that wrote their cursor
  std::uint64_t persist_syncs = 0;  // file and directory syncs they ran (not the cursor's own)
  double persist_seconds = 0;       // the dispatcher thread's time in persist steps
  double persist_begin_seconds = 0;  // ... of which in begins (writing records: not sliced)
  double apply_seconds = 0;         // its time reading committed entries and applying them
  double last_persist_seconds = 0;  // the last finished persist, from its start to its cursor
};

}  // namespace raftlog::server

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
  // ... of which writing records to their files: a persist's begin captures them (memory) and its
  // slices write them, one segment file per step, before its syncs (sliced since 2026-12-07)
  double persist_begin_seconds = 0;
  double apply_seconds = 0;         // its time reading committed entries and applying them
  double last_persist_seconds = 0;  // the last finished persist, from its start to its cursor
};

}  // namespace raftlog::server

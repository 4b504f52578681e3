// The families of the store and of the derived indexes (metrics_families.h; their meaning:
// docs/metrics.md).
#include <sys/statvfs.h>

#include <array>

#include "server/metrics_families.h"

namespace raftlog::server::metrics {

namespace {

constexpr std::array<store::RecoveryMode, 3> kRecoveryModes = {
    store::RecoveryMode::kFresh, store::RecoveryMode::kNormal, store::RecoveryMode::kAbnormal};

}  // namespace

StoreMetrics::StoreMetrics(FamilyBuilder& builder) {
  fsync =
      &builder.histogram("raftlog_store_fsync_duration_seconds",
                         "Duration of one flush cycle's sync calls.", exponential(0.0001, 2, 16));
  group_commit =
      &builder.histogram("raftlog_store_group_commit_entries",
                         "Entries made durable by one flush cycle.", exponential(1, 2, 14));
  readings_.add_gauges(
      builder,
      {{"raftlog_store_written_index", "Last entry written to the segment.",
        &field<&NodeStatus::last_index>},
       {"raftlog_store_flushed_index", "Last entry known durable.",
        &field<&NodeStatus::flushed_index>},
       {"raftlog_store_corrupt_index",
        "First entry found corrupt by the scrub or a read (0 = none).",
        &field<&NodeStatus::corrupt_index>},
       {"raftlog_store_scrub_verified_bytes", "Durable bytes the background scrub verified.",
        &field<&NodeStatus::scrub_bytes_verified>},
       {"raftlog_store_scrub_passes", "Completed scrub passes over the durable log.",
        &field<&NodeStatus::scrub_passes>},
       {"raftlog_store_segments", "Data segment files on disk.",
        &field<&NodeStatus::store_segments>},
       {"raftlog_store_disk_bytes", "Bytes of segment and index files on disk.",
        &field<&NodeStatus::store_disk_bytes>}});
  disk_free_ratio_ = &builder.gauge("raftlog_store_disk_free_ratio",
                                    "Free space of the data directory's file system, 0..1.");
  watermark_ =
      &builder.gauge("raftlog_store_disk_watermark_exceeded",
                     "1 while disk use is past the high watermark (a leader refuses appends, "
                     "a follower reports no room).");
  segments_deleted = &builder.counter("raftlog_store_segments_deleted_total",
                                      "Segments removed by retention or trim.");
  readings_.add_gauges(
      builder, {{"raftlog_store_recovery_duration_seconds", "How long the start-up recovery took.",
                 [](const NodeStatus& status) {
                   return std::chrono::duration<double>(status.recovery_duration).count();
                 }}});
  auto& modes =
      builder.gauges("raftlog_store_recovery_mode", "1 for the mode the last start-up used.");
  for (store::RecoveryMode mode : kRecoveryModes) {
    recovery_mode_[static_cast<std::size_t>(mode)] = &modes.Add({{"mode", store::to_string(mode)}});
  }
}

void StoreMetrics::refresh(const NodeStatus& status) const {
  readings_.refresh(status);
  for (store::RecoveryMode mode : kRecoveryModes) {
    recovery_mode_[static_cast<std::size_t>(mode)]->Set(status.recovery_mode == mode ? 1 : 0);
  }
}

void StoreMetrics::refresh_disk(const std::string& data_dir) const {
  struct statvfs fs {};
  if (::statvfs(data_dir.c_str(), &fs) == 0 && fs.f_blocks > 0) {
    disk_free_ratio_->Set(static_cast<double>(fs.f_bavail) / static_cast<double>(fs.f_blocks));
  }
}

DerivedMetrics::DerivedMetrics(FamilyBuilder& builder) {
  readings_.add_gauges(
      builder,
      {{"raftlog_derived_lag_entries",
        "Committed entries the derived indexes (topics, keys, time) lack yet.",
        &field<&NodeStatus::derived_lag_entries>},
       {"raftlog_derived_unqueued_entries",
        "Entries of topics beyond the indexed-topic bound, not queued, since the indexes opened.",
        &field<&NodeStatus::derived_unqueued_entries>},
       {"raftlog_groups_applied_index", "Last log index the consumer group table applied.",
        &field<&NodeStatus::groups_applied_through>},
       {"raftlog_groups_retention_hold_index",
        "Retention keeps entries from this index for the consumer group table (0 = no hold).",
        &field<&NodeStatus::groups_retention_hold>},
       {"raftlog_groups_bad_commits",
        "Group-commit entries the group table could not decode, since start.",
        &field<&NodeStatus::groups_bad_commits>},
       {"raftlog_groups_refused_commits",
        "Group commits past the table's stored bounds, since start.",
        &field<&NodeStatus::groups_refused_commits>},
       {"raftlog_derived_stopped",
        "1 when the derived indexes stopped on an error (see the node's log).",
        [](const NodeStatus& status) { return status.derived_problem.empty() ? 0.0 : 1.0; }}});
  dispatch_.add_totals(
      builder,
      {{"raftlog_derived_persists_total",
        "Persists of the derived indexes that wrote their cursor, since start.",
        &field<&DispatchStats::persists>},
       {"raftlog_derived_persist_syncs_total",
        "File and directory syncs those persists ran (one per topic file written), since start.",
        &field<&DispatchStats::persist_syncs>},
       {"raftlog_derived_persist_seconds_total",
        "Seconds the dispatcher's thread spent persisting the derived indexes, since start.",
        &field<&DispatchStats::persist_seconds>},
       {"raftlog_derived_persist_begin_seconds_total",
        "Seconds of those spent on persists' records before their syncs (captured at a persist's "
        "begin, written in its slices), since start.",
        &field<&DispatchStats::persist_begin_seconds>},
       {"raftlog_derived_apply_seconds_total",
        "Seconds the dispatcher's thread spent reading and applying committed entries, since start.",
        &field<&DispatchStats::apply_seconds>}});
  dispatch_.add_gauges(
      builder, {{"raftlog_derived_last_persist_seconds",
                 "Seconds the last finished persist of the derived indexes took, start to cursor.",
                 &field<&DispatchStats::last_persist_seconds>}});
}

}  // namespace raftlog::server::metrics

// Replica: the topic-table scan that moves "the topic table as of the first index - 1" over the
// segments a trim deletes, in bounded slices (replica.h, TopicScan; docs/raft.md, "Snapshots").
//
// The same reading moves "the configuration in force at the first index - 1" (first_index_conf_):
// the newest kConfig entry among the deleted entries, if any, is the one in force at the new first
// index - 1 (docs/raft.md, "Snapshots").
//
// Why slices: the table a snapshot at the first index - 1 carries is the old one advanced by every
// entry the trim deletes, and those entries must be read (their envelopes name topic and offset)
// while they are still on disk. A default segment is 1 GiB; reading it in one go would stall the
// replica's loop for seconds (no heartbeats: elections on every retention pass). So each loop round
// reads at most ReplicaConfig::topic_scan_slice_bytes, and a trim deletes only whole segments the
// scan has finished. A slice is bounded by time too: it stops once the round's trim budget
// (trim_round_budget_ms) is spent, after one batch at least (drills5 M2: an 8 MiB slice of entries
// naming 90,000 topics took 0.3 s on a loaded machine, past an election timeout). The next slice
// goes on from the entry after the last one read (`running` keeps the table as of it), so a slice
// cut by time reads nothing twice and skips nothing.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "derived/envelope.h"
#include "replica/replica.h"
#include "replica/store_log_reader.h"

namespace raftlog::replica {

void Replica::restart_topic_scan() {
  trim_.topic_scan.reset();
  if (!first_index_topics_) return;
  trim_.topic_scan = std::make_unique<TopicScan>();
  trim_.topic_scan->boundary = log_->first_index() - 1;
  trim_.topic_scan->boundary_table = *first_index_topics_;
  trim_.topic_scan->running.reset(trim_.topic_scan->boundary, *first_index_topics_);
  trim_.topic_scan->boundary_conf = first_index_conf_;
  trim_.topic_scan->running_conf = first_index_conf_;
  // Not known: from 0, so the trim carries the largest stamp it passes (a lower bound).
  trim_.topic_scan->boundary_stamp = first_index_stamp_.value_or(0);
  trim_.topic_scan->running_stamp = first_index_stamp_.value_or(0);
}

namespace {

// The last index of the sealed segment holding `index` (0: none, or the active one).
std::uint64_t sealed_segment_end(const std::vector<store::CommitLog::SegmentInfo>& segments,
                                 std::uint64_t index) {
  for (const store::CommitLog::SegmentInfo& segment : segments) {
    if (segment.active) break;
    if (segment.last_index >= index) return segment.last_index;
  }
  return 0;
}

// One scanned entry into the running table, stamp and configuration, as note_entry reads it: an
// envelope that does not validate counts as no topic and no stamp (as the derived indexes read it).
void record_scanned_entry(const store::EntryView& view, TopicOffsets* running,
                          std::uint64_t* running_stamp,
                          std::optional<raft::ConfState>* running_conf, std::uint64_t node_id) {
  std::string_view topic;
  std::optional<std::uint64_t> offset;
  derived::EnvelopeHeader header;
  if ((view.meta.flags & kEntryFlagEnvelope) != 0 &&
      derived::decode_envelope_header(view.payload, &header) == derived::EnvelopeDecode::kOk) {
    topic = header.topic;
    if (header.has_topic_offset) offset = header.topic_offset;
    // The raw stamp, as the derived indexes take it (not bounded by a clock like the floor).
    *running_stamp = std::max(*running_stamp, header.timestamp_ms);
  }
  (void)running->record(view.meta.index, topic, offset);
  if (view.meta.type != store::EntryType::kConfig) return;
  // Committed (a trim never passes the commit index), so the core checked it when it came: one
  // that does not decode here makes the configuration unknown, never fatal. Nor one that is not a
  // single change from the configuration the scan knew: that one was wrong (the bootstrap
  // configuration from --members edited since the log began, say), and snapshots must not carry
  // it.
  std::optional<raft::ConfState> conf = raft::decode_config(std::string(view.payload));
  if (conf && *running_conf && !raft::single_change_between(**running_conf, *conf)) {
    spdlog::warn(
        "node {}: configuration entry {} is not one change from {}, the configuration this node "
        "took for the one before it: the configuration at its first index - 1 is not known until "
        "the next configuration entry a trim passes",
        node_id, view.meta.index, raft::to_string(**running_conf));
    conf.reset();
  }
  *running_conf = std::move(conf);
}

}  // namespace

void Replica::advance_topic_scan(std::uint64_t goal, std::uint64_t budget_bytes,
                                 const std::function<bool()>& out_of_time) {
  if (!first_index_topics_) return;
  const std::uint64_t first = log_->first_index();
  // The scan must start at or after the log's start (a trim or an install moved it) and must not
  // have passed the goal (a lower trim target than the one it ran toward: its table is gone; its
  // reading past the goal too, else it could never reach it).
  if (!trim_.topic_scan || trim_.topic_scan->boundary + 1 < first ||
      trim_.topic_scan->boundary > goal || trim_.topic_scan->running.through() > goal) {
    restart_topic_scan();
  }
  // A batch is the unit of the time bound (the clock is read between batches), so it is smaller
  // than a slice's worth: 1,024 entries.
  constexpr std::size_t kBatchEntries = 1024;
  const std::vector<store::CommitLog::SegmentInfo> segments = log_->segments();
  // The boundary moves with a copy of the whole table (tens of ms with 90,000 topics).
  const auto move_boundary = [this](std::uint64_t segment_end) {
    trim_.topic_scan->boundary = segment_end;
    trim_.topic_scan->boundary_table = trim_.topic_scan->running.table_at(segment_end);
    trim_.topic_scan->boundary_conf = trim_.topic_scan->running_conf;
    trim_.topic_scan->boundary_stamp = trim_.topic_scan->running_stamp;
  };
  // A segment end the last slice reached out of time: its boundary moves first, in this round's
  // budget (review offloop3 M2: the copy after the budget was spent held the loop past it).
  bool moved = false;
  if (const std::uint64_t through = trim_.topic_scan->running.through();
      through > trim_.topic_scan->boundary && sealed_segment_end(segments, through) == through) {
    move_boundary(through);
    moved = true;
  }
  std::uint64_t spent = 0;
  bool read_a_batch = false;
  while (trim_.topic_scan->boundary < goal && spent < budget_bytes) {
    // Out of time: the next round's slice goes on from running.through() + 1. The first batch is
    // read whatever the clock says (unless the boundary moved), so that every slice moves the scan.
    if ((read_a_batch || moved) && out_of_time()) return;
    read_a_batch = true;
    const std::uint64_t next = trim_.topic_scan->running.through() + 1;
    // The end of the sealed segment holding `next`; the goal is always one's last index.
    const std::uint64_t segment_end = sealed_segment_end(segments, next);
    if (segment_end == 0 || segment_end > goal) return;  // not a sealed boundary: nothing to do
    auto batch = log_->read(next, kBatchEntries, std::max<std::uint64_t>(1, budget_bytes - spent));
    if (!batch.ok() || batch->entries.empty()) {
      const std::string problem =
          batch.ok() ? "no entry at index " + std::to_string(next) : batch.status().to_string();
      spdlog::warn(
          "node {}: reading the entries a trim deletes: {}; the topic table as of the first index "
          "- 1 is not known any more: snapshots this node sends start at its commit index",
          config_.node_id, problem);
      first_index_topics_.reset();
      first_index_conf_.reset();
      first_index_stamp_.reset();  // read only with the table: unknown with it
      trim_.topic_scan.reset();
      tell_core_trim_point_conf();
      return;
    }
    std::uint64_t last = trim_.topic_scan->running.through();
    for (const store::EntryView& view : batch->entries) {
      if (view.meta.index > segment_end) break;
      record_scanned_entry(view, &trim_.topic_scan->running, &trim_.topic_scan->running_stamp,
                           &trim_.topic_scan->running_conf, config_.node_id);
      spent += view.payload.size();
      last = view.meta.index;
    }
    trim_.topic_scan->running.committed(last);  // keeps its journal empty
    if (last != segment_end) continue;
    // At a segment end out of time: the boundary's copy waits for the next slice (above).
    if (out_of_time()) return;
    // The boundary moves only at the last segment end this slice reaches: a copy per segment,
    // with tens of thousands of topics and small segments, cost more than the reading (146 copies
    // of 30,000 topics: about 0.6 s; docs/benchmarks.md, "Trim round"). The next segment is
    // surely finished in this slice when it is sealed, within the goal and its disk bytes fit the
    // rest of the budget (they bound its payload); if the time runs out in it after all, the
    // boundary moves at its end instead.
    const auto next_finishes_too = [&] {
      for (const store::CommitLog::SegmentInfo& segment : segments) {
        if (segment.base_index != segment_end + 1) continue;
        return !segment.active && segment.last_index <= goal &&
               spent + segment.disk_bytes <= budget_bytes;
      }
      return false;
    };
    if (!next_finishes_too()) move_boundary(segment_end);
  }
}

void Replica::continue_pending_trim() {
  if (trim_.pending_before == 0) return;
  const std::uint64_t first = log_->first_index();
  const auto run_pending_trim = [this] {
    const std::uint64_t before = trim_.pending_before;
    trim_.pending_before = 0;
    trim(before, "continued:");  // deletes what the scan passed; waits again for the rest
  };
  if (trim_.deletion) {
    run_pending_trim();  // the deletion's next unlinks, or its SNAPSHOT (replica_trim_deletion.cpp)
    return;
  }
  if (trim_.pending_before <= first) {
    trim_.pending_before = 0;  // done
    return;
  }
  if (!first_index_topics_) {
    run_pending_trim();  // nothing to wait for: a trim without the table runs at once
    return;
  }
  const std::uint64_t new_first = trim_start_for(std::min(trim_.pending_before, trim_limit()));
  if (new_first <= first) {
    // Nothing whole to delete now. While the trim's write or flush is out it waits (asked again
    // next round); with nothing out it ends, as in finish_trim_call (review offloop2 M1).
    if (!pending_write_ && trim_.flush_wanted == 0) trim_.end();
    return;
  }
  // The trim reads the next slice, or deletes what the slices read so far passed, or takes its
  // next durable step: within the round's budget (trim_round_budget_ms), and waits again.
  run_pending_trim();
}

}  // namespace raftlog::replica

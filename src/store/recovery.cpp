// Opening a log directory: recovery (CRASH CASES in commit_log.h; the algorithm and its steps are
// docs/storage-format.md, "Recovery algorithm"). recover() runs one function per step:
//
//   1. remove_leftovers                    prealloc-* and discard-* files, index files without a
//                                          segment
//   2. read_checkpoint_and_select_mode     the checkpoint, the mode, the abort marker written
//      complete_reset_intent               a crashed reset: every segment replaced by the new empty
//                                          one (commit_log_reset.cpp)
//   3. open_segments                       every segment's header; a bad one after the flushed point
//                                          goes, with every later segment
//   4. complete_truncation_intent          segments above a crashed truncate_suffix's cut go
//   5. spot_check_flushed_segments         what the checkpoint vouches for, spot-checked
//                                          (verify_sealed_segment, verify_checkpoint_segment)
//   6. scan_tail                           every entry after the checkpoint validated; the cut
//   7. make_recovery_durable               flush, sync, new generation, fresh checkpoint
// After a clean shutdown the checkpoint is at the end of the log, so step 6 reads one end marker and
// recovery time does not grow with the log size.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <span>

#include "store/commit_log_impl.h"
#include "store/entry_scan.h"
#include "util/check.h"

namespace raftlog::store {

using segment_format::IndexRecord;
using segment_format::kSegmentHeaderBytes;

namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

std::string at(const Segment& segment, std::uint64_t offset) {
  return segment.data_path() + " offset " + std::to_string(offset);
}

// Rewrites the index record for a validated entry only when the stored one differs (usually it is
// already right): saves the encoding and keeps clean index pages clean.
Status ensure_index_record(Segment& segment, const entry_format::Decoded& entry,
                           std::uint64_t offset) {
  const IndexRecord expected{entry.meta.index, entry.meta.term, offset,
                             static_cast<std::uint32_t>(entry.record_bytes)};
  const auto stored = segment.index_record(entry.meta.index);
  if (stored && *stored == expected) return Status();
  return segment.write_index_record(expected);
}

}  // namespace

Status CommitLog::Impl::remove_segments_from(std::size_t position) {
  for (std::size_t i = position; i < segments_.size(); ++i) {
    Segment& segment = *segments_[i];
    // Count what is dropped (valid-looking entries), for the report.
    const ScanResult dropped =
        scan_entries(segment.data_map->data(), segment.size_bytes, kSegmentHeaderBytes,
                     segment.base_index, 0, 0, 0, max_payload_bytes(segment), nullptr);
    report_.entries_dropped += dropped.entries;
    if (dropped.entries > 0) {
      report_.highest_index_seen =
          std::max(report_.highest_index_seen, segment.base_index + dropped.entries - 1);
    }
    ++report_.segments_removed;
    spdlog::warn("raftlog store {}: recovery removes segment {} ({} valid-looking entries)", dir_,
                 segment.data_name, dropped.entries);
    RAFTLOG_RETURN_IF_ERROR(env_->remove(segment.data_path()));
    RAFTLOG_RETURN_IF_ERROR(env_->remove(segment.index_path()));
  }
  segments_.resize(std::min(position, segments_.size()));
  return Status();
}

void CommitLog::Impl::note_entries_after_cut(const Segment& segment) {
  // The entry at the cut is bad; look past it through the index records written at append time.
  // Bounded by the segment's index capacity; stops at the first missing or invalid one.
  const std::uint64_t capacity = segment_format::index_capacity_records(segment.size_bytes);
  for (std::uint64_t position = segment.entry_count + 1; position < capacity; ++position) {
    const std::uint64_t index = segment.base_index + position;
    const auto record = segment.index_record(index);
    if (!record || record->offset < kSegmentHeaderBytes || record->offset >= segment.size_bytes)
      return;
    entry_format::Decoded decoded;
    const auto result =
        entry_format::decode(segment.data_map->data() + record->offset,
                             segment.size_bytes - record->offset, max_payload_bytes(segment),
                             /*verify_crc=*/true, &decoded);
    if (result != entry_format::DecodeResult::kOk || decoded.meta.index != index) return;
    ++report_.valid_entries_after_cut;
    report_.highest_index_seen = std::max(report_.highest_index_seen, index);
  }
}

Status CommitLog::Impl::rebuild_segment_index(Segment& segment, std::uint64_t end_offset_limit,
                                              std::uint64_t max_index, std::uint64_t* end_offset,
                                              std::uint64_t* entries,
                                              std::uint64_t* last_generation) {
  Status write_status;
  const ScanResult scan = scan_entries(
      segment.data_map->data(), std::min(segment.size_bytes, end_offset_limit), kSegmentHeaderBytes,
      segment.base_index, segment.prev_term, 0, max_index + 1, max_payload_bytes(segment),
      [&](const entry_format::Decoded& entry, std::uint64_t offset) {
        write_status = ensure_index_record(segment, entry, offset);
        return write_status.ok();
      });
  RAFTLOG_RETURN_IF_ERROR(write_status);
  report_.bytes_scanned += scan.bytes;
  report_.entries_scanned += scan.entries;
  *end_offset = scan.end_offset;
  *entries = scan.entries;
  *last_generation = scan.last_generation;
  max_generation_seen_ = std::max(max_generation_seen_, scan.last_generation);
  segment.last_term = scan.last_term;
  if (scan.stop == ScanResult::Stop::kBad) {
    return Status::corruption(at(segment, scan.end_offset) + ": " + scan.problem);
  }
  return Status();
}

// A segment wholly before the checkpointed flushed point: expected to hold `expected_count` entries.
Status CommitLog::Impl::verify_sealed_segment(Segment& segment, std::uint64_t expected_count,
                                              bool full_scan) {
  // Sealed, flushed segments are trusted in both modes (spot-checked only), unless the suspect
  // marker says a reader found one of their entries corrupt: then every entry is checked.
  bool rebuilt = false;
  RAFTLOG_RETURN_IF_ERROR(segment.open_index(env_, &rebuilt));
  if (expected_count == 0) {
    segment.entry_count = 0;
    segment.write_offset = kSegmentHeaderBytes;
    segment.last_term = segment.prev_term;
    return Status();
  }
  const std::uint64_t last = segment.base_index + expected_count - 1;
  if (!rebuilt && !full_scan) {
    auto first_record = segment.index_record(segment.base_index);
    auto last_record = segment.index_record(last);
    if (first_record && last_record && first_record->offset == kSegmentHeaderBytes &&
        last_record->offset + last_record->record_bytes <= segment.size_bytes) {
      entry_format::Decoded decoded;
      const auto result = entry_format::decode(
          segment.data_map->data() + last_record->offset, segment.size_bytes - last_record->offset,
          max_payload_bytes(segment), /*verify_crc=*/true, &decoded);
      if (result == entry_format::DecodeResult::kOk && decoded.meta.index == last &&
          decoded.meta.term == last_record->term &&
          decoded.record_bytes == last_record->record_bytes) {
        report_.bytes_scanned += decoded.record_bytes;
        ++report_.entries_scanned;
        max_generation_seen_ = std::max(max_generation_seen_, decoded.generation);
        segment.entry_count = expected_count;
        segment.write_offset = last_record->offset + last_record->record_bytes;
        segment.last_term = last_record->term;
        segment.index_flushed_bytes = segment.index_bytes_for(expected_count);
        segment.flushed_offset = segment.write_offset;
        return Status();
      }
    }
    spdlog::warn("raftlog store {}: index {} inconsistent with its segment; rebuilding", dir_,
                 segment.index_name);
  }
  if (rebuilt || !full_scan)
    ++report_.index_files_rebuilt;  // not when only the marker asked for it
  std::uint64_t end_offset = 0;
  std::uint64_t entries = 0;
  std::uint64_t last_generation = 0;
  Status status = rebuild_segment_index(segment, segment.size_bytes, last, &end_offset, &entries,
                                        &last_generation);
  if (status.ok() && entries != expected_count) {
    status = Status::corruption(
        at(segment, end_offset) + ": segment ends after " + std::to_string(entries) +
        " entries but the next segment starts at " + std::to_string(last + 1));
  }
  segment.entry_count = entries;
  segment.write_offset = end_offset;
  segment.flushed_offset = end_offset;
  segment.index_flushed_bytes = 0;
  return status;
}

Status CommitLog::Impl::scan_tail(const TailStart& start, std::uint64_t cut_index) {
  const std::size_t position = start.position;
  // The scan rewrites index records; it opens the index of every later segment itself.
  RAFTLOG_CHECK(position >= segments_.size() || segments_[position]->index_map,
                "the tail scan starts in a segment whose index is open");
  std::uint64_t offset = start.offset;
  std::uint64_t expected_index = start.expected_index;
  std::uint64_t term = start.prev_term;
  std::uint64_t generation = start.prev_generation;
  for (std::size_t i = position; i < segments_.size(); ++i) {
    Segment& segment = *segments_[i];
    if (i > position) {
      if (segment.base_index != expected_index || segment.prev_term != term) {
        spdlog::warn(
            "raftlog store {}: segment {} (base {}, prev term {}) does not continue the log (next "
            "index {}, last term {}): removing it and later segments",
            dir_, segment.data_name, segment.base_index, segment.prev_term, expected_index, term);
        return remove_segments_from(i);
      }
      offset = kSegmentHeaderBytes;
      bool rebuilt = false;
      RAFTLOG_RETURN_IF_ERROR(segment.open_index(env_, &rebuilt));
      if (rebuilt) ++report_.index_files_rebuilt;
    }
    segment.flushed_offset = offset;  // bytes before the scan start are already durable
    Status write_status;
    const ScanResult scan =
        scan_entries(segment.data_map->data(), segment.size_bytes, offset, expected_index, term,
                     generation, cut_index, max_payload_bytes(segment),
                     [&](const entry_format::Decoded& entry, std::uint64_t at_offset) {
                       write_status = ensure_index_record(segment, entry, at_offset);
                       return write_status.ok();
                     });
    RAFTLOG_RETURN_IF_ERROR(write_status);
    report_.bytes_scanned += scan.bytes;
    report_.entries_scanned += scan.entries;
    segment.entry_count = scan.next_index - segment.base_index;
    segment.write_offset = scan.end_offset;
    segment.last_term = scan.last_term;
    segment.index_flushed_bytes = std::min(
        segment.index_flushed_bytes, segment.index_bytes_for(expected_index - segment.base_index));
    expected_index = scan.next_index;
    term = scan.last_term;
    generation = scan.last_generation;
    max_generation_seen_ = std::max(max_generation_seen_, generation);
    bool cut = scan.stop != ScanResult::Stop::kEnd;
    if (scan.stop == ScanResult::Stop::kBad && i + 1 < segments_.size() &&
        segments_[i + 1]->base_index == expected_index && segments_[i + 1]->prev_term == term &&
        cut_index == 0) {
      // The next segment's header says this one ended right here (it was rolled after this entry):
      // the bytes after are unused tail, not a torn entry. Defense in depth: the end marker written
      // after every entry normally makes the scan stop with kEnd.
      spdlog::warn(
          "raftlog store {}: ignoring invalid bytes after the last entry of {} at offset {} "
          "({}): the next segment continues at index {}",
          dir_, segment.data_name, scan.end_offset, scan.problem, expected_index);
      cut = false;
    } else if (scan.stop == ScanResult::Stop::kBad) {
      spdlog::warn("raftlog store {}: torn or invalid tail at {}: {}; truncating there", dir_,
                   at(segment, scan.end_offset), scan.problem);
    }
    if (scan.stop == ScanResult::Stop::kBad && cut) note_entries_after_cut(segment);
    if (cut) {
      // Zero the invalid bytes at the cut so the segment reads as ending there (for the verifier
      // and the next recovery). Garbage further on needs no zeroing: its generation is lower than
      // anything appended from now on, so it can never continue the log (entry_format.h).
      auto zeroed = segment.zero_data_run(scan.end_offset);
      if (!zeroed.ok()) return zeroed.status();
      report_.bytes_truncated += *zeroed;
      segment.clear_index_records(segment.entry_count,
                                  segment_format::index_capacity_records(segment.size_bytes));
    }
    if (cut) return remove_segments_from(i + 1);
  }
  return Status();
}

Status CommitLog::Impl::recover() {
  const auto started = std::chrono::steady_clock::now();
  RAFTLOG_RETURN_IF_ERROR(env_->create_dir(dir_));
  auto bases = remove_leftovers();  // 1
  if (!bases.ok()) return bases.status();
  auto checkpoint = read_checkpoint_and_select_mode(!bases->empty());  // 2
  if (!checkpoint.ok()) return checkpoint.status();
  const Checkpoint& cp = *checkpoint;
  if (cp.reset_base != 0) {  // a crashed reset: the new empty log replaces every segment
    auto reset_bases = complete_reset_intent(*bases, cp);
    if (!reset_bases.ok()) return reset_bases.status();
    bases = std::move(reset_bases);
  }
  // The bases are sorted: the segments above a crashed truncation's cut are the last ones.
  const std::span<const std::uint64_t> all_bases(*bases);
  const auto above_cut =
      cp.truncate_from == 0
          ? all_bases.end()
          : std::upper_bound(all_bases.begin(), all_bases.end(), cp.truncate_from);
  RAFTLOG_RETURN_IF_ERROR(open_segments({all_bases.begin(), above_cut}, cp));  // 3
  RAFTLOG_RETURN_IF_ERROR(
      complete_truncation_intent({above_cut, all_bases.end()}, cp.truncate_from));  // 4
  auto tail = spot_check_flushed_segments(cp);                                      // 5
  if (!tail.ok()) return tail.status();
  RAFTLOG_RETURN_IF_ERROR(scan_tail(*tail, cp.truncate_from));  // 6
  publish_recovered_range();
  RAFTLOG_RETURN_IF_ERROR(make_recovery_durable(cp));  // 7
  report_.first_index = first_index_.load();
  report_.last_index = last_index_.load();
  report_.highest_index_seen = std::max(report_.highest_index_seen, report_.last_index);
  report_.duration = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - started);
  spdlog::info("raftlog store {}: recovered: {}", dir_, report_.to_string());
  return Status();
}

Result<std::vector<std::uint64_t>> CommitLog::Impl::remove_leftovers() {
  auto names = env_->list_dir(dir_);
  if (!names.ok()) return names.status();
  std::vector<std::uint64_t> bases;
  std::set<std::uint64_t> index_bases;
  for (const std::string& name : *names) {
    // A reset's old segments set aside (crash case 7) are never read: removed like prealloc files.
    if (starts_with(name, segment_format::kPreallocPrefix) ||
        starts_with(name, segment_format::kDiscardPrefix)) {
      RAFTLOG_RETURN_IF_ERROR(env_->remove(join_path(dir_, name)));
    } else if (auto base = segment_format::parse_segment_file_name(name)) {
      bases.push_back(*base);
    } else if (auto index_base = segment_format::parse_index_file_name(name)) {
      index_bases.insert(*index_base);
    }
  }
  std::sort(bases.begin(), bases.end());
  for (std::uint64_t index_base : index_bases) {
    if (!std::binary_search(bases.begin(), bases.end(), index_base)) {
      RAFTLOG_RETURN_IF_ERROR(
          env_->remove(join_path(dir_, segment_format::index_file_name(index_base))));
    }
  }
  return bases;
}

Result<Checkpoint> CommitLog::Impl::read_checkpoint_and_select_mode(bool segments_exist) {
  const std::string abort_path = join_path(dir_, segment_format::kAbortMarkerFileName);
  const bool abort_present = env_->exists(abort_path);
  auto checkpoint_file =
      DurableRecordFile::open(env_, join_path(dir_, segment_format::kCheckpointFileName), dir_);
  if (!checkpoint_file.ok()) return checkpoint_file.status();
  checkpoint_file_ = std::move(*checkpoint_file);
  std::optional<Checkpoint> checkpoint;
  if (checkpoint_file_->current()) checkpoint = decode_checkpoint(*checkpoint_file_->current());
  if (checkpoint_file_->current() && !checkpoint) {
    spdlog::warn("raftlog store {}: checkpoint has an unknown version; recovering without it",
                 dir_);
  }
  const Checkpoint cp = checkpoint.value_or(Checkpoint{});
  RAFTLOG_RETURN_IF_ERROR(load_suspect_marker());
  const bool abnormal = abort_present || (!checkpoint && segments_exist);
  report_.mode = !segments_exist && !checkpoint
                     ? RecoveryMode::kFresh
                     : (abnormal ? RecoveryMode::kAbnormal : RecoveryMode::kNormal);
  report_.checkpoint_flushed_index = cp.flushed_index;
  // (A crashed reset may have removed every segment already; completing it creates the new one.)
  if (!segments_exist && cp.flushed_index > 0 && cp.reset_base == 0 &&
      !options_.allow_truncate_corrupted_flushed_data) {
    return Status::corruption(join_path(dir_, segment_format::kCheckpointFileName) +
                              " offset 0: checkpoint says entries up to " +
                              std::to_string(cp.flushed_index) +
                              " are durable but the directory holds no segment files");
  }
  RAFTLOG_RETURN_IF_ERROR(env_->write_file(abort_path, "raftlog store open\n"));
  RAFTLOG_RETURN_IF_ERROR(env_->sync_dir(dir_));
  abort_marker_written_ = true;
  commit_index_.store(cp.commit_index);
  return cp;
}

Status CommitLog::Impl::open_segments(std::span<const std::uint64_t> bases, const Checkpoint& cp) {
  const bool trust_flushed = !options_.allow_truncate_corrupted_flushed_data;
  for (std::size_t i = 0; i < bases.size(); ++i) {
    auto segment = Segment::open_existing(env_, dir_, bases[i]);
    if (segment.ok()) {
      segments_.push_back(std::move(*segment));
      continue;
    }
    const bool before_flushed = cp.flushed_index >= bases[i];
    if (segment.status().code() != StatusCode::kCorruption || (before_flushed && trust_flushed)) {
      return segment.status();
    }
    spdlog::error(
        "raftlog store {}: {}; removing it and every later segment{}", dir_,
        segment.status().message(),
        before_flushed ? " (DISCARDING DURABLE DATA: allow_truncate_corrupted_flushed_data)" : "");
    if (before_flushed) report_.corrupted_flushed_data_truncated = true;
    return remove_segment_files(bases.subspan(i));
  }
  return Status();
}

Status CommitLog::Impl::complete_truncation_intent(std::span<const std::uint64_t> bases_above_cut,
                                                   std::uint64_t cut_index) {
  RAFTLOG_RETURN_IF_ERROR(remove_segment_files(bases_above_cut));
  // The rest of the truncation is step 6's: its scan stops at the cut (scan_tail's cut_index).
  if (cut_index != 0) report_.truncation_intent_completed = true;
  return Status();
}

Status CommitLog::Impl::remove_segment_files(std::span<const std::uint64_t> bases) {
  for (const std::uint64_t base : bases) {
    RAFTLOG_RETURN_IF_ERROR(env_->remove(join_path(dir_, segment_format::segment_file_name(base))));
    RAFTLOG_RETURN_IF_ERROR(env_->remove(join_path(dir_, segment_format::index_file_name(base))));
    ++report_.segments_removed;
  }
  return Status();
}

Result<CommitLog::Impl::TailStart> CommitLog::Impl::spot_check_flushed_segments(
    const Checkpoint& cp) {
  if (segments_.empty()) return TailStart{};  // an empty log: nothing to scan
  std::size_t checkpoint_position = segments_.size();
  for (std::size_t i = 0; i < segments_.size(); ++i) {
    if (segments_[i]->base_index == cp.flushed_segment_base) checkpoint_position = i;
  }
  if (cp.flushed_segment_base == 0 || checkpoint_position == segments_.size()) {
    // Nothing vouched for: step 6 validates every entry, from the first segment on.
    Segment& first = *segments_.front();
    if (cp.flushed_index >= first.base_index && !options_.allow_truncate_corrupted_flushed_data) {
      return Status::corruption(join_path(dir_, segment_format::kCheckpointFileName) +
                                " offset 0: checkpoint points into segment " +
                                segment_format::segment_file_name(cp.flushed_segment_base) +
                                " which is missing or invalid");
    }
    bool rebuilt = false;
    RAFTLOG_RETURN_IF_ERROR(first.open_index(env_, &rebuilt));
    if (rebuilt) ++report_.index_files_rebuilt;
    return TailStart{0, kSegmentHeaderBytes, first.base_index, first.prev_term, 0};
  }
  for (std::size_t i = 0; i < checkpoint_position; ++i) {
    const std::uint64_t count = segments_[i + 1]->base_index - segments_[i]->base_index;
    Status status =
        verify_sealed_segment(*segments_[i], count, holds_suspect(*segments_[i], count));
    if (!status.ok()) return cut_at_corrupted_flushed_data(i, status);
  }
  return verify_checkpoint_segment(checkpoint_position, cp);
}

Result<CommitLog::Impl::TailStart> CommitLog::Impl::cut_at_corrupted_flushed_data(
    std::size_t position, const Status& status) {
  if (status.code() != StatusCode::kCorruption || !options_.allow_truncate_corrupted_flushed_data) {
    return status;
  }
  spdlog::error(
      "raftlog store {}: {}; TRUNCATING DURABLE DATA there "
      "(allow_truncate_corrupted_flushed_data)",
      dir_, status.message());
  report_.corrupted_flushed_data_truncated = true;
  Segment& segment = *segments_[position];
  if (!segment.index_map) {
    // The check failed before it opened the index (the segment does not continue the log); the
    // scan rewrites the index records, so it needs it.
    bool rebuilt = false;
    RAFTLOG_RETURN_IF_ERROR(segment.open_index(env_, &rebuilt));
    if (rebuilt) ++report_.index_files_rebuilt;
  }
  return TailStart{position, kSegmentHeaderBytes, segment.base_index, segment.prev_term, 0};
}

Result<CommitLog::Impl::TailStart> CommitLog::Impl::verify_checkpoint_segment(
    std::size_t position, const Checkpoint& cp) {
  Segment& segment = *segments_[position];
  Status status;
  // The segment before must end right where this one starts.
  if (position > 0) {
    const Segment& previous = *segments_[position - 1];
    if (previous.last_index() + 1 != segment.base_index || previous.last_term > segment.prev_term) {
      status =
          Status::corruption(at(segment, 0) + ": does not continue segment " + previous.data_name);
    }
  }
  bool rebuilt = false;
  if (status.ok()) status = segment.open_index(env_, &rebuilt);
  TailStart start{position, cp.flushed_offset, cp.flushed_index + 1, segment.prev_term, 0};
  if (status.ok()) {
    status = verify_flushed_prefix(segment, cp, rebuilt, &start.prev_term, &start.prev_generation);
  }
  if (!status.ok()) return cut_at_corrupted_flushed_data(position, status);
  return start;
}

Status CommitLog::Impl::verify_flushed_prefix(Segment& segment, const Checkpoint& cp, bool rebuilt,
                                              std::uint64_t* last_term,
                                              std::uint64_t* last_generation) {
  const std::uint64_t count =
      cp.flushed_index + 1 - segment.base_index;  // entries before the point
  // The suspect marker points below the checkpoint in this segment: check every entry up to it.
  const bool suspect_here = holds_suspect(segment, count);
  bool consistent = false;
  if (!rebuilt && count > 0 && !suspect_here) {
    consistent = spot_check_checkpoint_entry(segment, cp, last_term, last_generation);
  } else if (count == 0) {
    consistent = cp.flushed_offset == kSegmentHeaderBytes;
  }
  if (!consistent) {
    if (rebuilt) ++report_.index_files_rebuilt;
    if (!suspect_here) {
      spdlog::warn("raftlog store {}: index {} does not match the checkpoint; rebuilding", dir_,
                   segment.index_name);
    }
    std::uint64_t end_offset = 0;
    std::uint64_t entries = 0;
    RAFTLOG_RETURN_IF_ERROR(rebuild_segment_index(segment, cp.flushed_offset, cp.flushed_index,
                                                  &end_offset, &entries, last_generation));
    if (entries != count || end_offset != cp.flushed_offset) {
      return Status::corruption(at(segment, end_offset) + ": checkpoint says " +
                                std::to_string(count) + " durable entries ending at offset " +
                                std::to_string(cp.flushed_offset) + ", found " +
                                std::to_string(entries));
    }
    *last_term = segment.last_term;
  }
  segment.index_flushed_bytes = rebuilt || !consistent ? 0 : segment.index_bytes_for(count);
  return Status();
}

bool CommitLog::Impl::spot_check_checkpoint_entry(const Segment& segment, const Checkpoint& cp,
                                                  std::uint64_t* last_term,
                                                  std::uint64_t* last_generation) {
  auto record = segment.index_record(cp.flushed_index);
  if (!record || record->offset + record->record_bytes != cp.flushed_offset) return false;
  entry_format::Decoded decoded;
  const auto result = entry_format::decode(
      segment.data_map->data() + record->offset, segment.size_bytes - record->offset,
      max_payload_bytes(segment), /*verify_crc=*/true, &decoded);
  *last_term = record->term;
  *last_generation = decoded.generation;
  max_generation_seen_ = std::max(max_generation_seen_, decoded.generation);
  report_.bytes_scanned += record->record_bytes;
  ++report_.entries_scanned;
  return result == entry_format::DecodeResult::kOk && decoded.meta.index == cp.flushed_index &&
         decoded.meta.term == record->term;
}

void CommitLog::Impl::publish_recovered_range() {
  if (segments_.empty()) {
    first_index_.store(1);
    last_index_.store(0);
  } else {
    first_index_.store(segments_.front()->base_index);
    last_index_.store(segments_.back()->last_index());
  }
  if (commit_index_.load() > last_index_.load()) {
    spdlog::warn(
        "raftlog store {}: checkpointed commit index {} is above the recovered last index {}", dir_,
        commit_index_.load(), last_index_.load());
  }
}

Status CommitLog::Impl::make_recovery_durable(const Checkpoint& cp) {
  for (const auto& segment : segments_) {
    if (segment->flushed_offset < segment->write_offset) {
      // Entries found on disk may have been in the page cache only (process crash): flush them
      // before the checkpoint vouches for them.
      const std::uint64_t from = segment->flushed_offset;
      const std::uint64_t to =
          std::min(segment->size_bytes, segment->write_offset + entry_format::kEndMarkerBytes);
      RAFTLOG_RETURN_IF_ERROR(segment->data_map->flush(from, to - from));
      segment->flushed_offset = segment->write_offset;
    }
  }
  RAFTLOG_RETURN_IF_ERROR(env_->sync_dir(dir_));
  flushed_index_.store(last_index_.load());
  // A new generation, above everything on disk; durable in the checkpoint below before any append.
  generation_ = std::max(cp.generation, max_generation_seen_) + 1;
  {
    std::lock_guard cycle_lock(flush_cycle_mu_);
    RAFTLOG_RETURN_IF_ERROR(write_checkpoint_locked(0));
  }
  // Checked by steps 5 and 6: a mismatch there was cut or refused.
  return clear_suspect_marker();
}

}  // namespace raftlog::store

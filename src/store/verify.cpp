// Offline, read-only verification of a log directory (raftlogctl log verify / dump).
#include <algorithm>
#include <string>
#include <vector>

#include "store/checkpoint.h"
#include "store/commit_log.h"
#include "store/durable_record.h"
#include "store/entry_scan.h"
#include "store/segment_format.h"

namespace raftlog::store {
namespace {

// The base indexes of the segment files among `names`, in order.
std::vector<std::uint64_t> sorted_segment_bases(const std::vector<std::string>& names) {
  std::vector<std::uint64_t> bases;
  for (const std::string& name : names) {
    if (auto base = segment_format::parse_segment_file_name(name)) bases.push_back(*base);
  }
  std::sort(bases.begin(), bases.end());
  return bases;
}

// The flushed index of the newest valid slot of dir/CHECKPOINT; 0 without one (an unreadable or
// damaged file says nothing: the report is about the segments).
std::uint64_t checkpoint_flushed_index(const std::string& dir, Env* env) {
  const std::string checkpoint_path = join_path(dir, segment_format::kCheckpointFileName);
  if (!env->exists(checkpoint_path)) return 0;
  auto content = env->read_file(checkpoint_path, DurableRecordFile::kFileBytes);
  if (!content.ok()) return 0;
  std::uint64_t flushed_index = 0;
  std::uint64_t best_sequence = 0;
  for (std::uint64_t slot = 0; slot < 2; ++slot) {
    const std::uint64_t start = slot * DurableRecordFile::kSlotStrideBytes;
    if (content->size() <= start) continue;
    auto decoded =
        DurableRecordFile::decode_slot(content->data() + start, content->size() - start);
    if (!decoded || decoded->sequence < best_sequence) continue;
    if (auto checkpoint = decode_checkpoint(decoded->payload)) {
      best_sequence = decoded->sequence;
      flushed_index = checkpoint->flushed_index;
    }
  }
  return flushed_index;
}

// Whether the segment after `base` continues the log exactly where `scan` of `base` stopped: then
// the unused tail after its last entry is fine (the next header is the authority on where this
// segment ended).
bool next_segment_continues(const std::string& dir, Env* env,
                            const std::vector<std::uint64_t>& bases, std::uint64_t base,
                            const ScanResult& scan) {
  const auto it = std::upper_bound(bases.begin(), bases.end(), base);
  if (it == bases.end() || *it != scan.next_index) return false;
  auto next_file = env->open_read_only(join_path(dir, segment_format::segment_file_name(*it)));
  if (!next_file.ok()) return false;
  auto next_map = (*next_file)->map(segment_format::kSegmentHeaderBytes);
  if (!next_map.ok()) return false;
  auto next_header = segment_format::decode_segment_header((*next_map)->data());
  return next_header && next_header->prev_term == scan.last_term;
}

}  // namespace

Result<VerifyReport> verify_log_directory(const std::string& dir, Env* env,
                                          const EntryVisitor& visitor) {
  if (env == nullptr) env = Env::posix();
  auto names = env->list_dir(dir);
  if (!names.ok()) return names.status();
  VerifyReport report;
  const std::vector<std::uint64_t> bases = sorted_segment_bases(*names);
  report.abort_marker_present = env->exists(join_path(dir, segment_format::kAbortMarkerFileName));
  report.checkpoint_flushed_index = checkpoint_flushed_index(dir, env);

  std::uint64_t expected_index = 0;  // 0: any (first segment)
  std::uint64_t last_term = 0;
  std::uint64_t last_generation = 0;
  for (std::uint64_t base : bases) {
    const std::string name = segment_format::segment_file_name(base);
    const std::string path = join_path(dir, name);
    auto bad = [&](std::uint64_t offset, std::string problem) {
      report.ok = false;
      report.bad_file = name;
      report.bad_offset = offset;
      report.problem = std::move(problem);
      return report;
    };
    auto file = env->open_read_only(path);
    if (!file.ok()) return file.status();
    auto size = (*file)->size();
    if (!size.ok()) return size.status();
    if (*size < segment_format::kSegmentHeaderBytes)
      return bad(0, "file shorter than a segment header");
    auto mapping = (*file)->map(*size);
    if (!mapping.ok()) return mapping.status();
    const char* data = (*mapping)->data();
    auto header = segment_format::decode_segment_header(data);
    if (!header) return bad(0, "invalid segment header (magic/CRC/version)");
    if (header->base_index != base) return bad(0, "header base index does not match the file name");
    if (expected_index != 0 && base != expected_index) {
      return bad(0, "segment starts at index " + std::to_string(base) + " but " +
                        std::to_string(expected_index) + " was expected (gap or overlap)");
    }
    if (expected_index != 0 && header->prev_term != last_term) {
      return bad(0, "header prev_term " + std::to_string(header->prev_term) +
                        " differs from the previous entry's term " + std::to_string(last_term));
    }
    ++report.segments;
    bool stopped = false;
    const ScanResult scan = scan_entries(
        data, *size, segment_format::kSegmentHeaderBytes, base, header->prev_term, last_generation,
        0, static_cast<std::uint32_t>(std::min<std::uint64_t>(*size, UINT32_MAX)),
        [&](const entry_format::Decoded& entry, std::uint64_t offset) {
          if (visitor) {
            EntryLocation location{name, offset, static_cast<std::uint32_t>(entry.record_bytes)};
            if (!visitor(EntryView{entry.meta, entry.payload}, location)) {
              stopped = true;
              return false;
            }
          }
          return true;
        });
    if (scan.entries > 0) {
      if (report.first_index == 0) report.first_index = base;
      report.last_index = scan.next_index - 1;
    }
    report.entries += scan.entries;
    report.bytes += scan.bytes;
    if (scan.stop == ScanResult::Stop::kBad &&
        !next_segment_continues(dir, env, bases, base, scan)) {
      return bad(scan.end_offset, scan.problem);
    }
    if (stopped) return report;
    expected_index = scan.next_index;
    last_term = scan.last_term;
    last_generation = scan.last_generation;
  }
  return report;
}

}  // namespace raftlog::store

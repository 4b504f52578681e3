#include "derived/record_log.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "store/endian.h"
#include "util/crc32c.h"

namespace raftlog::derived {

using store::Status;

void encode_record(RecordKind kind, const Record& record, char* out) {
  std::memset(out, 0, kRecordBytes);
  store::put_u8(out + 4, kRecordVersion);
  store::put_u8(out + 5, static_cast<std::uint8_t>(kind));
  store::put_u64(out + 8, record.index);
  store::put_u64(out + 16, record.term);
  store::put_u64(out + 24, record.value);
  store::put_u32(out, util::crc32c::value(out + 4, kRecordBytes - 4));
}

bool decode_record(RecordKind kind, const char* in, Record* out) {
  if (store::get_u32(in) != util::crc32c::value(in + 4, kRecordBytes - 4)) return false;
  if (store::get_u8(in + 4) != kRecordVersion) return false;
  if (store::get_u8(in + 5) != static_cast<std::uint8_t>(kind)) return false;
  if (store::get_u16(in + 6) != 0) return false;
  out->index = store::get_u64(in + 8);
  out->term = store::get_u64(in + 16);
  out->value = store::get_u64(in + 24);
  return true;
}

RecordLog::RecordLog(store::Env* env, std::string dir, RecordKind kind,
                     std::uint64_t records_per_segment)
    : env_(env),
      dir_(std::move(dir)),
      kind_(kind),
      records_per_segment_(records_per_segment != 0 ? records_per_segment : kRecordsPerSegment) {}

RecordLog::~RecordLog() = default;

std::string RecordLog::segment_path(std::uint64_t segment_first) const {
  char name[32];
  std::snprintf(name, sizeof(name), "%020llu.rec", static_cast<unsigned long long>(segment_first));
  return store::join_path(dir_, name);
}

bool RecordLog::load(std::uint64_t first_number, std::uint64_t count, std::string* problem) {
  records_.clear();
  open_file_.reset();
  open_first_ = UINT64_MAX;
  first_number_ = first_number;
  written_end_ = first_number;
  dir_created_ = env_->exists(dir_);
  if (count < first_number) {
    *problem = dir_ + ": cursor names first record " + std::to_string(first_number) +
               " after its end " + std::to_string(count);
    return false;
  }
  std::uint64_t number = first_number;
  while (number < count) {
    const std::uint64_t segment_first = number - number % records_per_segment_;
    auto content = env_->read_file(segment_path(segment_first), records_per_segment_ * kRecordBytes);
    if (!content.ok()) {
      *problem = segment_path(segment_first) + ": " + content.status().to_string();
      return false;
    }
    const std::string& bytes = *content;
    const std::uint64_t segment_end = std::min(count, segment_first + records_per_segment_);
    for (; number < segment_end; ++number) {
      const std::uint64_t at = (number - segment_first) * kRecordBytes;
      Record record;
      if (at + kRecordBytes > bytes.size() || !decode_record(kind_, bytes.data() + at, &record)) {
        *problem = segment_path(segment_first) + ": record " + std::to_string(number) +
                   " is missing or fails its check";
        return false;
      }
      // Log order: one entry has at most one queue or time record, but a key record per key.
      const bool in_order = records_.empty() || record.index > records_.back().index ||
                            (kind_ == RecordKind::kKey && record.index == records_.back().index);
      if (!in_order) {
        *problem = segment_path(segment_first) + ": record " + std::to_string(number) +
                   " does not point past the one before it";
        return false;
      }
      records_.push_back(record);
    }
  }
  written_end_ = count;
  // What was written after the cursor (the tail of a dispatch the cursor did not cover) is cut.
  if (Status cut = truncate_to(count); !cut.ok()) {
    *problem = dir_ + ": " + cut.to_string();
    return false;
  }
  return true;
}

void RecordLog::append(const Record& record) { records_.push_back(record); }

store::Result<store::File*> RecordLog::segment_file(std::uint64_t segment_first) {
  if (open_file_ != nullptr && open_first_ == segment_first) return open_file_.get();
  if (!dir_created_) {
    if (Status made = env_->create_dir(dir_); !made.ok()) return made;
    dir_created_ = true;
    dir_dirty_ = true;
  }
  const std::string path = segment_path(segment_first);
  if (!env_->exists(path)) dir_dirty_ = true;
  auto file = env_->open(path, /*create=*/true);
  if (!file.ok()) return file.status();
  open_file_ = std::move(*file);
  open_first_ = segment_first;
  return open_file_.get();
}

Status run_sync_steps(store::Env* env, const std::vector<SyncStep>& steps, std::size_t* next,
                      const std::function<bool()>& keep_going, std::uint64_t* ran) {
  for (; *next < steps.size(); ++*next) {
    if (keep_going && !keep_going()) return Status();
    const SyncStep& step = steps[*next];
    if (Status synced = step.file != nullptr ? step.file->sync() : env->sync_dir(step.dir);
        !synced.ok()) {
      return synced;
    }
    ++*ran;
  }
  return Status();
}

void RecordLog::capture_pending(Captured* out) {
  out->chunks.clear();
  const std::uint64_t end = end_number();
  while (written_end_ < end) {
    const std::uint64_t segment_first = written_end_ - written_end_ % records_per_segment_;
    const std::uint64_t stop = std::min(end, segment_first + records_per_segment_);
    Captured::Chunk chunk{segment_first, written_end_,
                          std::string((stop - written_end_) * kRecordBytes, '\0')};
    for (std::uint64_t n = written_end_; n < stop; ++n) {
      encode_record(kind_, records_[n - first_number_],
                    chunk.bytes.data() + (n - written_end_) * kRecordBytes);
    }
    out->chunks.push_back(std::move(chunk));
    written_end_ = stop;
  }
}

Status RecordLog::write_chunk(const Captured::Chunk& chunk, std::vector<SyncStep>* steps) {
  auto file = segment_file(chunk.segment_first);
  if (!file.ok()) return file.status();
  // Grown to fit first (a write may not extend a file in every Env); the size is metadata,
  // the bytes become durable at the file's sync step.
  const std::uint64_t needed = chunk.from - chunk.segment_first + chunk.bytes.size() / kRecordBytes;
  auto size = (*file)->size();
  if (!size.ok()) return size.status();
  if (*size < needed * kRecordBytes) {
    if (Status grown = (*file)->truncate(needed * kRecordBytes); !grown.ok()) return grown;
  }
  if (Status wrote =
          (*file)->write_at((chunk.from - chunk.segment_first) * kRecordBytes, chunk.bytes);
      !wrote.ok()) {
    return wrote;
  }
  steps->push_back(SyncStep{open_file_, {}});
  return Status();
}

void RecordLog::finish_chunks(std::vector<SyncStep>* steps) {
  if (dir_dirty_) {
    steps->push_back(SyncStep{nullptr, dir_});
    dir_dirty_ = false;
  }
}

Status RecordLog::truncate_to(std::uint64_t number) {
  number = std::max(number, first_number_);
  if (number < end_number()) records_.resize(number - first_number_);
  if (!dir_created_) {
    written_end_ = std::min(written_end_, number);
    return Status();
  }
  // Files: the segment holding `number` is cut to it; later segments are removed.
  auto names = env_->list_dir(dir_);
  if (!names.ok()) return names.status();
  for (const std::string& name : *names) {
    unsigned long long segment_first = 0;
    if (std::sscanf(name.c_str(), "%20llu.rec", &segment_first) != 1) continue;
    // Below first_number_: retention's files a crash left after the cursor moved past them.
    if (segment_first >= number || segment_first + records_per_segment_ <= first_number_) {
      if (open_first_ == segment_first) {
        open_file_.reset();
        open_first_ = UINT64_MAX;
      }
      if (Status removed = env_->remove(store::join_path(dir_, name)); !removed.ok()) return removed;
      dir_dirty_ = true;
    } else if (segment_first < number && number < segment_first + records_per_segment_) {
      auto file = segment_file(segment_first);
      if (!file.ok()) return file.status();
      if (Status cut = (*file)->truncate((number - segment_first) * kRecordBytes); !cut.ok())
        return cut;
    }
  }
  written_end_ = std::min(written_end_, number);
  return Status();
}

void RecordLog::continue_at(std::uint64_t number) {
  if (number == end_number()) return;
  if (number < first_number_ || number > end_number()) {
    records_.clear();
    // A segment the new numbering writes into again is not unlinked (its file is rewritten); the
    // others still go once a cursor past them is durable (all are below what it names).
    const std::uint64_t reused_from = number - number % records_per_segment_;
    std::erase_if(dropped_segments_, [&](std::uint64_t first) { return first >= reused_from; });
    first_number_ = number;
    written_end_ = number;
    return;
  }
  records_.resize(number - first_number_);
  written_end_ = std::min(written_end_, number);
}

bool RecordLog::first_segment_below(std::uint64_t log_index, bool covers_until_next) const {
  // Never the segment that holds the last record (appends continue there).
  if (end_number() <= first_number_) return false;
  const std::uint64_t segment_end = first_number_ - first_number_ % records_per_segment_ +
                                    records_per_segment_;
  if (segment_end >= end_number()) return false;
  if (records_[segment_end - 1 - first_number_].index >= log_index) return false;
  // segment_end < end_number(): the next segment's first record exists.
  return !covers_until_next || records_[segment_end - first_number_].index <= log_index;
}

bool RecordLog::forget_below(std::uint64_t log_index, bool covers_until_next) {
  // Whole segments only, and only records already captured: capture_pending() encodes from
  // records_[written_end_ - first_number_], and a persist writes a forgotten segment's captured
  // bytes from its capture, before the cursor that lets remove_dropped() unlink the file.
  bool forgot = false;
  while (first_segment_below(log_index, covers_until_next)) {
    const std::uint64_t segment_first = first_number_ - first_number_ % records_per_segment_;
    const std::uint64_t segment_end = segment_first + records_per_segment_;
    if (segment_end > written_end_) break;
    records_.erase(records_.begin(),
                   records_.begin() + static_cast<std::ptrdiff_t>(segment_end - first_number_));
    first_number_ = segment_end;
    dropped_segments_.push_back(segment_first);
    forgot = true;
  }
  return forgot;
}

Status RecordLog::remove_dropped() {
  while (!dropped_segments_.empty()) {
    const std::uint64_t segment_first = dropped_segments_.back();
    if (open_first_ == segment_first) {
      open_file_.reset();
      open_first_ = UINT64_MAX;
    }
    if (Status removed = env_->remove(segment_path(segment_first)); !removed.ok()) return removed;
    dir_dirty_ = true;
    dropped_segments_.pop_back();
  }
  return Status();
}

Status RecordLog::clear() {
  open_file_.reset();
  open_first_ = UINT64_MAX;
  records_.clear();
  dropped_segments_.clear();
  first_number_ = 0;
  written_end_ = 0;
  if (!env_->exists(dir_)) return Status();
  auto names = env_->list_dir(dir_);
  if (!names.ok()) return names.status();
  for (const std::string& name : *names) {
    if (Status removed = env_->remove(store::join_path(dir_, name)); !removed.ok()) return removed;
  }
  dir_dirty_ = true;
  return Status();
}

}  // namespace raftlog::derived

#include "store/segment.h"

#include <algorithm>
#include <cstring>

namespace raftlog::store {

using segment_format::IndexRecord;
using segment_format::kIndexHeaderBytes;
using segment_format::kIndexRecordBytes;
using segment_format::kSegmentHeaderBytes;

namespace {
std::string prealloc_name(std::uint64_t sequence, const char* suffix) {
  return std::string(segment_format::kPreallocPrefix) + std::to_string(sequence) + suffix;
}
}  // namespace

Result<PreparedSegment> prepare_segment(Env* env, const std::string& dir, std::uint64_t sequence,
                                        std::uint64_t segment_size_bytes, bool zero_fill) {
  PreparedSegment prepared;
  prepared.data_path = join_path(dir, prealloc_name(sequence, ".seg"));
  prepared.index_path = join_path(dir, prealloc_name(sequence, ".idx"));
  auto fail = [&](const Status& status) -> Status {
    prepared.data_map.reset();
    prepared.index_map.reset();
    prepared.data_file.reset();
    prepared.index_file.reset();
    (void)env->remove(prepared.data_path);
    (void)env->remove(prepared.index_path);
    return status;
  };
  auto data_file = env->open(prepared.data_path, /*create=*/true);
  if (!data_file.ok()) return fail(data_file.status());
  prepared.data_file = std::move(*data_file);
  Status status = prepared.data_file->allocate(0, segment_size_bytes);
  if (!status.ok()) return fail(status);
  auto data = prepared.data_file->map(segment_size_bytes);
  if (!data.ok()) return fail(data.status());
  prepared.data_map = std::move(*data);
  if (zero_fill) {
    // Touch every page so the file's extents are written (not "unwritten"), and flush it.
    std::memset(prepared.data_map->data(), 0, segment_size_bytes);
    status = prepared.data_map->flush(0, segment_size_bytes);
    if (!status.ok()) return fail(status);
  }
  auto index_file = env->open(prepared.index_path, /*create=*/true);
  if (!index_file.ok()) return fail(index_file.status());
  prepared.index_file = std::move(*index_file);
  const std::uint64_t index_bytes = segment_format::index_file_bytes(segment_size_bytes);
  status = prepared.index_file->truncate(index_bytes);
  if (!status.ok()) return fail(status);
  status = prepared.index_file->allocate(0, std::min(index_bytes, kIndexChunkBytes));
  if (!status.ok()) return fail(status);
  prepared.index_allocated_bytes = std::min(index_bytes, kIndexChunkBytes);
  auto index_mapping = prepared.index_file->map(index_bytes);
  if (!index_mapping.ok()) return fail(index_mapping.status());
  prepared.index_map = std::move(*index_mapping);
  return prepared;
}

Segment::Segment(std::uint64_t base, std::uint64_t prev, std::uint64_t size, std::string directory)
    : base_index(base),
      prev_term(prev),
      size_bytes(size),
      dir(std::move(directory)),
      data_name(segment_format::segment_file_name(base)),
      index_name(segment_format::index_file_name(base)),
      last_term(prev) {}

Result<std::shared_ptr<Segment>> Segment::activate(Env* env, const std::string& dir,
                                                   PreparedSegment prepared,
                                                   std::uint64_t base_index,
                                                   std::uint64_t prev_term,
                                                   std::uint64_t segment_size_bytes) {
  auto segment = std::make_shared<Segment>(base_index, prev_term, segment_size_bytes, dir);
  segment_format::encode_segment_header({base_index, prev_term, segment_size_bytes},
                                        prepared.data_map->data());
  const std::uint64_t capacity = segment_format::index_capacity_records(segment_size_bytes);
  segment_format::encode_index_header({base_index, capacity}, prepared.index_map->data());
  // Index before data: a data file under its final name always has an index file (maybe empty).
  RAFTLOG_RETURN_IF_ERROR(env->rename(prepared.index_path, segment->index_path()));
  RAFTLOG_RETURN_IF_ERROR(env->rename(prepared.data_path, segment->data_path()));
  segment->data_file = std::move(prepared.data_file);
  segment->index_file = std::move(prepared.index_file);
  segment->data_map = std::move(prepared.data_map);
  segment->index_map = std::move(prepared.index_map);
  segment->index_allocated_bytes = prepared.index_allocated_bytes;
  return segment;
}

Result<std::shared_ptr<Segment>> Segment::open_existing(Env* env, const std::string& dir,
                                                        std::uint64_t base_index) {
  const std::string path = join_path(dir, segment_format::segment_file_name(base_index));
  auto file = env->open(path, /*create=*/false);
  if (!file.ok()) return file.status();
  auto size = (*file)->size();
  if (!size.ok()) return size.status();
  if (*size < kSegmentHeaderBytes) {
    return Status::corruption(path + " offset 0: file of " + std::to_string(*size) +
                              " bytes is shorter than a segment header");
  }
  auto mapping = (*file)->map(*size);
  if (!mapping.ok()) return mapping.status();
  auto header = segment_format::decode_segment_header((*mapping)->data());
  if (!header) return Status::corruption(path + " offset 0: invalid segment header (magic/CRC)");
  if (header->base_index != base_index) {
    return Status::corruption(path + " offset 0: header base index " +
                              std::to_string(header->base_index) + " does not match the file name");
  }
  if (header->segment_size_bytes != *size) {
    return Status::corruption(path + " offset 0: header says " +
                              std::to_string(header->segment_size_bytes) + " bytes, file has " +
                              std::to_string(*size));
  }
  auto segment = std::make_shared<Segment>(base_index, header->prev_term, *size, dir);
  segment->data_file = std::move(*file);
  segment->data_map = std::move(*mapping);
  return segment;
}

Status Segment::open_index(Env* env, bool* rebuilt) {
  *rebuilt = false;
  const std::uint64_t index_bytes = segment_format::index_file_bytes(size_bytes);
  auto file = env->open(index_path(), /*create=*/true);
  if (!file.ok()) return file.status();
  auto size = (*file)->size();
  if (!size.ok()) return size.status();
  bool valid = *size == index_bytes;
  if (!valid) {
    // Wrong size (missing, or from a different segment size): start over with an empty index.
    *rebuilt = true;
    RAFTLOG_RETURN_IF_ERROR((*file)->truncate(0));
    RAFTLOG_RETURN_IF_ERROR((*file)->truncate(index_bytes));
  }
  RAFTLOG_RETURN_IF_ERROR((*file)->allocate(0, std::min(index_bytes, kIndexChunkBytes)));
  auto mapping = (*file)->map(index_bytes);
  if (!mapping.ok()) return mapping.status();
  index_file = std::move(*file);
  index_map = std::move(*mapping);
  index_allocated_bytes = std::min(index_bytes, kIndexChunkBytes);
  auto header = segment_format::decode_index_header(index_map->data());
  if (!header || header->base_index != base_index ||
      header->capacity_records != segment_format::index_capacity_records(size_bytes)) {
    *rebuilt = true;
    std::memset(index_map->data(), 0,
                std::min<std::uint64_t>(index_allocated_bytes, index_map->size()));
    segment_format::encode_index_header(
        {base_index, segment_format::index_capacity_records(size_bytes)}, index_map->data());
  }
  return Status();
}

Status Segment::write_index_record(const IndexRecord& record) {
  const std::uint64_t position = record.index - base_index;
  const std::uint64_t offset = kIndexHeaderBytes + position * kIndexRecordBytes;
  if (offset + kIndexRecordBytes > index_map->size()) {
    return Status::corruption(index_path() + ": index record beyond capacity for index " +
                              std::to_string(record.index));
  }
  if (offset + kIndexRecordBytes > index_allocated_bytes) {
    const std::uint64_t new_end =
        std::min<std::uint64_t>(index_map->size(), offset + kIndexChunkBytes);
    RAFTLOG_RETURN_IF_ERROR(
        index_file->allocate(index_allocated_bytes, new_end - index_allocated_bytes));
    index_allocated_bytes = new_end;
  }
  segment_format::encode_index_record(record, index_map->data() + offset);
  return Status();
}

std::optional<IndexRecord> Segment::index_record(std::uint64_t idx) const {
  if (idx < base_index || !index_map) return std::nullopt;
  const std::uint64_t offset = kIndexHeaderBytes + (idx - base_index) * kIndexRecordBytes;
  // Reading a not-yet-allocated part of the sparse file is safe (it reads zeros: invalid record).
  if (offset + kIndexRecordBytes > index_map->size()) return std::nullopt;
  auto record = segment_format::decode_index_record(index_map->data() + offset);
  if (!record || record->index != idx) return std::nullopt;
  // Inside the segment's entry area: a record pointing elsewhere passes its CRC only in a crafted
  // or buggy file, and following it would decode outside the mapping.
  if (record->offset < kSegmentHeaderBytes || record->offset > size_bytes ||
      record->record_bytes > size_bytes - record->offset) {
    return std::nullopt;
  }
  return record;
}

void Segment::clear_index_records(std::uint64_t first_entry, std::uint64_t end_entry) {
  if (end_entry <= first_entry) return;
  const std::uint64_t from = kIndexHeaderBytes + first_entry * kIndexRecordBytes;
  std::uint64_t to = kIndexHeaderBytes + end_entry * kIndexRecordBytes;
  to = std::min(to, index_allocated_bytes);
  if (to > from) std::memset(index_map->data() + from, 0, to - from);
}

Result<std::uint64_t> Segment::zero_data_run(std::uint64_t from_offset) {
  constexpr std::uint64_t kBlock = 4096;
  static const char kZeros[kBlock] = {};
  char* base = data_map->data();
  std::uint64_t nonzero = 0;
  std::uint64_t at = from_offset;
  while (at < size_bytes) {
    const std::uint64_t block_end = std::min(size_bytes, (at / kBlock + 1) * kBlock);
    const std::uint64_t len = block_end - at;
    if (std::memcmp(base + at, kZeros, len) == 0) break;
    for (std::uint64_t i = at; i < block_end; ++i) nonzero += base[i] != 0 ? 1 : 0;
    std::memset(base + at, 0, len);
    at = block_end;
  }
  if (at > from_offset) RAFTLOG_RETURN_IF_ERROR(data_map->flush(from_offset, at - from_offset));
  return nonzero;
}

Status Segment::zero_data_range(std::uint64_t from_offset, std::uint64_t to_offset) {
  if (to_offset <= from_offset) return Status();
  std::memset(data_map->data() + from_offset, 0, to_offset - from_offset);
  return data_map->flush(from_offset, to_offset - from_offset);
}

}  // namespace raftlog::store

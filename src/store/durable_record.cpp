#include "store/durable_record.h"

#include <spdlog/spdlog.h>

#include <cstring>

#include "store/endian.h"
#include "util/check.h"
#include "util/crc32c.h"

namespace raftlog::store {
namespace {
constexpr std::uint32_t kMagic = 0x52444C52U;  // "RLDR"
constexpr std::uint32_t kVersion = 1;
constexpr std::uint64_t kSlotHeaderBytes = 24;
}  // namespace

std::optional<DurableRecordFile::Slot> DurableRecordFile::decode_slot(
    const char* bytes, std::uint64_t available_bytes) {
  if (available_bytes < kSlotHeaderBytes) return std::nullopt;
  if (get_u32(bytes) != kMagic || get_u32(bytes + 8) != kVersion) return std::nullopt;
  const std::uint32_t payload_size = get_u32(bytes + 12);
  if (payload_size > kMaxPayloadBytes || kSlotHeaderBytes + payload_size > available_bytes) {
    return std::nullopt;
  }
  if (util::crc32c::value(bytes + 8, kSlotHeaderBytes - 8 + payload_size) != get_u32(bytes + 4)) {
    return std::nullopt;
  }
  Slot slot;
  slot.sequence = get_u64(bytes + 16);
  slot.payload.assign(bytes + kSlotHeaderBytes, payload_size);
  return slot;
}

DurableRecordFile::DurableRecordFile(std::string path, std::shared_ptr<Mapping> mapping)
    : path_(std::move(path)), mapping_(std::move(mapping)) {}

Result<std::unique_ptr<DurableRecordFile>> DurableRecordFile::open(
    Env* env, const std::string& path, const std::string& dir_for_sync) {
  const bool existed = env->exists(path);
  auto file = env->open(path, /*create=*/true);
  if (!file.ok()) return file.status();
  auto size = (*file)->size();
  if (!size.ok()) return size.status();
  if (*size < kFileBytes) {
    // A short file (crash during creation) is grown with zeros; zero slots are simply invalid.
    RAFTLOG_RETURN_IF_ERROR((*file)->allocate(0, kFileBytes));
    RAFTLOG_RETURN_IF_ERROR((*file)->sync());
  }
  if (!existed) RAFTLOG_RETURN_IF_ERROR(env->sync_dir(dir_for_sync));
  auto mapping = (*file)->map(kFileBytes);
  if (!mapping.ok()) return mapping.status();
  std::unique_ptr<DurableRecordFile> record(new DurableRecordFile(path, std::move(*mapping)));
  record->bytes_at_open_ = *size;
  for (int slot = 0; slot < 2; ++slot) {
    auto decoded =
        decode_slot(record->mapping_->data() + slot * kSlotStrideBytes, kSlotStrideBytes);
    if (decoded && (record->current_slot_ < 0 || decoded->sequence > record->current_sequence_)) {
      record->current_slot_ = slot;
      record->current_sequence_ = decoded->sequence;
      record->current_ = std::move(decoded->payload);
    }
  }
  if (record->current_slot_ >= 0) {
    const int other = 1 - record->current_slot_;
    record->fallback_ = damaged_newer_slot(record->mapping_->data() + other * kSlotStrideBytes,
                                           record->current_sequence_);
    if (!record->fallback_.empty()) {
      // Once per open: the record read is an older one than the file last held, and nobody would
      // know it otherwise (docs/operations.md, "Damaged data at startup").
      spdlog::warn("{}: slot {} {}; using the older record of slot {} (sequence {})", path, other,
                   record->fallback_, record->current_slot_, record->current_sequence_);
    }
  }
  return record;
}

std::string DurableRecordFile::damaged_newer_slot(const char* bytes,
                                                  std::uint64_t valid_sequence) {
  if (decode_slot(bytes, kSlotStrideBytes)) return {};  // valid, hence older: no fallback
  bool blank = true;
  for (std::uint64_t i = 0; i < kSlotStrideBytes && blank; ++i) blank = bytes[i] == '\0';
  if (blank) return {};  // never written (the file has had one write)
  if (get_u32(bytes) == kMagic && get_u32(bytes + 8) == kVersion) {
    const std::uint64_t sequence = get_u64(bytes + 16);
    // write() numbers each record one above the other slot's, so the only older record this slot
    // can hold is the valid one's predecessor: damaged, it loses nothing. Any other number is the
    // newer record's, or a damaged sequence field (which the checksum covers too).
    if (sequence + 1 == valid_sequence) return {};
    if (sequence > valid_sequence) {
      return "is damaged (its checksum does not match: a crash in the middle of its write, or "
             "damage on disk) and held the newer record (sequence " +
             std::to_string(sequence) + ")";
    }
    return "is damaged (its checksum does not match, and its sequence field reads " +
           std::to_string(sequence) + ", not the older record's " +
           std::to_string(valid_sequence - 1) + ") and may have held the newer record";
  }
  return "is damaged (its header is not a record's: a crash in the middle of its write, or damage "
         "on disk) and may have held the newer record";
}

Status DurableRecordFile::write(std::string_view payload) {
  if (payload.size() > kMaxPayloadBytes) {
    return Status::invalid_argument("durable record payload of " + std::to_string(payload.size()) +
                                    " bytes exceeds " + std::to_string(kMaxPayloadBytes));
  }
  const int slot = current_slot_ == 0 ? 1 : 0;
  const std::uint64_t sequence = current_sequence_ + 1;
  char* out = mapping_->data() + static_cast<std::uint64_t>(slot) * kSlotStrideBytes;
  const std::uint64_t total = kSlotHeaderBytes + payload.size();
  put_u32(out + 8, kVersion);
  put_u32(out + 12, static_cast<std::uint32_t>(payload.size()));
  put_u64(out + 16, sequence);
  if (!payload.empty()) std::memcpy(out + kSlotHeaderBytes, payload.data(), payload.size());
  put_u32(out + 4, util::crc32c::value(out + 8, total - 8));
  put_u32(out, kMagic);
  // Paired with decode_slot() (at most 1 KiB, and a write costs a sync anyway): the slot reads back
  // as the newest record before it is made durable.
  const auto written = decode_slot(out, kSlotStrideBytes);
  RAFTLOG_CHECK(written && written->sequence == sequence && written->payload == payload,
                "a written durable record slot decodes back to its record");
  Status status = mapping_->flush(static_cast<std::uint64_t>(slot) * kSlotStrideBytes, total);
  if (!status.ok()) return Status(status.code(), "writing " + path_ + ": " + status.message());
  current_slot_ = slot;
  current_sequence_ = sequence;
  current_ = std::string(payload);
  return Status();
}

}  // namespace raftlog::store

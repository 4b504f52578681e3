// DurableRecordFile: a small record (at most kMaxPayloadBytes) replaced atomically on disk, using two
// alternating checksummed slots in one file. A write goes to the slot NOT holding the newest valid
// record and is made durable before write() returns; a crash mid-write tears at most that slot, whose
// CRC then fails, so read() returns the previous record. The store uses it for its checkpoint; the
// server reuses it for Raft hard state (term, vote).
//
// Layout (little-endian): two slots at offsets 0 and kSlotStrideBytes (separate pages, so one torn
// page never damages both). Slot: u32 magic "RLDR", u32 crc32c over bytes [8, 24 + payload_size),
// u32 format version (1), u32 payload_size, u64 sequence (newest = highest valid), payload.
//
// Threading: not thread-safe; callers serialize.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "store/env.h"
#include "store/status.h"

namespace raftlog::store {

class DurableRecordFile {
 public:
  static constexpr std::uint64_t kSlotStrideBytes = 4096;
  // A slot's page less its header (the layout is unchanged from when this was 1024: files written
  // then read the same). CONFSTATE's addresses need more than 1024.
  static constexpr std::uint32_t kMaxPayloadBytes = kSlotStrideBytes - 24;
  static constexpr std::uint64_t kFileBytes = 2 * kSlotStrideBytes;

  // Opens or creates `path` (creation is made durable with a directory sync of `dir_for_sync`).
  static Result<std::unique_ptr<DurableRecordFile>> open(Env* env, const std::string& path,
                                                         const std::string& dir_for_sync);

  // The newest valid record's payload, or nullopt when neither slot holds a valid record.
  const std::optional<std::string>& current() const { return current_; }
  // The file's size when open() found it (0 for a file it created). Every open() grows the file to
  // kFileBytes before any write, so a shorter file that holds a valid record was cut short after it
  // was written (a copy or a hand's truncation), and the slot the cut removed may have been the
  // newer one: callers refuse it rather than take the older record for the current one.
  std::uint64_t bytes_at_open() const { return bytes_at_open_; }
  // Why open() fell back to the older slot, "" when it did not: the other slot is damaged (not
  // blank, not valid) and held, or may have held, a newer record. open() logs it as a warning with
  // the file and the slots; the record read is then older than the one the file last held.
  const std::string& fallback() const { return fallback_; }
  // Durably replaces the record. kInvalidArgument above kMaxPayloadBytes.
  Status write(std::string_view payload);

  // Decodes one slot; nullopt when invalid. Exposed for tests and tools.
  struct Slot {
    std::uint64_t sequence = 0;
    std::string payload;
  };
  static std::optional<Slot> decode_slot(const char* bytes, std::uint64_t available_bytes);

 private:
  DurableRecordFile(std::string path, std::shared_ptr<Mapping> mapping);
  // The reason for fallback() given the other slot's bytes and the valid slot's sequence.
  static std::string damaged_newer_slot(const char* bytes, std::uint64_t valid_sequence);
  std::string path_;
  std::shared_ptr<Mapping> mapping_;
  std::optional<std::string> current_;
  std::uint64_t current_sequence_ = 0;
  int current_slot_ = -1;  // -1: none valid
  std::uint64_t bytes_at_open_ = 0;
  std::string fallback_;
};

}  // namespace raftlog::store

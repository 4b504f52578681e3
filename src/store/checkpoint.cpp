#include "store/checkpoint.h"

#include "store/endian.h"
#include "util/check.h"

namespace raftlog::store {
namespace {
constexpr std::uint32_t kCheckpointVersion = 1;
constexpr std::size_t kCheckpointBytes = 56;
// A checkpoint that carries a reset intent (checkpoint.h).
constexpr std::uint32_t kResetCheckpointVersion = 2;
constexpr std::size_t kResetCheckpointBytes = 72;
}  // namespace

std::string encode_checkpoint(const Checkpoint& checkpoint) {
  const bool resetting = checkpoint.reset_base != 0;
  std::string out(resetting ? kResetCheckpointBytes : kCheckpointBytes, '\0');
  char* p = out.data();
  put_u32(p, resetting ? kResetCheckpointVersion : kCheckpointVersion);
  put_u64(p + 8, checkpoint.flushed_index);
  put_u64(p + 16, checkpoint.flushed_segment_base);
  put_u64(p + 24, checkpoint.flushed_offset);
  put_u64(p + 32, checkpoint.commit_index);
  put_u64(p + 40, checkpoint.truncate_from);
  put_u64(p + 48, checkpoint.generation);
  if (resetting) {
    put_u64(p + 56, checkpoint.reset_base);
    put_u64(p + 64, checkpoint.reset_prev_term);
  } else {
    RAFTLOG_CHECK(checkpoint.reset_prev_term == 0, "a reset's term needs its base");
  }
  RAFTLOG_CHECK(decode_checkpoint(out) == checkpoint,
                "an encoded checkpoint decodes back to itself");
  return out;
}

std::optional<Checkpoint> decode_checkpoint(std::string_view payload) {
  if (payload.size() < 4) return std::nullopt;
  const char* p = payload.data();
  const std::uint32_t version = get_u32(p);
  const bool resetting = version == kResetCheckpointVersion;
  if (version != kCheckpointVersion && !resetting) return std::nullopt;
  if (payload.size() != (resetting ? kResetCheckpointBytes : kCheckpointBytes)) return std::nullopt;
  Checkpoint checkpoint;
  checkpoint.flushed_index = get_u64(p + 8);
  checkpoint.flushed_segment_base = get_u64(p + 16);
  checkpoint.flushed_offset = get_u64(p + 24);
  checkpoint.commit_index = get_u64(p + 32);
  checkpoint.truncate_from = get_u64(p + 40);
  checkpoint.generation = get_u64(p + 48);
  if (resetting) {
    checkpoint.reset_base = get_u64(p + 56);
    checkpoint.reset_prev_term = get_u64(p + 64);
    if (checkpoint.reset_base == 0) return std::nullopt;  // version 2 exists only for a reset
  }
  return checkpoint;
}

}  // namespace raftlog::store

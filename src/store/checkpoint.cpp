#include "store/checkpoint.h"

#include "store/endian.h"
#include "util/check.h"

namespace raftlog::store {
namespace {
constexpr std::uint32_t kCheckpointVersion = 1;
constexpr std::size_t kCheckpointBytes = 56;
}  // namespace

std::string encode_checkpoint(const Checkpoint& checkpoint) {
  std::string out(kCheckpointBytes, '\0');
  char* p = out.data();
  put_u32(p, kCheckpointVersion);
  put_u64(p + 8, checkpoint.flushed_index);
  put_u64(p + 16, checkpoint.flushed_segment_base);
  put_u64(p + 24, checkpoint.flushed_offset);
  put_u64(p + 32, checkpoint.commit_index);
  put_u64(p + 40, checkpoint.truncate_from);
  put_u64(p + 48, checkpoint.generation);
  RAFTLOG_CHECK(decode_checkpoint(out) == checkpoint,
                "an encoded checkpoint decodes back to itself");
  return out;
}

std::optional<Checkpoint> decode_checkpoint(std::string_view payload) {
  if (payload.size() != kCheckpointBytes) return std::nullopt;
  const char* p = payload.data();
  if (get_u32(p) != kCheckpointVersion) return std::nullopt;
  Checkpoint checkpoint;
  checkpoint.flushed_index = get_u64(p + 8);
  checkpoint.flushed_segment_base = get_u64(p + 16);
  checkpoint.flushed_offset = get_u64(p + 24);
  checkpoint.commit_index = get_u64(p + 32);
  checkpoint.truncate_from = get_u64(p + 40);
  checkpoint.generation = get_u64(p + 48);
  return checkpoint;
}

}  // namespace raftlog::store

// ConfState <-> kConfig entry payload. Versioned and checksummed: a config read back from a log decides
// who votes, so a torn or foreign payload must be rejected, never half-parsed.

#include "raft/assert.h"
#include "raft/types.h"
#include "util/crc32c.h"

namespace raftlog::raft {
namespace {

constexpr std::uint8_t kConfigFormatVersion = 1;
constexpr std::size_t kVersionBytes = 1;
constexpr std::size_t kCountBytes = 4;
constexpr std::size_t kVoterBytes = 8;
constexpr std::size_t kChecksumBytes = 4;

void put_le(std::string& out, std::uint64_t value, std::size_t width_bytes) {
  for (std::size_t i = 0; i < width_bytes; ++i) {
    out.push_back(static_cast<char>((value >> (8 * i)) & 0xFFu));
  }
}

std::uint64_t get_le(const std::string& in, std::size_t offset, std::size_t width_bytes) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < width_bytes; ++i) {
    value |= static_cast<std::uint64_t>(static_cast<unsigned char>(in[offset + i])) << (8 * i);
  }
  return value;
}

}  // namespace

bool is_valid_conf(const ConfState& conf) {
  if (conf.voters.empty() || conf.voters.size() > kMaxVoters) return false;
  for (std::size_t i = 0; i < conf.voters.size(); ++i) {
    if (conf.voters[i] == kNoNode) return false;
    if (i > 0 && conf.voters[i - 1] >= conf.voters[i]) return false;  // sorted and unique
  }
  return true;
}

std::string encode_config(const ConfState& conf) {
  RAFT_ASSERT(is_valid_conf(conf), "encode_config needs a sorted, unique, non-empty voter set");
  std::string out;
  out.reserve(kVersionBytes + kCountBytes + kVoterBytes * conf.voters.size() + kChecksumBytes);
  put_le(out, kConfigFormatVersion, kVersionBytes);
  put_le(out, conf.voters.size(), kCountBytes);
  for (NodeId voter : conf.voters) put_le(out, voter, kVoterBytes);
  put_le(out, util::crc32c::value(out.data(), out.size()), kChecksumBytes);
  return out;
}

std::optional<ConfState> decode_config(const std::string& payload) {
  if (payload.size() < kVersionBytes + kCountBytes + kChecksumBytes) return std::nullopt;
  if (get_le(payload, 0, kVersionBytes) != kConfigFormatVersion) return std::nullopt;
  const std::uint64_t count = get_le(payload, kVersionBytes, kCountBytes);
  if (count == 0 || count > kMaxVoters) return std::nullopt;
  const std::size_t body_bytes = kVersionBytes + kCountBytes + kVoterBytes * count;
  if (payload.size() != body_bytes + kChecksumBytes)
    return std::nullopt;  // strict length: no trailing bytes
  if (get_le(payload, body_bytes, kChecksumBytes) !=
      util::crc32c::value(payload.data(), body_bytes)) {
    return std::nullopt;
  }
  ConfState conf;
  conf.voters.reserve(count);
  for (std::uint64_t i = 0; i < count; ++i) {
    conf.voters.push_back(
        get_le(payload, kVersionBytes + kCountBytes + kVoterBytes * i, kVoterBytes));
  }
  if (!is_valid_conf(conf)) return std::nullopt;
  return conf;
}

}  // namespace raftlog::raft

// A consumer group's offset commit as it travels through the log (docs/storage-format.md, "Group
// offset commit"): the payload of an entry whose store flags have kEntryFlagGroupCommit
// (src/replica/store_log_reader.h). Little-endian:
//
//   offset size field
//   0      1    commit format version (kGroupCommitVersion)
//   1      1    group length g (1..kMaxGroupBytes)
//   2      g    group ([A-Za-z0-9._-], starting with a letter or digit, like a topic)
//   2+g    1    topic length t (1..kMaxTopicBytes)
//   3+g    t    topic (derived::topic_problem)
//   3+g+t  8    offset: the next offset of the topic the group will read
//
// and nothing after it: at most kMaxGroupCommitBytes. The entry's CRC32C covers it on disk; the
// decoder still trusts nothing (a forged or damaged commit is refused, never read past its end).
// It is not an envelope (src/derived/envelope.h) and never carries one: the two flags are
// exclusive, and an entry with both is refused here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "derived/envelope.h"

namespace raftlog::derived {

inline constexpr std::uint8_t kGroupCommitVersion = 1;
inline constexpr std::size_t kMaxGroupBytes = 128;
inline constexpr std::size_t kMaxGroupCommitBytes = 1 + 1 + kMaxGroupBytes + 1 + kMaxTopicBytes + 8;

struct GroupCommit {
  std::string group;
  std::string topic;
  std::uint64_t offset = 0;
  friend bool operator==(const GroupCommit&, const GroupCommit&) = default;
};

// Why a group name is refused: "" when valid, else a sentence for an INVALID_ARGUMENT message.
std::string group_problem(std::string_view group);

// The payload for `commit`, whose group and topic must be valid (checked: std::logic_error).
std::string encode_group_commit(const GroupCommit& commit);

enum class GroupCommitDecode {
  kOk,
  kTruncated,   // shorter than its lengths say
  kTrailing,    // bytes after the offset
  kBadVersion,  // unknown commit format version
  kBadGroup,    // empty, too long or outside the charset
  kBadTopic,    // empty, too long or outside the charset
};
const char* to_string(GroupCommitDecode result);

GroupCommitDecode decode_group_commit(std::string_view payload, GroupCommit* out);

}  // namespace raftlog::derived

#include "derived/group_commit.h"

#include <stdexcept>

#include "store/endian.h"

namespace raftlog::derived {

std::string group_problem(std::string_view group) {
  if (group.empty()) return "the group name is empty";
  if (group.size() > kMaxGroupBytes) {
    return "the group name is " + std::to_string(group.size()) + " bytes, more than the " +
           std::to_string(kMaxGroupBytes) + " allowed";
  }
  // Groups follow the topics' charset (topic_problem checks only charset and length).
  if (!topic_problem(group).empty()) {
    return "the group name may hold only letters, digits, '.', '_' and '-', and must start with a "
           "letter or digit";
  }
  return "";
}

std::string encode_group_commit(const GroupCommit& commit) {
  if (!group_problem(commit.group).empty() || !topic_problem(commit.topic).empty()) {
    throw std::logic_error("encode_group_commit: invalid group or topic");
  }
  std::string out;
  out.reserve(3 + commit.group.size() + commit.topic.size() + 8);
  out.push_back(static_cast<char>(kGroupCommitVersion));
  out.push_back(static_cast<char>(commit.group.size()));
  out += commit.group;
  out.push_back(static_cast<char>(commit.topic.size()));
  out += commit.topic;
  char offset[8];
  store::put_u64(offset, commit.offset);
  out.append(offset, 8);
  return out;
}

const char* to_string(GroupCommitDecode result) {
  switch (result) {
    case GroupCommitDecode::kOk:
      return "ok";
    case GroupCommitDecode::kTruncated:
      return "truncated";
    case GroupCommitDecode::kTrailing:
      return "trailing bytes";
    case GroupCommitDecode::kBadVersion:
      return "unknown version";
    case GroupCommitDecode::kBadGroup:
      return "bad group";
    case GroupCommitDecode::kBadTopic:
      return "bad topic";
  }
  return "unknown";
}

GroupCommitDecode decode_group_commit(std::string_view payload, GroupCommit* out) {
  std::size_t pos = 0;
  auto take_name = [&](std::string* name) {
    if (payload.size() - pos < 1) return false;
    const std::size_t size = static_cast<unsigned char>(payload[pos]);
    ++pos;
    if (payload.size() - pos < size) return false;
    name->assign(payload.substr(pos, size));
    pos += size;
    return true;
  };
  if (payload.empty()) return GroupCommitDecode::kTruncated;
  if (static_cast<unsigned char>(payload[0]) != kGroupCommitVersion) {
    return GroupCommitDecode::kBadVersion;
  }
  pos = 1;
  GroupCommit commit;
  if (!take_name(&commit.group)) return GroupCommitDecode::kTruncated;
  if (!group_problem(commit.group).empty()) return GroupCommitDecode::kBadGroup;
  if (!take_name(&commit.topic)) return GroupCommitDecode::kTruncated;
  if (!topic_problem(commit.topic).empty()) return GroupCommitDecode::kBadTopic;
  if (payload.size() - pos < 8) return GroupCommitDecode::kTruncated;
  commit.offset = store::get_u64(payload.data() + pos);
  pos += 8;
  if (pos != payload.size()) return GroupCommitDecode::kTrailing;
  *out = std::move(commit);
  return GroupCommitDecode::kOk;
}

}  // namespace raftlog::derived

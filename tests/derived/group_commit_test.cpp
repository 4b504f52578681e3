// The consumer group commit codec (derived/group_commit.h): round trips, and every truncation,
// flipped byte and hostile length refused or decoded to a valid commit, never read past the end.
#include <gtest/gtest.h>

#include <string>

#include "derived/group_commit.h"
#include "util/prng.h"

namespace raftlog::derived {
namespace {

TEST(GroupCommitCodec, RoundTripsAtItsBounds) {
  const GroupCommit commits[] = {
      {"g", "t", 0},
      {"billing-consumers.v2", "orders", 4711},
      {std::string(kMaxGroupBytes, 'g'), std::string(kMaxTopicBytes, 't'), ~std::uint64_t{0}},
  };
  for (const GroupCommit& commit : commits) {
    const std::string bytes = encode_group_commit(commit);
    EXPECT_LE(bytes.size(), kMaxGroupCommitBytes);
    GroupCommit decoded;
    ASSERT_EQ(decode_group_commit(bytes, &decoded), GroupCommitDecode::kOk);
    EXPECT_EQ(decoded, commit);
  }
  EXPECT_EQ(encode_group_commit(commits[2]).size(), kMaxGroupCommitBytes);
}

TEST(GroupCommitCodec, GroupNamesAreCheckedLikeTopics) {
  EXPECT_EQ(group_problem("consumers-1.a_b"), "");
  EXPECT_NE(group_problem(""), "");
  EXPECT_NE(group_problem(std::string(kMaxGroupBytes + 1, 'g')), "");
  EXPECT_NE(group_problem("-leading-dash"), "");
  EXPECT_NE(group_problem("a/b"), "");
  EXPECT_NE(group_problem(".."), "");
  EXPECT_NE(group_problem(std::string("a\0b", 3)), "");
  EXPECT_THROW(encode_group_commit({"bad/group", "t", 1}), std::logic_error);
  EXPECT_THROW(encode_group_commit({"g", "", 1}), std::logic_error);
}

TEST(GroupCommitCodec, EveryTruncationIsRefused) {
  const std::string bytes = encode_group_commit({"group", "topic", 99});
  for (std::size_t size = 0; size < bytes.size(); ++size) {
    GroupCommit decoded;
    EXPECT_EQ(decode_group_commit(bytes.substr(0, size), &decoded), GroupCommitDecode::kTruncated)
        << size;
  }
  GroupCommit decoded;
  EXPECT_EQ(decode_group_commit(bytes + "x", &decoded), GroupCommitDecode::kTrailing);
}

TEST(GroupCommitCodec, HostileFieldsAreRefused) {
  std::string bytes = encode_group_commit({"group", "topic", 99});
  GroupCommit decoded;
  std::string version = bytes;
  version[0] = 2;
  EXPECT_EQ(decode_group_commit(version, &decoded), GroupCommitDecode::kBadVersion);
  std::string long_group = bytes;
  long_group[1] = static_cast<char>(0xFF);  // 255 bytes claimed, far past the payload
  EXPECT_EQ(decode_group_commit(long_group, &decoded), GroupCommitDecode::kTruncated);
  std::string empty_group = bytes;
  empty_group[1] = 0;
  EXPECT_NE(decode_group_commit(empty_group, &decoded), GroupCommitDecode::kOk);
  std::string bad_char = bytes;
  bad_char[3] = '/';
  EXPECT_EQ(decode_group_commit(bad_char, &decoded), GroupCommitDecode::kBadGroup);
  std::string bad_topic = bytes;
  bad_topic[2 + 5 + 1] = '\n';  // first topic byte
  EXPECT_EQ(decode_group_commit(bad_topic, &decoded), GroupCommitDecode::kBadTopic);
  // A 200-byte group fits in a payload of that size but not in the bounds.
  std::string oversized = {char(kGroupCommitVersion), char(200)};
  oversized += std::string(200, 'g');
  oversized += std::string({char(1), 't'});
  oversized += std::string(8, '\0');
  EXPECT_EQ(decode_group_commit(oversized, &decoded), GroupCommitDecode::kBadGroup);
}

TEST(GroupCommitCodec, FlippedBytesAreRefusedOrDecodeToAValidCommit) {
  const std::string bytes = encode_group_commit({"consumers", "orders", 123456});
  util::Prng prng(16);
  for (int round = 0; round < 20000; ++round) {
    std::string damaged = bytes;
    for (std::uint64_t flips = 1 + prng.below(3); flips > 0; --flips) {
      damaged[prng.below(damaged.size())] ^= static_cast<char>(1 + prng.below(255));
    }
    if (prng.below(4) == 0) damaged.resize(prng.below(damaged.size() + 1));
    GroupCommit decoded;
    if (decode_group_commit(damaged, &decoded) == GroupCommitDecode::kOk) {
      EXPECT_EQ(group_problem(decoded.group), "");
      EXPECT_EQ(topic_problem(decoded.topic), "");
      EXPECT_EQ(encode_group_commit(decoded), damaged);  // exactly what it decoded from
    }
  }
}

}  // namespace
}  // namespace raftlog::derived

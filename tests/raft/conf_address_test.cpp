// Member addresses in configurations (format 3 of the kConfig payload): they round-trip, every
// truncation and every bit flip is refused, format 2 still reads, the core's changes carry them
// (opaque to its decisions, which stay on ids), and hostile addresses are refused.
#include <gtest/gtest.h>

#include "raft/types.h"
#include "util/crc32c.h"

namespace raftlog::raft {
namespace {

ConfState with_addresses() {
  ConfState conf{{1, 2, 3}, {4}};
  conf.addresses = {{1, "10.0.0.1:7001"}, {2, "node-2.example:7001"}, {4, "[::1]:7004"}};
  return conf;
}

TEST(ConfAddresses, Format3RoundTripsAndFormat2StillReads) {
  const ConfState conf = with_addresses();
  ASSERT_TRUE(is_valid_conf(conf));
  const std::string encoded = encode_config(conf);
  EXPECT_EQ(encoded[0], 3);
  EXPECT_EQ(decode_config(encoded), conf);
  ASSERT_NE(address_of(conf, 2), nullptr);
  EXPECT_EQ(*address_of(conf, 2), "node-2.example:7001");
  EXPECT_EQ(address_of(conf, 3), nullptr);
  // Without addresses the encoding is format 2, what older nodes read.
  const ConfState ids_only{{1, 2, 3}, {4}};
  const std::string format2 = encode_config(ids_only);
  EXPECT_EQ(format2[0], 2);
  EXPECT_EQ(decode_config(format2), ids_only);
  EXPECT_TRUE(same_members(*decode_config(format2), conf));
}

TEST(ConfAddresses, EveryTruncationAndEveryBitFlipIsRefused) {
  const std::string encoded = encode_config(with_addresses());
  for (std::size_t cut = 0; cut < encoded.size(); ++cut) {
    EXPECT_FALSE(decode_config(encoded.substr(0, cut)).has_value()) << "cut at " << cut;
  }
  EXPECT_FALSE(decode_config(encoded + "x").has_value());
  for (std::size_t byte = 0; byte < encoded.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string flipped = encoded;
      flipped[byte] = static_cast<char>(flipped[byte] ^ (1 << bit));
      EXPECT_FALSE(decode_config(flipped).has_value()) << "byte " << byte << " bit " << bit;
    }
  }
}

// A payload with a valid CRC around a hostile address list: the codec's structure checks, not the
// checksum, must refuse it.
std::string forge_with_address(NodeId node, const std::string& address) {
  std::string out;
  auto put = [&](std::uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
  };
  put(3, 1);
  put(1, 4);
  put(1, 8);  // voter 1
  put(0, 4);  // no learners
  put(1, 4);  // one address
  put(node, 8);
  put(address.size(), 2);
  out += address;
  put(util::crc32c::value(out.data(), out.size()), 4);
  return out;
}

TEST(ConfAddresses, HostileAddressesAreRefused) {
  EXPECT_TRUE(decode_config(forge_with_address(1, "127.0.0.1:7001")).has_value());
  EXPECT_FALSE(decode_config(forge_with_address(2, "127.0.0.1:7001")).has_value()) << "non-member";
  EXPECT_FALSE(decode_config(forge_with_address(0, "127.0.0.1:7001")).has_value());
  const std::vector<std::string> hostile = {"",       "no-port", "host:0", "host:65536",
                                            "a b:1", "h\x01:1",
                                            std::string(kMaxMemberAddressBytes, 'a') + ":1"};
  for (const std::string& bad : hostile) {
    EXPECT_FALSE(decode_config(forge_with_address(1, bad)).has_value()) << bad;
    EXPECT_FALSE(check_member_address(bad).empty()) << bad;
  }
  ConfState two_same{{1, 2}};
  two_same.addresses = {{1, "h:1"}, {2, "h:1"}};
  EXPECT_FALSE(is_valid_conf(two_same)) << "two members, one address";
}

TEST(ConfAddresses, ChangesCarryAddressesAndKeepDecidingOnIds) {
  ConfState conf{{1, 2, 3}};
  conf.addresses = {{1, "h1:1"}, {2, "h2:1"}, {3, "h3:1"}};
  ConfChange add{ConfChangeType::kAddLearner, 4, {{1, "h1:1"}, {2, "h2:1"}, {3, "h3:1"}, {4, "h4:1"}}};
  ASSERT_EQ(check_conf_change(conf, add), ConfChangeProblem::kNone);
  const ConfState added = apply_conf_change(conf, add);
  EXPECT_EQ(added.learners, (std::vector<NodeId>{4}));
  ASSERT_NE(address_of(added, 4), nullptr);
  EXPECT_EQ(*address_of(added, 4), "h4:1");
  // A removal without addresses keeps the rest's and drops the removed member's.
  const ConfState removed = apply_conf_change(added, {ConfChangeType::kRemoveNode, 2});
  EXPECT_EQ(address_of(removed, 2), nullptr);
  EXPECT_EQ(removed.addresses.size(), 3U);
  // The followers' check finds the one change, addresses included.
  EXPECT_EQ(single_change_between(conf, added), add);
  EXPECT_TRUE(single_change_between(added, removed).has_value());
  // Problems of the addresses themselves.
  ConfChange taken{ConfChangeType::kAddLearner, 4, {{1, "h1:1"}, {4, "h1:1"}}};
  EXPECT_EQ(check_conf_change(conf, taken), ConfChangeProblem::kAddressInUse);
  ConfChange bad{ConfChangeType::kAddLearner, 4, {{4, "nowhere"}}};
  EXPECT_EQ(check_conf_change(conf, bad), ConfChangeProblem::kBadAddress);
  ConfChange unsorted{ConfChangeType::kAddLearner, 4, {{4, "h4:1"}, {1, "h1:1"}}};
  EXPECT_EQ(check_conf_change(conf, unsorted), ConfChangeProblem::kBadAddress);
  // The role rules still come first.
  EXPECT_EQ(check_conf_change(conf, ConfChange{ConfChangeType::kAddLearner, 2, {{2, "x:1"}}}),
            ConfChangeProblem::kAlreadyMember);
}

TEST(ConfAddresses, AConfigurationLargerThanTheBoundIsRefused) {
  ConfState conf{{1}};
  std::vector<MemberAddress> addresses = {{1, "h:1"}};
  ConfChange change{ConfChangeType::kAddLearner, 0, {}};
  NodeId next = 2;
  ConfChangeProblem problem = ConfChangeProblem::kNone;
  while (problem == ConfChangeProblem::kNone && next < kMaxMembers) {
    const std::string long_name = std::string(100, 'a') + std::to_string(next) + ":1";
    change = ConfChange{ConfChangeType::kAddLearner, next, addresses};
    change.addresses.push_back({next, long_name});
    problem = check_conf_change(conf, change);
    if (problem == ConfChangeProblem::kNone) {
      conf = apply_conf_change(conf, change);
      addresses = conf.addresses;
      ++next;
    }
  }
  EXPECT_EQ(problem, ConfChangeProblem::kTooLarge);
  EXPECT_LE(encode_config(conf).size(), kMaxConfigBytes);
  EXPECT_TRUE(decode_config(encode_config(conf)).has_value());
}

}  // namespace
}  // namespace raftlog::raft

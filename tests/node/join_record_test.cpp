// DIR/JOIN (server/join.h): what a joining node learnt from the cluster round-trips, and anything
// else is refused; applying it gives the node its seed and the cluster's bootstrap voters.
#include "server/join.h"

#include <gtest/gtest.h>

#include "temp_dir.h"
#include "raft/raft.h"
#include "server/node_config.h"

namespace raftlog::server {
namespace {

JoinRecord sample() {
  JoinRecord record;
  record.bootstrap_voters = {1, 2, 3};
  record.seed = {{1, "10.0.0.1:7001"}, {2, "10.0.0.2:7001"}, {5, "[::1]:7005"}};
  return record;
}

TEST(JoinRecord, RoundTripsAndRefusesAnythingElse) {
  const std::string encoded = encode_join_record(sample());
  auto decoded = decode_join_record(encoded);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(*decoded, sample());
  for (std::size_t cut = 0; cut < encoded.size(); ++cut) {
    EXPECT_FALSE(decode_join_record(encoded.substr(0, cut)).ok()) << "cut at " << cut;
  }
  for (std::size_t i = 0; i < encoded.size(); ++i) {
    std::string flipped = encoded;
    flipped[i] = static_cast<char>(flipped[i] ^ 0x01);
    EXPECT_FALSE(decode_join_record(flipped).ok()) << "byte " << i;
  }
  JoinRecord no_voters = sample();
  no_voters.bootstrap_voters.clear();
  EXPECT_FALSE(decode_join_record(encode_join_record(no_voters)).ok());
  JoinRecord no_seed = sample();
  no_seed.seed.clear();
  EXPECT_FALSE(decode_join_record(encode_join_record(no_seed)).ok()) << "an empty seed";
  JoinRecord bad_address = sample();
  bad_address.seed[9] = "nowhere";
  EXPECT_FALSE(decode_join_record(encode_join_record(bad_address)).ok());
}

TEST(JoinRecord, IsKeptInTheDataDirectoryAndApplied) {
  testing::TempDir dir;
  auto none = read_join_record(dir.path());
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  EXPECT_FALSE(data_dir_has_state(dir.path()));
  ASSERT_EQ(write_join_record(dir.path(), sample()), "");
  auto read = read_join_record(dir.path());
  ASSERT_TRUE(read.ok()) << read.status().to_string();
  ASSERT_TRUE(read->has_value());
  EXPECT_EQ(**read, sample());
  NodeConfig config;
  config.node_id = 5;
  config.members[5] = "127.0.0.1:7005";
  apply_join_record(sample(), &config);
  EXPECT_EQ(config.members.size(), 3U);  // 1, 2 and this node (its own address kept)
  EXPECT_EQ(config.members.at(5), "127.0.0.1:7005");
  EXPECT_EQ(config.bootstrap_voters, (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_EQ(raft_config_for(config).initial_conf.voters, (std::vector<raft::NodeId>{1, 2, 3}));
}

}  // namespace
}  // namespace raftlog::server

namespace raftlog::server {
namespace {

// A node on an empty directory joining under an id the cluster already knows would vote without
// the hard state and log that id once had: refused whether the id is listed or a bootstrap voter.
TEST(JoinRecord, JoiningUnderAKnownIdIsRefused) {
  EXPECT_EQ(join_identity_problem({1, 2, 3}, {1, 2, 3}, 4), "");
  EXPECT_NE(join_identity_problem({1, 2, 3, 4}, {1, 2, 3}, 4).find("as a member already"),
            std::string::npos);
  // Removed from the configuration since, but a bootstrap voter: its id is never reused.
  EXPECT_NE(join_identity_problem({2, 3}, {1, 2, 3}, 1).find("bootstrap voters"),
            std::string::npos);
  EXPECT_NE(join_identity_problem({1, 2, 3}, {1, 2, 3}, 3), "");
  EXPECT_NE(join_identity_problem({1, 2, 3}, {1, 2, 3}, 5, {4, 5}).find("removed from the cluster"),
            std::string::npos)
      << "a retired id";
  EXPECT_EQ(join_identity_problem({1, 2, 3}, {1, 2, 3}, 6, {4, 5}), "");
}

}  // namespace
}  // namespace raftlog::server

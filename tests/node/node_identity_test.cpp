// DIR/IDENTITY (src/server/node_identity.h): the file's encoding is strict, a fresh or pre-identity
// directory gets one, and a directory of another cluster or node is refused without being changed.
#include "server/node_identity.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "temp_dir.h"

namespace raftlog::server {
namespace {

using testing::TempDir;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

NodeConfig config_for(const std::string& dir, const std::string& cluster_id,
                      std::uint64_t node_id) {
  NodeConfig config;
  config.node_id = node_id;
  config.members = {{1, "127.0.0.1:1"}, {2, "127.0.0.1:2"}, {3, "127.0.0.1:3"}};
  config.cluster_id = cluster_id;
  config.data_dir = dir + "/data";
  return config;
}

// Every file below `dir` with its content, to show a refusal changed nothing.
std::map<std::string, std::string> snapshot(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    files[entry.path().string()] =
        entry.is_regular_file() ? read_file(entry.path().string()) : "<dir>";
  }
  return files;
}

TEST(NodeIdentity, EncodingRoundTripsAndIsReadable) {
  const DataDirIdentity identity{"prod-7f3a9c", 3};
  const std::string bytes = encode_identity(identity);
  EXPECT_EQ(bytes.rfind("raftlog-identity 1\ncluster-id prod-7f3a9c\nnode-id 3\ncrc32c ", 0), 0u)
      << bytes;
  auto decoded = decode_identity(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(*decoded, identity);
}

TEST(NodeIdentity, DecodeRefusesAnythingElse) {
  const std::string good = encode_identity(DataDirIdentity{"prod-7f3a9c", 3});
  std::string flipped = good;
  flipped[good.find("node-id 3") + 8] = '4';  // the node id changed, the checksum not
  std::string newer = good;
  newer[std::string("raftlog-identity ").size()] = '2';
  const std::map<std::string, std::string> cases = {
      {"empty", ""},
      {"other magic", "raftlog-hardstate 1\n"},
      {"bit flip", flipped},
      {"newer version", newer},
      {"truncated", good.substr(0, good.size() - 1)},
      {"trailing bytes", good + "x"},
      {"extra line", good + "more\n"},
      {"node id 0", encode_identity(DataDirIdentity{"prod", 0})},
      {"empty cluster id", encode_identity(DataDirIdentity{"", 1})},
      {"cluster id with a space", encode_identity(DataDirIdentity{"a b", 1})},
      {"oversize", std::string(kMaxIdentityFileBytes + 1, 'x')},
  };
  for (const auto& [name, bytes] : cases) {
    SCOPED_TRACE(name);
    auto decoded = decode_identity(bytes);
    ASSERT_FALSE(decoded.ok());
    EXPECT_EQ(decoded.status().code(), store::StatusCode::kCorruption);
  }
  EXPECT_NE(decode_identity(newer).status().message().find("unknown format version 2"),
            std::string::npos);
}

TEST(NodeIdentity, FreshDirectoryGetsAnIdentityAndIsAcceptedAfterwards) {
  TempDir dir;
  const NodeConfig config = config_for(dir.path(), "cluster-a", 2);
  EXPECT_EQ(check_data_dir_identity(config), "");  // does not exist yet
  EXPECT_FALSE(std::filesystem::exists(config.data_dir)) << "the check must not create anything";
  ASSERT_EQ(establish_data_dir_identity(config), "");
  auto written = decode_identity(read_file(config.data_dir + "/IDENTITY"));
  ASSERT_TRUE(written.ok()) << written.status().to_string();
  EXPECT_EQ(*written, (DataDirIdentity{"cluster-a", 2}));
  EXPECT_FALSE(std::filesystem::exists(config.data_dir + "/IDENTITY.tmp"));
  EXPECT_EQ(check_data_dir_identity(config), "");
  EXPECT_EQ(establish_data_dir_identity(config), "");
}

TEST(NodeIdentity, AnotherClustersOrNodesDirectoryIsRefusedUnchanged) {
  TempDir dir;
  ASSERT_EQ(establish_data_dir_identity(config_for(dir.path(), "cluster-a", 2)), "");
  std::ofstream(dir.path() + "/data/HARDSTATE") << "stand-in";
  const auto before = snapshot(dir.path());

  const NodeConfig other_cluster = config_for(dir.path(), "cluster-b", 2);
  const std::string cluster_problem = check_data_dir_identity(other_cluster);
  EXPECT_NE(cluster_problem.find("belongs to cluster \"cluster-a\""), std::string::npos)
      << cluster_problem;
  EXPECT_NE(cluster_problem.find("--cluster-id \"cluster-b\""), std::string::npos)
      << cluster_problem;
  EXPECT_EQ(establish_data_dir_identity(other_cluster), cluster_problem);

  const NodeConfig other_node = config_for(dir.path(), "cluster-a", 3);
  const std::string node_problem = check_data_dir_identity(other_node);
  EXPECT_NE(node_problem.find("belongs to node 2"), std::string::npos) << node_problem;
  EXPECT_NE(node_problem.find("this is node 3"), std::string::npos) << node_problem;
  // The remedy never sends the operator to copy another member's HARDSTATE: it holds that member's
  // vote (outside test L1: the message used to say "copying only log/ and HARDSTATE").
  EXPECT_NE(node_problem.find("never copy another member's HARDSTATE"), std::string::npos)
      << node_problem;
  EXPECT_NE(node_problem.find("members replace"), std::string::npos) << node_problem;
  EXPECT_EQ(establish_data_dir_identity(other_node), node_problem);

  EXPECT_EQ(snapshot(dir.path()), before);
}

TEST(NodeIdentity, DirectoryFromBeforeIdentityFilesIsAdopted) {
  TempDir dir;
  const NodeConfig config = config_for(dir.path(), "cluster-a", 1);
  std::filesystem::create_directories(config.data_dir + "/log");
  std::ofstream(config.data_dir + "/HARDSTATE") << "stand-in";
  EXPECT_EQ(check_data_dir_identity(config), "");
  ASSERT_EQ(establish_data_dir_identity(config), "");
  auto written = decode_identity(read_file(config.data_dir + "/IDENTITY"));
  ASSERT_TRUE(written.ok());
  EXPECT_EQ(*written, (DataDirIdentity{"cluster-a", 1}));
  // From then on it is this cluster's node 1 only.
  EXPECT_NE(check_data_dir_identity(config_for(dir.path(), "cluster-b", 1)), "");
}

TEST(NodeIdentity, DamagedIdentityIsRefusedUnchanged) {
  TempDir dir;
  const NodeConfig config = config_for(dir.path(), "cluster-a", 1);
  std::filesystem::create_directories(config.data_dir);
  std::ofstream(config.data_dir + "/IDENTITY")
      << "raftlog-identity 1\ncluster-id cluster-a\nnode-id 1\ncrc32c 00000000\n";
  const auto before = snapshot(dir.path());
  const std::string problem = check_data_dir_identity(config);
  EXPECT_NE(problem.find("IDENTITY is damaged (its checksum does not match)"), std::string::npos)
      << problem;
  EXPECT_EQ(establish_data_dir_identity(config), problem);
  EXPECT_EQ(snapshot(dir.path()), before);
  // A data "directory" that is a file is refused too.
  NodeConfig file_config = config;
  file_config.data_dir = config.data_dir + "/IDENTITY";
  EXPECT_NE(check_data_dir_identity(file_config).find("is not a directory"), std::string::npos);
}

}  // namespace
}  // namespace raftlog::server

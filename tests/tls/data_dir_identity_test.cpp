// The data directory's IDENTITY over real raftlogd processes (docs/storage-format.md): a node given
// the directory of another cluster, or of another node, exits 2 and leaves every byte of it as it
// was; a directory written before identity files existed is adopted and served.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "shared/command_run.h"
#include "testing/local_cluster.h"

namespace raftlog::testing {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Every file below `dir` with its content and modification time.
std::map<std::string, std::string> snapshot(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    const std::string path = entry.path().string();
    const auto written = std::filesystem::last_write_time(entry.path()).time_since_epoch().count();
    files[path] =
        std::to_string(written) + ":" + (entry.is_regular_file() ? read_file(path) : "<dir>");
  }
  return files;
}

// A stopped one-node cluster holding a few committed entries in data_dir(1).
class DataDirIdentityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LocalClusterOptions options;
    options.raftlogd_path = RAFTLOGD_PATH;
    options.nodes = 1;
    source_ = std::make_unique<LocalCluster>(options);
    source_->start_all();
    ASSERT_NE(source_->wait_for_leader(), 0) << source_->log_tail(1);
    auto appended = source_->client()->append({"a", "b", "c"});
    ASSERT_TRUE(appended.ok()) << appended.status().to_string();
    last_index_ = appended->last_index;
    ASSERT_EQ(source_->stop(1), 0) << source_->log_tail(1);
  }

  // raftlogd on `data_dir`, killed after 5 s if it starts serving (a refusal exits at once).
  static CommandRun run_node(const std::string& flags, const std::string& data_dir) {
    return run_command("timeout -s KILL 5 " + std::string(RAFTLOGD_PATH) + " --data-dir " +
                       data_dir + " " + flags);
  }

  std::unique_ptr<LocalCluster> source_;
  std::uint64_t last_index_ = 0;
};

TEST_F(DataDirIdentityTest, AnotherClustersDirectoryIsRefusedUntouched) {
  // Cluster B's node 1 is stopped and its directory replaced by a copy of cluster A's node 1's.
  LocalClusterOptions options;
  options.raftlogd_path = RAFTLOGD_PATH;
  LocalCluster other(options);
  std::filesystem::copy(source_->data_dir(1), other.data_dir(1),
                        std::filesystem::copy_options::recursive);
  const auto before = snapshot(other.data_dir(1));
  std::string members;
  for (int id = 1; id <= other.size(); ++id) {
    members += (id > 1 ? "," : "") + std::to_string(id) + "=" + other.address(id);
  }
  const CommandRun run =
      run_node("--id 1 --members " + members + " --cluster-id " + other.cluster_id() +
                   " --peer-secret-file " + other.peer_secret_file(),
               other.data_dir(1));
  EXPECT_EQ(run.exit_code, 2) << run.out;
  EXPECT_NE(run.out.find("belongs to cluster \"" + source_->cluster_id() + "\""), std::string::npos)
      << run.out;
  EXPECT_EQ(snapshot(other.data_dir(1)), before) << "the refused directory was modified";
}

TEST_F(DataDirIdentityTest, AnotherNodesDirectoryIsRefusedUntouched) {
  const auto before = snapshot(source_->data_dir(1));
  // The same cluster, now with two members; node 2 is given node 1's directory.
  const CommandRun run =
      run_node("--id 2 --members 1=" + source_->address(1) + ",2=127.0.0.1:1 --cluster-id " +
                   source_->cluster_id() + " --peer-secret-file " + source_->peer_secret_file(),
               source_->data_dir(1));
  EXPECT_EQ(run.exit_code, 2) << run.out;
  EXPECT_NE(run.out.find("belongs to node 1"), std::string::npos) << run.out;
  EXPECT_EQ(snapshot(source_->data_dir(1)), before) << "the refused directory was modified";
}

TEST_F(DataDirIdentityTest, DirectoryFromBeforeIdentityFilesIsAdoptedAndServed) {
  const std::string identity = source_->data_dir(1) + "/IDENTITY";
  ASSERT_TRUE(std::filesystem::remove(identity));
  source_->start(1);
  ASSERT_NE(source_->wait_for_leader(), 0) << source_->log_tail(1);
  const auto entries = source_->read_all(1);
  ASSERT_FALSE(entries.empty());
  EXPECT_GE(entries.back().index, last_index_);
  EXPECT_NE(source_->log_tail(1, 100000).find("has data but no IDENTITY"), std::string::npos);
  const std::string written = read_file(identity);
  EXPECT_NE(written.find("cluster-id " + source_->cluster_id() + "\nnode-id 1\n"),
            std::string::npos)
      << written;
}

}  // namespace
}  // namespace raftlog::testing

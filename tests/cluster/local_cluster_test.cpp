// LocalCluster itself: a sanitizer report in a node's log fails the test process instead of being
// removed with the cluster's directory; output the caller printed before starting a node appears
// once. A shell script stands in for raftlogd (no real node runs).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "testing/local_cluster.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;

// A stand-in for raftlogd that writes `stderr_text` to its stderr and exits 1.
class FakeNode : public ::testing::Test {
 protected:
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove(script_, ignored);
  }

  std::string write_script(const std::string& stderr_text) {
    script_ = std::filesystem::temp_directory_path() /
              ("raftlog-fake-node-" + std::to_string(::getpid()) + "-" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".sh");
    std::ofstream(script_) << "#!/bin/sh\nprintf '%s\\n' '" << stderr_text << "' >&2\nexit 1\n";
    std::filesystem::permissions(script_, std::filesystem::perms::owner_all);
    return script_.string();
  }

  // Starts one node of `script`, waits until it exits and destroys the cluster; returns the
  // cluster's directory.
  static std::string run_one_node(const std::string& script) {
    LocalClusterOptions options;
    options.raftlogd_path = script;
    options.nodes = 1;
    LocalCluster cluster(options);
    cluster.start(1);
    if (!cluster.wait_for_exit(1, 10s).has_value()) return "";
    return std::filesystem::path(cluster.data_dir(1)).parent_path().string();
  }

  std::filesystem::path script_;
};

TEST_F(FakeNode, LogWithoutSanitizerReportIsRemovedWithTheCluster) {
  const std::string root =
      run_one_node(write_script("raftlogd: cannot start: some ordinary error"));
  ASSERT_FALSE(root.empty()) << "the fake node did not exit";
  EXPECT_FALSE(std::filesystem::exists(root));
}

// Removes the directories the aborted clusters kept: those whose node log holds `token`.
void remove_kept_cluster_directories(const std::string& token) {
  for (const auto& entry : std::filesystem::directory_iterator("/tmp")) {
    if (entry.path().filename().string().rfind("raftlog-cluster-test.", 0) != 0) continue;
    std::ifstream log(entry.path() / "n1.log");
    std::stringstream contents;
    contents << log.rdbuf();
    if (contents.str().find(token) != std::string::npos) std::filesystem::remove_all(entry.path());
  }
}

TEST_F(FakeNode, SanitizerReportInANodeLogAbortsTheTestProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // Not the pid: the threadsafe death test runs this body again in a re-executed child.
  const std::string token = "fake-report-of-local_cluster_test";
  const std::string asan =
      write_script("==42==ERROR: AddressSanitizer: heap-use-after-free " + token);
  EXPECT_DEATH(run_one_node(asan),
               "node 1's log .* holds a sanitizer report:\n==42==ERROR: AddressSanitizer");
  const std::string ubsan =
      write_script("src/x.cpp:1:2: runtime error: signed integer overflow " + token);
  EXPECT_DEATH(run_one_node(ubsan),
               "sanitizer report:\nsrc/x.cpp:1:2: runtime error: signed integer overflow");
  remove_kept_cluster_directories(token);
}

// The node inherits the caller's stdio buffers across fork; before the fix, the node's freopen of
// stdout flushed what the caller had printed but not yet flushed to the caller's stdout again.
TEST_F(FakeNode, OutputPrintedBeforeAStartAppearsOnce) {
  const std::string script = write_script("raftlogd: a stand-in");
  const std::filesystem::path captured =
      std::filesystem::temp_directory_path() /
      ("raftlog-local-cluster-stdout-" + std::to_string(::getpid()));
  std::fflush(nullptr);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // A process of its own whose stdout is a file: the caller's stdout in the test below.
    const int fd = ::open(captured.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || ::dup2(fd, STDOUT_FILENO) < 0) std::_Exit(3);
    std::printf("printed-before-start");  // no newline: not flushed even if line-buffered
    run_one_node(script);
    std::printf("\n");
    std::fflush(stdout);
    std::_Exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  std::stringstream contents;
  contents << std::ifstream(captured).rdbuf();
  std::filesystem::remove(captured);
  EXPECT_EQ(contents.str(), "printed-before-start\n");
}

// Every node's peer and metrics port differ from every other's. Picked one by one (bind to port 0,
// release, repeat), 800 ports held about 20 repeats, and a cluster once refused its own node 4 as
// ADDRESS_IN_USE because a founder had the same port.
TEST_F(FakeNode, EveryNodeAndMetricsPortOfAClusterIsDistinct) {
  LocalClusterOptions options;
  options.raftlogd_path = write_script("never started");
  options.nodes = 400;
  options.metrics = true;
  LocalCluster cluster(options);
  std::set<std::string> addresses;
  for (int id = 1; id <= options.nodes; ++id) {
    addresses.insert(cluster.address(id));
    addresses.insert(cluster.metrics_address(id));
  }
  EXPECT_EQ(addresses.size(), 2U * 400);
}

TEST(LoopbackPorts, PortsPickedTogetherAreDistinctAndEachWasFree) {
  const std::vector<int> ports = distinct_free_loopback_ports(1000);
  ASSERT_EQ(ports.size(), 1000U);
  EXPECT_EQ(std::set<int>(ports.begin(), ports.end()).size(), 1000U);
  for (const int port : {ports.front(), ports.back()}) EXPECT_GT(port, 0);
  const HeldLoopbackPort held;
  EXPECT_GT(held.port(), 0);
}

}  // namespace
}  // namespace raftlog::testing

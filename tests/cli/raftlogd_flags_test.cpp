// The built raftlogd (and raftlogctl) with bad flags: every configuration error is exit code 2 with
// a message on stderr naming the problem, and raftlogd has not created its data directory.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "server/join.h"
#include "server/node_config.h"
#include "server/node_identity.h"
#include "testing/local_cluster.h"

namespace raftlog::testing {
namespace {

struct ProcessRun {
  int exit_code = -1;
  std::string err;  // stderr only; stdout is discarded
};

// Runs `command` under `timeout`: a binary that wrongly accepts its flags starts serving, and is
// killed after 5 s (exit code 137), which fails the test instead of hanging it.
ProcessRun run_stderr(const std::string& command) {
  ProcessRun result;
  FILE* pipe = ::popen(("timeout -s KILL 5 " + command + " 2>&1 >/dev/null").c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer{};
  std::size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    result.err.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

class RaftlogdFlagsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/raftlog-flags-test.XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    data_dir_ = dir_ + "/data";
    port_ = free_loopback_port();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string member() const { return "127.0.0.1:" + std::to_string(port_); }

  // raftlogd as the only member, on a free port, with `flags` after the defaults (a repeated
  // --members is not allowed, so cases that need their own pass `members`).
  ProcessRun raftlogd(const std::string& flags, const std::string& members = "") const {
    return run_stderr(std::string(RAFTLOGD_PATH) + " --id 1 --data-dir " + data_dir_ +
                      " --members " + (members.empty() ? "1=" + member() : members) + " " + flags);
  }

  void expect_refused(const ProcessRun& run, const std::string& message,
                      const std::string& what) const {
    EXPECT_EQ(run.exit_code, 2) << what << "\n" << run.err;
    EXPECT_NE(run.err.find(message), std::string::npos)
        << what << ": expected \"" << message << "\" in:\n"
        << run.err;
    EXPECT_FALSE(std::filesystem::exists(data_dir_))
        << what << ": a refused configuration created --data-dir";
    std::filesystem::remove_all(data_dir_);
  }

  std::string dir_;
  std::string data_dir_;
  int port_ = 0;
};

TEST_F(RaftlogdFlagsTest, OutOfRangeNumbersAreRefusedBeforeTheDataDirectoryExists) {
  struct Case {
    const char* flags;
    const char* message;
  };
  const Case cases[] = {
      // Each used to be narrowed to 32 bits: 0 (every append refused), 1, and 20.
      {"--max-entry-size 4GiB",
       "flag '--max-entry-size' value '4GiB' (4294967296 bytes) is out of range"},
      {"--max-entry-size 4294967297", "flag '--max-entry-size' value '4294967297' is out of range"},
      {"--tick-ms 4294967316",
       "flag '--tick-ms' value '4294967316' is out of range: allowed 1..10000"},
      {"--election-ticks 4294967306", "flag '--election-ticks' value '4294967306' is out of range"},
      {"--flush-interval-ms 4294967306",
       "flag '--flush-interval-ms' value '4294967306' is out of range"},
      {"--append-timeout-ms 4294967296",
       "flag '--append-timeout-ms' value '4294967296' is out of range"},
      {"--max-entries-per-append 4294968320",
       "flag '--max-entries-per-append' value '4294968320' is out of range"},
      // Used to be clamped silently to 2^32-1.
      {"--retention-follower-grace-ms 4294967296",
       "flag '--retention-follower-grace-ms' value '4294967296'"},
      // In range for its type, but the node would refuse it (or overflow on it) later.
      {"--max-append-bytes 600MiB",
       "flag '--max-append-bytes' value '600MiB' (629145600 bytes) is out of range"},
      // Over the node's queued-bytes bound: refused TOO_MANY_PENDING forever, even on an idle node.
      {"--max-append-bytes 300MiB",
       "flag '--max-append-bytes' value '300MiB' (314572800 bytes) is out of range: allowed "
       "0..256MiB"},
      {"--retention-max-age-s 10000000000",
       "flag '--retention-max-age-s' value '10000000000' is out of range"},
      {"--max-read-entries 100000",
       "flag '--max-read-entries' value '100000' is out of range: allowed 1..16384"},
      {"--segment-size 32KiB",
       "flag '--segment-size' value '32KiB' (32768 bytes) is out of range: allowed 64KiB..16GiB"},
      // drills7 L1: how far behind its leader a caught-up follower may fall and stay SERVING.
      {"--serving-lag-entries 0",
       "flag '--serving-lag-entries' value '0' is out of range: allowed 1..4294967296"},
      {"--serving-lag-entries 4294967297",
       "flag '--serving-lag-entries' value '4294967297' is out of range: allowed 1..4294967296"},
  };
  for (const Case& c : cases) expect_refused(raftlogd(c.flags), c.message, c.flags);
}

TEST_F(RaftlogdFlagsTest, BadAddressesAreRefused) {
  // 99999 used to be bound as 99999 mod 65536 = 34463.
  expect_refused(raftlogd("", "1=127.0.0.1:99999"),
                 "member 1 address '127.0.0.1:99999' has port 99999 out of range",
                 "member port 99999");
  expect_refused(raftlogd("", "1=127.0.0.1:0"), "has port 0 out of range (expected 1..65535)",
                 "member port 0");
  expect_refused(raftlogd("", "1=" + member() + ",2=" + member()),
                 "members 1 and 2 have the same address " + member(), "duplicate member address");
  expect_refused(raftlogd("--listen 127.0.0.1:70000"),
                 "flag '--listen' value '127.0.0.1:70000' has port 70000", "listen port");
  expect_refused(raftlogd("--metrics-addr 127.0.0.1:65536"),
                 "flag '--metrics-addr' value '127.0.0.1:65536'", "metrics port");
  expect_refused(raftlogd("--metrics-addr " + member()), "takes the port of the listen address",
                 "metrics = listen");
}

TEST_F(RaftlogdFlagsTest, StoreAndOtherConfigurationErrorsAreRefused) {
  // The default 4 MiB entry cannot fit a 64 KiB segment: CommitLog::open used to refuse it after the
  // data directory had been created, with exit code 1.
  expect_refused(raftlogd("--segment-size 64KiB"), "does not fit in one segment of 65536 bytes",
                 "segment size below the entry size");
  // spdlog reads an unknown level as "off".
  expect_refused(raftlogd("--log-level verbose"), "--log-level must be one of", "log level");
  expect_refused(raftlogd("--cluster-id " + std::string(300, 'c')),
                 "--cluster-id is longer than 256 characters", "cluster id length");
}

TEST_F(RaftlogdFlagsTest, AValidConfigurationStillStartsAndStops) {
  // The control: the same command line without a bad flag serves, creates its data directory and
  // stops cleanly on SIGTERM.
  const ProcessRun run = run_stderr(
      "timeout --preserve-status -s TERM 1 " + std::string(RAFTLOGD_PATH) + " --id 1 --data-dir " +
      data_dir_ + " --members 1=" + member() +
      " --segment-size 8MiB --max-entry-size 64KiB --bootstrap-new-cluster");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(std::filesystem::exists(data_dir_ + "/log"));
}

// --bootstrap-new-cluster (drills7 H5) founds a cluster of this node alone: with --join or several
// members it contradicts the start, and a config file (which a supervisor reuses at every start)
// may not carry it. Each refused before the data directory exists.
TEST_F(RaftlogdFlagsTest, BootstrapNewClusterIsRefusedWhereItFoundsNothingAndFromAConfigFile) {
  expect_refused(raftlogd("--bootstrap-new-cluster --cluster-id c1 --join 127.0.0.1:1"),
                 "--bootstrap-new-cluster and --join contradict each other", "with --join");
  expect_refused(raftlogd("--bootstrap-new-cluster --cluster-id c1 --peer-secret-file /nonexistent",
                          "1=" + member() + ",2=127.0.0.1:2,3=127.0.0.1:3"),
                 "this start's configuration has 3 members", "with three members");
  const std::string config = dir_ + "/raftlogd.conf";
  std::ofstream(config) << "bootstrap-new-cluster = true\n";
  expect_refused(raftlogd("--config " + config),
                 "bootstrap-new-cluster cannot come from a config file", "from a config file");
}

// drills7 L3: a joined node (4) restarted by hand with the founders' --members (which lack its id)
// got only "node id 4 is not among the members"; with a list that names it, the helpful message
// about its JOIN record. Every wrong form now gets the directory's word first (restart_form.h):
// the JOIN record, and IDENTITY before it (another node's directory).
TEST_F(RaftlogdFlagsTest, AJoinedNodesDirectorySpeaksBeforeTheMemberList) {
  server::NodeConfig joined;
  joined.node_id = 4;
  joined.cluster_id = "c1";
  joined.data_dir = data_dir_;
  ASSERT_EQ(server::establish_data_dir_identity(joined), "");
  server::JoinRecord record;
  record.bootstrap_voters = {1, 2, 3};
  record.seed = {{1, "127.0.0.1:1"}, {2, "127.0.0.1:2"}, {3, "127.0.0.1:3"}};
  ASSERT_EQ(server::write_join_record(data_dir_, record), "");
  const std::string founders = "1=127.0.0.1:1,2=127.0.0.1:2,3=127.0.0.1:3";
  const std::string run_as_4 = std::string(RAFTLOGD_PATH) + " --id 4 --data-dir " + data_dir_ +
                               " --cluster-id c1 --peer-secret-file /nonexistent --members ";
  struct Case {
    std::string command;
    std::string message;
    const char* what;
  };
  const std::string join_message = "was created by --join (it holds a JOIN record";
  const Case cases[] = {
      {run_as_4 + founders, join_message, "the founders' list, without its id"},
      {run_as_4 + founders + ",4=" + member(), join_message, "the founders' list with its id"},
      {run_as_4 + founders + " --join 127.0.0.1:1", join_message, "with --join"},
      {std::string(RAFTLOGD_PATH) + " --id 5 --data-dir " + data_dir_ +
           " --cluster-id c1 --peer-secret-file /nonexistent --members " + founders,
       "belongs to node 4 of this cluster", "another id, the founders' list"},
      {std::string(RAFTLOGD_PATH) + " --id 4 --data-dir " + data_dir_ +
           " --cluster-id c2 --peer-secret-file /nonexistent --members " + founders,
       "belongs to cluster \"c1\"", "another cluster id"},
  };
  for (const Case& c : cases) {
    const ProcessRun run = run_stderr(c.command);
    EXPECT_EQ(run.exit_code, 2) << c.what << "\n" << run.err;
    EXPECT_NE(run.err.find(c.message), std::string::npos)
        << c.what << ": expected \"" << c.message << "\" in:\n"
        << run.err;
  }
  // The record and the identity are still there, and nothing else was written.
  EXPECT_TRUE(std::filesystem::exists(data_dir_ + "/JOIN"));
  EXPECT_FALSE(std::filesystem::exists(data_dir_ + "/log"));
}

// The inverse (review of lagging6, #6): a founder's directory (a node's state, no JOIN record)
// started with --join and the founders' list was told to name itself alone in --members; the
// directory's word comes first there too.
TEST_F(RaftlogdFlagsTest, AFoundersDirectoryStartedWithJoinSaysItHasNoJoinRecord) {
  server::NodeConfig founder;
  founder.node_id = 1;
  founder.cluster_id = "c1";
  founder.data_dir = data_dir_;
  ASSERT_EQ(server::establish_data_dir_identity(founder), "");
  std::ofstream(data_dir_ + "/HARDSTATE") << "state";
  const std::string founders = "1=" + member() + ",2=127.0.0.1:2,3=127.0.0.1:3";
  for (const std::string& members : {founders, "1=" + member()}) {
    const ProcessRun run = run_stderr(std::string(RAFTLOGD_PATH) + " --id 1 --data-dir " +
                                      data_dir_ + " --cluster-id c1 --members " + members +
                                      " --join 127.0.0.1:2");
    EXPECT_EQ(run.exit_code, 2) << members << "\n" << run.err;
    EXPECT_NE(run.err.find("holds a node's state but no JOIN record"), std::string::npos)
        << members << "\n" << run.err;
  }
}

// --unvouched-may-elect (drills7 H4) is a one-time action too: not from a config file, and never
// naming the node itself (the core's configuration check).
TEST_F(RaftlogdFlagsTest, UnvouchedMayElectIsRefusedFromAConfigFileAndForItself) {
  const std::string config = dir_ + "/raftlogd.conf";
  std::ofstream(config) << "unvouched-may-elect = 2\n";
  expect_refused(raftlogd("--config " + config),
                 "unvouched-may-elect cannot come from a config file", "from a config file");
  expect_refused(raftlogd("--unvouched-may-elect 1 --bootstrap-new-cluster"),
                 "unvouched_may_elect must name another node", "naming itself");
}

// --skip-founding-check (found6) is a one-time action as well: a supervisor's config file would
// skip the founding check again after a later lost disk.
TEST_F(RaftlogdFlagsTest, SkipFoundingCheckIsRefusedFromAConfigFile) {
  const std::string config = dir_ + "/raftlogd.conf";
  std::ofstream(config) << "skip-founding-check = true\n";
  expect_refused(raftlogd("--config " + config),
                 "skip-founding-check cannot come from a config file", "from a config file");
}

TEST(RaftlogdFlags, NoFlagsNamesEveryRequiredFlagAndAnExample) {
  const ProcessRun run = run_stderr(RAFTLOGD_PATH);
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_NE(run.err.find(
                "missing required flags '--id ID', '--members ID=HOST:PORT,...', '--data-dir DIR'"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("A node needs at least: raftlogd --id 1 --members"), std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("Run 'raftlogd --help' for every flag."), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("Flags:"), std::string::npos) << "the whole usage buries the message:\n"
                                                       << run.err;
}

// stdout of `command` (stderr discarded) and its exit code.
ProcessRun run_stdout(const std::string& command) {
  return run_stderr("sh -c '" + command + " 1>&2 2>/dev/null'");
}

TEST(AllTools, VersionPrintsTheVersionAndRevision) {
  for (const char* tool : {RAFTLOGD_PATH, RAFTLOGCTL_PATH, RAFTLOG_BENCH_PATH, RAFTLOG_SIM_PATH}) {
    const ProcessRun run = run_stdout(std::string(tool) + " --version");
    EXPECT_EQ(run.exit_code, 0) << tool << ": " << run.err;
    const std::string name = std::filesystem::path(tool).filename().string();
    EXPECT_EQ(run.err.rfind(name + " " + RAFTLOG_PROJECT_VERSION + " (revision ", 0), 0U)
        << tool << ": " << run.err;
  }
  // raftlogd answers --version before it checks the required flags, wherever it appears.
  const ProcessRun late = run_stdout(std::string(RAFTLOGD_PATH) + " --log-level info --version");
  EXPECT_EQ(late.exit_code, 0) << late.err;
  const ProcessRun help = run_stdout(std::string(RAFTLOGD_PATH) + " --help");
  EXPECT_NE(help.err.find("clients and peers on (required)\n"), std::string::npos) << help.err;
  EXPECT_NE(help.err.find("where this node keeps its log and hard state (required)\n"),
            std::string::npos)
      << help.err;
}

TEST(RaftlogctlFlags, TimeoutsAreRefusedNotTruncated) {
  // --timeout-ms 4294967297 used to become a 1 ms retry deadline.
  for (const char* flags : {"read --timeout-ms 4294967297", "tail --duration-ms 4294967296"}) {
    const ProcessRun run =
        run_stderr(std::string(RAFTLOGCTL_PATH) + " " + flags + " --endpoints 127.0.0.1:1");
    EXPECT_EQ(run.exit_code, 2) << flags << "\n" << run.err;
    EXPECT_NE(run.err.find("is out of range"), std::string::npos) << flags << "\n" << run.err;
  }
}

// `read --count 0` printed the header and exited 0 (outside test L3): a count of nothing is a
// mistake, refused like one above the bound, before any connection.
TEST(RaftlogctlFlags, ReadCountsOutsideOneToTheBoundAreRefused) {
  for (const char* flags :
       {"read --count 0", "read --count 1000001", "topic read --topic t --count 0"}) {
    const ProcessRun run =
        run_stderr(std::string(RAFTLOGCTL_PATH) + " " + flags + " --endpoints 127.0.0.1:1");
    EXPECT_EQ(run.exit_code, 2) << flags << "\n" << run.err;
    EXPECT_NE(run.err.find("--count"), std::string::npos) << flags << "\n" << run.err;
  }
}

// `append --client-id/--sequence` (review drills3 L1): a bad id, a bad sequence or a sequence
// without an id is a usage error, before any connection.
TEST(RaftlogctlFlags, AppendClientIdAndSequenceAreChecked) {
  const struct {
    const char* flags;
    const char* message;
  } cases[] = {
      {"append --client-id 0 --value x", "--client-id"},
      {"append --client-id abc --value x", "--client-id"},
      {"append --client-id 18446744073709551616 --value x", "--client-id"},
      {"append --client-id 5 --sequence 0 --value x", "--sequence"},
      {"append --sequence 3 --value x", "--sequence needs --client-id"},
      {"append --client-id 5 --sequence 18446744073709551615 --batch=false", "leaves no room"},
  };
  for (const auto& c : cases) {
    const std::string command = std::string(c.flags).find("--batch") != std::string::npos
                                    ? "printf 'a\\nb\\n' | " + std::string(RAFTLOGCTL_PATH) +
                                          " " + c.flags + " --endpoints 127.0.0.1:1"
                                    : std::string(RAFTLOGCTL_PATH) + " " + c.flags +
                                          " --endpoints 127.0.0.1:1";
    const ProcessRun run = run_stderr(command);
    EXPECT_EQ(run.exit_code, 2) << c.flags << "\n" << run.err;
    EXPECT_NE(run.err.find(c.message), std::string::npos) << c.flags << "\n" << run.err;
  }
}

// raftlog-bench cluster's replayable ids: checked before any cluster starts.
TEST(RaftlogBenchFlags, ClusterFirstClientIdAndSequenceAreChecked) {
  const struct {
    const char* flags;
    const char* message;
  } cases[] = {
      {"cluster --first-client-id 0", "--first-client-id"},
      {"cluster --first-client-id 18446744073709551615", "--first-client-id"},
      {"cluster --first-client-id 7 --first-sequence 0", "--first-sequence"},
      {"cluster --first-sequence 3", "--first-sequence needs --first-client-id"},
      {"cluster --first-client-id 7 --producer-lanes 2", "--producer-lanes 0"},
  };
  for (const auto& c : cases) {
    const ProcessRun run = run_stderr(std::string(RAFTLOG_BENCH_PATH) + " " + c.flags +
                                      " --endpoints 127.0.0.1:1 --duration 1");
    EXPECT_EQ(run.exit_code, 2) << c.flags << "\n" << run.err;
    EXPECT_NE(run.err.find(c.message), std::string::npos) << c.flags << "\n" << run.err;
  }
  // Without --endpoints it would start a fresh cluster: nothing to replay there.
  const ProcessRun own_cluster =
      run_stderr(std::string(RAFTLOG_BENCH_PATH) + " cluster --first-client-id 7 --duration 1");
  EXPECT_EQ(own_cluster.exit_code, 2) << own_cluster.err;
  EXPECT_NE(own_cluster.err.find("--first-client-id needs --endpoints"), std::string::npos)
      << own_cluster.err;
}

}  // namespace
}  // namespace raftlog::testing

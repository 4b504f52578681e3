// The real raftlog-bench binary, run the way bench/compare-etcd.sh runs it, against no etcd at all.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "testing/loopback_ports.h"

namespace {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

CommandResult run(const std::string& args) {
  CommandResult result;
  FILE* pipe = ::popen((std::string(RAFTLOG_BENCH_PATH) + " " + args + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0;)
    result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// Connections to a held loopback port are refused for as long as the object lives.
std::string refusing_endpoint(const raftlog::testing::HeldLoopbackPort& port) {
  return "127.0.0.1:" + std::to_string(port.port());
}

TEST(BenchEtcdCli, HelpListsTheFlagsTheCompareScriptUses) {
  const auto result = run("etcd --help");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  for (const char* flag :
       {"--endpoints", "--clients", "--value-size", "--duration", "--server-pids"}) {
    EXPECT_NE(result.output.find(flag), std::string::npos) << flag << " missing from:\n"
                                                           << result.output;
  }
  const auto failover = run("etcd-failover --help");
  EXPECT_EQ(failover.exit_code, 0) << failover.output;
  EXPECT_NE(failover.output.find("--leader-pid"), std::string::npos) << failover.output;
}

TEST(BenchEtcdCli, BadInputIsAUsageError) {
  EXPECT_EQ(run("etcd").exit_code, 2);  // --endpoints is required
  EXPECT_EQ(run("etcd --endpoints 127.0.0.1:2379 --clients 0").exit_code, 2);
  EXPECT_EQ(run("etcd --endpoints 127.0.0.1:2379 --clients 2000").exit_code, 2);
  EXPECT_EQ(run("etcd --endpoints 127.0.0.1:2379 --duration 0").exit_code, 2);
  const auto pids = run("etcd --endpoints 127.0.0.1:2379 --server-pids 12,abc");
  EXPECT_EQ(pids.exit_code, 2);
  EXPECT_NE(pids.output.find("not a process id: 'abc'"), std::string::npos) << pids.output;
  EXPECT_EQ(run("cluster --endpoints 127.0.0.1:2379 --server-pids 0").exit_code, 2);
  const auto rpc = run("cluster --endpoints 127.0.0.1:2379 --append-rpc carrier-pigeon");
  EXPECT_EQ(rpc.exit_code, 2);
  EXPECT_NE(rpc.output.find("--append-rpc must be stream, own-stream or unary"), std::string::npos)
      << rpc.output;
  const auto help = run("cluster --help");
  EXPECT_EQ(help.exit_code, 0) << help.output;
  for (const char* flag : {"--append-rpc", "--producer-lanes", "--server-pids"}) {
    EXPECT_NE(help.output.find(flag), std::string::npos) << flag << " missing from:\n"
                                                         << help.output;
  }
}

TEST(BenchEtcdCli, UnreachableEtcdFailsWithAClearMessage) {
  const raftlog::testing::HeldLoopbackPort port;
  const auto result = run("etcd --endpoints " + refusing_endpoint(port) + " --clients 2 --duration 1");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("cannot Put to etcd at " + refusing_endpoint(port)), std::string::npos)
      << result.output;
  EXPECT_EQ(result.output.find("RESULT"), std::string::npos) << "no figures without a server:\n"
                                                             << result.output;
}

TEST(BenchEtcdCli, FailoverRefusesToKillAProcessThatIsNotEtcd) {
  // This test process is alive and is not etcd: the tool must refuse before any load or kill.
  const raftlog::testing::HeldLoopbackPort port;
  const auto result = run("etcd-failover --endpoints " + refusing_endpoint(port) + " --leader-pid " +
                          std::to_string(::getpid()));
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("is not a running etcd (refusing to kill it)"), std::string::npos)
      << result.output;
}

// The raw loop the compare script takes the disk limit from, in both sync methods and with several
// concurrent streams (as three replicas on one disk): a short real run that must report syncs.
TEST(BenchRawCli, MmapAndStreamsReportSyncs) {
  const std::string dir =
      std::filesystem::temp_directory_path() / ("bench-raw-cli-" + std::to_string(::getpid()));
  for (const char* via : {"write", "mmap"}) {
    std::filesystem::remove_all(dir);
    const auto result = run(std::string("raw --dir ") + dir + " --via " + via +
                            " --streams 2 --batch-bytes 5000 --seconds 0.3 --max-bytes 4MiB");
    EXPECT_EQ(result.exit_code, 0) << result.output;
    const std::string method =
        std::string(via) == "mmap" ? "method=mmap_msync" : "method=write_fdatasync";
    EXPECT_NE(
        result.output.find("RESULT bench=raw_streams " + method + " streams=2 batch_bytes=5000"),
        std::string::npos)
        << result.output;
    EXPECT_EQ(result.output.find("syncs_per_s_per_stream=0 "), std::string::npos) << result.output;
    EXPECT_FALSE(std::filesystem::exists(dir)) << "the scratch directory must be removed";
  }
  EXPECT_EQ(run("raw --dir " + dir + " --via pmem").exit_code, 2);
  EXPECT_EQ(run("raw --dir " + dir + " --streams 9").exit_code, 2);
  std::filesystem::remove_all(dir);
}

// The minimal group commit (`raw --writers N`): every record acknowledged was synced by a round, so
// it reports records, at least one record per sync, and the one-thread loop at its batch size.
TEST(BenchRawCli, GroupCommitReportsRecordsPerSyncAndTheRatio) {
  const std::string dir =
      std::filesystem::temp_directory_path() / ("bench-raw-gc-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const auto result =
      run("raw --dir " + dir + " --writers 8 --record-bytes 1000 --seconds 0.3 --max-bytes 8MiB");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("RESULT bench=raw_group_commit writers=8 record_bytes=1000 "),
            std::string::npos)
      << result.output;
  EXPECT_EQ(result.output.find(" records=0 "), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("RESULT bench=raw_disk batch_bytes="), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("RESULT bench=raw_group_commit_vs_raw writers=8 "),
            std::string::npos)
      << result.output;
  EXPECT_FALSE(std::filesystem::exists(dir)) << "the scratch directory must be removed";
  EXPECT_EQ(run("raw --dir " + dir + " --writers 2000").exit_code, 2);
  std::filesystem::remove_all(dir);
}

// The one-thread loop alone and under background CPU load (`raw --busy-threads N`): one line per
// pair with the load's measured CPU use, and a total; conflicting or out-of-range flags are refused.
TEST(BenchRawCli, UnderLoadReportsBothLoopsTheLoadAndTheRatio) {
  const std::string dir =
      std::filesystem::temp_directory_path() / ("bench-raw-load-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const auto result = run("raw --dir " + dir +
                          " --batch-bytes 8KiB --busy-threads 4 --busy-us 200 --pairs 2 --seconds "
                          "0.3 --max-bytes 8MiB");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(
      result.output.find(
          "RESULT bench=raw_under_load batch_bytes=8192 busy_threads=4 busy_us=200 load_cpus="),
      std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("RESULT bench=raw_under_load_total pairs=2 "), std::string::npos)
      << result.output;
  // Four threads burning 200 us per ~1.2 ms use a measurable share of a CPU.
  EXPECT_EQ(result.output.find("load_cpus=0.00"), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find("loaded_mib_per_s=0.0 "), std::string::npos) << result.output;
  EXPECT_FALSE(std::filesystem::exists(dir)) << "the scratch directory must be removed";
  EXPECT_EQ(run("raw --dir " + dir + " --busy-threads 5000").exit_code, 2);
  EXPECT_EQ(run("raw --dir " + dir + " --busy-threads 2 --pairs 0").exit_code, 2);
  EXPECT_EQ(run("raw --dir " + dir + " --busy-threads 2 --writers 4").exit_code, 2);
  std::filesystem::remove_all(dir);
}

}  // namespace

// `raftlog-bench topics` with tiny sizes, so the command cannot rot: it starts its clusters, runs
// every phase for about a second and prints each figure (docs/benchmarks.md, "Topics and keys").
// The figures themselves are not judged here (a loaded CI machine); only that each phase ran,
// measured something and failed no append.
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <sstream>
#include <string>

namespace {

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout only: the RESULT lines
};

CommandResult run(const std::string& args) {
  CommandResult result;
  FILE* pipe = ::popen((std::string(RAFTLOG_BENCH_PATH) + " " + args).c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0;)
    result.out.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// The key=value fields of the RESULT line of `bench`, empty when there is none.
std::map<std::string, std::string> result_fields(const std::string& out, const std::string& bench) {
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("RESULT bench=" + bench + " ", 0) != 0) continue;
    std::map<std::string, std::string> fields;
    std::istringstream words(line);
    for (std::string word; words >> word;) {
      const auto eq = word.find('=');
      if (eq != std::string::npos) fields[word.substr(0, eq)] = word.substr(eq + 1);
    }
    return fields;
  }
  return {};
}

double number(const std::map<std::string, std::string>& fields, const std::string& key) {
  const auto found = fields.find(key);
  return found == fields.end() ? -1.0 : std::stod(found->second);
}

TEST(BenchTopicsSmoke, EveryPhaseRunsAndPrintsItsFigures) {
  const CommandResult result =
      run("topics --rounds 2 --round-seconds 1 --clients 2 --entry-size 64 --dispatch-entries 3000 "
          "--dispatch-entry-size 64 --rebuild-bytes 4MiB --rebuild-entry-size 64KiB "
          "--flush-mode async");
  ASSERT_EQ(result.exit_code, 0) << result.out;

  const auto append = result_fields(result.out, "topics-append");
  ASSERT_FALSE(append.empty()) << result.out;
  EXPECT_GT(number(append, "plain_ops_per_s"), 0.0) << result.out;
  EXPECT_GT(number(append, "topics_ops_per_s"), 0.0) << result.out;
  EXPECT_GT(number(append, "ratio_median"), 0.0) << result.out;
  EXPECT_EQ(number(append, "rounds"), 2.0);
  EXPECT_EQ(number(append, "failures"), 0.0) << result.out;
  // The nodes' CPU per append was read for both variants.
  EXPECT_GT(number(append, "plain_server_cpu_us_per_append"), 0.0) << result.out;
  EXPECT_GT(number(append, "topics_server_cpu_us_per_append"), 0.0) << result.out;
  EXPECT_GT(number(append, "cpu_ratio_median"), 0.0) << result.out;
  // One ratio per round, side by side in the same run.
  EXPECT_NE(append.at("ratios").find(','), std::string::npos) << result.out;

  const auto dispatch = result_fields(result.out, "topics-dispatch");
  ASSERT_FALSE(dispatch.empty()) << result.out;
  EXPECT_GT(number(dispatch, "entries"), 0.0) << result.out;
  EXPECT_LE(number(dispatch, "entries"), 3001.0) << result.out;
  EXPECT_GT(number(dispatch, "entries_per_s"), 0.0) << result.out;

  const auto rebuild = result_fields(result.out, "topics-rebuild");
  ASSERT_FALSE(rebuild.empty()) << result.out;
  EXPECT_GT(number(rebuild, "gib_per_s"), 0.0) << result.out;
  EXPECT_EQ(number(rebuild, "entry_size_bytes"), 65536.0);
}

// The live phase (a steady load, the dispatchers' lag): its lag is sampled 10 times a second and
// a consumer group commit probes it every 200 ms (review L5: once a second, and no group commit,
// so failing group commits under the load could not show). A short run (1 node, 3 s); the
// command's live phase runs only when asked (--phases live), as here.
TEST(BenchTopicsSmoke, TheLivePhaseSamplesTheLagFinelyAndProbesGroupCommits) {
  const CommandResult result =
      run("topics --phases live --live-nodes 1 --live-topics 20 --live-rate 100 "
          "--live-seconds 3 --live-keys off --live-slices 20 --flush-mode async 2>/dev/null");
  ASSERT_EQ(result.exit_code, 0) << result.out;
  const auto live = result_fields(result.out, "topics-live");
  ASSERT_FALSE(live.empty()) << result.out;
  EXPECT_EQ(number(live, "failures"), 0.0) << result.out;
  EXPECT_GE(number(live, "lag_samples"), 20.0) << result.out;
  EXPECT_GE(number(live, "group_commits"), 5.0) << result.out;
  EXPECT_EQ(number(live, "group_commit_failures"), 0.0) << result.out;
  EXPECT_GT(number(live, "group_commit_max_ms"), 0.0) << result.out;
}

TEST(BenchTopicsSmoke, RefusesAnUnknownPhase) {
  EXPECT_EQ(run("topics --phases append,compact 2>/dev/null").exit_code, 2);
}

}  // namespace

// End-to-end tests of the offline tools as an operator runs them: the real raftlogctl and
// raftlog-bench binaries, their output and exit codes, and that verify/dump change nothing on disk.
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "crash_protocol.h"
#include "store/commit_log.h"
#include "test_dir.h"

namespace raftlog::crash_test {
namespace {

namespace fs = std::filesystem;

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

CommandResult run(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0;)
    result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

std::string ctl(const std::string& args) { return std::string(RAFTLOGCTL_PATH) + " " + args; }

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  return lines;
}

// name -> (size, content hash): detects any file created, removed or changed.
std::map<std::string, std::pair<std::uintmax_t, std::uint64_t>> snapshot(const std::string& dir) {
  std::map<std::string, std::pair<std::uintmax_t, std::uint64_t>> files;
  for (const auto& item : fs::directory_iterator(dir)) {
    std::string content;
    if (FILE* file = std::fopen(item.path().c_str(), "rb"); file != nullptr) {
      char buffer[1 << 16];
      for (std::size_t n; (n = std::fread(buffer, 1, sizeof(buffer), file)) > 0;)
        content.append(buffer, n);
      std::fclose(file);
    }
    files[item.path().filename().string()] = {item.file_size(), fnv1a64(content)};
  }
  return files;
}

constexpr std::uint64_t kEntries = 60;
constexpr std::uint64_t kSegmentSizeBytes =
    64 << 10;  // the minimum: 60 entries of ~2 KiB span segments

// A closed log of kEntries entries; entry 7 has a payload that needs escaping.
void build_log(const std::string& dir) {
  store::Options options;
  options.segment_size_bytes = kSegmentSizeBytes;
  options.max_entry_size_bytes = 4096;
  auto opened = store::CommitLog::open(dir, options);
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  auto log = std::move(opened).value();
  for (std::uint64_t index = 1; index <= kEntries; ++index) {
    const std::string payload =
        index == 7 ? std::string("a\n\"\x01", 4) : make_payload(9, index, 2048);
    const store::EntryToAppend entry{
        store::EntryMeta{index, 1 + index / 30, store::EntryType::kNormal, 0, 42, index}, payload};
    ASSERT_TRUE(log->append(std::span<const store::EntryToAppend>(&entry, 1)).ok());
  }
  ASSERT_TRUE(log->close().ok());
}

class StoreToolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    build_log(log_dir_);
    if (HasFatalFailure()) return;
    ASSERT_GT(snapshot(log_dir_).size(), 2U) << "expected several segment files";
  }
  const TestDir dir_{"store_tools"};
  const std::string log_dir_ = dir_.sub("log");
};

TEST_F(StoreToolsTest, VerifyPrintsRangeAndOkAndChangesNothing) {
  const auto before = snapshot(log_dir_);
  const CommandResult result = run(ctl("log verify --dir " + log_dir_));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("first index:              1\n"), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("last index:               60\n"), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("\nOK\n"), std::string::npos) << result.output;
  EXPECT_EQ(snapshot(log_dir_), before) << "verify modified the directory";

  const CommandResult json = run(ctl("log verify --json --dir=" + log_dir_));
  EXPECT_EQ(json.exit_code, 0) << json.output;
  EXPECT_NE(json.output.find("\"ok\":true"), std::string::npos) << json.output;
  EXPECT_NE(json.output.find("\"first_index\":1,\"last_index\":60"), std::string::npos)
      << json.output;
  EXPECT_NE(json.output.find("\"abort_marker_present\":false"), std::string::npos) << json.output;
}

TEST_F(StoreToolsTest, VerifyNamesFirstBadFileAndOffset) {
  // Find where entry 25 lives and flip one byte in the middle of its record.
  store::EntryLocation target;
  auto scanned = store::verify_log_directory(
      log_dir_, nullptr, [&](const store::EntryView& entry, const store::EntryLocation& at) {
        if (entry.meta.index == 25) target = at;
        return entry.meta.index < 25;
      });
  ASSERT_TRUE(scanned.ok());
  ASSERT_FALSE(target.segment_file.empty());
  {
    std::fstream file(log_dir_ + "/" + target.segment_file,
                      std::ios::in | std::ios::out | std::ios::binary);
    const auto position = static_cast<std::streamoff>(target.offset + target.record_bytes / 2);
    file.seekg(position);
    const char original = static_cast<char>(file.get());
    file.seekp(position);
    file.put(static_cast<char>(original ^ 0x10));
  }
  const auto before = snapshot(log_dir_);
  const CommandResult result = run(ctl("log verify --dir " + log_dir_));
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("CORRUPT: " + target.segment_file + " offset " +
                               std::to_string(target.offset) + ":"),
            std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("last index:               24\n"), std::string::npos)
      << result.output;
  EXPECT_EQ(snapshot(log_dir_), before) << "verify modified a corrupt directory";

  const CommandResult json = run(ctl("log verify --json --dir " + log_dir_));
  EXPECT_EQ(json.exit_code, 1);
  EXPECT_NE(json.output.find("\"ok\":false"), std::string::npos) << json.output;
  EXPECT_NE(json.output.find("\"bad_offset\":" + std::to_string(target.offset)), std::string::npos)
      << json.output;

  // dump stops at the bad entry with exit 1 when asked for entries past it, but works before it.
  EXPECT_EQ(run(ctl("log dump --dir " + log_dir_ + " --from 20 --count 10")).exit_code, 1);
  EXPECT_EQ(run(ctl("log dump --dir " + log_dir_ + " --from 20 --count 5")).exit_code, 0);
}

TEST_F(StoreToolsTest, DumpPrintsRequestedEntriesEscaped) {
  const auto before = snapshot(log_dir_);
  const CommandResult result =
      run(ctl("log dump --dir " + log_dir_ + " --from 6 --count 3 --preview-bytes 8"));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto lines = lines_of(result.output);
  ASSERT_EQ(lines.size(), 3U) << result.output;
  EXPECT_EQ(lines[0].rfind("index=6 term=1 type=normal size=", 0), 0U) << lines[0];
  EXPECT_NE(lines[0].find(" client=42 seq=6 "), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("index=7 term=1 type=normal size=4 client=42 seq=7 at="),
            std::string::npos)
      << lines[1];
  EXPECT_NE(lines[1].find(" payload=\"a\\n\\\"\\x01\""), std::string::npos) << lines[1];
  EXPECT_EQ(lines[2].rfind("index=8 ", 0), 0U) << lines[2];

  const CommandResult json = run(ctl("log dump --json --dir " + log_dir_ + " --from 7 --count 1"));
  ASSERT_EQ(json.exit_code, 0) << json.output;
  EXPECT_EQ(
      json.output.rfind(
          "{\"index\":7,\"term\":1,\"type\":\"normal\",\"flags\":0,\"size\":4,\"client_id\":42,",
          0),
      0U)
      << json.output;
  EXPECT_NE(
      json.output.find("\"payload_preview\":\"a\\n\\\"\\u0001\",\"payload_truncated\":false}"),
      std::string::npos)
      << json.output;

  const CommandResult tail = run(ctl("log dump --dir " + log_dir_ + " --from 59"));
  EXPECT_EQ(tail.exit_code, 0);
  EXPECT_EQ(lines_of(tail.output).size(), 2U) << tail.output;
  EXPECT_EQ(snapshot(log_dir_), before) << "dump modified the directory";
}

TEST(StoreToolsUsageTest, HelpAndUsageErrors) {
  const CommandResult help = run(ctl("--help"));
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.output.find("log"), std::string::npos) << help.output;
  const CommandResult log_help = run(ctl("log --help"));
  EXPECT_EQ(log_help.exit_code, 0);
  EXPECT_NE(log_help.output.find("verify"), std::string::npos) << log_help.output;
  EXPECT_NE(log_help.output.find("dump"), std::string::npos) << log_help.output;
  const CommandResult verify_help = run(ctl("log verify --help"));
  EXPECT_EQ(verify_help.exit_code, 0);
  EXPECT_NE(verify_help.output.find("--dir DIR"), std::string::npos) << verify_help.output;

  EXPECT_EQ(run(ctl("")).exit_code, 2);
  EXPECT_EQ(run(ctl("nonsense")).exit_code, 2);
  EXPECT_EQ(run(ctl("log verify")).exit_code, 2);  // --dir is required
  const CommandResult unknown = run(ctl("log verify --dir /tmp --bogus"));
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.output.find("unknown flag '--bogus'"), std::string::npos) << unknown.output;
  EXPECT_EQ(run(ctl("log dump --dir /tmp --count x")).exit_code, 2);
  EXPECT_EQ(run(ctl("log dump --dir /tmp --count 0")).exit_code, 2);
  EXPECT_EQ(run(ctl("log verify --dir /tmp extra")).exit_code, 2);
  EXPECT_EQ(run(std::string(RAFTLOG_BENCH_PATH) + " store --dir /tmp/x --writers 0").exit_code, 2);
  EXPECT_EQ(run(std::string(RAFTLOG_BENCH_PATH) + " store --dir /tmp/x --modes fast").exit_code, 2);
}

TEST(StoreToolsUsageTest, VerifyOfMissingDirectoryFails) {
  const TestDir dir("store_tools_missing");
  const CommandResult result = run(ctl("log verify --dir " + dir.sub("does-not-exist")));
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_FALSE(fs::exists(dir.sub("does-not-exist"))) << "verify created the directory";

  // An existing directory without a log is not "OK" either (a mistyped --dir must be noticed).
  const CommandResult empty = run(ctl("log verify --dir " + dir.path()));
  EXPECT_EQ(empty.exit_code, 1) << empty.output;
  EXPECT_NE(empty.output.find("NO LOG"), std::string::npos) << empty.output;
  EXPECT_TRUE(fs::is_empty(dir.path())) << "verify created files in an empty directory";
}

TEST(StoreBenchSmokeTest, TinyRunPrintsResultsAndCleansUp) {
  const TestDir dir("store_bench");
  const std::string bench_dir = dir.sub("bench");
  const CommandResult result = run(
      std::string(RAFTLOG_BENCH_PATH) + " store --dir " + bench_dir +
      " --modes sync,async --writers 4 --sizes 128 --seconds 0.3 --raw sync --segment-bytes 1MiB"
      " --max-cell-bytes 8MiB --recovery-gib 0.004 --recovery-segment-bytes 1MiB");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("RESULT bench=store mode=sync writers=4 entry_bytes=128 "),
            std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("RESULT bench=store mode=async writers=4 entry_bytes=128 "),
            std::string::npos);
  EXPECT_NE(result.output.find("RESULT bench=store_vs_raw mode=sync "), std::string::npos);
  EXPECT_NE(result.output.find("RESULT bench=recovery shutdown=unclean mode=abnormal "),
            std::string::npos);
  EXPECT_NE(result.output.find("RESULT bench=recovery shutdown=clean mode=normal "),
            std::string::npos);
  EXPECT_FALSE(fs::exists(bench_dir)) << "the benchmark left its directory behind";

  // The same cell with the writers driven from one thread by completions: every writer's entry is
  // acknowledged only once durable, so the cell reports its own flushes and latency.
  const CommandResult completion =
      run(std::string(RAFTLOG_BENCH_PATH) + " store --dir " + bench_dir +
          " --modes sync --writers 4 --writer-model completion --sizes 128 --seconds 0.3 --raw none"
          " --segment-bytes 1MiB --max-cell-bytes 8MiB");
  ASSERT_EQ(completion.exit_code, 0) << completion.output;
  EXPECT_NE(completion.output.find(
                "RESULT bench=store mode=sync writers=4 entry_bytes=128 writer_model=completion "),
            std::string::npos)
      << completion.output;
  EXPECT_EQ(
      run(std::string(RAFTLOG_BENCH_PATH) + " store --dir " + bench_dir + " --writer-model fibers")
          .exit_code,
      2);
  EXPECT_FALSE(fs::exists(bench_dir));

  // A non-empty directory is refused, and left alone.
  fs::create_directories(bench_dir);
  std::ofstream(bench_dir + "/precious") << "data";
  EXPECT_EQ(run(std::string(RAFTLOG_BENCH_PATH) + " store --quick --dir " + bench_dir).exit_code,
            1);
  EXPECT_TRUE(fs::exists(bench_dir + "/precious"));
}

}  // namespace
}  // namespace raftlog::crash_test

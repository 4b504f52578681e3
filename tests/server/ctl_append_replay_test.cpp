// raftlogctl append --client-id/--sequence against a real one-node Server in this process (review
// drills3 L1): an operator replays an acknowledged append by hand and it answers its original
// index, writing nothing; other entries under that sequence are refused.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "in_process_node.h"
#include "shared/command_run.h"

namespace raftlog::testing {
namespace {

// The number after `"name":` in a --json line; 0 when absent.
std::uint64_t json_number(const std::string& line, const std::string& name) {
  const std::string key = "\"" + name + "\":";
  const std::size_t at = line.find(key);
  if (at == std::string::npos) return 0;
  return std::stoull(line.substr(at + key.size()));
}

TEST(CtlAppendReplay, TheSameClientSequenceAndEntryAnswerTheOriginalIndex) {
  InProcessNode node([](server::NodeConfig&) {});
  ASSERT_TRUE(node.started());
  const std::string ctl =
      std::string(RAFTLOGCTL_PATH) + " append --endpoints " + node.address() + " ";
  const std::string replay = ctl + "--client-id 77 --sequence 5 --value probe";

  const CommandRun first = run_command(replay + " --json");
  ASSERT_EQ(first.exit_code, 0) << first.out;
  const std::uint64_t index = json_number(first.out, "first_index");
  ASSERT_GT(index, 0U) << first.out;
  EXPECT_NE(first.out.find("\"duplicate\":false,\"client_id\":77,\"sequence\":5}"),
            std::string::npos)
      << first.out;
  // Another client's append moves the log on.
  const CommandRun other = run_command(ctl + "--value filler --json");
  ASSERT_EQ(other.exit_code, 0) << other.out;
  const std::uint64_t filler = json_number(other.out, "first_index");
  EXPECT_EQ(filler, index + 1) << other.out;

  const CommandRun retry = run_command(replay + " --json");
  ASSERT_EQ(retry.exit_code, 0) << retry.out;
  EXPECT_EQ(json_number(retry.out, "first_index"), index) << retry.out;
  EXPECT_NE(retry.out.find("\"duplicate\":true"), std::string::npos) << retry.out;
  const CommandRun text = run_command(replay);
  ASSERT_EQ(text.exit_code, 0) << text.out;
  EXPECT_EQ(text.out.rfind("appended at index " + std::to_string(index) + " (term ", 0), 0U)
      << text.out;
  EXPECT_NE(text.out.find(", client 77 sequence 5, a retry: answered from the original append)"),
            std::string::npos)
      << text.out;

  // Other entries under the same sequence: refused, nothing written.
  const CommandRun reused = run_command(ctl + "--client-id 77 --sequence 5 --value other");
  EXPECT_EQ(reused.exit_code, 1) << reused.out;
  EXPECT_NE(reused.out.find("FAILED_PRECONDITION"), std::string::npos) << reused.out;
  EXPECT_NE(reused.out.find("a retry must carry the same entries"), std::string::npos)
      << reused.out;

  // Lines from stdin take the next sequences; replayed, each answers its own index.
  const std::string two_lines =
      "printf 'a\\nb\\n' | " + ctl + "--client-id 77 --sequence 6 --json";
  const CommandRun lines = run_command(two_lines);
  ASSERT_EQ(lines.exit_code, 0) << lines.out;
  EXPECT_NE(lines.out.find("\"first_index\":" + std::to_string(filler + 1) +
                           ",\"last_index\":" + std::to_string(filler + 1)),
            std::string::npos)
      << lines.out;
  EXPECT_NE(lines.out.find("\"sequence\":7}"), std::string::npos) << lines.out;
  const CommandRun lines_again = run_command(two_lines);
  ASSERT_EQ(lines_again.exit_code, 0) << lines_again.out;
  EXPECT_NE(lines_again.out.find("\"first_index\":" + std::to_string(filler + 2) +
                                 ",\"last_index\":" + std::to_string(filler + 2) +
                                 ",\"term\":1,\"duplicate\":true,\"client_id\":77,\"sequence\":7}"),
            std::string::npos)
      << lines_again.out;

  // Nothing was written twice: a new append lands right after the two lines.
  const CommandRun next = run_command(ctl + "--value next --json");
  ASSERT_EQ(next.exit_code, 0) << next.out;
  EXPECT_EQ(json_number(next.out, "first_index"), filler + 3) << next.out;
}

}  // namespace
}  // namespace raftlog::testing

// util/build_info.h: the version is the project's; the revision is the commit the binary was built
// from (checked against the checkout's HEAD when git can tell), and both are safe in a string
// literal and a Prometheus label.
#include "util/build_info.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <regex>
#include <string>

namespace raftlog::util {
namespace {

std::string checkout_head() {
  const std::string command = "git -C '" + std::string(RAFTLOG_SOURCE_DIR) + "' rev-parse --short=12 HEAD 2>/dev/null";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return "";
  std::array<char, 64> buffer{};
  std::string out;
  while (std::fgets(buffer.data(), buffer.size(), pipe) != nullptr) out += buffer.data();
  ::pclose(pipe);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

TEST(BuildInfo, VersionIsTheProjectsAndTheRevisionTheCheckoutsHead) {
  EXPECT_EQ(build_version(), RAFTLOG_PROJECT_VERSION);
  const std::string revision(build_revision());
  ASSERT_TRUE(std::regex_match(revision, std::regex("[A-Za-z0-9._+-]+"))) << revision;
  const std::string override_revision = RAFTLOG_GIT_REVISION_OVERRIDE;
  const std::string head = checkout_head();
  if (!override_revision.empty()) {
    EXPECT_EQ(revision, override_revision);
  } else if (head.empty()) {
    EXPECT_EQ(revision, "unknown");
  } else {
    // The build ran after the last commit (ctest runs after the build): the same commit.
    EXPECT_TRUE(std::regex_match(revision, std::regex(head + "(-dirty)?"))) << revision << " vs HEAD " << head;
  }
  EXPECT_EQ(version_line("raftlogd"), "raftlogd " + std::string(build_version()) + " (revision " + revision + ")");
}

}  // namespace
}  // namespace raftlog::util

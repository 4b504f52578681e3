// util/build_info.h: the version is the project's; the revision is the commit the binary was built
// from (a commit of the checkout, HEAD or an ancestor, when git can tell), and both are safe in a string
// literal and a Prometheus label.
#include "util/build_info.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <regex>
#include <string>

namespace raftlog::util {
namespace {

// `git ARGS` in the checkout: its stdout ("" when git fails or is missing).
std::string git(const std::string& args) {
  const std::string command =
      "git -C '" + std::string(RAFTLOG_SOURCE_DIR) + "' " + args + " 2>/dev/null";
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
  const std::string head = git("rev-parse --short=12 HEAD");
  if (!override_revision.empty()) {
    EXPECT_EQ(revision, override_revision);
  } else if (head.empty()) {
    EXPECT_EQ(revision, "unknown");
  } else {
    // A commit of this checkout (HEAD when built after the last commit; an ancestor of it if
    // commits were made since the build), abbreviated as rev-parse abbreviates.
    std::smatch commit;
    ASSERT_TRUE(std::regex_match(revision, commit, std::regex("([0-9a-f]{12})(-dirty)?")))
        << revision;
    EXPECT_EQ(git("rev-parse --short=12 " + commit[1].str() + "^{commit}"), commit[1].str())
        << revision;
    EXPECT_EQ(git("merge-base --is-ancestor " + commit[1].str() + " HEAD && echo yes"), "yes")
        << revision << " is not HEAD " << head << " or an ancestor of it";
  }
  EXPECT_EQ(version_line("raftlogd"),
            "raftlogd " + std::string(build_version()) + " (revision " + revision + ")");
}

}  // namespace
}  // namespace raftlog::util

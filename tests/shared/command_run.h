// Runs a shell command line for the process tests: stdout captured, stderr merged, bounded by
// `timeout 30`.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace raftlog::testing {

struct CommandRun {
  int exit_code = -1;
  std::string out;
};

inline CommandRun run_command(const std::string& command) {
  CommandRun result;
  FILE* pipe = ::popen(("timeout 30 " + command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer{};
  std::size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    result.out.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace raftlog::testing

// raftlogctl: the operator's tool. One row per command group; each group lives in its own file
// (log_commands.cpp today; status/append/read/tail/transfer-leader/flush join with the node).
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "log_commands.h"

namespace {

constexpr raftlog::cli::Command kCommands[] = {
    {"log", "inspect an offline CommitLog data directory (verify, dump)", nullptr, &raftlog::ctl::kLogCommands},
};
constexpr raftlog::cli::CommandTable kTable{kCommands};

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const raftlog::cli::Io io{std::cout, std::cerr};
  return raftlog::cli::dispatch("raftlogctl", "Operator tool for raftlog. Exit codes: 0 ok, 1 failure or corruption, 2 usage error.",
                                kTable, args, io);
}

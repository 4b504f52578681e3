// raftlogctl: the operator's tool. One row per command; each group lives in its own file:
// cluster_commands.cpp talks to a running cluster, log_commands.cpp inspects an offline data directory.
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "cli/commands.h"
#include "cluster_commands.h"
#include "group_commands.h"
#include "log_commands.h"
#include "topic_commands.h"
#include "members_commands.h"

namespace {

constexpr raftlog::cli::Command kCommands[] = {
    {"status", "show every member: role, term, leader, indexes, peer lag and last contact",
     raftlog::ctl::run_status, nullptr},
    {"leader", "print the current leader's id and address (exit 1 when no node knows one)",
     raftlog::ctl::run_leader, nullptr},
    {"health", "ask each node's gRPC health service; exit 0 only if every node is SERVING",
     raftlog::ctl::run_health, nullptr},
    {"append", "append entries (--value TEXT, or one per stdin line) and print their indexes",
     raftlog::ctl::run_append, nullptr},
    {"read", "print committed entries (--from, --count, --linearizable)", raftlog::ctl::run_read,
     nullptr},
    {"tail", "print committed entries; -f keeps following the log", raftlog::ctl::run_tail,
     nullptr},
    {"transfer-leader", "hand leadership to another node (--to ID)",
     raftlog::ctl::run_transfer_leader, nullptr},
    {"flush", "make every node flush what it has written", raftlog::ctl::run_flush, nullptr},
    {"trim", "delete every node's whole segments below an index (as far as safe)",
     raftlog::ctl::run_trim, nullptr},
    {"log", "inspect an offline CommitLog data directory (verify, dump)", nullptr,
     &raftlog::ctl::kLogCommands},
    {"topic", "list, read and tail topics (entries appended with --topic)", nullptr,
     &raftlog::ctl::kTopicCommands},
    {"key", "find entries by key (entries appended with --key)", nullptr,
     &raftlog::ctl::kKeyCommands},
    {"group", "consumer groups' committed offsets (list, show, commit)", nullptr,
     &raftlog::ctl::kGroupCommands},
    {"members", "list and change the cluster's members (list, add, promote, remove, replace)",
     nullptr, &raftlog::ctl::kMembersCommands},
};
constexpr raftlog::cli::CommandTable kTable{kCommands};

// The cluster commands' shared flags (cluster_commands.h), also accepted before the command word.
constexpr std::string_view kGlobalValueFlags[] = {"endpoints", "cluster-dir", "timeout-ms",
                                                  "tls-ca",    "tls-cert",    "tls-key"};
constexpr std::string_view kGlobalBoolFlags[] = {"json"};

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> given(argv + 1, argv + argc);
  const std::vector<std::string> args =
      raftlog::cli::hoist_leading_flags(given, kGlobalValueFlags, kGlobalBoolFlags);
  const raftlog::cli::Io io{std::cout, std::cerr};
  return raftlog::cli::run_tool(
      "raftlogctl",
      "Operator tool for raftlog. Exit codes: 0 ok, 1 failure or corruption, 2 usage error.\n"
      "The cluster commands' flags (--endpoints, --cluster-dir, --timeout-ms, --json, --tls-*) "
      "may also come before the command.",
      kTable, args, io);
}

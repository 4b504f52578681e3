// Subcommand tables for the raftlog tools: `raftlogctl log verify`, `raftlog-bench store`, ...
//
// A tool is a tree of small static tables. Each level maps a word to either a handler or a nested
// table, so adding `raftlogctl status` later is one table row plus one handler file.
#pragma once

#include <iosfwd>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace raftlog::cli {

// Where a command writes. Handlers never touch std::cout/std::cerr directly so that they can be
// driven from tests.
struct Io {
  std::ostream& out;
  std::ostream& err;
};

// `args` excludes the command words themselves: for `raftlogctl log verify --dir x` the verify
// handler receives {"--dir", "x"}. `command_path` is "raftlogctl log verify" (for usage text).
using Handler = int (*)(std::string_view command_path, std::span<const std::string> args,
                        const Io& io);

struct Command;

struct CommandTable {
  std::span<const Command> commands;
};

struct Command {
  std::string_view name;
  std::string_view summary;
  Handler handler = nullptr;  // exactly one of handler / subcommands is set
  const CommandTable* subcommands = nullptr;
};

// Dispatches `args` (after the program or group name) through `table`.
//   no word or an unknown word -> usage on io.err, kExitUsage
//   -h / --help / help         -> usage on io.out, kExitOk
int dispatch(std::string_view command_path, std::string_view summary, const CommandTable& table,
             std::span<const std::string> args, const Io& io);

// A tool's entry point: `--version` (or `version`) prints util::version_line(program) to io.out and
// returns kExitOk; anything else goes to dispatch().
int run_tool(std::string_view program, std::string_view summary, const CommandTable& table,
             std::span<const std::string> args, const Io& io);

// Global flags before the command word (`raftlogctl --endpoints X status`, as etcdctl and kubectl
// take them): moves every leading `--name[=value]` / `--name value` that names one of
// `value_flags` or `bool_flags` to the end of the arguments, so the command's own FlagSet parses
// it. `--help`, `--version` and unknown leading flags are left in place (dispatch() then answers
// or refuses them); a value flag missing its value is left in place too.
std::vector<std::string> hoist_leading_flags(std::span<const std::string> args,
                                             std::span<const std::string_view> value_flags,
                                             std::span<const std::string_view> bool_flags);

class FlagSet;

// Parses `args` into `flags` the way every tool does: -h prints usage to io.out (kExitOk), an error
// prints the problem and usage to io.err (kExitUsage). Returns -1 when the caller should go on,
// otherwise the exit code to return.
int parse_or_exit(FlagSet& flags, std::string_view command_path, std::span<const std::string> args,
                  const Io& io);

// Usage text listing `table`'s commands.
std::string table_usage(std::string_view command_path, std::string_view summary,
                        const CommandTable& table);

}  // namespace raftlog::cli

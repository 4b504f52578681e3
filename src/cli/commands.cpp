#include "cli/commands.h"

#include <algorithm>
#include <ostream>
#include <sstream>

#include "cli/flags.h"
#include "util/build_info.h"

namespace raftlog::cli {

std::string table_usage(std::string_view command_path, std::string_view summary,
                        const CommandTable& table) {
  std::ostringstream text;
  text << "Usage: " << command_path << " <command> [flags]\n\n" << summary << "\n\nCommands:\n";
  std::size_t width = 0;
  for (const Command& command : table.commands) width = std::max(width, command.name.size());
  for (const Command& command : table.commands) {
    text << "  " << command.name << std::string(width - command.name.size() + 2, ' ')
         << command.summary << '\n';
  }
  text << "\nRun '" << command_path << " <command> --help' for a command's flags";
  // Only the tool itself (no command word yet) answers --version (run_tool).
  if (command_path.find(' ') == std::string_view::npos)
    text << ", '" << command_path << " --version' for its version";
  text << ".\n";
  return text.str();
}

int dispatch(std::string_view command_path, std::string_view summary, const CommandTable& table,
             std::span<const std::string> args, const Io& io) {
  if (args.empty()) {
    io.err << table_usage(command_path, summary, table);
    return kExitUsage;
  }
  const std::string_view word = args.front();
  if (word == "-h" || word == "--help" || word == "help") {
    io.out << table_usage(command_path, summary, table);
    return kExitOk;
  }
  for (const Command& command : table.commands) {
    if (command.name != word) continue;
    const std::string nested_path = std::string(command_path) + " " + std::string(command.name);
    if (command.subcommands != nullptr) {
      return dispatch(nested_path, command.summary, *command.subcommands, args.subspan(1), io);
    }
    return command.handler(nested_path, args.subspan(1), io);
  }
  io.err << command_path << ": unknown command '" << word << "'\n\n"
         << table_usage(command_path, summary, table);
  return kExitUsage;
}

int parse_or_exit(FlagSet& flags, std::string_view command_path, std::span<const std::string> args,
                  const Io& io) {
  switch (flags.parse(args)) {
    case ParseStatus::kHelp:
      io.out << flags.usage();
      return kExitOk;
    case ParseStatus::kError:
      io.err << command_path << ": " << flags.error() << "\n\n" << flags.usage();
      return kExitUsage;
    case ParseStatus::kOk:
      return -1;
  }
  return kExitUsage;
}

int run_tool(std::string_view program, std::string_view summary, const CommandTable& table,
             std::span<const std::string> args, const Io& io) {
  if (!args.empty() && (args.front() == "--version" || args.front() == "version")) {
    io.out << util::version_line(program) << '\n';
    return kExitOk;
  }
  return dispatch(program, summary, table, args, io);
}

std::vector<std::string> hoist_leading_flags(std::span<const std::string> args,
                                             std::span<const std::string_view> value_flags,
                                             std::span<const std::string_view> bool_flags) {
  auto names = [](std::span<const std::string_view> list, std::string_view name) {
    return std::find(list.begin(), list.end(), name) != list.end();
  };
  std::vector<std::string> hoisted;
  std::size_t i = 0;
  while (i < args.size() && args[i].starts_with("--")) {
    const std::string_view arg = args[i];
    const std::size_t eq = arg.find('=');
    const std::string_view name =
        arg.substr(2, eq == std::string_view::npos ? std::string_view::npos : eq - 2);
    if (names(bool_flags, name) || (names(value_flags, name) && eq != std::string_view::npos)) {
      hoisted.push_back(args[i]);
      i += 1;
    } else if (names(value_flags, name) && i + 1 < args.size()) {
      hoisted.push_back(args[i]);
      hoisted.push_back(args[i + 1]);
      i += 2;
    } else {
      break;
    }
  }
  std::vector<std::string> out(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  out.insert(out.end(), hoisted.begin(), hoisted.end());
  return out;
}

}  // namespace raftlog::cli

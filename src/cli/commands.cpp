#include "cli/commands.h"

#include <algorithm>
#include <ostream>
#include <sstream>

#include "cli/flags.h"

namespace raftlog::cli {

std::string table_usage(std::string_view command_path, std::string_view summary, const CommandTable& table) {
  std::ostringstream text;
  text << "Usage: " << command_path << " <command> [flags]\n\n" << summary << "\n\nCommands:\n";
  std::size_t width = 0;
  for (const Command& command : table.commands) width = std::max(width, command.name.size());
  for (const Command& command : table.commands) {
    text << "  " << command.name << std::string(width - command.name.size() + 2, ' ') << command.summary << '\n';
  }
  text << "\nRun '" << command_path << " <command> --help' for a command's flags.\n";
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
  io.err << command_path << ": unknown command '" << word << "'\n\n" << table_usage(command_path, summary, table);
  return kExitUsage;
}

int parse_or_exit(FlagSet& flags, std::string_view command_path, std::span<const std::string> args, const Io& io) {
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

}  // namespace raftlog::cli

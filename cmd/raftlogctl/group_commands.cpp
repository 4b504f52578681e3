#include "group_commands.h"

#include <iomanip>
#include <memory>
#include <ostream>
#include <string>

#include "command_failure.h"
#include "cli/flags.h"
#include "client/groups.h"
#include "cluster_commands.h"
#include "text_format.h"

namespace raftlog::ctl {
namespace {

// Parses the cluster flags and `flags`, then connects: a negative number with *groups set, or the
// exit code to return (help, a usage error, or a client that cannot be made).
int parse_and_connect(cli::FlagSet& flags, std::string_view command_path,
                      std::span<const std::string> args, const cli::Io& io,
                      std::unique_ptr<client::Groups>* groups, bool* json) {
  client::Options options;
  if (int code = parse_cluster_command(flags, command_path, args, io, &options, json); code >= 0)
    return code;
  auto made = client::Groups::create(options);
  if (!made.ok()) {
    io.err << made.status().message() << "\n";
    return cli::kExitUsage;
  }
  *groups = std::move(made).value();
  return -1;
}

int run_group_list(std::string_view command_path, std::span<const std::string> args,
                   const cli::Io& io) {
  cli::FlagSet flags(std::string(command_path),
                     "List the consumer groups with the number of topics each has committed.");
  std::unique_ptr<client::Groups> groups;
  bool json = false;
  if (int code = parse_and_connect(flags, command_path, args, io, &groups, &json); code >= 0)
    return code;
  auto listing = groups->list();
  if (!listing.ok()) return fail(io, "group list", listing.status());
  if (!json)
    io.out << std::left << std::setw(32) << "GROUP"
           << "TOPICS\n";
  for (const client::GroupSummary& group : listing->groups) {
    if (json) {
      io.out << "{\"group\":" << json_string(group.group) << ",\"topics\":" << group.topics
             << ",\"unknown_topics\":" << group.unknown_topics << "}\n";
    } else {
      io.out << std::left << std::setw(32) << group.group << group.topics;
      if (group.unknown_topics > 0) io.out << " (" << group.unknown_topics << " unknown)";
      io.out << "\n";
    }
  }
  if (!listing->complete) {
    io.err << "the leader's group table is incomplete (built after retention removed commits): "
              "groups may be missing from this list\n";
  }
  return cli::kExitOk;
}

int run_group_show(std::string_view command_path, std::span<const std::string> args,
                   const cli::Io& io) {
  cli::FlagSet flags(std::string(command_path),
                     "Print a consumer group's committed offsets: topic, offset, commit index.");
  std::string group;
  std::string topic;
  flags.string_flag("group", &group, "NAME", "the group (required)");
  flags.string_flag("topic", &topic, "NAME", "only this topic");
  flags.require("group");
  std::unique_ptr<client::Groups> groups;
  bool json = false;
  if (int code = parse_and_connect(flags, command_path, args, io, &groups, &json); code >= 0)
    return code;
  std::vector<std::string> topics;
  if (!topic.empty()) topics.push_back(topic);
  auto fetched = groups->fetch(group, topics);
  if (!fetched.ok()) return fail(io, "group show", fetched.status());
  if (!json)
    io.out << std::left << std::setw(32) << "TOPIC" << std::setw(14) << "OFFSET"
           << "COMMIT_INDEX\n";
  for (const client::GroupTopicOffset& offset : fetched->offsets) {
    if (json) {
      io.out << "{\"group\":" << json_string(group) << ",\"topic\":" << json_string(offset.topic)
             << ",\"offset\":" << offset.offset << ",\"commit_index\":" << offset.commit_index
             << "}\n";
    } else {
      io.out << std::left << std::setw(32) << offset.topic << std::setw(14) << offset.offset
             << offset.commit_index << "\n";
    }
  }
  // Nothing committed (for that topic): exit 1, like `key get` finding nothing, with a line on
  // stderr so that a person sees why (stdout keeps only the header, or nothing with --json).
  if (fetched->offsets.empty()) {
    io.err << "group show: group " << group << " has no committed offset"
           << (topic.empty() ? std::string() : " for topic " + topic) << "\n";
    return cli::kExitFailure;
  }
  return cli::kExitOk;
}

int run_group_commit(std::string_view command_path, std::span<const std::string> args,
                     const cli::Io& io) {
  cli::FlagSet flags(std::string(command_path),
                     "Set a consumer group's offset for a topic: the next offset it will read (at "
                     "most the topic's end offset). Replicated through the log.");
  std::string group;
  std::string topic;
  std::uint64_t offset = 0;
  flags.string_flag("group", &group, "NAME", "the group (required)");
  flags.string_flag("topic", &topic, "NAME", "the topic (required)");
  flags.uint_flag("offset", &offset, "N", "the offset (required)");
  flags.require("group");
  flags.require("topic");
  flags.require("offset");
  std::unique_ptr<client::Groups> groups;
  bool json = false;
  if (int code = parse_and_connect(flags, command_path, args, io, &groups, &json); code >= 0)
    return code;
  auto committed = groups->commit(group, topic, offset);
  if (!committed.ok()) return fail(io, "group commit", committed.status());
  if (json) {
    io.out << "{\"group\":" << json_string(group) << ",\"topic\":" << json_string(topic)
           << ",\"offset\":" << offset << ",\"index\":" << committed->index
           << ",\"term\":" << committed->term << "}\n";
  } else {
    io.out << "committed " << group << " " << topic << " " << offset << " at index "
           << committed->index << "\n";
  }
  return cli::kExitOk;
}

constexpr cli::Command kGroup[] = {
    {"list", "list the consumer groups", run_group_list, nullptr},
    {"show", "print a group's committed offsets (--group, --topic)", run_group_show, nullptr},
    {"commit", "set a group's offset for a topic (--group, --topic, --offset)", run_group_commit,
     nullptr},
};

}  // namespace

const cli::CommandTable kGroupCommands{kGroup};

}  // namespace raftlog::ctl

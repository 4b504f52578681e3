#include "topic_commands.h"

#include <csignal>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <stop_token>
#include <string>

#include "command_failure.h"
#include "cli/flags.h"
#include "client/topics.h"
#include "cluster_commands.h"
#include "text_format.h"

namespace raftlog::ctl {
namespace {

constexpr std::uint64_t kMaxTopicReadCount = 1'000'000;

std::unique_ptr<client::Topics> connect(const client::Options& options, const cli::Io& io) {
  auto topics = client::Topics::create(options);
  if (!topics.ok()) {
    io.err << topics.status().message() << "\n";
    return nullptr;
  }
  return std::move(topics).value();
}

void print_topic_entry(const cli::Io& io, const client::TopicEntry& entry, bool json) {
  if (json) {
    // The entry's own object with the offset added: {"index":...,"offset":N}.
    std::ostringstream line;
    cli::Io capture{line, io.err};
    print_cluster_entry(capture, entry.entry, true);
    std::string text = line.str();
    text.resize(text.size() - 2);  // "}\n"
    io.out << text << ",\"offset\":" << entry.offset << "}\n";
    return;
  }
  io.out << entry.offset << "\t";
  print_cluster_entry(io, entry.entry, false);
}

int run_topic_list(std::string_view command_path, std::span<const std::string> args,
                   const cli::Io& io) {
  cli::FlagSet flags(std::string(command_path),
                     "List the topics a node has indexed, with their first and end offsets.");
  client::Options options;
  bool json = false;
  if (int code = parse_cluster_command(flags, command_path, args, io, &options, &json); code >= 0)
    return code;
  auto topics = connect(options, io);
  if (topics == nullptr) return cli::kExitUsage;
  auto listing = topics->list();
  if (!listing.ok()) return fail(io, "topic list", listing.status());
  if (!json) io.out << std::left << std::setw(32) << "TOPIC" << std::setw(14) << "FIRST" << "END\n";
  for (const client::TopicSummary& topic : listing->topics) {
    if (json) {
      io.out << "{\"topic\":" << json_string(topic.topic) << ",\"first_offset\":"
             << topic.first_offset << ",\"end_offset\":" << topic.end_offset << "}\n";
    } else {
      io.out << std::left << std::setw(32) << topic.topic << std::setw(14) << topic.first_offset
             << topic.end_offset << "\n";
    }
  }
  return cli::kExitOk;
}

int run_topic_read(std::string_view command_path, std::span<const std::string> args,
                   const cli::Io& io) {
  cli::FlagSet flags(std::string(command_path),
                     "Print a topic's entries from an offset: offset, index, term, payload.");
  std::string topic;
  std::uint64_t from = 0;
  std::uint64_t count = 100;
  std::string since;
  flags.string_flag("topic", &topic, "NAME", "the topic (required)");
  flags.uint_flag("from", &from, "OFFSET", "first offset to print");
  flags.uint_flag("count", &count, "N", "most entries to print (1 to 1000000)");
  flags.string_flag("since", &since, "TIME",
                    "start at the first offset stamped at or after TIME (overrides --from)");
  client::Options options;
  bool json = false;
  if (int code = parse_cluster_command(flags, command_path, args, io, &options, &json); code >= 0)
    return code;
  if (topic.empty() || count == 0 || count > kMaxTopicReadCount) {
    io.err << command_path << ": --topic is required and --count in [1, " << kMaxTopicReadCount
           << "]\n";
    return cli::kExitUsage;
  }
  auto topics = connect(options, io);
  if (topics == nullptr) return cli::kExitUsage;
  if (!since.empty()) {
    std::uint64_t timestamp_ms = 0;
    if (!client::parse_time(since, &timestamp_ms)) {
      io.err << command_path << ": --since: not a time: " << since << "\n";
      return cli::kExitUsage;
    }
    auto found = topics->find_by_time(timestamp_ms, topic);
    if (!found.ok()) return fail(io, "topic read --since", found.status());
    from = found->offset;
  }
  std::uint64_t printed = 0;
  while (printed < count) {
    const auto want = static_cast<std::uint32_t>(std::min<std::uint64_t>(count - printed, 1024));
    auto read = topics->read(topic, from, want);
    if (!read.ok()) return fail(io, "topic read", read.status());
    if (read->entries.empty()) break;
    for (const client::TopicEntry& entry : read->entries) {
      print_topic_entry(io, entry, json);
      ++printed;
    }
    from = read->end_offset;
  }
  return cli::kExitOk;
}

std::stop_source tail_stop;
extern "C" void stop_tail(int) { tail_stop.request_stop(); }

int run_topic_tail(std::string_view command_path, std::span<const std::string> args,
                   const cli::Io& io) {
  cli::FlagSet flags(std::string(command_path),
                     "Print a topic's entries from an offset; with -f keep following it (across "
                     "leader changes and node restarts) until interrupted.");
  std::string topic;
  std::uint64_t from = 0;
  bool follow = false;
  std::uint64_t duration_ms = 0;
  flags.string_flag("topic", &topic, "NAME", "the topic (required)");
  flags.uint_flag("from", &from, "OFFSET", "first offset to print");
  flags.bool_flag("follow", &follow, "(or -f) keep following the topic");
  flags.uint_flag("duration-ms", &duration_ms, "MS", "with -f: stop after this long (0: never)");
  client::Options options;
  bool json = false;
  const std::vector<std::string> normalized = with_short_follow(args);
  if (int code = parse_cluster_command(flags, command_path, normalized, io, &options, &json);
      code >= 0)
    return code;
  if (topic.empty()) {
    io.err << command_path << ": --topic is required\n";
    return cli::kExitUsage;
  }
  auto topics = connect(options, io);
  if (topics == nullptr) return cli::kExitUsage;
  if (!follow) {
    auto read = topics->read(topic, from, 1024);
    if (!read.ok()) return fail(io, "topic tail", read.status());
    for (const client::TopicEntry& entry : read->entries) print_topic_entry(io, entry, json);
    return cli::kExitOk;
  }
  std::signal(SIGINT, stop_tail);
  std::signal(SIGTERM, stop_tail);
  auto next = topics->tail(topic, from, duration_ms, tail_stop.get_token(),
                           [&](const client::TopicEntry& entry) {
                             print_topic_entry(io, entry, json);
                             io.out.flush();
                             return true;
                           });
  if (!next.ok()) return fail(io, "topic tail", next.status());
  return cli::kExitOk;
}

int run_key_get(std::string_view command_path, std::span<const std::string> args,
                const cli::Io& io) {
  cli::FlagSet flags(std::string(command_path),
                     "Print the entries appended with a key (raftlogctl append --key), oldest first.");
  std::string key;
  std::uint64_t count = 100;
  flags.string_flag("key", &key, "KEY", "the key (required)");
  flags.uint_flag("count", &count, "N", "most entries to print (at most 1024)", {1, 1024});
  client::Options options;
  bool json = false;
  if (int code = parse_cluster_command(flags, command_path, args, io, &options, &json); code >= 0)
    return code;
  if (key.empty()) {
    io.err << command_path << ": --key is required\n";
    return cli::kExitUsage;
  }
  auto topics = connect(options, io);
  if (topics == nullptr) return cli::kExitUsage;
  auto entries = topics->lookup_key(key, static_cast<std::uint32_t>(count));
  if (!entries.ok()) return fail(io, "key get", entries.status());
  for (const client::Entry& entry : entries.value()) print_cluster_entry(io, entry, json);
  if (entries->empty()) {
    // Exit 1 says "not found" to a script; the line says it to a person (stdout stays empty).
    io.err << "key get: no retained entry has the key " << key
           << " (committed entries that retention trimmed are not found by their keys)\n";
    return cli::kExitFailure;
  }
  return cli::kExitOk;
}

constexpr cli::Command kTopic[] = {
    {"list", "list the indexed topics with their first and end offsets", run_topic_list, nullptr},
    {"read", "print a topic's entries from an offset (--topic, --from, --count, --since)",
     run_topic_read, nullptr},
    {"tail", "print a topic's entries; -f keeps following it", run_topic_tail, nullptr},
};
constexpr cli::Command kKey[] = {
    {"get", "print the entries appended with a key (--key)", run_key_get, nullptr},
};

}  // namespace

const cli::CommandTable kTopicCommands{kTopic};
const cli::CommandTable kKeyCommands{kKey};

}  // namespace raftlog::ctl

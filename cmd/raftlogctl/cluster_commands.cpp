// `raftlogctl leader|health|append|read|tail|transfer-leader|flush|trim` (status: status_command.cpp): talk to a running cluster through the
// client library (leader discovery, redirects, idempotent retries).
#include "cluster_commands.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "command_failure.h"
#include "cli/flags.h"
#include "client/client.h"
#include "client/topics.h"
#include "cluster_flags.h"
#include "text_format.h"

namespace raftlog::ctl {
namespace {

constexpr std::uint64_t kMaxAppendLines = 1'000'000;  // bound on one `append` from stdin
constexpr std::uint64_t kMaxReadCount = 1'000'000;    // bound on one `read`'s output

void print_entry(const cli::Io& io, const client::Entry& e, bool json) {
  if (json) {
    io.out << "{\"index\":" << e.index << ",\"term\":" << e.term
           << ",\"type\":" << json_string(client::to_string(e.type))
           << ",\"client_id\":" << e.client_id << ",\"sequence\":" << e.sequence
           << ",\"payload\":" << json_string(e.payload);
    if (e.has_attributes) {
      io.out << ",\"topic\":" << json_string(e.topic) << ",\"keys\":[";
      for (std::size_t i = 0; i < e.keys.size(); ++i)
        io.out << (i == 0 ? "" : ",") << json_string(e.keys[i]);
      io.out << "],\"timestamp_ms\":" << e.timestamp_ms;
    }
    io.out << "}\n";
  } else {
    io.out << e.index << "\t" << e.term << "\t"
           << (e.type == client::EntryType::kNormal
                   ? escape_text(e.payload)
                   : "(" + std::string(client::to_string(e.type)) + ")")
           << "\n";
  }
}

// print_entry()'s lines under their header, which is printed with the first entry, or by
// finish() when the command succeeds without any: a command that fails (a trimmed --from) prints
// no table at all, only its error (drills6 L4: scripts saw a header with no rows).
class EntryTable {
 public:
  EntryTable(const Common& common, const cli::Io& io) : common_(common), io_(io) {}
  void print(const client::Entry& e) {
    header();
    print_entry(io_, e, common_.json);
  }
  void finish() { header(); }

 private:
  void header() {
    if (header_pending_ && common_.headers()) io_.out << "INDEX\tTERM\tPAYLOAD\n";
    header_pending_ = false;
  }
  const Common& common_;
  const cli::Io& io_;
  bool header_pending_ = true;
};

// The first log index stamped at or after `timestamp_ms` (0: none), nullopt after printing why.
std::optional<std::uint64_t> find_index_by_time(const Common& common, std::uint64_t timestamp_ms,
                                                const cli::Io& io);

}  // namespace

std::string unreachable_text(const client::Status& status) {
  return "DOWN (" + describe_unreachable(client::to_string(status.code()), status.message()) + ")";
}

// --- leader --------------------------------------------------------------------------------------
int run_leader(std::string_view command_path, std::span<const std::string> args,
               const cli::Io& io) {
  Common common;
  cli::FlagSet flags(std::string(command_path),
                     "Print the leader's id and address, as the node that calls itself leader (or, "
                     "failing that, the "
                     "other members) reports it. Exit 1 when no reachable node knows a leader.");
  common.add_to(flags);
  if (int code = parse_command(flags, common, command_path, args, io); code >= 0) return code;
  auto c = common.connect(io);
  if (c == nullptr) return cli::kExitUsage;
  const std::vector<client::EndpointStatus> all = c->status_all();
  // The self-declared leader with the highest term wins; else the highest-term follower's hint.
  const client::NodeStatus* best = nullptr;
  auto better = [&best](const client::NodeStatus& s) {
    if (s.leader_id == 0) return false;
    if (best == nullptr) return true;
    const bool self = s.role == client::Role::kLeader;
    const bool best_self = best->role == client::Role::kLeader;
    return s.term > best->term || (s.term == best->term && self && !best_self);
  };
  int reachable = 0;
  for (const client::EndpointStatus& e : all) {
    if (!e.status.ok()) continue;
    ++reachable;
    if (better(e.status.value())) best = &e.status.value();
  }
  if (best == nullptr) {
    io.err << command_path << ": no leader known (" << reachable << " of " << all.size()
           << " endpoints answered; run 'raftlogctl status')\n";
    return cli::kExitFailure;
  }
  const std::string address =
      best->role == client::Role::kLeader ? best->address : best->leader_address;
  if (common.json) {
    io.out << "{\"leader_id\":" << best->leader_id << ",\"leader_address\":" << json_string(address)
           << ",\"term\":" << best->term << ",\"reported_by\":" << best->node_id << "}\n";
  } else {
    io.out << "node " << best->leader_id << " at " << address << " (term " << best->term << ")\n";
  }
  return cli::kExitOk;
}

// --- health --------------------------------------------------------------------------------------
struct NotServingWhy {
  std::string reason;
  std::uint64_t catching_up_to = 0;  // a follower catching up to its leader's commit index
  std::uint64_t behind_entries = 0;
};

NotServingWhy not_serving_why(client::Client& c, const std::string& endpoint) {
  const client::Result<client::NodeStatus> status = c.status(endpoint);
  if (!status.ok()) return {};
  const client::NodeStatus& s = status.value();
  return {s.not_serving_reason, s.catching_up_to_leader_commit, s.behind_leader_commit_entries};
}

int run_health(std::string_view command_path, std::span<const std::string> args,
               const cli::Io& io) {
  Common common;
  std::string service;
  cli::FlagSet flags(
      std::string(command_path),
      "Ask every endpoint's grpc.health.v1 service; exit 0 only if all are SERVING (for probes).");
  common.add_to(flags);
  flags.string_flag("service", &service, "NAME",
                    "service to ask about: \"\" (the node) or raftlog.v1.Log");
  if (int code = parse_command(flags, common, command_path, args, io); code >= 0) return code;
  auto c = common.connect(io);
  if (c == nullptr) return cli::kExitUsage;
  bool all_serving = true;
  const std::vector<std::string> endpoints = client::parse_endpoints(common.endpoints).value();
  if (common.headers())
    io.out << std::left << std::setw(22) << "ENDPOINT"
           << "HEALTH\n";
  for (const std::string& endpoint : endpoints) {
    const client::Result<client::HealthState> state = c->health(endpoint, service);
    const std::string text =
        state.ok() ? client::to_string(state.value()) : unreachable_text(state.status());
    all_serving = all_serving && state.ok() && state.value() == client::HealthState::kServing;
    // Why not (drills7 L1): one Status call to a node that answered NOT_SERVING; "" when that
    // fails or the node predates the field. The exit status stays the health service's alone.
    const NotServingWhy why = state.ok() && state.value() == client::HealthState::kNotServing
                                  ? not_serving_why(*c, endpoint)
                                  : NotServingWhy{};
    if (common.json) {
      io.out << "{\"endpoint\":" << json_string(endpoint) << ",\"status\":" << json_string(text);
      if (!why.reason.empty()) io.out << ",\"reason\":" << json_string(why.reason);
      if (why.catching_up_to != 0) {
        io.out << ",\"catching_up_to_leader_commit\":" << why.catching_up_to
               << ",\"behind_leader_commit_entries\":" << why.behind_entries;
      }
      io.out << "}\n";
    } else {
      io.out << std::left << std::setw(22) << endpoint << text;
      if (!why.reason.empty()) io.out << " (" << why.reason << ")";
      if (why.catching_up_to != 0) {
        io.out << " [" << why.behind_entries << " entries behind the commit index "
               << why.catching_up_to << "]";
      }
      io.out << "\n";
    }
  }
  return all_serving ? cli::kExitOk : cli::kExitFailure;
}

// --- append --------------------------------------------------------------------------------------
int run_append(std::string_view command_path, std::span<const std::string> args,
               const cli::Io& io) {
  Common common;
  std::string value;
  bool batch = false;
  cli::FlagSet flags(
      std::string(command_path),
      "Append entries: --value TEXT, or one entry per line of standard input. Prints each "
      "entry's index once it is committed.");
  common.add_to(flags);
  flags.string_flag("value", &value, "TEXT",
                    "append this one entry, at least one byte (otherwise one entry per line of "
                    "stdin, where an empty line appends an empty entry)");
  flags.bool_flag("batch", &batch,
                  "stdin: append all lines as one atomic batch instead of one append per line");
  std::string topic;
  std::string key;
  flags.string_flag("topic", &topic, "NAME", "append the entries to this topic");
  flags.string_flag("key", &key, "KEY", "give every entry this key (raftlogctl key get finds it)");
  // An acknowledged append replayed by hand (docs/durability.md, "Idempotent appends"): the same
  // client id, sequence and entries answer the original indexes (duplicate), not a second write.
  std::uint64_t client_id = 0;
  std::uint64_t sequence = 0;
  flags.uint_flag("client-id", &client_id, "ID",
                  "append as this client (default: a random id); with --sequence, a retry of that "
                  "client's append answers its original indexes",
                  {1, std::numeric_limits<std::uint64_t>::max()});
  flags.uint_flag("sequence", &sequence, "N",
                  "the first append's sequence number (needs --client-id; each further stdin "
                  "line takes the next; default 1)",
                  {1, std::numeric_limits<std::uint64_t>::max()});
  if (int code = parse_command(flags, common, command_path, args, io); code >= 0) return code;
  if (flags.was_set("sequence") && !flags.was_set("client-id")) {
    io.err << command_path
           << ": --sequence needs --client-id (a sequence belongs to one client's appends)\n";
    return cli::kExitUsage;
  }
  const std::vector<std::string> keys =
      key.empty() ? std::vector<std::string>{} : std::vector<std::string>{key};
  std::optional<client::Options> options = client_options(common, io);
  if (!options) return cli::kExitUsage;
  if (flags.was_set("client-id")) options->client_id = client_id;
  if (flags.was_set("sequence")) options->first_sequence = sequence;
  auto created = client::Client::create(*options);
  if (!created.ok()) {
    io.err << created.status().message() << "\n";
    return cli::kExitUsage;
  }
  std::unique_ptr<client::Client> c = std::move(created).value();
  const bool with_attributes = !topic.empty() || !keys.empty();
  auto append = [&](const std::vector<std::string>& entries) {
    if (!with_attributes) return c->append(entries);
    return c->append(entries, std::vector<client::EntryAttributes>(entries.size(), {topic, keys}));
  };

  std::vector<std::string> lines;
  if (flags.was_set("value")) {
    lines.push_back(value);
  } else {
    std::string line;
    while (lines.size() < kMaxAppendLines && std::getline(std::cin, line)) lines.push_back(line);
  }
  if (lines.empty()) {
    io.err << command_path << ": nothing to append\n";
    return cli::kExitUsage;
  }
  const std::uint64_t appends = batch ? 1 : lines.size();
  if (options->first_sequence > std::numeric_limits<std::uint64_t>::max() - (appends - 1)) {
    io.err << command_path << ": --sequence " << options->first_sequence << " leaves no room for "
           << appends << " appends (each takes the next sequence number)\n";
    return cli::kExitUsage;
  }
  const bool replayable = flags.was_set("client-id");
  auto report = [&](const client::AppendResult& r) {
    if (common.json) {
      io.out << "{\"first_index\":" << r.first_index << ",\"last_index\":" << r.last_index
             << ",\"term\":" << r.term << ",\"duplicate\":" << (r.duplicate ? "true" : "false");
      if (replayable) io.out << ",\"client_id\":" << client_id << ",\"sequence\":" << r.sequence;
      io.out << "}\n";
      return;
    }
    if (r.first_index == r.last_index) {
      io.out << "appended at index " << r.first_index << " (term " << r.term;
    } else {
      io.out << "appended at indexes " << r.first_index << ".." << r.last_index << " (term "
             << r.term;
    }
    if (replayable) io.out << ", client " << client_id << " sequence " << r.sequence;
    if (r.duplicate) io.out << ", a retry: answered from the original append";
    io.out << ")\n";
  };
  if (batch) {
    auto r = append(lines);
    if (!r.ok()) return fail(io, "append", r.status());
    report(r.value());
    return cli::kExitOk;
  }
  for (const std::string& line : lines) {
    auto r = append({line});
    if (!r.ok()) return fail(io, "append", r.status());
    report(r.value());
  }
  return cli::kExitOk;
}

// --- read ----------------------------------------------------------------------------------------
int run_read(std::string_view command_path, std::span<const std::string> args, const cli::Io& io) {
  Common common;
  std::uint64_t from = 1;
  std::uint64_t count = 100;
  bool linearizable = false;
  cli::FlagSet flags(std::string(command_path),
                     "Print committed entries: index, term, payload (escaped).");
  common.add_to(flags);
  flags.uint_flag("from", &from, "INDEX", "first index to print");
  flags.uint_flag("count", &count, "N", "most entries to print (1 to 1000000)");
  flags.bool_flag("linearizable", &linearizable,
                  "read through the leader with ReadIndex (sees every completed append)");
  std::string since;
  flags.string_flag("since", &since, "TIME",
                    "start at the first entry with a topic or keys stamped at or after TIME "
                    "(2026-12-01T09:00Z, or ms since the epoch); overrides --from");
  if (int code = parse_command(flags, common, command_path, args, io); code >= 0) return code;
  if (!since.empty()) {
    std::uint64_t timestamp_ms = 0;
    if (!client::parse_time(since, &timestamp_ms)) {
      io.err << command_path << ": --since: not a time: " << since << "\n";
      return cli::kExitUsage;
    }
    auto found = find_index_by_time(common, timestamp_ms, io);
    if (!found) return cli::kExitFailure;
    if (*found == 0) return cli::kExitOk;  // nothing stamped at or after that time yet
    from = *found;
  }
  if (count == 0 || count > kMaxReadCount || from == 0) {
    io.err << command_path << ": --from must be >= 1 and --count in [1, " << kMaxReadCount
           << "]\n";
    return cli::kExitUsage;
  }
  auto c = common.connect(io);
  if (c == nullptr) return cli::kExitUsage;
  std::uint64_t printed = 0;
  std::uint64_t next = from;
  std::uint64_t commit_index = 0;  // as of the last answer
  EntryTable table(common, io);
  while (printed < count) {
    const auto want = static_cast<std::uint32_t>(std::min<std::uint64_t>(count - printed, 1000));
    auto r = c->read(next, want, 0, linearizable);
    if (!r.ok()) return fail(io, "read", r.status());
    commit_index = r->commit_index;
    if (r->entries.empty()) break;
    for (const client::Entry& e : r->entries) {
      table.print(e);
      ++printed;
      next = e.index + 1;
    }
  }
  table.finish();
  // Stopped by --count with committed entries left: say so (on stderr, so the output stays data).
  if (printed == count && commit_index >= next) {
    io.err << (commit_index - next + 1) << " more entries (through index " << commit_index
           << "); use --count or --from " << next << "\n";
  }
  return cli::kExitOk;
}

// --- tail ----------------------------------------------------------------------------------------
std::vector<std::string> with_short_follow(std::span<const std::string> args) {
  std::vector<std::string> normalized(args.begin(), args.end());
  for (std::string& arg : normalized) {
    if (arg == "-f") arg = "--follow";
  }
  return normalized;
}

int run_tail(std::string_view command_path, std::span<const std::string> args, const cli::Io& io) {
  Common common;
  std::uint64_t from = 1;
  bool follow = false;
  std::uint32_t duration_ms = 0;
  cli::FlagSet flags(
      std::string(command_path),
      "Print committed entries from --from on; with -f keep following the log as it grows "
      "(surviving leader changes and node restarts).");
  common.add_to(flags);
  flags.uint_flag("from", &from, "INDEX", "first index to print");
  flags.bool_flag("follow", &follow,
                  "(or -f) keep printing new entries until interrupted (or --duration-ms)");
  flags.uint_flag("duration-ms", &duration_ms, "MS",
                  "with -f: stop after this long (0 = until interrupted)");
  const std::vector<std::string> normalized = with_short_follow(args);
  if (int code = parse_command(flags, common, command_path, normalized, io); code >= 0) return code;
  if (from == 0) {
    io.err << command_path << ": --from must be >= 1\n";
    return cli::kExitUsage;
  }
  auto c = common.connect(io);
  if (c == nullptr) return cli::kExitUsage;
  if (!follow) {
    // Without -f: everything committed now, then stop.
    std::uint64_t next = from;
    EntryTable table(common, io);
    for (std::uint64_t round = 0; round < kMaxReadCount; ++round) {
      auto r = c->read(next, 1000, 0, false);
      if (!r.ok()) return fail(io, "tail", r.status());
      if (r->entries.empty()) break;
      for (const client::Entry& e : r->entries) table.print(e);
      next = r->entries.back().index + 1;
    }
    table.finish();
    return cli::kExitOk;
  }
  EntryTable table(common, io);
  client::TailOptions options;
  options.from_index = from;
  options.duration_ms = duration_ms;
  auto r = c->tail(options, [&](const client::Entry& e) {
    table.print(e);
    io.out.flush();
    return true;
  });
  if (!r.ok()) return fail(io, "tail", r.status());
  table.finish();
  return cli::kExitOk;
}

// --- transfer-leader -----------------------------------------------------------------------------
int run_transfer_leader(std::string_view command_path, std::span<const std::string> args,
                        const cli::Io& io) {
  Common common;
  std::uint64_t target = 0;
  cli::FlagSet flags(std::string(command_path), "Hand leadership to node --to.");
  common.add_to(flags);
  // 0 is never a node id: refused here as a usage error (exit 2), like `members remove 0`.
  flags.uint_flag("to", &target, "ID", "the node to become leader", {1, UINT64_MAX});
  flags.require("to");
  if (int code = parse_command(flags, common, command_path, args, io); code >= 0) return code;
  auto c = common.connect(io);
  if (c == nullptr) return cli::kExitUsage;
  auto r = c->transfer_leadership(target);
  if (!r.ok()) return fail(io, "transfer-leader", r.status());
  if (common.json) {
    io.out << "{\"leader_id\":" << r->leader_id << ",\"term\":" << r->term << "}\n";
  } else {
    io.out << "node " << r->leader_id << " is leader (term " << r->term << ")\n";
  }
  return cli::kExitOk;
}

// --- per-node admin commands (flush, trim) ------------------------------------------------------
// Sends one call to every endpoint in --endpoints and prints each answer; errors go to stderr and
// make the exit code 1. `call` returns the line to print (text and JSON) or the failed status.
struct NodeAnswer {
  std::string text;  // after "<endpoint>: "
  std::string json;  // fields after {"endpoint":...,
};
int for_each_endpoint(
    const Common& common, const cli::Io& io,
    const std::function<client::Result<NodeAnswer>(client::Client&, const std::string&)>& call) {
  auto parsed = client::parse_endpoints(common.endpoints);
  if (!parsed.ok()) {
    io.err << "--endpoints: " << parsed.status().message() << "\n";
    return cli::kExitUsage;
  }
  auto c = common.connect(io);
  if (c == nullptr) return cli::kExitUsage;
  int failures = 0;
  for (const std::string& endpoint : parsed.value()) {
    auto r = call(*c, endpoint);
    if (!r.ok()) {
      ++failures;
      io.err << endpoint << ": " << client::to_string(r.status().code()) << ": "
             << r.status().message() << "\n";
      continue;
    }
    if (common.json) {
      io.out << "{\"endpoint\":" << json_string(endpoint) << "," << r->json << "}\n";
    } else {
      io.out << endpoint << ": " << r->text << "\n";
    }
  }
  return failures == 0 ? cli::kExitOk : cli::kExitFailure;
}

int run_flush(std::string_view command_path, std::span<const std::string> args, const cli::Io& io) {
  Common common;
  cli::FlagSet flags(std::string(command_path),
                     "Force every node to flush what it has written; print each flushed index.");
  common.add_to(flags);
  if (int code = parse_command(flags, common, command_path, args, io); code >= 0) return code;
  return for_each_endpoint(
      common, io, [](client::Client& c, const std::string& endpoint) -> client::Result<NodeAnswer> {
        auto r = c.flush(endpoint);
        if (!r.ok()) return r.status();
        return NodeAnswer{"flushed through index " + std::to_string(r.value()),
                          "\"flushed_index\":" + std::to_string(r.value())};
      });
}

int run_trim(std::string_view command_path, std::span<const std::string> args, const cli::Io& io) {
  Common common;
  std::uint64_t before_index = 0;
  cli::FlagSet flags(
      std::string(command_path),
      "Ask every node to delete its whole segments below INDEX, as far as its safety limit allows "
      "(committed entries only; the leader keeps what live followers need). Prints each node's "
      "first retained index.");
  common.add_to(flags);
  flags.uint_flag("before", &before_index, "INDEX", "delete entries below this index (required)");
  if (int code = parse_command(flags, common, command_path, args, io); code >= 0) return code;
  if (before_index == 0) {
    io.err << "--before INDEX is required (and must be at least 1)\n";
    return cli::kExitUsage;
  }
  return for_each_endpoint(
      common, io,
      [before_index](client::Client& c, const std::string& endpoint) -> client::Result<NodeAnswer> {
        auto r = c.trim(endpoint, before_index);
        if (!r.ok()) return r.status();
        return NodeAnswer{"first retained index " + std::to_string(r->first_index) +
                              " (trim allowed below " + std::to_string(r->limit) +
                              (r->limit <= 1 ? ": nothing may be trimmed yet, the whole log is held"
                                             : "") +
                              ")",
                          "\"first_index\":" + std::to_string(r->first_index) +
                              ",\"limit\":" + std::to_string(r->limit)};
      });
}

// --- shared with topic_commands.cpp ---------------------------------------------------------------
namespace {

std::optional<std::uint64_t> find_index_by_time(const Common& common, std::uint64_t timestamp_ms,
                                                const cli::Io& io) {
  std::optional<client::Options> options = client_options(common, io);
  if (!options) return std::nullopt;
  auto topics = client::Topics::create(*options);
  if (!topics.ok()) {
    fail(io, "read --since", topics.status());
    return std::nullopt;
  }
  auto found = topics.value()->find_by_time(timestamp_ms, "");
  if (!found.ok()) {
    fail(io, "read --since", found.status());
    return std::nullopt;
  }
  return found->found ? found->index : 0;
}

}  // namespace

int parse_cluster_command(cli::FlagSet& flags, std::string_view command_path,
                          std::span<const std::string> args, const cli::Io& io,
                          client::Options* options, bool* json) {
  ClusterFlags parsed;
  if (int code = parse_cluster_flags(flags, command_path, args, io, &parsed); code >= 0)
    return code;
  *options = std::move(parsed.options);
  *json = parsed.json;
  return -1;
}

void print_cluster_entry(const cli::Io& io, const client::Entry& entry, bool json) {
  print_entry(io, entry, json);
}

int parse_cluster_flags(cli::FlagSet& flags, std::string_view command_path,
                        std::span<const std::string> args, const cli::Io& io, ClusterFlags* out) {
  Common common;
  common.add_to(flags);
  if (int code = parse_command(flags, common, command_path, args, io); code >= 0) return code;
  std::optional<client::Options> built = client_options(common, io);
  if (!built) return cli::kExitUsage;
  out->options = std::move(*built);
  out->json = common.json;
  out->no_headers = common.no_headers;
  out->timeout_ms = common.timeout_ms;
  return -1;
}

}  // namespace raftlog::ctl

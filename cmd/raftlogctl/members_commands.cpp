#include "members_commands.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "command_failure.h"
#include "cli/flags.h"
#include "cli/members_args.h"
#include "client/admin.h"
#include "cluster_commands.h"
#include "text_format.h"

namespace raftlog::ctl {
namespace {

using cli::PositionalKind;
using cli::PositionalSpec;

// "1,2,3" (`separator` between the ids).
std::string joined_ids(const std::vector<std::uint64_t>& ids, std::string_view separator) {
  std::string out;
  for (std::uint64_t id : ids) {
    if (!out.empty()) out += separator;
    out += std::to_string(id);
  }
  return out;
}

std::string ids_text(const std::vector<std::uint64_t>& ids) {
  return "{" + joined_ids(ids, ",") + "}";
}

// Parses positionals, then the flags (the shared cluster flags and `extra`'s); -1 to go on.
struct Parsed {
  cli::MembersArgs args;
  ClusterFlags cluster;
  std::unique_ptr<client::MembersClient> members;
  std::chrono::steady_clock::time_point deadline;  // --timeout-ms from the start of the command
  // What is left of --timeout-ms (at least 1 ms).
  std::uint32_t remaining_ms() const {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    return static_cast<std::uint32_t>(std::max<std::int64_t>(left.count(), 1));
  }
};
int parse(std::string_view command_path, std::string_view summary,
          std::span<const std::string> args, std::span<const PositionalSpec> spec,
          const cli::Io& io, Parsed* out,
          const std::function<void(cli::FlagSet&)>& extra = nullptr) {
  std::string positional_usage;
  for (const PositionalSpec& item : spec) positional_usage += " " + std::string(item.name);
  cli::FlagSet flags(std::string(command_path) + positional_usage, std::string(summary));
  if (extra) extra(flags);
  if (std::string problem = cli::parse_members_args(args, spec, &out->args); !problem.empty()) {
    io.err << command_path << ": " << problem << "\n\n" << flags.usage();
    return cli::kExitUsage;
  }
  if (int code = parse_cluster_flags(flags, command_path, out->args.flags, io, &out->cluster);
      code >= 0)
    return code;
  // Each attempt has its own deadline (a list's call_timeout_ms, a change's few seconds: the
  // client moves on to the next endpoint after it), and --timeout-ms bounds the whole command: the
  // change, its confirmation from the member list after an ambiguous attempt, the wait for a
  // learner and its promotion (docs/operations.md, "Membership").
  auto created = client::MembersClient::create(out->cluster.options);
  if (!created.ok()) {
    io.err << created.status().message() << "\n";
    return cli::kExitUsage;
  }
  out->members = std::move(created).value();
  out->deadline = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(out->cluster.timeout_ms);
  out->members->bound_by(out->deadline);
  return -1;
}

void print_change(const cli::Io& io, bool json, const std::string& what,
                  const client::MembershipChange& change) {
  if (json) {
    io.out << "{\"done\":" << json_string(what) << ",\"config_index\":" << change.config_index
           << ",\"term\":" << change.term << ",\"voters\":[";
    for (std::size_t i = 0; i < change.voters.size(); ++i)
      io.out << (i ? "," : "") << change.voters[i];
    io.out << "],\"learners\":[";
    for (std::size_t i = 0; i < change.learners.size(); ++i)
      io.out << (i ? "," : "") << change.learners[i];
    io.out << "]}\n";
    return;
  }
  io.out << what << " (configuration entry " << change.config_index << ", term " << change.term
         << ": voters " << ids_text(change.voters);
  if (!change.learners.empty()) io.out << " learners " << ids_text(change.learners);
  io.out << ")\n";
}

// --- list ------------------------------------------------------------------------------------------
int run_list(std::string_view command_path, std::span<const std::string> args, const cli::Io& io) {
  Parsed p;
  if (int code = parse(command_path,
                       "List the members as the leader sees them, the bootstrap voters and the "
                       "retired ids (ids a new node must not take).",
                       args, {}, io, &p);
      code >= 0)
    return code;
  auto list = p.members->list();
  if (!list.ok()) return fail(io, "members list", list.status());
  std::sort(list->retired_ids.begin(), list->retired_ids.end());  // the leader keeps them by age
  if (p.cluster.json) {
    io.out << "{\"leader_id\":" << list->leader_id << ",\"term\":" << list->term
           << ",\"config_index\":" << list->config_index
           << ",\"config_committed\":" << (list->config_committed ? "true" : "false")
           << ",\"commit_index\":" << list->commit_index << ",\"bootstrap_voters\":["
           << joined_ids(list->bootstrap_voters, ",") << "],\"retired_ids\":["
           << joined_ids(list->retired_ids, ",") << "],\"members\":[";
    for (std::size_t i = 0; i < list->members.size(); ++i) {
      const client::Member& m = list->members[i];
      io.out << (i ? "," : "") << "{\"id\":" << m.id << ",\"address\":" << json_string(m.address)
             << ",\"role\":" << json_string(m.voter ? "voter" : "learner")
             << ",\"leader\":" << (m.leader ? "true" : "false") << ",\"match_index\":" << m.match_index
             << ",\"lag_entries\":" << m.lag_entries
             << ",\"caught_up\":" << (m.caught_up ? "true" : "false") << "}";
    }
    io.out << "]}\n";
    return cli::kExitOk;
  }
  if (p.cluster.headers()) {
    io.out << "configuration entry " << list->config_index
           << (list->config_committed ? " (committed)" : " (not committed yet)") << ", leader "
           << list->leader_id << ", term " << list->term << ", commit " << list->commit_index
           << "\n";
    // The ids a new node must not take (--join and AddMember refuse them): the founders, and the
    // ids removed by a committed change.
    io.out << "bootstrap voters: " << joined_ids(list->bootstrap_voters, ", ") << "\n";
    io.out << "retired ids: "
           << (list->retired_ids.empty() ? "none" : joined_ids(list->retired_ids, ", ")) << "\n";
    io.out << "ID\tADDRESS\tROLE\tMATCH\tLAG\tCAUGHT_UP\n";
  }
  for (const client::Member& m : list->members) {
    io.out << m.id << "\t" << (m.address.empty() ? "-" : m.address) << "\t"
           << (m.leader ? "leader" : (m.voter ? "voter" : "learner")) << "\t" << m.match_index
           << "\t" << m.lag_entries << "\t" << (m.caught_up ? "yes" : "no") << "\n";
  }
  return cli::kExitOk;
}

// Adds `id` as a learner and prints the change: the first step of add, and of replace.
int add_learner(Parsed& p, const cli::Io& io, std::string_view what, std::uint64_t id,
                const std::string& address) {
  auto added = p.members->add(id, address, /*learner=*/true);
  if (!added.ok()) return fail(io, what, added.status());
  print_change(io, p.cluster.json,
               "node " + std::to_string(id) + " added as a learner at " + address, added.value());
  return cli::kExitOk;
}

// Waits for learner `id` to catch up and promotes it, printing the change; on failure says that it
// stays a learner, then `left` (what the operator does next, through its newline).
int promote_caught_up(Parsed& p, const cli::Io& io, std::string_view what, std::uint64_t id,
                      std::string_view left) {
  auto promoted = p.members->promote_when_caught_up(id, p.remaining_ms());
  if (!promoted.ok()) {
    io.err << what << ": node " << id << " stays a learner" << left;
    return fail(io, what, promoted.status());
  }
  print_change(io, p.cluster.json, "node " + std::to_string(id) + " caught up and is a voter",
               promoted.value());
  return cli::kExitOk;
}

// Adds `id` as a learner, waits for it to catch up, promotes it. Prints each step.
int add_caught_up_voter(Parsed& p, const cli::Io& io, std::string_view what, std::uint64_t id,
                        const std::string& address) {
  if (int code = add_learner(p, io, what, id, address); code != cli::kExitOk) return code;
  return promote_caught_up(p, io, what, id,
                           " (promote it with `members promote` once it caught up)\n");
}

// --- add -------------------------------------------------------------------------------------------
int run_add(std::string_view command_path, std::span<const std::string> args, const cli::Io& io) {
  static constexpr PositionalSpec kSpec[] = {{"ID", PositionalKind::kNodeId},
                                             {"ADDR", PositionalKind::kAddress}};
  bool learner = false;
  Parsed p;
  if (int code = parse(
          command_path,
          "Add node ID at ADDR (host:port): as a learner, then, once it holds every committed "
          "entry (within --timeout-ms), as a voter. --learner stops after the first step.",
          args, kSpec, io, &p,
          [&](cli::FlagSet& flags) {
            flags.bool_flag("learner", &learner, "add as a learner only (no promotion)");
          });
      code >= 0)
    return code;
  const std::uint64_t id = p.args.ids[0];
  const std::string& address = p.args.addresses[0];
  if (learner) return add_learner(p, io, "members add", id, address);
  return add_caught_up_voter(p, io, "members add", id, address);
}

// --- promote, remove -------------------------------------------------------------------------------
int run_promote(std::string_view command_path, std::span<const std::string> args,
                const cli::Io& io) {
  static constexpr PositionalSpec kSpec[] = {{"ID", PositionalKind::kNodeId}};
  Parsed p;
  if (int code = parse(command_path,
                       "Make learner ID a voter once it holds every committed entry (waits for "
                       "it, and tries again when the commit index moved on, within --timeout-ms).",
                       args, kSpec, io, &p);
      code >= 0)
    return code;
  // Like add's second step: under load the commit index moves on between the learner's catch-up
  // and the promotion (LEARNER_BEHIND at a lag of a few entries), so it waits and tries again.
  // Any other refusal (not a learner, not a member) is the answer at once.
  auto promoted = p.members->promote(p.args.ids[0]);
  if (!promoted.ok() && promoted.status().details() &&
      promoted.status().details()->reason == client::reason::kLearnerBehind) {
    promoted = p.members->promote_when_caught_up(p.args.ids[0], p.remaining_ms());
  }
  if (!promoted.ok()) return fail(io, "members promote", promoted.status());
  print_change(io, p.cluster.json, "node " + std::to_string(p.args.ids[0]) + " is a voter",
               promoted.value());
  return cli::kExitOk;
}

int run_remove(std::string_view command_path, std::span<const std::string> args,
               const cli::Io& io) {
  static constexpr PositionalSpec kSpec[] = {{"ID", PositionalKind::kNodeId}};
  Parsed p;
  if (int code = parse(command_path,
                       "Remove member ID (a removed leader hands leadership over first).", args,
                       kSpec, io, &p);
      code >= 0)
    return code;
  auto removed = p.members->remove(p.args.ids[0]);
  if (!removed.ok()) return fail(io, "members remove", removed.status());
  print_change(io, p.cluster.json, "node " + std::to_string(p.args.ids[0]) + " removed", removed.value());
  return cli::kExitOk;
}

// --- replace ---------------------------------------------------------------------------------------
// The replacement's steps once NEW_ID is a member: a voter's replacement is promoted once caught up,
// a learner's stays a learner (the voters and the quorum stay as they were: drills7 M4, where a
// replaced read replica silently became a fourth voter) once caught up. On failure the message says
// what is left, and that running the same replace again finishes it.
int replacement_takes_role(Parsed& p, const cli::Io& io, std::uint64_t old_id, bool old_is_voter,
                           std::uint64_t new_id, bool new_is_voter) {
  const std::string left = "node " + std::to_string(old_id) + " is still a member: run this " +
                           "`members replace` again once node " + std::to_string(new_id) +
                           " runs (it goes on from here)\n";
  if (!old_is_voter) {
    if (client::Status caught_up = p.members->wait_caught_up(new_id, p.remaining_ms());
        !caught_up.ok()) {
      io.err << "members replace: node " << new_id << " stays a learner, not caught up yet; " << left;
      return fail(io, "members replace", caught_up);
    }
    if (!p.cluster.json)
      io.out << "node " << new_id << " caught up and stays a learner, as node " << old_id << " was\n";
    return cli::kExitOk;
  }
  if (new_is_voter) return cli::kExitOk;
  return promote_caught_up(p, io, "members replace", new_id, "; " + left);
}

int run_replace(std::string_view command_path, std::span<const std::string> args,
                const cli::Io& io) {
  static constexpr PositionalSpec kSpec[] = {{"OLD_ID", PositionalKind::kNodeId},
                                             {"NEW_ID", PositionalKind::kNodeId},
                                             {"NEW_ADDR", PositionalKind::kAddress}};
  Parsed p;
  if (int code = parse(command_path,
                       "Replace member OLD_ID by node NEW_ID at NEW_ADDR: add NEW_ID as a learner, "
                       "wait until it caught up, promote it (when OLD_ID is a voter; a learner's "
                       "replacement stays a learner), then remove OLD_ID. Run again after an "
                       "interruption (NEW_ID not running yet, --timeout-ms passed), it goes on "
                       "from the step it stopped at.",
                       args, kSpec, io, &p);
      code >= 0)
    return code;
  const std::uint64_t old_id = p.args.ids[0];
  const std::uint64_t new_id = p.args.ids[1];
  const std::string& new_address = p.args.addresses[0];
  if (old_id == new_id) {
    io.err << command_path << ": OLD_ID and NEW_ID are the same node\n";
    return cli::kExitUsage;
  }
  // OLD_ID must be a member before anything changes: a mistyped id would otherwise leave NEW_ID
  // added and promoted, and the cluster one voter larger than intended, before the remove fails.
  auto listed = p.members->list();
  if (!listed.ok()) return fail(io, "members replace", listed.status());
  const client::Member* old_member = listed->find(old_id);
  if (old_member == nullptr) {
    io.err << command_path << ": node " << old_id
           << " is not a member (see `members list`); nothing was changed\n";
    return cli::kExitFailure;
  }
  const bool old_is_voter = old_member->voter;
  // NEW_ID a member already: an earlier replace added it and stopped (drills7 M1: the rerun was
  // refused ALREADY_A_MEMBER, and "promote it" left the dead OLD_ID a voter). At NEW_ADDR it is
  // that replacement, so the replace goes on; anywhere else it is another node.
  bool new_is_voter = false;
  if (const client::Member* new_member = listed->find(new_id); new_member != nullptr) {
    if (new_member->address != new_address) {
      io.err << command_path << ": node " << new_id << " is a member already, at "
             << new_member->address << ", not " << new_address << "; nothing was changed\n";
      return cli::kExitFailure;
    }
    new_is_voter = new_member->voter;
    io.err << "members replace: node " << new_id << " is a " << (new_is_voter ? "voter" : "learner")
           << " at " << new_address << " already (an earlier replace added it): going on\n";
  } else if (int code = add_learner(p, io, "members replace", new_id, new_address);
             code != cli::kExitOk) {
    return code;
  }
  if (int code = replacement_takes_role(p, io, old_id, old_is_voter, new_id, new_is_voter);
      code != cli::kExitOk)
    return code;
  auto removed = p.members->remove(old_id);
  if (!removed.ok()) return fail(io, "members replace", removed.status());
  print_change(io, p.cluster.json, "node " + std::to_string(old_id) + " removed", removed.value());
  return cli::kExitOk;
}

constexpr cli::Command kCommands[] = {
    {"list",
     "every member: id, address, voter or learner, match index and lag on the leader; the "
     "bootstrap voters and retired ids",
     run_list, nullptr},
    {"add", "add a node (ID ADDR): learner first, then a voter once caught up (--learner: stay)",
     run_add, nullptr},
    {"promote", "make a caught-up learner (ID) a voter", run_promote, nullptr},
    {"remove", "remove a member (ID)", run_remove, nullptr},
    {"replace",
     "replace OLD_ID by NEW_ID at NEW_ADDR (add, catch up, promote a voter's replacement, remove; "
     "run again to finish an interrupted one)",
     run_replace, nullptr},
};

}  // namespace

const cli::CommandTable kMembersCommands{kCommands};

}  // namespace raftlog::ctl

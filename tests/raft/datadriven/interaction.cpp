#include "interaction.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <sstream>

#include "raft/memory_log.h"
#include "sim/checker.h"

namespace raftlog::raft::golden {

namespace {

// Bounds that turn a core that never quiets down into a script error instead of a hang.
constexpr int kMaxReadyBatchesPerNode = 100;
constexpr int kMaxStabilizeRounds = 1000;
constexpr std::size_t kMaxNodes = 9;

std::uint64_t parse_number(const std::string& word, const char* what) {
  std::uint64_t value = 0;
  const char* end = word.data() + word.size();
  const auto [ptr, error] = std::from_chars(word.data(), end, value);
  if (word.empty() || error != std::errc() || ptr != end) {
    throw ScriptError(fmt::format("{} must be a number, not '{}'", what, word));
  }
  return value;
}

int parse_ticks(const std::string& word, const char* what) {
  constexpr std::uint64_t kMaxTicks = 1000;
  const std::uint64_t ticks = parse_number(word, what);
  if (ticks == 0 || ticks > kMaxTicks)
    throw ScriptError(fmt::format("{} must be 1 to {}", what, kMaxTicks));
  return static_cast<int>(ticks);
}

bool parse_bool(const std::string& word, const char* what) {
  if (word == "true") return true;
  if (word == "false") return false;
  throw ScriptError(fmt::format("{} must be true or false, not '{}'", what, word));
}

MessageType parse_message_type(const std::string& word) {
  for (int t = static_cast<int>(MessageType::kPreVote);
       t <= static_cast<int>(MessageType::kTimeoutNow); ++t) {
    const auto type = static_cast<MessageType>(t);
    if (word == to_string(type)) return type;
  }
  throw ScriptError(fmt::format("unknown message type '{}'", word));
}

void check_options(const CommandLine& command, const std::set<std::string>& known) {
  for (const auto& [key, value] : command.options) {
    if (known.count(key) == 0)
      throw ScriptError(fmt::format("{}: unknown option '{}'", command.name, key));
  }
}

void check_arg_count(const CommandLine& command, std::size_t min, std::size_t max) {
  if (command.args.size() < min || command.args.size() > max) {
    throw ScriptError(fmt::format("{}: takes {} to {} arguments, got {}", command.name, min, max,
                                  command.args.size()));
  }
}

// "log=1,1,2": entries 1..3 with those terms (kNormal, empty payload).
std::vector<Entry> parse_log(const std::string& terms) {
  std::vector<Entry> entries;
  std::stringstream stream(terms);
  std::string term;
  while (std::getline(stream, term, ',')) {
    Entry entry;
    entry.index = entries.size() + 1;
    entry.term = parse_number(term, "a log term");
    entries.push_back(entry);
  }
  return entries;
}

std::string role_and_term(const Raft& raft) {
  return fmt::format("{} term={}", to_string(raft.role()), raft.term());
}

// A replica's refusal: its code, reason and (for NOT_LEADER) the leader it names.
std::string describe_error(const replica::NodeError& error) {
  std::string text = replica::to_string(error.code);
  if (!error.reason.empty()) text += " " + error.reason;
  if (error.leader_id != 0) text += fmt::format(" leader=n{}", error.leader_id);
  return text;
}

}  // namespace

Interaction::Interaction() = default;
Interaction::~Interaction() = default;

CommandLine parse_command_line(const std::string& line) {
  CommandLine command;
  std::stringstream stream(line);
  std::string word;
  stream >> command.name;
  while (stream >> word) {
    const std::size_t equals = word.find('=');
    if (equals == std::string::npos) {
      command.args.push_back(word);
    } else if (!command.options.emplace(word.substr(0, equals), word.substr(equals + 1)).second) {
      throw ScriptError(fmt::format("option '{}' given twice", word.substr(0, equals)));
    }
  }
  return command;
}

Lines Interaction::run(const std::string& command_line, const std::vector<std::string>& input) {
  const CommandLine command = parse_command_line(command_line);
  if (command.name != "add-nodes" && !input.empty())
    throw ScriptError(command.name + ": takes no input lines");
  if (command.name != "add-nodes" && !cluster_) throw ScriptError("add-nodes must come first");
  Lines out;
  if (command.name == "add-nodes") {
    add_nodes(command, input, out);
  } else if (command.name == "campaign") {
    campaign(command, out);
  } else if (command.name == "tick") {
    tick(command, out);
  } else if (command.name == "propose") {
    propose(command, out);
  } else if (command.name == "read-index") {
    read_index(command, out);
  } else if (command.name == "transfer-leadership") {
    transfer_leadership(command, out);
  } else if (command.name == "process-ready") {
    check_options(command, {});
    for (NodeId id : node_ids(command.args, 0)) process_ready(id, out);
  } else if (command.name == "deliver-msgs" || command.name == "drop-msgs") {
    move_messages(message_filter(command), command.name == "deliver-msgs", out);
  } else if (command.name == "stabilize") {
    check_arg_count(command, 0, 0);
    check_options(command, {});
    stabilize(out);
  } else if (command.name == "isolate") {
    check_arg_count(command, 1, SIZE_MAX);
    check_options(command, {});
    for (NodeId id : node_ids(command.args, 0)) isolated_.insert(id);
  } else if (command.name == "heal") {
    check_arg_count(command, 0, 0);
    check_options(command, {});
    isolated_.clear();
  } else if (command.name == "crash-restart") {
    crash_restart(command, out);
  } else if (command.name == "status") {
    check_options(command, {});
    print_status(node_ids(command.args, 0), out);
  } else if (command.name == "log") {
    check_arg_count(command, 1, 1);
    check_options(command, {});
    print_log(node_id(command.args[0]), out);
  } else {
    throw ScriptError(fmt::format("unknown command '{}'", command.name));
  }
  print_new_readies(out);
  print_answers(out);
  if (out.empty()) out.push_back("ok");
  return out;
}

void Interaction::add_nodes(const CommandLine& command, const std::vector<std::string>& input,
                            Lines& out) {
  if (cluster_) throw ScriptError("add-nodes: the cluster exists already");
  check_arg_count(command, 1, 1);
  check_options(command, {"pre-vote", "check-quorum", "election-ticks", "heartbeat-ticks",
                          "max-entries", "max-inflight"});
  const std::uint64_t count = parse_number(command.args[0], "the node count");
  if (count == 0 || count > kMaxNodes)
    throw ScriptError(fmt::format("add-nodes: 1 to {} nodes", kMaxNodes));
  std::vector<NodeId> ids;
  for (NodeId id = 1; id <= count; ++id) ids.push_back(id);
  Config base;
  for (const auto& [key, value] : command.options) {
    if (key == "pre-vote") base.pre_vote = parse_bool(value, key.c_str());
    if (key == "check-quorum") base.check_quorum = parse_bool(value, key.c_str());
    if (key == "election-ticks") base.election_ticks = parse_ticks(value, key.c_str());
    if (key == "heartbeat-ticks") base.heartbeat_ticks = parse_ticks(value, key.c_str());
    if (key == "max-entries") base.max_entries_per_message = parse_number(value, key.c_str());
    if (key == "max-inflight") base.max_inflight_messages = parse_number(value, key.c_str());
  }
  const auto tweak = [base](Config& config) {
    const NodeId id = config.id;
    const ConfState voters = config.initial_conf;
    config = base;
    config.id = id;
    config.initial_conf = voters;
    config.random_seed = id;
  };
  for (NodeId id : ids) {
    Config config;
    config.id = id;
    config.initial_conf.voters = ids;
    tweak(config);
    const std::string problem = validate_config(config);
    if (!problem.empty()) throw ScriptError("add-nodes: " + problem);
  }
  std::vector<std::vector<Entry>> logs(count);
  std::vector<HardState> hard_states(count);
  for (const std::string& line : input) {
    const CommandLine restore = parse_command_line(line);
    check_options(restore, {"log", "term", "vote", "commit"});
    const NodeId id = parse_number(restore.name, "a node id");
    if (id == 0 || id > count) throw ScriptError(fmt::format("no node n{}", id));
    if (restore.options.count("log") != 0) logs[id - 1] = parse_log(restore.options.at("log"));
    HardState& hard_state = hard_states[id - 1];
    if (restore.options.count("term") != 0)
      hard_state.term = parse_number(restore.options.at("term"), "term");
    if (restore.options.count("vote") != 0)
      hard_state.vote = parse_number(restore.options.at("vote"), "vote");
    if (restore.options.count("commit") != 0)
      hard_state.commit = parse_number(restore.options.at("commit"), "commit");
  }
  for (NodeId id : ids) {
    MemoryLog log;
    log.append(logs[id - 1]);
    const std::string problem =
        restart_problem(hard_states[id - 1], log);  // the replica refuses it
    if (!problem.empty()) throw ScriptError(fmt::format("add-nodes: n{}: {}", id, problem));
  }
  cluster_ = std::make_unique<testing::TestCluster>(ids, logs, hard_states, tweak);
  for (NodeId id : ids) {
    // The interpreter runs every flush cycle itself, in process_ready().
    cluster_->node(id).hold_persistence = true;
    readies_printed_[id] = 0;
  }
  print_status(all_ids(), out);
}

void Interaction::campaign(const CommandLine& command, Lines& out) {
  check_arg_count(command, 1, 1);
  check_options(command, {});
  const NodeId id = node_id(command.args[0]);
  const Raft& raft = core(id);
  if (raft.role() == Role::kLeader)
    throw ScriptError(fmt::format("campaign: n{} leads already", id));
  // Only an election timeout makes a non-leader's tick produce output: that is how we see it fire.
  if (raft.has_ready())
    throw ScriptError(fmt::format("campaign: n{} has a Ready to process first", id));
  // A randomized timeout lies in [election_ticks, 2 * election_ticks).
  const int bound = 2 * cluster().node(id).config.raft.election_ticks;
  for (int ticks = 1; ticks <= bound; ++ticks) {
    cluster().tick_unprocessed(id);
    if (raft.has_ready()) {
      out.push_back(
          fmt::format("n{} times out after {} ticks: {}", id, ticks, role_and_term(raft)));
      return;
    }
  }
  throw ScriptError(fmt::format("campaign: n{} did not time out within {} ticks", id, bound));
}

void Interaction::tick(const CommandLine& command, Lines& out) {
  check_arg_count(command, 1, 2);
  check_options(command, {});
  const NodeId id = node_id(command.args[0]);
  const std::uint64_t times =
      command.args.size() == 2 ? parse_number(command.args[1], "the tick count") : 1;
  if (times > 1000) throw ScriptError("tick: at most 1000 ticks");
  for (std::uint64_t i = 0; i < times; ++i) cluster().tick_unprocessed(id);
  out.push_back(fmt::format("n{} ticks {} time{}: {}", id, times, times == 1 ? "" : "s",
                            role_and_term(core(id))));
}

void Interaction::propose(const CommandLine& command, Lines& out) {
  check_arg_count(command, 2, SIZE_MAX);
  check_options(command, {});
  const NodeId id = node_id(command.args[0]);
  replica::Replica::AppendRequest request;
  request.payloads.assign(command.args.begin() + 1, command.args.end());
  request.deadline = replica::Clock::time_point::max();
  auto slot = std::make_shared<std::optional<replica::AppendResult>>();
  request.done = [slot](replica::AppendResult result) { *slot = std::move(result); };
  const replica::Replica::AppendPlacement placement =
      cluster().replica(id).append(std::move(request));
  print_new_readies(out);  // what the replica handled first (see print_new_readies)
  if (!placement.proposed) {
    out.push_back(fmt::format("n{} proposes: {}", id,
                              slot->has_value() ? describe_error((*slot)->error) : "not proposed"));
    return;
  }
  out.push_back(fmt::format("n{} proposes: Ok indexes {}..{} term={}", id, placement.first,
                            placement.last, placement.term));
  pending_answers_.push_back(
      PendingAnswer{fmt::format("n{} append {}..{}", id, placement.first, placement.last),
                    [slot]() -> std::optional<std::string> {
                      if (!slot->has_value()) return std::nullopt;
                      const replica::AppendResult& result = **slot;
                      if (!result.error.ok()) return describe_error(result.error);
                      return fmt::format("acknowledged {}..{} term={}", result.first_index,
                                         result.last_index, result.term);
                    }});
}

void Interaction::read_index(const CommandLine& command, Lines& out) {
  check_arg_count(command, 1, 1);
  check_options(command, {});
  const NodeId id = node_id(command.args[0]);
  replica::Replica::ReadIndexRequest request;
  request.deadline = replica::Clock::time_point::max();
  auto slot = std::make_shared<std::optional<replica::ReadIndexResult>>();
  request.done = [slot](replica::ReadIndexResult result) { *slot = std::move(result); };
  cluster().replica(id).read_index(std::move(request));
  if (slot->has_value()) {
    out.push_back(fmt::format("n{} read-index: {}", id, describe_error((*slot)->error)));
    return;
  }
  out.push_back(fmt::format("n{} read-index: pending", id));
  pending_answers_.push_back(
      PendingAnswer{fmt::format("n{} read", id), [slot]() -> std::optional<std::string> {
                      if (!slot->has_value()) return std::nullopt;
                      const replica::ReadIndexResult& result = **slot;
                      if (!result.error.ok()) return describe_error(result.error);
                      return fmt::format("released at index {}", result.read_index);
                    }});
}

void Interaction::transfer_leadership(const CommandLine& command, Lines& out) {
  check_arg_count(command, 2, 2);
  check_options(command, {});
  const NodeId from = node_id(command.args[0]);
  const NodeId to = node_id(command.args[1]);
  replica::Replica::TransferRequest request;
  request.target = to;
  auto slot = std::make_shared<std::optional<replica::TransferResult>>();
  request.done = [slot](replica::TransferResult result) { *slot = std::move(result); };
  cluster().replica(from).transfer_leadership(std::move(request));
  const auto describe_transfer = [slot]() -> std::optional<std::string> {
    if (!slot->has_value()) return std::nullopt;
    const replica::TransferResult& result = **slot;
    if (!result.error.ok()) return describe_error(result.error);
    return fmt::format("done: n{} leads term {}", result.leader_id, result.term);
  };
  if (slot->has_value()) {
    out.push_back(
        fmt::format("n{} transfers leadership to n{}: {}", from, to, *describe_transfer()));
    return;
  }
  out.push_back(fmt::format("n{} transfers leadership to n{}: pending", from, to));
  pending_answers_.push_back(
      PendingAnswer{fmt::format("n{} transfer to n{}", from, to), describe_transfer});
}

void Interaction::stabilize(Lines& out) {
  const MessageFilter everything;
  for (int round = 0; round < kMaxStabilizeRounds; ++round) {
    bool progressed = false;
    for (NodeId id : all_ids()) progressed = process_ready(id, out) || progressed;
    progressed = move_messages(everything, /*deliver=*/true, out) || progressed;
    if (!progressed) return;
  }
  throw ScriptError(fmt::format("stabilize: still busy after {} rounds", kMaxStabilizeRounds));
}

void Interaction::crash_restart(const CommandLine& command, Lines& out) {
  check_arg_count(command, 1, 1);
  check_options(command, {});
  const NodeId id = node_id(command.args[0]);
  // Its unhandled outputs go with it: they were never persisted nor sent. Its pending requests fail
  // (printed below, with the other answers).
  cluster().crash_restart(id);
  cluster().node(id).hold_persistence = true;
  readies_printed_[id] = cluster().node(id).readies.size();
  print_status({id}, out);
}

void Interaction::print_status(const std::vector<NodeId>& ids, Lines& out) const {
  for (NodeId id : ids) {
    const Raft& raft = core(id);
    const testing::NodeLog& node_log = cluster().node(id).log;
    std::string log;
    for (Index index = node_log.first_index(); index <= node_log.last_index(); ++index) {
      log += fmt::format("{}{}/t{}", log.empty() ? "" : " ", index,
                         node_log.term_at(index).value_or(0));
    }
    out.push_back(fmt::format("n{}: {} vote=n{} leader=n{} commit={} log=[{}]{}", id,
                              role_and_term(raft), raft.hard_state().vote, raft.leader(),
                              raft.commit_index(), log,
                              isolated_.count(id) != 0 ? " (isolated)" : ""));
  }
}

void Interaction::print_log(NodeId id, Lines& out) const {
  const testing::NodeLog& log = cluster().node(id).log;
  if (log.last_index() == 0) out.push_back(fmt::format("n{}: empty log", id));
  for (Index index = log.first_index(); index <= log.last_index(); ++index)
    out.push_back(sim::describe(log.entry(index)));
}

bool Interaction::print_new_readies(Lines& out) {
  bool printed = false;
  for (NodeId id : all_ids()) {
    const std::vector<Ready>& readies = cluster().node(id).readies;
    std::size_t& printed_count = readies_printed_[id];
    if (printed_count > readies.size()) printed_count = 0;  // never: readies only grow
    for (; printed_count < readies.size(); ++printed_count) {
      print_ready(id, readies[printed_count], out);
      printed = true;
    }
  }
  return printed;
}

void Interaction::print_answers(Lines& out) {
  for (auto it = pending_answers_.begin(); it != pending_answers_.end();) {
    if (std::optional<std::string> answer = it->answer()) {
      out.push_back(fmt::format("> {}: {}", it->what, *answer));
      it = pending_answers_.erase(it);
    } else {
      ++it;
    }
  }
}

bool Interaction::process_ready(NodeId id, Lines& out) {
  testing::TestCluster& c = cluster();
  const std::size_t readies_before = c.node(id).readies.size();
  const std::size_t messages_before = c.network_size();
  // The replica's own driver handles every pending Ready; then its flush cycles make what it wrote
  // durable (releasing held messages, and handling the Ready batches the report causes).
  c.process(id);
  c.persist_all(id);
  const std::size_t handled = c.node(id).readies.size() - readies_before;
  if (handled > static_cast<std::size_t>(kMaxReadyBatchesPerNode)) {
    throw ScriptError(fmt::format("n{} produced more than {} Ready batches in a row", id,
                                  kMaxReadyBatchesPerNode));
  }
  print_new_readies(out);
  return handled > 0 || c.network_size() != messages_before;
}

bool Interaction::move_messages(const MessageFilter& filter, bool deliver, Lines& out) {
  bool moved_any = false;
  for (NodeId id : all_ids()) {
    if (!filter.recipients.empty() && filter.recipients.count(id) == 0) continue;
    std::vector<Message> taken = cluster().take_from_network(
        [&](const Message& m) { return m.to == id && (!filter.type || m.type == *filter.type); },
        filter.per_node);
    if (taken.empty()) continue;
    moved_any = true;
    std::vector<Message> received;
    std::vector<Message> lost;
    for (Message& m : taken) {
      const bool cut_off = !deliver || isolated_.count(m.from) != 0 || isolated_.count(m.to) != 0;
      (cut_off ? lost : received).push_back(std::move(m));
    }
    if (!received.empty()) out.push_back(fmt::format("> n{} receives", id));
    for (const Message& m : received) print_message(m, "  ", out);
    if (!lost.empty())
      out.push_back(fmt::format("> n{} loses ({})", id, deliver ? "isolated" : "dropped"));
    for (const Message& m : lost) print_message(m, "  ", out);
    for (Message& m : received) cluster().replica(id).step(std::move(m));
  }
  return moved_any;
}

testing::TestCluster& Interaction::cluster() const {
  if (!cluster_) throw ScriptError("add-nodes must come first");
  return *cluster_;
}

const Raft& Interaction::core(NodeId id) const { return cluster().raft(id); }

NodeId Interaction::node_id(const std::string& word) const {
  const NodeId id = parse_number(word, "a node id");
  if (readies_printed_.count(id) == 0) throw ScriptError(fmt::format("no node n{}", id));
  return id;
}

std::vector<NodeId> Interaction::node_ids(const std::vector<std::string>& words,
                                          std::size_t from) const {
  if (words.size() <= from) return all_ids();
  std::vector<NodeId> ids;
  for (std::size_t i = from; i < words.size(); ++i) ids.push_back(node_id(words[i]));
  return ids;
}

std::vector<NodeId> Interaction::all_ids() const {
  std::vector<NodeId> ids;
  for (const auto& [id, printed] : readies_printed_) ids.push_back(id);
  return ids;
}

Interaction::MessageFilter Interaction::message_filter(const CommandLine& command) const {
  check_options(command, {"type", "count"});
  MessageFilter filter;
  for (NodeId id : node_ids(command.args, 0)) filter.recipients.insert(id);
  if (command.options.count("type") != 0)
    filter.type = parse_message_type(command.options.at("type"));
  if (command.options.count("count") != 0)
    filter.per_node = parse_number(command.options.at("count"), "count");
  return filter;
}

}  // namespace raftlog::raft::golden

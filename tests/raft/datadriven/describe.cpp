#include "describe.h"

#include <fmt/format.h>

#include "sim/checker.h"

namespace raftlog::raft::golden {

namespace {

constexpr const char* kIndent = "  ";

void print_messages(const char* heading, const std::vector<Message>& messages, Lines& out) {
  if (messages.empty()) return;
  out.push_back(fmt::format("{}{}:", kIndent, heading));
  for (const Message& m : messages) print_message(m, std::string(kIndent) + kIndent, out);
}

}  // namespace

std::string describe_message(const Message& m) {
  std::string text = fmt::format("n{}->n{} {} term={} index={} log-term={}", m.from, m.to,
                                 to_string(m.type), m.term, m.index, m.log_term);
  if (m.commit != 0) text += fmt::format(" commit={}", m.commit);
  if (!m.entries.empty()) text += fmt::format(" entries={}", m.entries.size());
  if (m.reject) text += " reject";
  if (m.reject_hint != 0) text += fmt::format(" hint={}", m.reject_hint);
  if (m.hint_term != 0) text += fmt::format(" hint-term={}", m.hint_term);
  if (m.context != 0) text += fmt::format(" ctx={}", m.context);
  return text;
}

void print_message(const Message& message, const std::string& indent, Lines& out) {
  out.push_back(indent + describe_message(message));
  for (const Entry& entry : message.entries) out.push_back(indent + kIndent + sim::describe(entry));
}

void print_ready(NodeId node, const Ready& ready, Lines& out) {
  out.push_back(fmt::format("> n{} handles Ready{}", node, ready.must_sync ? " (must sync)" : ""));
  if (ready.soft_state) {
    const SoftState& soft = *ready.soft_state;
    out.push_back(fmt::format("{}soft-state: {} term={} leader=n{}", kIndent, to_string(soft.role),
                              soft.term, soft.leader));
  }
  if (ready.hard_state) {
    const HardState& hard = *ready.hard_state;
    out.push_back(fmt::format("{}hard-state: term={} vote=n{} commit={} leader=n{}", kIndent,
                              hard.term, hard.vote, hard.commit, hard.leader));
  }
  if (ready.truncate_from)
    out.push_back(fmt::format("{}truncate-from: {}", kIndent, *ready.truncate_from));
  if (!ready.entries.empty()) {
    out.push_back(fmt::format("{}entries:", kIndent));
    for (const Entry& entry : ready.entries)
      out.push_back(std::string(kIndent) + kIndent + sim::describe(entry));
  }
  print_messages("messages", ready.messages, out);
  print_messages("messages-after-persist", ready.messages_after_persist, out);
  if (ready.commit_index)
    out.push_back(fmt::format("{}commit-index: {}", kIndent, *ready.commit_index));
  for (const ReadState& read : ready.read_states) {
    out.push_back(
        fmt::format("{}read-state: request={} index={}", kIndent, read.request_id, read.index));
  }
  for (std::uint64_t request : ready.aborted_reads)
    out.push_back(fmt::format("{}aborted-read: request={}", kIndent, request));
}

}  // namespace raftlog::raft::golden

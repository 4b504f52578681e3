// Stable text for what a Raft core hands its driver, as the golden files show it. Entries use the
// simulator's form (sim::describe: "(index/tterm type "payload" +more)", "+more" marking
// proposal_continues). A message prints term, index and log term always and every other field only
// when it is set (an absent field is 0 or false), so no field a core fills in goes unseen. "n0" is no
// node (no leader, no vote).
#pragma once

#include <string>
#include <vector>

#include "raft/types.h"

namespace raftlog::raft::golden {

using Lines = std::vector<std::string>;

// One line: "n1->n2 Append term=1 index=0 log-term=0 commit=1 entries=2 reject hint=3 hint-term=2 ctx=7".
std::string describe_message(const Message& message);
// The message's line, then one line per carried entry, indented below it.
void print_message(const Message& message, const std::string& indent, Lines& out);
// Every field of a Ready batch that is set, one per line, under "> nID handles Ready".
void print_ready(NodeId node, const Ready& ready, Lines& out);

}  // namespace raftlog::raft::golden

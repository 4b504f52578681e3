// Two leaders of one term (docs/raft.md, "A second leader of a term"; docs/operations.md, same
// title): the core refuses a leader message of its term from another node than the term's leader it
// knows, and a leader learns that a node refused it so. The replica says so loudly and, on the
// refusing node, reports NOT_SERVING while such messages keep coming (AlarmWindow).
#include <spdlog/spdlog.h>

#include <string>

#include "replica/replica.h"

namespace raftlog::replica {
namespace {

std::string leader_name(std::uint64_t leader, std::uint64_t self) {
  return leader == self ? "this node itself" : "node " + std::to_string(leader);
}

// The same id leading one term twice (two leadership nonces): it lost its state in between.
bool same_id_twice(const raft::TermLeaderClash& clash) {
  return clash.known_leader == clash.other_leader;
}

std::string held_back_note(std::uint64_t held_back) {
  return held_back == 0 ? std::string()
                        : " (" + std::to_string(held_back) + " more not logged)";
}

}  // namespace

void Replica::report_term_leader_clashes() {
  const std::uint64_t self = config_.node_id;
  const raft::TermLeaderClash& second = raft_->second_leader();
  if (const auto held_back = second_leader_alarm_.note(second.count, deps_.clock())) {
    if (same_id_twice(second)) {
      spdlog::critical(
          "node {}: node {} sent leader messages of term {} as another leadership (nonce {:016x}) "
          "than the one of node {} this node knows for term {} (nonce {:016x}): two leaders of "
          "term {} under one id (a safety violation: node {} lost its state, a disk or "
          "HARDSTATE, and was elected again in a term it had led). This node refuses them: it "
          "takes none of their entries, keeps its log and serves nothing (NOT_SERVING) while they "
          "keep coming; see docs/operations.md, \"A second leader of a term\"{}",
          self, second.other_leader, second.term, second.other_nonce, second.known_leader,
          second.term, second.known_nonce, second.term, second.other_leader,
          held_back_note(*held_back));
    } else {
      spdlog::critical(
          "node {}: node {} sent leader messages of term {}, whose leader this node knows to be "
          "{}: two leaders of term {} (a safety violation: a node restarted on a lost disk or "
          "HARDSTATE under its id and was elected again in a term already led?). This node "
          "refuses them: it takes none of their entries, keeps its log and serves nothing "
          "(NOT_SERVING) while they keep coming; see docs/operations.md, \"A second leader of a "
          "term\"{}",
          self, second.other_leader, second.term, leader_name(second.known_leader, self),
          second.term, held_back_note(*held_back));
    }
  }
  const raft::TermLeaderClash& refused = raft_->leadership_refused();
  if (const auto held_back = leadership_refused_alarm_.note(refused.count, deps_.clock())) {
    if (same_id_twice(refused)) {
      spdlog::critical(
          "node {}: node {} refused this node's leadership of term {}: it knows another "
          "leadership of this node's id in term {} (nonce {:016x}, this one {:016x}), so this "
          "node led term {} before and lost its state (a disk or HARDSTATE) since: two leaders of "
          "term {}. This node keeps leading; see docs/operations.md, \"A second leader of a "
          "term\"{}",
          self, refused.refused_by, refused.term, refused.term, refused.known_nonce,
          refused.other_nonce, refused.term, refused.term, held_back_note(*held_back));
    } else {
      spdlog::critical(
          "node {}: node {} refused this node's leadership of term {}: it knows node {} as the "
          "leader of term {}, so two leaders of term {} exist (a safety violation: a node "
          "restarted on a lost disk or HARDSTATE under its id?). This node keeps leading; see "
          "docs/operations.md, \"A second leader of a term\"{}",
          self, refused.refused_by, refused.term, refused.known_leader, refused.term, refused.term,
          held_back_note(*held_back));
    }
  }
}

void Replica::fill_term_leader_status(NodeStatus& status) const {
  const std::uint64_t self = config_.node_id;
  const raft::TermLeaderClash& second = raft_->second_leader();
  status.second_leader_messages = second.count;
  if (second_leader_alarm_.shown(second.count, deps_.clock())) {
    const std::string term = std::to_string(second.term);
    status.second_leader =
        same_id_twice(second)
            ? "node " + std::to_string(second.other_leader) + " sends leader messages of term " +
                  term + " with another leadership nonce than the one this node knows for it " +
                  "in term " + term + " (the same id leading the term twice: it lost its " +
                  "state): refused"
            : "node " + std::to_string(second.other_leader) + " sends leader messages of term " +
                  term + ", whose leader this node knows to be " +
                  leader_name(second.known_leader, self) + ": refused";
  }
  const raft::TermLeaderClash& refused = raft_->leadership_refused();
  status.leadership_refusals = refused.count;
  if (leadership_refused_alarm_.shown(refused.count, deps_.clock())) {
    status.leads_term_twice = same_id_twice(refused);
    const std::string term = std::to_string(refused.term);
    status.leadership_refused =
        same_id_twice(refused)
            ? "node " + std::to_string(refused.refused_by) +
                  " refuses this node's leadership of term " + term +
                  ": it knows another leadership of this node's id in that term (this node " +
                  "lost its state since it led it)"
            : "node " + std::to_string(refused.refused_by) +
                  " refuses this node's leadership of term " + term + ": it knows node " +
                  std::to_string(refused.known_leader) + " as that term's leader";
  }
}

}  // namespace raftlog::replica

// The leader this node knows for its current term, and the refusal of a second one (docs/raft.md,
// "A second leader of a term"; drills7 H3).
#include "raft/raft_impl.h"

namespace raftlog::raft {
namespace {

bool is_leader_message(MessageType type) {
  return type == MessageType::kAppend || type == MessageType::kHeartbeat ||
         type == MessageType::kSnapshot;
}

}  // namespace

NodeId Raft::Impl::term_leader() const {
  return term_leader_term_ == term_ ? term_leader_ : kNoNode;
}

void Raft::Impl::know_term_leader(NodeId leader) {
  term_leader_ = leader;
  term_leader_term_ = term_;
}

// Called after the term rules (handle_term): m.term is our term now. Raft elects at most one leader
// per term, so a leader message of our term from a node other than the one we know can only come
// from a node that lost its durable state (a disk lost under its id: it restarted at term 0 and was
// elected again in a term it or its peers had already seen) or from a forged message. Following it
// would take entries that pass the log-matching check (equal terms) while differing from ours.
bool Raft::Impl::refuse_second_leader(const Message& m) {
  if (m.type == MessageType::kAppendResponse && m.context == kOtherLeaderContext) {
    note_leadership_refused(m);
    return true;
  }
  const NodeId known = term_leader();
  // Only the term's leader hands leadership over: a TimeoutNow from another node of our term is a
  // second leader's, and obeying it would start a new term whose leader merges the two leaders'
  // entries of this one silently (docs/raft.md). Dropped without an answer (it expects none).
  if (m.type == MessageType::kTimeoutNow) return known != kNoNode && known != m.from;
  if (!is_leader_message(m.type)) return false;
  if (known == kNoNode) {
    // The term's first leader we hear of: the message is handled as before (step_follower or
    // step_candidate follow it), and the driver makes it durable with the term (HardState::leader)
    // before any acknowledgement leaves.
    know_term_leader(m.from);
    return false;
  }
  if (known == m.from) return false;
  second_leader_ = TermLeaderClash{term_, known, m.from, id(), second_leader_.count + 1};
  // After persist: the answer vouches for the leader we know, which the batch that learnt it makes
  // durable. Index 0 and no hint: a leader from before kOtherLeaderContext takes it for a stale
  // rejection and changes nothing it tracks for us but the time of our last answer.
  Message reply;
  reply.type = MessageType::kAppendResponse;
  reply.to = m.from;
  reply.reject = true;
  reply.context = kOtherLeaderContext;
  reply.term_leader = known;
  send(std::move(reply), /*after_persist=*/true);
  return true;
}

// Only a node that led this term is told anything it can use (it sent the refused leader messages);
// any other took no part, and the answer is a stale or forged one. Nothing else changes: the leader
// keeps leading (docs/raft.md says why), and the answer does not count as the peer's contact.
void Raft::Impl::note_leadership_refused(const Message& m) {
  if (term_leader() != id()) return;
  leadership_refused_ =
      TermLeaderClash{term_, m.term_leader, id(), m.from, leadership_refused_.count + 1};
}

}  // namespace raftlog::raft

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

std::uint64_t Raft::Impl::term_leader_nonce() const {
  return term_leader_term_ == term_ ? term_leader_nonce_ : 0;
}

void Raft::Impl::know_term_leader(NodeId leader, std::uint64_t nonce) {
  term_leader_ = leader;
  term_leader_nonce_ = nonce;
  term_leader_term_ = term_;
}

std::uint64_t Raft::Impl::draw_leadership_nonce() {
  // Zero means "not said" on the wire: drawn again. A generator that gave zero 64 times running is
  // broken; 1 keeps the value non-zero rather than loop.
  for (int attempt = 0; attempt < 64; ++attempt) {
    if (const std::uint64_t nonce = nonce_prng_.next_u64(); nonce != 0) return nonce;
  }
  return 1;
}

// Raft elects at most one leader per term, and a leader that restarts (keeping its disk) comes back
// a follower of its term and never leads it again (it voted in it), so one term's leader messages
// all come from one id with one nonce. Another id, or the known id with another non-zero nonce (a
// node that lost its state and was elected again in a term it had led: review oneterm5 H1), is a
// second leadership. A nonce of 0 on either side (an older sender, or a leader learnt from one or
// from a HARDSTATE before nonces) compares ids only, as before nonces.
bool Raft::Impl::is_second_leader_message(const Message& m) const {
  if (m.term != term_) return false;
  if (!is_leader_message(m.type) && m.type != MessageType::kTimeoutNow) return false;
  const NodeId known = term_leader();
  if (known == kNoNode) return false;
  if (known != m.from) return true;
  const std::uint64_t known_nonce = term_leader_nonce();
  return known_nonce != 0 && m.leader_nonce != 0 && m.leader_nonce != known_nonce;
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
  // Only the term's leader hands leadership over: a TimeoutNow from another leadership of our term
  // is a second leader's, and obeying it would start a new term whose leader merges the two
  // leaders' entries of this one silently (docs/raft.md). Dropped without an answer (it expects
  // none).
  if (m.type == MessageType::kTimeoutNow) return is_second_leader_message(m);
  if (!is_leader_message(m.type)) return false;
  if (known == kNoNode) {
    // The term's first leader we hear of: the message is handled as before (step_follower or
    // step_candidate follow it), and the driver makes it durable with the term (HardState::leader
    // and leader_nonce) before any acknowledgement leaves. Only here is the nonce learnt: a leader
    // known without one (an older sender first) stays so for the term, with no sync per message.
    know_term_leader(m.from, m.leader_nonce);
    return false;
  }
  if (!is_second_leader_message(m)) return false;
  second_leader_ = TermLeaderClash{
      term_, known, m.from, id(), second_leader_.count + 1, term_leader_nonce(), m.leader_nonce};
  // The known leader's own id with another nonce: that leadership is gone (its node lost its
  // state and runs the second one), so this node no longer names it as its leader: not in its
  // status, and no client is redirected to the fork (review of nonce6, L2).
  if (known == m.from && leader_ == m.from) leader_ = kNoNode;
  // After persist: the answer vouches for the leader we know, which the batch that learnt it makes
  // durable. Index 0 and no hint: a leader from before kOtherLeaderContext takes it for a stale
  // rejection and changes nothing it tracks for us but the time of our last answer.
  Message reply;
  reply.type = MessageType::kAppendResponse;
  reply.to = m.from;
  reply.reject = true;
  reply.context = kOtherLeaderContext;
  reply.term_leader = known;
  reply.leader_nonce = term_leader_nonce();
  send(std::move(reply), /*after_persist=*/true);
  return true;
}

// Only a node that led this term is told anything it can use (it sent the refused leader messages);
// any other took no part, and the answer is a stale or forged one. Nothing else changes: the leader
// keeps leading (docs/raft.md says why), and the answer does not count as the peer's contact.
void Raft::Impl::note_leadership_refused(const Message& m) {
  if (term_leader() != id()) return;
  const std::uint64_t count = leadership_refused_.count + 1;
  const std::uint64_t own_nonce = term_leader_nonce();
  leadership_refused_ =
      TermLeaderClash{term_, m.term_leader, id(), m.from, count, m.leader_nonce, own_nonce};
}

}  // namespace raftlog::raft

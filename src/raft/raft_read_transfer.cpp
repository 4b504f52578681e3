// Linearizable reads (ReadIndex) and leadership transfer.
#include "raft/assert.h"
#include "raft/raft_impl.h"

namespace raftlog::raft {

ReadIndexStatus Raft::Impl::read_index(std::uint64_t request_id) {
  if (role_ != Role::kLeader) return ReadIndexStatus::kNotLeader;
  if (read_only_.full()) return ReadIndexStatus::kTooManyPending;
  if (!own_term_committed()) {
    // Our commit index may still lag entries an earlier leader committed: wait for our no-op.
    read_only_.defer(request_id);
    return ReadIndexStatus::kOk;
  }
  const std::uint64_t context = read_only_.start_round(request_id, log_.committed());
  if (conf_.voters.size() == 1 && is_voter(id())) {
    release_confirmed_reads();  // we alone are the majority
  } else {
    broadcast_heartbeat(context);
  }
  return ReadIndexStatus::kOk;
}

void Raft::Impl::start_deferred_reads() {
  const std::uint64_t context = read_only_.start_deferred_round(log_.committed());
  if (conf_.voters.size() == 1 && is_voter(id())) {
    release_confirmed_reads();
  } else {
    broadcast_heartbeat(context);
  }
}

void Raft::Impl::release_confirmed_reads() {
  std::vector<ReadState> released = read_only_.release(conf_.voters, id());
  read_states_.insert(read_states_.end(), released.begin(), released.end());
}

TransferStatus Raft::Impl::transfer_leadership(NodeId target) {
  if (role_ != Role::kLeader) return TransferStatus::kNotLeader;
  if (target == id()) return TransferStatus::kAlreadyLeader;
  if (!is_voter(target)) return TransferStatus::kUnknownTarget;
  if (transfer_target_ != kNoNode) return TransferStatus::kInProgress;
  // Refused at once rather than tried: a transfer refuses proposals until it ends, and one to a
  // node that does not answer ends only when tick_heartbeat aborts it an election timeout later;
  // a client retrying it would keep the cluster from taking appends (drills6 L10). The count
  // starts at 0 when this leader took over, so a fresh leader gives every peer a full timeout.
  if (progress_.at(target).ticks_since_contact >= static_cast<std::uint64_t>(config_.election_ticks)) {
    return TransferStatus::kTargetSilent;
  }
  transfer_target_ = target;
  // The transfer must finish within one election timeout; tick_heartbeat aborts it otherwise.
  election_elapsed_ticks_ = 0;
  const Progress& pr = progress_.at(target);
  if (pr.match == log_.last_index()) {
    send_timeout_now(target);
  } else {
    send_append(target,
                /*send_if_empty=*/true);  // catch the target up; its ack triggers TimeoutNow
  }
  return TransferStatus::kOk;
}

void Raft::Impl::send_timeout_now(NodeId peer) {
  RAFT_ASSERT(peer == transfer_target_, "TimeoutNow goes only to the transfer target");
  Message m;
  m.type = MessageType::kTimeoutNow;
  m.to = peer;
  send(std::move(m), /*after_persist=*/false);
}

void Raft::Impl::abort_transfer() { transfer_target_ = kNoNode; }

}  // namespace raftlog::raft

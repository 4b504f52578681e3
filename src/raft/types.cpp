// to_string helpers and Ready::empty(). The ConfState codec lives in conf_codec.cpp.
#include "raft/types.h"

#include "raft/raft.h"

namespace raftlog::raft {

const char* to_string(MessageType type) {
  switch (type) {
    case MessageType::kPreVote:
      return "PreVote";
    case MessageType::kPreVoteResponse:
      return "PreVoteResponse";
    case MessageType::kVote:
      return "Vote";
    case MessageType::kVoteResponse:
      return "VoteResponse";
    case MessageType::kAppend:
      return "Append";
    case MessageType::kAppendResponse:
      return "AppendResponse";
    case MessageType::kHeartbeat:
      return "Heartbeat";
    case MessageType::kHeartbeatResponse:
      return "HeartbeatResponse";
    case MessageType::kSnapshot:
      return "Snapshot";
    case MessageType::kTimeoutNow:
      return "TimeoutNow";
  }
  return "UnknownMessageType";
}

bool durable_fields_differ(const HardState& a, const HardState& b) {
  return a.term != b.term || a.vote != b.vote || a.leader != b.leader ||
         a.leader_nonce != b.leader_nonce;
}

const char* to_string(Role role) {
  switch (role) {
    case Role::kFollower:
      return "Follower";
    case Role::kPreCandidate:
      return "PreCandidate";
    case Role::kCandidate:
      return "Candidate";
    case Role::kLeader:
      return "Leader";
  }
  return "UnknownRole";
}

const char* to_string(StepDownReason reason) {
  switch (reason) {
    case StepDownReason::kNone:
      return "none";
    case StepDownReason::kCheckQuorum:
      return "check-quorum";
    case StepDownReason::kNewerTerm:
      return "newer-term";
    case StepDownReason::kRemoved:
      return "removed";
    case StepDownReason::kToldRemoved:
      return "told-removed";
  }
  return "unknown";
}

const char* to_string(ProposeStatus status) {
  switch (status) {
    case ProposeStatus::kOk:
      return "Ok";
    case ProposeStatus::kNotLeader:
      return "NotLeader";
    case ProposeStatus::kTransferring:
      return "Transferring";
    case ProposeStatus::kTooManyPending:
      return "TooManyPending";
    case ProposeStatus::kEmpty:
      return "Empty";
    case ProposeStatus::kTooLarge:
      return "TooLarge";
    case ProposeStatus::kInvalidEntry:
      return "InvalidEntry";
  }
  return "UnknownProposeStatus";
}

const char* to_string(ConfChangeStatus status) {
  switch (status) {
    case ConfChangeStatus::kOk:
      return "Ok";
    case ConfChangeStatus::kNotLeader:
      return "NotLeader";
    case ConfChangeStatus::kTransferring:
      return "Transferring";
    case ConfChangeStatus::kNotReady:
      return "NotReady";
    case ConfChangeStatus::kInProgress:
      return "InProgress";
    case ConfChangeStatus::kInvalid:
      return "Invalid";
    case ConfChangeStatus::kWouldLoseQuorum:
      return "WouldLoseQuorum";
    case ConfChangeStatus::kLearnerBehind:
      return "LearnerBehind";
    case ConfChangeStatus::kTooManyPending:
      return "TooManyPending";
  }
  return "UnknownConfChangeStatus";
}

const char* to_string(ReadIndexStatus status) {
  switch (status) {
    case ReadIndexStatus::kOk:
      return "Ok";
    case ReadIndexStatus::kNotLeader:
      return "NotLeader";
    case ReadIndexStatus::kTooManyPending:
      return "TooManyPending";
  }
  return "UnknownReadIndexStatus";
}

const char* to_string(TransferStatus status) {
  switch (status) {
    case TransferStatus::kOk:
      return "Ok";
    case TransferStatus::kNotLeader:
      return "NotLeader";
    case TransferStatus::kUnknownTarget:
      return "UnknownTarget";
    case TransferStatus::kAlreadyLeader:
      return "AlreadyLeader";
    case TransferStatus::kInProgress:
      return "InProgress";
    case TransferStatus::kTargetSilent:
      return "TargetSilent";
  }
  return "UnknownTransferStatus";
}

bool Ready::empty() const {
  return !snapshot && !soft_state && !hard_state && !must_sync && !truncate_from &&
         entries.empty() && messages.empty() && messages_after_persist.empty() && !commit_index &&
         read_states.empty() && aborted_reads.empty();
}

}  // namespace raftlog::raft

// The names of the client's public enum values and of a Status (client.h).
#include "client/client.h"

#include <string>

namespace raftlog::client {

const char* to_string(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kCancelled:
      return "CANCELLED";
    case StatusCode::kUnknown:
      return "UNKNOWN";
    case StatusCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case StatusCode::kDeadlineExceeded:
      return "DEADLINE_EXCEEDED";
    case StatusCode::kNotFound:
      return "NOT_FOUND";
    case StatusCode::kAlreadyExists:
      return "ALREADY_EXISTS";
    case StatusCode::kPermissionDenied:
      return "PERMISSION_DENIED";
    case StatusCode::kResourceExhausted:
      return "RESOURCE_EXHAUSTED";
    case StatusCode::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case StatusCode::kAborted:
      return "ABORTED";
    case StatusCode::kOutOfRange:
      return "OUT_OF_RANGE";
    case StatusCode::kUnimplemented:
      return "UNIMPLEMENTED";
    case StatusCode::kInternal:
      return "INTERNAL";
    case StatusCode::kUnavailable:
      return "UNAVAILABLE";
    case StatusCode::kDataLoss:
      return "DATA_LOSS";
    case StatusCode::kUnauthenticated:
      return "UNAUTHENTICATED";
  }
  return "UNKNOWN_CODE";
}

std::string Status::to_string() const {
  if (ok()) return "OK";
  return std::string(client::to_string(code_)) + ": " + message_;
}

const char* to_string(EntryType type) {
  switch (type) {
    case EntryType::kNormal:
      return "normal";
    case EntryType::kNoop:
      return "noop";
    case EntryType::kConfig:
      return "config";
    case EntryType::kGroupCommit:
      return "group-commit";
  }
  return "unknown";
}

const char* to_string(Role role) {
  switch (role) {
    case Role::kUnknown:
      return "unknown";
    case Role::kFollower:
      return "follower";
    case Role::kPreCandidate:
      return "pre-candidate";
    case Role::kCandidate:
      return "candidate";
    case Role::kLeader:
      return "leader";
  }
  return "unknown";
}

const char* to_string(FlushMode flush_mode) {
  switch (flush_mode) {
    case FlushMode::kUnknown:
      return "unknown";
    case FlushMode::kSync:
      return "sync";
    case FlushMode::kAsync:
      return "async";
  }
  return "unknown";
}

const char* to_string(HealthState state) {
  switch (state) {
    case HealthState::kUnknown:
      return "UNKNOWN";
    case HealthState::kServing:
      return "SERVING";
    case HealthState::kNotServing:
      return "NOT_SERVING";
    case HealthState::kServiceUnknown:
      return "SERVICE_UNKNOWN";
  }
  return "UNKNOWN";
}

}  // namespace raftlog::client

#include "server/node_error_status.h"

#include <grpcpp/server_context.h>

#include <string>

#include "derived/derived_indexes.h"

namespace raftlog::server {

grpc::StatusCode grpc_code(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return grpc::StatusCode::OK;
    case ErrorCode::kInvalidArgument:
      return grpc::StatusCode::INVALID_ARGUMENT;
    case ErrorCode::kNotLeader:
    case ErrorCode::kNoLeader:
    case ErrorCode::kFailedPrecondition:
      return grpc::StatusCode::FAILED_PRECONDITION;
    case ErrorCode::kOutOfRange:
      return grpc::StatusCode::OUT_OF_RANGE;
    case ErrorCode::kResourceExhausted:
      return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case ErrorCode::kUnavailable:
      return grpc::StatusCode::UNAVAILABLE;
    case ErrorCode::kDeadlineExceeded:
      return grpc::StatusCode::DEADLINE_EXCEEDED;
    case ErrorCode::kInternal:
      return grpc::StatusCode::INTERNAL;
    case ErrorCode::kDataLoss:
      return grpc::StatusCode::DATA_LOSS;
  }
  return grpc::StatusCode::UNKNOWN;
}

api_errors::ErrorAnswer error_answer(const NodeError& error) {
  if (error.code == ErrorCode::kNotLeader || error.code == ErrorCode::kNoLeader) {
    return api_errors::not_leader_answer(error.leader_id, error.leader_address);
  }
  api_errors::ErrorAnswer answer;
  answer.code = grpc_code(error.code);
  answer.message = error.message;
  answer.details.reason = error.reason;
  answer.details.first_index = error.first_index;
  answer.details.commit_index = error.commit_index;
  return answer;
}

grpc::Status reason_status(grpc::ServerContextBase* context, grpc::StatusCode code,
                           const std::string& message, std::string reason) {
  api_errors::ErrorDetails details;
  details.reason = std::move(reason);
  return api_errors::error_status(context, code, message, details);
}

grpc::Status not_indexed_status(grpc::ServerContextBase* context, const std::string& topic,
                                std::uint64_t unqueued_entries) {
  return reason_status(
      context, grpc::StatusCode::FAILED_PRECONDITION,
      "topic " + topic + " has no queue on this node: its indexes hold their most topics (" +
          std::to_string(derived::kMaxTopics) + "), and entries of further topics are stored but " +
          "not queued (" + std::to_string(unqueued_entries) +
          " since the indexes opened); read them by index or key",
      replica::kReasonTopicNotIndexed);
}

grpc::Status to_grpc(grpc::ServerContextBase* context, const NodeError& error) {
  if (error.ok()) return grpc::Status::OK;
  api_errors::ErrorAnswer answer = error_answer(error);
  return api_errors::error_status(context, answer.code, std::move(answer.message), answer.details);
}

}  // namespace raftlog::server

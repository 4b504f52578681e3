// How a node's outcome (NodeError) becomes what a client sees: the gRPC status code, message and
// ErrorInfo details. One mapping for the unary calls (status + trailing metadata) and for the
// per-append answers of AppendStream (fields of the answer message), so the two cannot drift apart.
#pragma once

#include <grpcpp/support/status.h>

#include <cstdint>
#include <string>

#include "api_errors/error_info.h"
#include "server/node.h"

namespace grpc {
class ServerContextBase;
}  // namespace grpc

namespace raftlog::server {

grpc::StatusCode grpc_code(ErrorCode code);

// The answer for a failed outcome (error.ok() must be false): NOT_LEADER/NO_LEADER with the leader
// hint, every other code with its reason word (and, for the index reasons, the node's indexes).
api_errors::ErrorAnswer error_answer(const NodeError& error);

// An error status carrying only a reason word in its ErrorInfo (no leader hint).
grpc::Status reason_status(grpc::ServerContextBase* context, grpc::StatusCode code,
                           const std::string& message, std::string reason);

// FAILED_PRECONDITION, TOPIC_NOT_INDEXED: a topic read, tail or group commit named a topic this
// node's indexes do not know while they hold their most topics (derived::kMaxTopics), so it may
// have entries they did not queue (`unqueued_entries` since they were opened).
grpc::Status not_indexed_status(grpc::ServerContextBase* context, const std::string& topic,
                                std::uint64_t unqueued_entries);

// OK for an ok() error, else error_answer() as a call's status with its ErrorInfo attached.
grpc::Status to_grpc(grpc::ServerContextBase* context, const NodeError& error);

}  // namespace raftlog::server

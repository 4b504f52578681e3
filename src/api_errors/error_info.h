// How a raftlog error carries its machine-readable details, shared by the server (which attaches
// them) and the client library (which reads them) so the two cannot drift apart.
//
// A refusal's trailing metadata holds two copies of its details (docs/errors.md):
//   grpc-status-details-bin  gRPC's standard error model: a google.rpc.Status with a
//                            google.rpc.ErrorInfo (status_details.h), which Python, Go and Java
//                            status helpers and grpcurl decode
//   raftlog-error-bin        a serialized raftlog.v1.ErrorInfo (leader id/address and a reason
//                            word), the older form, kept for existing clients
// The status code and message stay the plain gRPC ones, so tools that know neither still get a
// readable error.
#pragma once

#include <grpcpp/support/status.h>

#include <cstdint>
#include <optional>
#include <string>

#include "api_errors/error_details.h"

namespace grpc {
class ClientContext;
class ServerContextBase;
}  // namespace grpc

namespace raftlog::v1 {
class ErrorInfo;
}  // namespace raftlog::v1

namespace raftlog::api_errors {

// A refusal as the server states it: the status code and message, plus the details for ErrorInfo.
struct ErrorAnswer {
  grpc::StatusCode code = grpc::StatusCode::UNKNOWN;
  std::string message;
  ErrorDetails details;
};

// The standard "not the leader" answer. leader_id 0 gives NO_LEADER, else NOT_LEADER naming the
// leader; both FAILED_PRECONDITION, which the client library retries/redirects.
ErrorAnswer not_leader_answer(std::uint64_t leader_id, std::string leader_address);

// Server side: attaches `details` to the call's trailing metadata (raftlog-error-bin) and returns
// the status to return from the handler, whose error_details gRPC sends as grpc-status-details-bin.
// Works for sync and callback handlers (both contexts derive ServerContextBase).
grpc::Status error_status(grpc::ServerContextBase* context, grpc::StatusCode code,
                          std::string message, const ErrorDetails& details);

// Server side: not_leader_answer() as the status of a call.
grpc::Status not_leader_status(grpc::ServerContextBase* context, std::uint64_t leader_id,
                               std::string leader_address);

// ErrorDetails <-> raftlog.v1.ErrorInfo: the one mapping used for the raftlog-error-bin trailer and
// for the per-append answers of AppendStream. raftlog.v1.ErrorInfo has no index fields: to_wire
// drops first_index/commit_index, from_wire leaves them unset.
void to_wire(const ErrorDetails& details, raftlog::v1::ErrorInfo* out);
ErrorDetails from_wire(const raftlog::v1::ErrorInfo& info);

// Client side: the details of a finished call, from grpc-status-details-bin when it holds raftlog's
// ErrorInfo, else from raftlog-error-bin (older servers); nullopt when the server attached neither
// (or they do not parse: a foreign or corrupt value is ignored rather than trusted).
std::optional<ErrorDetails> error_details(const grpc::ClientContext& context);

}  // namespace raftlog::api_errors

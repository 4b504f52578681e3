// The standard gRPC error model's payload (trailer grpc-status-details-bin): a google.rpc.Status
// whose details hold one google.rpc.ErrorInfo of domain "raftlog.v1" (proto/raftlog/v1/
// error_model.proto). error_info.h attaches it to every refusal next to the raftlog-error-bin
// trailer and prefers it when reading.
#pragma once

#include <grpcpp/support/status.h>

#include <optional>
#include <string>
#include <string_view>

#include "api_errors/error_details.h"

namespace raftlog::api_errors {

// The serialized google.rpc.Status for a refusal: `code` and `message` as the call's status, the
// ErrorInfo's reason from `details` and metadata for the hints it holds (leader_id when non-zero,
// leader_address when non-empty, first_index / commit_index when set).
std::string status_details(grpc::StatusCode code, const std::string& message,
                           const ErrorDetails& details);

// The ErrorDetails in a serialized google.rpc.Status: from its first ErrorInfo of domain
// "raftlog.v1". nullopt when the bytes do not parse or hold no such ErrorInfo (another service's
// details are not ours to read). A metadata value that is not a decimal number is ignored.
std::optional<ErrorDetails> details_from_status_details(std::string_view serialized);

}  // namespace raftlog::api_errors

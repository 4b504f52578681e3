#include "api_errors/error_info.h"

#include <grpcpp/client_context.h>
#include <grpcpp/server_context.h>

#include "api_errors/status_details.h"
#include "raftlog/v1/client.pb.h"

namespace raftlog::api_errors {

void to_wire(const ErrorDetails& details, raftlog::v1::ErrorInfo* out) {
  out->set_leader_id(details.leader_id);
  out->set_leader_address(details.leader_address);
  out->set_reason(details.reason);
}

ErrorDetails from_wire(const raftlog::v1::ErrorInfo& info) {
  ErrorDetails details;
  details.leader_id = info.leader_id();
  details.leader_address = info.leader_address();
  details.reason = info.reason();
  return details;
}

grpc::Status error_status(grpc::ServerContextBase* context, grpc::StatusCode code,
                          std::string message, const ErrorDetails& details) {
  raftlog::v1::ErrorInfo info;
  to_wire(details, &info);
  context->AddTrailingMetadata(std::string(kErrorInfoMetadataKey), info.SerializeAsString());
  // gRPC sends a status's error_details as the grpc-status-details-bin trailer.
  std::string standard = status_details(code, message, details);
  return {code, std::move(message), std::move(standard)};
}

ErrorAnswer not_leader_answer(std::uint64_t leader_id, std::string leader_address) {
  ErrorAnswer answer;
  answer.code = grpc::StatusCode::FAILED_PRECONDITION;
  answer.details.leader_id = leader_id;
  answer.details.leader_address = std::move(leader_address);
  if (leader_id == 0) {
    answer.details.reason = std::string(reason::kNoLeader);
    answer.message = "no leader yet (an election is in progress); retry shortly";
    return answer;
  }
  answer.details.reason = std::string(reason::kNotLeader);
  answer.message = "not the leader; the leader is node " + std::to_string(leader_id);
  if (!answer.details.leader_address.empty())
    answer.message += " at " + answer.details.leader_address;
  return answer;
}

grpc::Status not_leader_status(grpc::ServerContextBase* context, std::uint64_t leader_id,
                               std::string leader_address) {
  ErrorAnswer answer = not_leader_answer(leader_id, std::move(leader_address));
  return error_status(context, answer.code, std::move(answer.message), answer.details);
}

std::optional<ErrorDetails> error_details(const grpc::ClientContext& context) {
  const auto& trailers = context.GetServerTrailingMetadata();
  const auto standard = trailers.find(
      grpc::string_ref(kStatusDetailsMetadataKey.data(), kStatusDetailsMetadataKey.size()));
  if (standard != trailers.end()) {
    const std::string_view bytes(standard->second.data(), standard->second.size());
    if (auto details = details_from_status_details(bytes)) return details;
  }
  // A server from before the standard trailer, or one whose details are not raftlog's.
  const auto found =
      trailers.find(grpc::string_ref(kErrorInfoMetadataKey.data(), kErrorInfoMetadataKey.size()));
  if (found == trailers.end()) return std::nullopt;
  raftlog::v1::ErrorInfo info;
  if (!info.ParseFromArray(found->second.data(), static_cast<int>(found->second.size())))
    return std::nullopt;
  return from_wire(info);
}

}  // namespace raftlog::api_errors

// Internal to the client library: raftlog.v1 messages and gRPC statuses as the client's own types
// (client.h), and the two grpc.health.v1 messages, which Debian ships no generated code for.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <string>
#include <vector>

#include "client/client.h"
#include "raftlog/v1/client.pb.h"

namespace raftlog::client::internal {

namespace pb = raftlog::v1;

// The call's status, its message prefixed with the endpoint, with the server's ErrorInfo if any.
Status from_grpc(const grpc::Status& status, const grpc::ClientContext& context,
                 const std::string& endpoint);

// An unknown entry type reads as kNormal, an unknown role or flush mode as kUnknown.
Entry entry_from_wire(const pb::Entry& wire);
void attributes_to_wire(const std::vector<EntryAttributes>& attributes, pb::AppendRequest* out);
NodeStatus status_from_wire(const pb::StatusResponse& wire, const std::string& endpoint);

// grpc.health.v1.HealthCheckRequest{string service = 1}, serialized.
std::string encode_health_request(const std::string& service);
// The status field of a serialized HealthCheckResponse (0 when absent, as proto3 omits defaults);
// false when the bytes are not such a message.
bool decode_health_response(const std::string& bytes, std::uint64_t* status);

}  // namespace raftlog::client::internal

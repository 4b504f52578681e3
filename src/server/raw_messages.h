// The client services' requests arrive as raw bytes (grpc::ByteBuffer) and are parsed here, so that
// one that is not a valid protobuf message is answered INVALID_ARGUMENT (reason MALFORMED_REQUEST)
// with a message that says so.
//
// Why the services do not let gRPC parse them: gRPC 1.51's generated callback handlers hide a
// failed parse from the service. A unary or server-streaming method is then never called and the
// call ends UNIMPLEMENTED with an empty message (CallbackUnaryHandler::RunHandler and
// CallbackServerStreamingHandler::RunHandler substitute a reactor that finishes so), and a bidi
// stream's read completes with ok = false (CallOpRecvMessage::FinishOp), exactly like the client's
// half-close: AppendStream ended OK, and its client never learnt that a request and everything
// after it were not read. (grpc_call_failed_before_recv_message does not help: the transport
// delivered the message fine; only the C++ layer's parse failed.) So every client method is
// registered raw (the generated WithRawCallbackMethod_<Method> templates: requests and responses
// are ByteBuffers) and parsed and serialized here with the very SerializationTraits gRPC would have
// used, so the wire format is unchanged.
#pragma once

#include <grpcpp/grpcpp.h>

#include <string>

#include "server/node_error_status.h"

namespace raftlog::server {

// Parses `bytes` into `out`; false when they are not a valid `Message` (or there are none).
template <typename Message>
bool parse_message(const grpc::ByteBuffer& bytes, Message* out) {
  grpc::ByteBuffer consumed(bytes);  // shares the slices: Deserialize empties the buffer it reads
  return grpc::SerializationTraits<Message>::Deserialize(&consumed, out).ok();
}

// Serializes `message` into `out`, replacing what it held (a write has its own reference to the
// slices it sends); INTERNAL when it cannot be (larger than 2 GiB).
template <typename Message>
grpc::Status serialize_message(const Message& message, grpc::ByteBuffer* out) {
  out->Clear();  // gRPC's ProtoBufferWriter requires an empty buffer
  bool own_buffer = false;
  return grpc::SerializationTraits<Message>::Serialize(message, out, &own_buffer);
}

// INVALID_ARGUMENT, reason MALFORMED_REQUEST: `what` did not parse as a `type_name` message.
inline grpc::Status malformed_request(grpc::ServerContextBase* context, const std::string& what,
                                      const std::string& type_name,
                                      const std::string& consequence) {
  return reason_status(
      context, grpc::StatusCode::INVALID_ARGUMENT,
      what + " is not a valid " + type_name + " (it does not parse as protobuf); " + consequence,
      std::string(api_errors::reason::kMalformedRequest));
}

}  // namespace raftlog::server

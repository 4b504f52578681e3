// The gRPC server interceptor that records client RPCs in ClientMetrics (raftlog_grpc_*, and
// raftlog_rejected_requests_total by the ErrorInfo reason word). Peer streams are not client
// requests and are skipped; so is AppendStream, whose appends are recorded one by one as they are
// answered (Metrics::request_answered).
#pragma once

#include <memory>

namespace grpc::experimental {
class ServerInterceptorFactoryInterface;
}  // namespace grpc::experimental

namespace raftlog::server::metrics {

class ClientMetrics;

// Keeps a pointer to `client`, which must outlive the server that uses the factory.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> rpc_interceptor_factory(
    ClientMetrics* client);

}  // namespace raftlog::server::metrics

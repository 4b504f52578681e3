#include "server/metrics_rpc_interceptor.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_interceptor.h>

#include <chrono>
#include <string>
#include <string_view>

#include "api_errors/error_details.h"
#include "raftlog/v1/client.pb.h"
#include "server/metrics_families.h"

namespace raftlog::server::metrics {

namespace {

// One per client RPC: remembers when it started and records the outcome when the status is sent.
class RpcMetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  RpcMetricsInterceptor(ClientMetrics* client, std::string method)
      : client_(client), method_(std::move(method)), started_(std::chrono::steady_clock::now()) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status status = methods->GetSendStatus();
      std::string reason;
      if (!status.ok()) {
        if (auto* trailing = methods->GetSendTrailingMetadata(); trailing != nullptr) {
          const auto it = trailing->find(std::string(api_errors::kErrorInfoMetadataKey));
          raftlog::v1::ErrorInfo info;
          if (it != trailing->end() && info.ParseFromString(it->second)) reason = info.reason();
        }
      }
      client_->record_rpc(method_, static_cast<int>(status.error_code()),
                          seconds(std::chrono::steady_clock::now() - started_), reason);
    }
    methods->Proceed();
  }

 private:
  ClientMetrics* client_;
  const std::string method_;
  const std::chrono::steady_clock::time_point started_;
};

class RpcMetricsFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit RpcMetricsFactory(ClientMetrics* client) : client_(client) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    std::string_view method = info->method() == nullptr ? "" : info->method();
    // Peer streams are replication, not client requests (their traffic shows in the peer gauges).
    if (method.starts_with("/raftlog.peer.")) return nullptr;
    // A long-lived call: each append on it is recorded as it is answered (request_answered), and
    // the call's own end would put its lifetime into the request latency histogram.
    if (method == "/raftlog.v1.Log/AppendStream") return nullptr;
    if (method.starts_with('/')) method.remove_prefix(1);
    return new RpcMetricsInterceptor(client_, std::string(method));
  }

 private:
  ClientMetrics* client_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> rpc_interceptor_factory(
    ClientMetrics* client) {
  return std::make_unique<RpcMetricsFactory>(client);
}

}  // namespace raftlog::server::metrics

// Told about client requests that the gRPC interceptor cannot see one by one: each append answered
// on a long-lived AppendStream call (the interceptor sees only the call). Metrics implements it so
// that raftlog_grpc_requests_total, the latency histogram and the refusal reasons count appends on
// streams as they count unary Append calls. Calls come from the Node's loop thread and gRPC's
// threads: implementations must be thread-safe and quick.
#pragma once

#include <chrono>
#include <string_view>

namespace raftlog::server {

class ClientRequestObserver {
 public:
  virtual ~ClientRequestObserver() = default;
  // `method` as the metrics label ("raftlog.v1.Log/AppendStream"), `grpc_code` a grpc::StatusCode
  // value, `reason` the ErrorInfo reason word ("" when none), `latency` from read to answer.
  virtual void request_answered(std::string_view method, int grpc_code,
                                std::chrono::steady_clock::duration latency,
                                std::string_view reason) = 0;
};

}  // namespace raftlog::server

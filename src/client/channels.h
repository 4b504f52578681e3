// Internal to the client library: the connections to the nodes. TLS credentials built from
// TlsOptions, and one gRPC channel per endpoint dialled, shared by every call of a Client.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "client/client.h"

namespace raftlog::client::internal {

// Endpoints learned from leader hints are cached too; past this many a cache is reset.
inline constexpr std::size_t kMaxCachedChannels = 2 * kMaxEndpoints;

// Plaintext unless tls.enabled; INVALID_ARGUMENT when a TLS file cannot be read or is not PEM.
Result<std::shared_ptr<grpc::ChannelCredentials>> channel_credentials(const TlsOptions& tls);

// One channel per endpoint, created on first use. Thread-safe.
class Channels {
 public:
  Channels(const Options& options, std::shared_ptr<grpc::ChannelCredentials> credentials);

  std::shared_ptr<grpc::Channel> get(const std::string& endpoint);

 private:
  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
  grpc::ChannelArguments arguments_;  // the same for every channel
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<grpc::Channel>>
      channels_;  // guarded by mu_; at most kMaxCachedChannels
};

}  // namespace raftlog::client::internal

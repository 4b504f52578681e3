#include "client/channels.h"

#include <fstream>
#include <sstream>
#include <utility>

namespace raftlog::client::internal {

namespace {

// A PEM file is small; a larger one is a mistake.
constexpr std::size_t kMaxPemFileBytes = 1 << 20;

Status read_pem_file(const std::string& what, const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(StatusCode::kInvalidArgument, "cannot read TLS " + what + " file " + path);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  *out = buffer.str();
  if (out->size() > kMaxPemFileBytes || out->find("-----BEGIN") == std::string::npos) {
    return Status(StatusCode::kInvalidArgument,
                  "TLS " + what + " file " + path + " is not a PEM file");
  }
  return {};
}

}  // namespace

Result<std::shared_ptr<grpc::ChannelCredentials>> channel_credentials(const TlsOptions& tls) {
  if (!tls.enabled) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  if (!tls.ca_file.empty()) {
    if (Status s = read_pem_file("CA", tls.ca_file, &ssl.pem_root_certs); !s.ok()) return s;
  }
  if (!tls.cert_file.empty()) {
    if (Status s = read_pem_file("certificate", tls.cert_file, &ssl.pem_cert_chain); !s.ok())
      return s;
    if (Status s = read_pem_file("key", tls.key_file, &ssl.pem_private_key); !s.ok()) return s;
  }
  return grpc::SslCredentials(ssl);
}

Channels::Channels(const Options& options, std::shared_ptr<grpc::ChannelCredentials> credentials)
    : credentials_(std::move(credentials)) {
  arguments_.SetMaxReceiveMessageSize(static_cast<int>(options.max_message_bytes));
  arguments_.SetMaxSendMessageSize(static_cast<int>(options.max_message_bytes));
  // Follow our backoff bounds rather than gRPC's (1 s initial, 120 s max, 20 s connect timeout), so
  // a restarted node is found again quickly.
  arguments_.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
                    static_cast<int>(options.backoff_min_ms));
  arguments_.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, static_cast<int>(options.backoff_max_ms));
  arguments_.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, static_cast<int>(options.call_timeout_ms));
}

std::shared_ptr<grpc::Channel> Channels::get(const std::string& endpoint) {
  std::lock_guard lock(mu_);
  if (auto found = channels_.find(endpoint); found != channels_.end()) return found->second;
  if (channels_.size() >= kMaxCachedChannels) channels_.clear();
  auto created = grpc::CreateCustomChannel(endpoint, credentials_, arguments_);
  channels_.emplace(endpoint, created);
  return created;
}

}  // namespace raftlog::client::internal

#include "server/peer_stream_auth.h"

#include <grpcpp/security/auth_context.h>

#include <cstdint>
#include <string_view>
#include <vector>

#include "server/peer_auth.h"
#include "server/tls_files.h"

namespace raftlog::server {

std::shared_ptr<grpc::ChannelCredentials> PeerStreamAuth::channel_credentials() const {
  if (!options_.tls.has_value()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = options_.tls->ca_pem;
  ssl.pem_private_key = options_.tls->key_pem;
  ssl.pem_cert_chain = options_.tls->cert_pem;
  return grpc::SslCredentials(ssl);
}

void PeerStreamAuth::add_stream_metadata(grpc::ClientContext& context, raft::NodeId to) const {
  if (options_.peer_secret.empty()) return;
  context.AddMetadata(
      std::string(kPeerAuthMetadataKey),
      peer_auth_token(options_.peer_secret, options_.cluster_id, options_.self_id, to));
}

std::string PeerStreamAuth::authenticate(const grpc::ServerContextBase& context,
                                         raft::NodeId* authenticated_from) const {
  *authenticated_from = raft::kNoNode;
  raft::NodeId by_certificate = raft::kNoNode;
  if (options_.tls.has_value()) {
    if (std::string problem = authenticate_by_certificate(context, &by_certificate);
        !problem.empty())
      return problem;
    *authenticated_from = by_certificate;
  }
  if (!options_.peer_secret.empty()) {
    raft::NodeId by_secret = raft::kNoNode;
    if (std::string problem = authenticate_by_secret(context, &by_secret); !problem.empty())
      return problem;
    if (by_certificate != raft::kNoNode && by_secret != by_certificate) {
      return "the caller's certificate names node " + std::to_string(by_certificate) +
             " but its peer authenticator names node " + std::to_string(by_secret);
    }
    *authenticated_from = by_secret;
  }
  return "";
}

std::string PeerStreamAuth::authenticate_by_certificate(const grpc::ServerContextBase& context,
                                                        raft::NodeId* from) const {
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) {
    return "peer streams need a TLS client certificate from the cluster CA; none was presented";
  }
  // The caller's own certificate, and the chain gRPC verified, which need not start with it (gRPC
  // 1.51 puts the root first): the chain only supplies intermediates for checking the certificate.
  const std::vector<grpc::string_ref> leaf =
      auth->FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME);
  if (leaf.empty())
    return "peer streams need a TLS client certificate from the cluster CA; none was found";
  const std::string certificate(leaf.front().data(), leaf.front().size());
  std::string with_chain = certificate;
  const std::vector<grpc::string_ref> chain =
      auth->FindPropertyValues(GRPC_X509_PEM_CERT_CHAIN_PROPERTY_NAME);
  if (!chain.empty()) with_chain += "\n" + std::string(chain.front().data(), chain.front().size());
  if (std::string problem = verify_certificate_chain(with_chain, options_.tls->ca_pem);
      !problem.empty()) {
    return "the caller's certificate is not from the cluster CA (" + problem + ")";
  }
  // A certificate speaks for the one node it names, so one member's key cannot impersonate another.
  std::uint64_t named = 0;
  if (std::string problem = certificate_node_id(certificate, &named); !problem.empty()) {
    return "the caller's certificate names no node: " + problem;
  }
  *from = named;
  return "";
}

std::string PeerStreamAuth::authenticate_by_secret(const grpc::ServerContextBase& context,
                                                   raft::NodeId* from) const {
  const auto& metadata = context.client_metadata();
  const grpc::string_ref key(kPeerAuthMetadataKey.data(), kPeerAuthMetadataKey.size());
  const auto found = metadata.find(key);
  if (found == metadata.end()) {
    return "peer streams need the cluster's peer secret (--peer-secret-file): this one carried "
           "no " +
           std::string(kPeerAuthMetadataKey) + " metadata";
  }
  if (metadata.count(key) != 1)
    return "the stream carried more than one " + std::string(kPeerAuthMetadataKey);
  std::uint64_t named = 0;
  const std::string_view token(found->second.data(), found->second.size());
  if (std::string problem = verify_peer_auth_token(token, options_.peer_secret, options_.cluster_id,
                                                   options_.self_id, &named);
      !problem.empty()) {
    return problem;
  }
  *from = named;
  return "";
}

}  // namespace raftlog::server

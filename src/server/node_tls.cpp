#include "server/node_tls.h"

#include "server/peer_auth.h"

namespace raftlog::server {

namespace {

// "host:port" / "[v6]:port" -> host.
std::string host_of(const std::string& address) {
  const std::size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

}  // namespace

std::string load_node_tls(const NodeConfig& config, NodeTls* out) {
  *out = NodeTls{};
  if (!config.client_tls.any()) return "";
  if (std::string problem = load_tls_material(config.client_tls, "--tls", &out->port);
      !problem.empty()) {
    return problem;
  }
  out->enabled = true;
  const auto self = config.members.find(config.node_id);
  if (self != config.members.end()) {
    const std::string host = host_of(self->second);
    if (std::string problem = check_certificate_host(out->port.cert_pem, host); !problem.empty()) {
      return "--tls-cert: " + config.client_tls.cert_path +
             " is not valid for this node's address " + self->second + " (" + problem +
             "); clients and peers dial that address and check it";
    }
  }
  if (!config.peer_tls.any()) return "";
  if (std::string problem = load_tls_material(config.peer_tls, "--peer-tls", &out->peer);
      !problem.empty()) {
    return problem;
  }
  out->peers_enabled = true;
  if (std::string problem = verify_certificate_chain(out->port.cert_pem, out->peer.ca_pem);
      !problem.empty()) {
    return "--tls-cert: " + config.client_tls.cert_path + " does not chain to the cluster CA in " +
           config.peer_tls.ca_path + " (" + problem +
           "); peers check the port's certificate against that CA";
  }
  if (std::string problem = verify_certificate_chain(out->peer.cert_pem, out->peer.ca_pem);
      !problem.empty()) {
    return "--peer-tls-cert: " + config.peer_tls.cert_path +
           " does not chain to the cluster CA in " + config.peer_tls.ca_path + " (" + problem + ")";
  }
  std::uint64_t named = 0;
  if (std::string problem = certificate_node_id(out->peer.cert_pem, &named); !problem.empty()) {
    return "--peer-tls-cert: " + config.peer_tls.cert_path +
           " does not name this node: " + problem +
           " (peers accept a certificate only for the node it names)";
  }
  if (named != config.node_id) {
    return "--peer-tls-cert: " + config.peer_tls.cert_path + " names node " +
           std::to_string(named) + ", but this is node " + std::to_string(config.node_id) +
           " (peers accept a certificate only for the node it names)";
  }
  return "";
}

std::string load_peer_secret(const NodeConfig& config, std::string* secret) {
  secret->clear();
  if (config.peer_secret_path.empty()) {
    if (config.members.size() > 1 && !config.peer_tls.any()) {
      return "a multi-node cluster without mutual TLS between peers needs --peer-secret-file (the "
             "same file on "
             "every node, e.g. made with `openssl rand -hex 32 > FILE; chmod 600 FILE`): otherwise "
             "anyone who can "
             "reach this port could send Raft messages as any member (docs/security.md)";
    }
    return "";
  }
  return read_peer_secret_file(config.peer_secret_path, secret);
}

}  // namespace raftlog::server

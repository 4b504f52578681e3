#include "server/node_tls.h"

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
  if (std::string problem = load_tls_material(config.client_tls, "--tls", &out->port); !problem.empty()) {
    return problem;
  }
  out->enabled = true;
  const auto self = config.members.find(config.node_id);
  if (self != config.members.end()) {
    const std::string host = host_of(self->second);
    if (std::string problem = check_certificate_host(out->port.cert_pem, host); !problem.empty()) {
      return "--tls-cert: " + config.client_tls.cert_path + " is not valid for this node's address " + self->second +
             " (" + problem + "); clients and peers dial that address and check it";
    }
  }
  if (!config.peer_tls.any()) return "";
  if (std::string problem = load_tls_material(config.peer_tls, "--peer-tls", &out->peer); !problem.empty()) {
    return problem;
  }
  out->peers_enabled = true;
  if (std::string problem = verify_certificate_chain(out->port.cert_pem, out->peer.ca_pem); !problem.empty()) {
    return "--tls-cert: " + config.client_tls.cert_path + " does not chain to the cluster CA in " +
           config.peer_tls.ca_path + " (" + problem + "); peers check the port's certificate against that CA";
  }
  if (std::string problem = verify_certificate_chain(out->peer.cert_pem, out->peer.ca_pem); !problem.empty()) {
    return "--peer-tls-cert: " + config.peer_tls.cert_path + " does not chain to the cluster CA in " +
           config.peer_tls.ca_path + " (" + problem + ")";
  }
  return "";
}

}  // namespace raftlog::server

// The TLS material of one raftlogd node, read and cross-checked at start-up (docs/security.md).
#pragma once

#include <string>

#include "server/node_config.h"
#include "server/tls_files.h"

namespace raftlog::server {

struct NodeTls {
  bool enabled = false;  // the listen port speaks TLS (config.client_tls given)
  TlsMaterial port;  // what the port presents; port.ca_pem non-empty = client certificates required
  bool peers_enabled = false;  // mutual TLS between peers (config.peer_tls given)
  TlsMaterial peer;            // outgoing peer streams' certificate and the cluster CA
};

// Reads every configured file and checks that the node can work with them: each key matches its
// certificate; the port's certificate names this node's advertised host (the address peers and
// clients dial) and, with peer TLS, chains to the cluster CA, as does the peer certificate.
// Returns "" or a sentence naming the flag and the problem.
// With peer TLS, --peer-tls-cert must also name this node (CN=raftlog-node-<id>, tls_files.h): peers
// accept a certificate only for the node it names.
std::string load_node_tls(const NodeConfig& config, NodeTls* out);

// Reads --peer-secret-file (read_peer_secret_file, peer_auth.h) into *secret, empty when none is
// given. A multi-node cluster without peer TLS must have one: otherwise anyone who can reach the port
// could send Raft messages as any member. Returns "" or a sentence naming the flag and the problem.
std::string load_peer_secret(const NodeConfig& config, std::string* secret);

}  // namespace raftlog::server

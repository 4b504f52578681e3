// TLS material for raftlogd: reading the PEM files named by --tls-* / --peer-tls-* and checking them
// at start-up (OpenSSL), so a bad file is a clear error before the node serves anything instead of a
// handshake failure much later. Also the chain check the Peer service applies to a caller's
// certificate. Free of gRPC headers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace raftlog::server {

// File paths as configured. Empty strings mean "not given".
struct TlsFiles {
  std::string cert_path;
  std::string key_path;
  std::string ca_path;

  bool any() const { return !cert_path.empty() || !key_path.empty() || !ca_path.empty(); }
};

// The files' contents, checked: the certificate parses, the key parses and belongs to it, the CA
// file holds at least one certificate.
struct TlsMaterial {
  std::string cert_pem;  // leaf first, then any intermediates
  std::string key_pem;
  std::string ca_pem;  // may be empty (client endpoint without client-certificate checking)
};

// Reads and checks `files`. `flag_prefix` ("--tls" or "--peer-tls") names the flags in error
// messages. Returns "" or a sentence naming the offending flag and file.
std::string load_tls_material(const TlsFiles& files, const std::string& flag_prefix,
                              TlsMaterial* out);

// "" when the first certificate of `cert_pem` chains to one of the certificates in `ca_pem` (and is
// within its validity period); otherwise OpenSSL's reason.
std::string verify_certificate_chain(const std::string& cert_pem, const std::string& ca_pem);

// "" when the first certificate of `cert_pem` is valid for `host` (an IP address is matched against
// the IP SANs, a name against the DNS SANs); otherwise a sentence saying so.
std::string check_certificate_host(const std::string& cert_pem, const std::string& host);

// A peer certificate names the one node it speaks for in its subject: CN=raftlog-node-<id> (a decimal
// id without leading zeros). Over mutual TLS a peer stream may carry messages only from that node.
inline constexpr std::string_view kNodeCommonNamePrefix = "raftlog-node-";
// "" and *node_id set when the first certificate of `cert_pem` has exactly one subject common name
// and it has that form with a non-zero id; otherwise a sentence saying what it has instead.
std::string certificate_node_id(const std::string& cert_pem, std::uint64_t* node_id);

}  // namespace raftlog::server

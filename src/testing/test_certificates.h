// Test certificates made on the fly with the `openssl` command-line tool (Debian package `openssl`),
// the same commands docs/security.md shows operators: an EC P-256 CA, and leaf certificates signed
// by it that are valid for serverAuth and clientAuth. For loopback tests the SANs are IP:127.0.0.1
// and DNS:localhost.
#pragma once

#include <string>
#include <vector>

namespace raftlog::testing {

struct CertificateFiles {
  std::string cert_path;
  std::string key_path;
};

// A self-signed CA in dir/<name>.crt and dir/<name>.key. Throws std::runtime_error (with openssl's
// output) on failure.
CertificateFiles make_certificate_authority(const std::string& dir, const std::string& name);

// A leaf certificate dir/<name>.crt (+ .key) signed by `ca`, with the given subject alternative
// names ("IP:127.0.0.1", "DNS:localhost") and subject CN=<common_name> (default: the name). A peer
// certificate names its node as CN=raftlog-node-<id> (node_certificate_name).
CertificateFiles make_signed_certificate(
    const CertificateFiles& ca, const std::string& dir, const std::string& name,
    const std::vector<std::string>& subject_alt_names = {"IP:127.0.0.1", "DNS:localhost"},
    const std::string& common_name = "");

// "raftlog-node-<id>": the common name that binds a peer certificate to node `id`.
std::string node_certificate_name(int id);

}  // namespace raftlog::testing

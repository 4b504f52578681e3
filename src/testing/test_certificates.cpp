#include "testing/test_certificates.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace raftlog::testing {

namespace {

// Runs `command` through the shell with its output in `log`; throws with that output on failure.
void run(const std::string& command, const std::string& log) {
  const int status = std::system((command + " >" + log + " 2>&1").c_str());
  if (status != 0) {
    std::ifstream in(log);
    std::stringstream output;
    output << in.rdbuf();
    throw std::runtime_error("`" + command + "` failed (status " + std::to_string(status) +
                             "): " + output.str());
  }
}

std::string quoted(const std::string& text) { return "'" + text + "'"; }

}  // namespace

CertificateFiles make_certificate_authority(const std::string& dir, const std::string& name) {
  CertificateFiles ca{dir + "/" + name + ".crt", dir + "/" + name + ".key"};
  run("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj " +
          quoted("/CN=raftlog test " + name) + " -keyout " + quoted(ca.key_path) + " -out " +
          quoted(ca.cert_path),
      dir + "/" + name + ".openssl.log");
  return ca;
}

CertificateFiles make_signed_certificate(const CertificateFiles& ca, const std::string& dir,
                                         const std::string& name,
                                         const std::vector<std::string>& subject_alt_names,
                                         const std::string& common_name) {
  CertificateFiles leaf{dir + "/" + name + ".crt", dir + "/" + name + ".key"};
  const std::string csr = dir + "/" + name + ".csr";
  const std::string extensions = dir + "/" + name + ".ext";
  const std::string log = dir + "/" + name + ".openssl.log";
  run("openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj " +
          quoted("/CN=" + (common_name.empty() ? name : common_name)) + " -keyout " +
          quoted(leaf.key_path) + " -out " + quoted(csr),
      log);
  {
    std::ofstream ext(extensions);
    std::string sans;
    for (const std::string& san : subject_alt_names) sans += (sans.empty() ? "" : ",") + san;
    ext << "basicConstraints=CA:FALSE\n"
        << "keyUsage=digitalSignature,keyEncipherment\n"
        << "extendedKeyUsage=serverAuth,clientAuth\n";
    if (!sans.empty()) ext << "subjectAltName=" << sans << "\n";
  }
  run("openssl x509 -req -in " + quoted(csr) + " -CA " + quoted(ca.cert_path) + " -CAkey " +
          quoted(ca.key_path) + " -CAcreateserial -days 30 -extfile " + quoted(extensions) +
          " -out " + quoted(leaf.cert_path),
      log);
  return leaf;
}

std::string node_certificate_name(int id) { return "raftlog-node-" + std::to_string(id); }

}  // namespace raftlog::testing

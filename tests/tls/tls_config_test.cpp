// raftlogd's start-up checks of its TLS flags and files: every problem is a clear message and exit
// code 2 (usage), before the node touches its data directory.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "shared/command_run.h"
#include "testing/local_cluster.h"
#include "testing/test_certificates.h"

namespace raftlog::testing {
namespace {

class TlsConfigTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char pattern[] = "/tmp/raftlog-tls-config.XXXXXX";
    dir_ = ::mkdtemp(pattern);
    ca_ = make_certificate_authority(dir_, "ca");
    other_ca_ = make_certificate_authority(dir_, "other-ca");
    node_ = make_signed_certificate(ca_, dir_, "node", {"IP:127.0.0.1", "DNS:localhost"},
                                    node_certificate_name(1));
    node2_ = make_signed_certificate(ca_, dir_, "node2", {"IP:127.0.0.1", "DNS:localhost"},
                                     node_certificate_name(2));
    second_ = make_signed_certificate(ca_, dir_, "second");
    elsewhere_ =
        make_signed_certificate(ca_, dir_, "elsewhere", {"DNS:db.example.com", "IP:10.1.2.3"});
    foreign_ = make_signed_certificate(other_ca_, dir_, "foreign");
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }

  // raftlogd as node 1 of a 3-node loopback cluster with `flags`; it must refuse to start.
  CommandRun start(const std::string& flags,
                   const std::string& members = "1=127.0.0.1:1,2=127.0.0.1:2,3=127.0.0.1:3") {
    const std::string data = dir_ + "/data";
    CommandRun run = run_command(std::string(RAFTLOGD_PATH) + " --id 1 --members " + members +
                                 " --data-dir " + data + " --cluster-id tls-config-test " + flags);
    EXPECT_FALSE(std::filesystem::exists(data))
        << "refused configuration touched the data directory";
    return run;
  }

  std::string node_tls() const {
    return " --tls-cert " + node_.cert_path + " --tls-key " + node_.key_path;
  }
  std::string peer_tls() const {
    return " --peer-tls-cert " + node_.cert_path + " --peer-tls-key " + node_.key_path +
           " --peer-tls-ca " + ca_.cert_path;
  }

  static inline std::string dir_;
  static inline CertificateFiles ca_, other_ca_, node_, node2_, second_, elsewhere_, foreign_;
};

void expect_refused(const CommandRun& run, const std::string& message) {
  EXPECT_EQ(run.exit_code, 2) << run.out;
  EXPECT_NE(run.out.find(message), std::string::npos) << "expected \"" << message << "\" in:\n"
                                                      << run.out;
}

TEST_F(TlsConfigTest, PartialFlagSetsAreRefused) {
  expect_refused(start("--tls-cert " + node_.cert_path + peer_tls()),
                 "--tls-cert and --tls-key must be given together");
  expect_refused(start(node_tls() + " --peer-tls-cert " + node_.cert_path + " --peer-tls-key " +
                       node_.key_path),
                 "needs all of --peer-tls-cert, --peer-tls-key and --peer-tls-ca");
  expect_refused(start(peer_tls()), "--peer-tls-* needs --tls-cert and --tls-key too");
  expect_refused(start(node_tls()), "needs --peer-tls-cert, --peer-tls-key and --peer-tls-ca");
  expect_refused(start("--tls-ca " + ca_.cert_path + peer_tls()),
                 "--tls-cert and --tls-key must be given together");
}

TEST_F(TlsConfigTest, BadFilesAreRefused) {
  expect_refused(
      start(" --tls-cert " + dir_ + "/missing.crt --tls-key " + node_.key_path + peer_tls()),
      "--tls-cert: cannot read " + dir_ + "/missing.crt");
  expect_refused(
      start(" --tls-cert " + node_.cert_path + " --tls-key " + second_.key_path + peer_tls()),
      "does not match the certificate");
  expect_refused(start(node_tls() + " --peer-tls-cert " + node_.cert_path + " --peer-tls-key " +
                       node_.key_path + " --peer-tls-ca " + node_.key_path),
                 "--peer-tls-ca: " + node_.key_path + " holds no PEM certificate");
  expect_refused(
      start(" --tls-cert " + node_.key_path + " --tls-key " + node_.key_path + peer_tls()),
      "holds no PEM certificate");
}

TEST_F(TlsConfigTest, CertificatesThatPeersWouldRejectAreRefused) {
  // The SANs must name the address in --members that peers and clients dial.
  expect_refused(start(" --tls-cert " + elsewhere_.cert_path + " --tls-key " + elsewhere_.key_path +
                       peer_tls()),
                 "is not valid for this node's address 127.0.0.1:1");
  // The port's certificate and the peer certificate must come from the cluster CA.
  expect_refused(
      start(" --tls-cert " + foreign_.cert_path + " --tls-key " + foreign_.key_path + peer_tls()),
      "does not chain to the cluster CA");
  expect_refused(start(node_tls() + " --peer-tls-cert " + foreign_.cert_path + " --peer-tls-key " +
                       foreign_.key_path + " --peer-tls-ca " + ca_.cert_path),
                 "--peer-tls-cert: " + foreign_.cert_path + " does not chain to the cluster CA");
  // The peer certificate must name this node: peers accept it only for the node it names.
  expect_refused(start(node_tls() + " --peer-tls-cert " + node2_.cert_path + " --peer-tls-key " +
                       node2_.key_path + " --peer-tls-ca " + ca_.cert_path),
                 "--peer-tls-cert: " + node2_.cert_path + " names node 2, but this is node 1");
  expect_refused(start(node_tls() + " --peer-tls-cert " + second_.cert_path + " --peer-tls-key " +
                       second_.key_path + " --peer-tls-ca " + ca_.cert_path),
                 "--peer-tls-cert: " + second_.cert_path +
                     " does not name this node: the certificate's common name "
                     "\"second\" is not of the form CN=raftlog-node-<id>");
}

TEST_F(TlsConfigTest, ConfigFileTakesTheSameOptions) {
  const std::string config = dir_ + "/node.conf";
  {
    std::ofstream out(config);
    out << "tls-cert = " << node_.cert_path << "\n"
        << "tls-key = " << second_.key_path << "  # the wrong key\n"
        << "peer-tls-cert = " << node_.cert_path << "\npeer-tls-key = " << node_.key_path << "\n"
        << "peer-tls-ca = " << ca_.cert_path << "\n";
  }
  expect_refused(start("--config " + config), "does not match the certificate");
  // A single-node cluster may use TLS on the client side only. Its config file is accepted, the
  // node starts serving TLS, and SIGTERM (after 2 s) stops it cleanly.
  const std::string single = dir_ + "/single.conf";
  {
    std::ofstream out(single);
    out << "id = 1\nmembers = 1=127.0.0.1:" << free_loopback_port() << "\ndata-dir = " << dir_
        << "/single\n"
        << "tls-cert = " << node_.cert_path << "\ntls-key = " << node_.key_path << "\n";
  }
  CommandRun served = run_command("timeout --preserve-status -s TERM 2 " +
                                  std::string(RAFTLOGD_PATH) + " --config " + single +
                                  " --bootstrap-new-cluster");  // a first start: command line only
  EXPECT_EQ(served.exit_code, 0) << served.out;
  EXPECT_NE(served.out.find("flush mode sync, TLS)"), std::string::npos) << served.out;
  EXPECT_NE(served.out.find("shut down in"), std::string::npos) << served.out;
}

}  // namespace
}  // namespace raftlog::testing

// The Peer service's own certificate check, in process: when the port trusts a separate client CA
// as well as the cluster CA (--tls-ca next to --peer-tls-ca), a client certificate passes the TLS
// handshake but must not open a peer stream; a certificate from the cluster CA may, and then speaks
// only for the node it names (CN=raftlog-node-<id>).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "raftlog/peer/v1/peer.grpc.pb.h"
#include "server/transport.h"
#include "testing/test_certificates.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Opens a Peer stream towards node 1 with `credentials` and sends one heartbeat from `from`; returns
// how the stream ended.
grpc::Status send_one_message(const std::string& address,
                              const std::shared_ptr<grpc::ChannelCredentials>& credentials,
                              std::uint64_t from = 2) {
  auto stub = peer::v1::Peer::NewStub(grpc::CreateChannel(address, credentials));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 5s);
  peer::v1::StreamSummary summary;
  auto writer = stub->Stream(&context, &summary);
  peer::v1::RaftMessage message;
  message.set_cluster_id("auth-test");
  message.set_from(from);
  message.set_to(1);
  message.set_term(1);
  message.set_type(peer::v1::HEARTBEAT);
  writer->Write(message);
  writer->WritesDone();
  return writer->Finish();
}

// Node 1's Peer service on a TLS port as server.cpp builds it with --tls-ca (the cluster CA and a
// separate clients' CA trusted, a certificate required), with peers 2 and 3, and certificates:
// node1..node3 from the cluster CA naming their nodes, `unnamed` from the cluster CA naming no node,
// alice from the clients' CA.
class PeerAuthentication : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/raftlog-peer-auth.XXXXXX";
    dir_ = ::mkdtemp(pattern);
    cluster_ca_ = make_certificate_authority(dir_, "cluster-ca");
    const CertificateFiles clients_ca = make_certificate_authority(dir_, "clients-ca");
    for (int id = 1; id <= 3; ++id) {
      node_[id] = make_signed_certificate(cluster_ca_, dir_, "node" + std::to_string(id),
                                          {"IP:127.0.0.1"}, node_certificate_name(id));
    }
    unnamed_ = make_signed_certificate(cluster_ca_, dir_, "unnamed");
    alice_ = make_signed_certificate(clients_ca, dir_, "alice");

    server::PeerTransportOptions options;
    options.cluster_id = "auth-test";
    options.self_id = 1;
    options.peers[2] = "127.0.0.1:1";  // never dialled in these tests
    options.peers[3] = "127.0.0.1:1";
    options.tls =
        server::PeerTlsOptions{read_file(node_[1].cert_path), read_file(node_[1].key_path),
                               read_file(cluster_ca_.cert_path)};
    transport_ = std::make_unique<server::PeerTransport>(
        options, [this](raft::Message) { delivered_.fetch_add(1); });

    grpc::SslServerCredentialsOptions ssl(
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    ssl.pem_key_cert_pairs.push_back({read_file(node_[1].key_path), read_file(node_[1].cert_path)});
    ssl.pem_root_certs = read_file(cluster_ca_.cert_path) + read_file(clients_ca.cert_path);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::SslServerCredentials(ssl), &port);
    builder.RegisterService(transport_->service());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_NE(port, 0);
    address_ = "127.0.0.1:" + std::to_string(port);
  }
  void TearDown() override {
    if (transport_ != nullptr) {
      EXPECT_TRUE(transport_->stop());
    }
    if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now() + 1s);
    std::filesystem::remove_all(dir_);
  }

  std::shared_ptr<grpc::ChannelCredentials> credentials_for(const CertificateFiles& holder) const {
    grpc::SslCredentialsOptions client;
    client.pem_root_certs = read_file(cluster_ca_.cert_path);
    client.pem_cert_chain = read_file(holder.cert_path);
    client.pem_private_key = read_file(holder.key_path);
    return grpc::SslCredentials(client);
  }

  std::string dir_;
  CertificateFiles cluster_ca_;
  std::map<int, CertificateFiles> node_;
  CertificateFiles unnamed_;
  CertificateFiles alice_;
  std::atomic<int> delivered_{0};
  std::unique_ptr<server::PeerTransport> transport_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

TEST_F(PeerAuthentication, ClientCertificateFromAnotherTrustedCaCannotOpenPeerStreams) {
  const grpc::Status as_client = send_one_message(address_, credentials_for(alice_));
  EXPECT_EQ(as_client.error_code(), grpc::StatusCode::UNAUTHENTICATED) << as_client.error_message();
  EXPECT_NE(as_client.error_message().find("not from the cluster CA"), std::string::npos)
      << as_client.error_message();
  EXPECT_EQ(delivered_.load(), 0);

  const grpc::Status as_peer = send_one_message(address_, credentials_for(node_[2]));
  EXPECT_TRUE(as_peer.ok()) << as_peer.error_message();
  EXPECT_EQ(delivered_.load(), 1);
}

TEST_F(PeerAuthentication, CertificateSpeaksOnlyForTheNodeItNames) {
  // Node 2's certificate cannot carry a (forged) heartbeat from node 3.
  const grpc::Status forged = send_one_message(address_, credentials_for(node_[2]), 3);
  EXPECT_EQ(forged.error_code(), grpc::StatusCode::PERMISSION_DENIED) << forged.error_message();
  EXPECT_NE(forged.error_message().find("authenticated as node 2 but sent a message from node 3"),
            std::string::npos)
      << forged.error_message();
  // A cluster-CA certificate that names no node cannot open a peer stream at all.
  const grpc::Status unnamed = send_one_message(address_, credentials_for(unnamed_));
  EXPECT_EQ(unnamed.error_code(), grpc::StatusCode::UNAUTHENTICATED) << unnamed.error_message();
  EXPECT_NE(unnamed.error_message().find("names no node"), std::string::npos)
      << unnamed.error_message();
  // Nor can this node's own certificate (node 1 is not its own peer).
  const grpc::Status own = send_one_message(address_, credentials_for(node_[1]), 1);
  EXPECT_EQ(own.error_code(), grpc::StatusCode::UNAUTHENTICATED) << own.error_message();
  EXPECT_EQ(delivered_.load(), 0);

  const grpc::Status genuine = send_one_message(address_, credentials_for(node_[3]), 3);
  EXPECT_TRUE(genuine.ok()) << genuine.error_message();
  EXPECT_EQ(delivered_.load(), 1);
}

}  // namespace
}  // namespace raftlog::testing

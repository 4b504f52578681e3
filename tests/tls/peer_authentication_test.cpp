// The Peer service's own certificate check, in process: when the port trusts a separate client CA
// as well as the cluster CA (--tls-ca next to --peer-tls-ca), a client certificate passes the TLS
// handshake but must not open a peer stream; a certificate from the cluster CA may.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
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

// Opens a Peer stream as node 2 towards node 1 with `credentials`; returns how it ended.
grpc::Status send_one_message(const std::string& address, const std::shared_ptr<grpc::ChannelCredentials>& credentials) {
  auto stub = peer::v1::Peer::NewStub(grpc::CreateChannel(address, credentials));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 5s);
  peer::v1::StreamSummary summary;
  auto writer = stub->Stream(&context, &summary);
  peer::v1::RaftMessage message;
  message.set_cluster_id("auth-test");
  message.set_from(2);
  message.set_to(1);
  message.set_term(1);
  message.set_type(peer::v1::HEARTBEAT);
  writer->Write(message);
  writer->WritesDone();
  return writer->Finish();
}

TEST(PeerAuthentication, ClientCertificateFromAnotherTrustedCaCannotOpenPeerStreams) {
  char pattern[] = "/tmp/raftlog-peer-auth.XXXXXX";
  const std::string dir = ::mkdtemp(pattern);
  const CertificateFiles cluster_ca = make_certificate_authority(dir, "cluster-ca");
  const CertificateFiles clients_ca = make_certificate_authority(dir, "clients-ca");
  const CertificateFiles node1 = make_signed_certificate(cluster_ca, dir, "node1");
  const CertificateFiles node2 = make_signed_certificate(cluster_ca, dir, "node2");
  const CertificateFiles alice = make_signed_certificate(clients_ca, dir, "alice");

  server::PeerTransportOptions options;
  options.cluster_id = "auth-test";
  options.self_id = 1;
  options.peers[2] = "127.0.0.1:1";  // never dialled in this test
  options.tls = server::PeerTlsOptions{read_file(node1.cert_path), read_file(node1.key_path),
                                       read_file(cluster_ca.cert_path)};
  std::atomic<int> delivered{0};
  server::PeerTransport transport(options, [&](raft::Message) { delivered.fetch_add(1); });

  // The port as server.cpp builds it with --tls-ca: both CAs trusted, a certificate required.
  grpc::SslServerCredentialsOptions ssl(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  ssl.pem_key_cert_pairs.push_back({read_file(node1.key_path), read_file(node1.cert_path)});
  ssl.pem_root_certs = read_file(cluster_ca.cert_path) + read_file(clients_ca.cert_path);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::SslServerCredentials(ssl), &port);
  builder.RegisterService(transport.service());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ASSERT_NE(port, 0);
  const std::string address = "127.0.0.1:" + std::to_string(port);

  const auto credentials_for = [&](const CertificateFiles& holder) {
    grpc::SslCredentialsOptions client;
    client.pem_root_certs = read_file(cluster_ca.cert_path);
    client.pem_cert_chain = read_file(holder.cert_path);
    client.pem_private_key = read_file(holder.key_path);
    return grpc::SslCredentials(client);
  };

  const grpc::Status as_client = send_one_message(address, credentials_for(alice));
  EXPECT_EQ(as_client.error_code(), grpc::StatusCode::UNAUTHENTICATED) << as_client.error_message();
  EXPECT_NE(as_client.error_message().find("not from the cluster CA"), std::string::npos) << as_client.error_message();
  EXPECT_EQ(delivered.load(), 0);

  const grpc::Status as_peer = send_one_message(address, credentials_for(node2));
  EXPECT_TRUE(as_peer.ok()) << as_peer.error_message();
  EXPECT_EQ(delivered.load(), 1);

  EXPECT_TRUE(transport.stop());
  server->Shutdown(std::chrono::system_clock::now() + 1s);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace raftlog::testing

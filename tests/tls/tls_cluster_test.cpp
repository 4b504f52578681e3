// A cluster with TLS on its client/peer port and mutual TLS between peers (docs/security.md), with
// certificates made by the openssl CLI for each test: it elects a leader and serves appends and
// reads over TLS; plaintext clients, clients trusting another CA, and callers without a cluster
// certificate on the Peer service are refused; a node whose certificate comes from a rogue CA never
// joins.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "raftlog/peer/v1/peer.grpc.pb.h"
#include "shared/command_run.h"
#include "testing/local_cluster.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;

LocalClusterOptions tls_options() {
  LocalClusterOptions options;
  options.raftlogd_path = RAFTLOGD_PATH;
  options.tls = true;
  return options;
}

std::vector<std::string> payloads(int count, const std::string& prefix) {
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) out.push_back(prefix + std::to_string(i));
  return out;
}

// A one-endpoint client with the given TLS settings, for checking what a node accepts.
std::unique_ptr<client::Client> single_client(const std::string& endpoint, client::TlsOptions tls) {
  client::Options options;
  options.endpoints = {endpoint};
  options.call_timeout_ms = 1000;
  options.retry_deadline_ms = 1500;
  options.tls = std::move(tls);
  auto created = client::Client::create(options);
  EXPECT_TRUE(created.ok()) << created.status().to_string();
  return std::move(created).value();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(TlsClusterTest, ElectsLeaderAndServesAppendsAndReadsOverTls) {
  LocalCluster cluster(tls_options());
  cluster.start_all();
  const int leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0) << cluster.log_tail(1);
  EXPECT_NE(cluster.log_tail(leader).find("mutual TLS between peers"), std::string::npos)
      << cluster.log_tail(leader);

  auto writer = cluster.client();
  std::uint64_t last = 0;
  for (int batch = 0; batch < 5; ++batch) {
    auto appended = writer->append(payloads(4, "tls-" + std::to_string(batch) + "-"));
    ASSERT_TRUE(appended.ok()) << appended.status().to_string();
    last = appended->last_index;
  }
  auto linearizable = writer->read(1, 0, 0, /*linearizable=*/true);
  ASSERT_TRUE(linearizable.ok()) << linearizable.status().to_string();
  ASSERT_EQ(linearizable->entries.size(), last);
  // Every node got every entry through its mutual-TLS peer streams.
  for (int id = 1; id <= cluster.size(); ++id) {
    ASSERT_TRUE(cluster.wait_for_commit(id, last)) << "node " << id << "\n" << cluster.log_tail(id);
    const std::vector<client::Entry> entries = cluster.read_all(id);
    ASSERT_EQ(entries.size(), last) << "node " << id;
    EXPECT_EQ(entries.back().payload, "tls-4-3");
  }

  // raftlogctl speaks TLS with --tls-ca, and fails without it.
  const std::string ctl = std::string(RAFTLOGCTL_PATH) + " ";
  const std::string endpoints = " --endpoints " + cluster.endpoints() + " --timeout-ms 1500";
  CommandRun status =
      run_command(ctl + "status --json --tls-ca " + cluster.tls_dir() + "/ca.crt" + endpoints);
  EXPECT_EQ(status.exit_code, 0) << status.out;
  EXPECT_NE(status.out.find("\"role\":\"leader\""), std::string::npos) << status.out;
  CommandRun plaintext = run_command(ctl + "status --json" + endpoints);
  EXPECT_EQ(plaintext.exit_code, 1) << plaintext.out;
  EXPECT_EQ(plaintext.out.find("\"role\""), std::string::npos) << plaintext.out;
  // In text, the node that refused a plaintext client is not just "DOWN": the likely cause is named.
  CommandRun plaintext_text = run_command(ctl + "status" + endpoints);
  EXPECT_EQ(plaintext_text.exit_code, 1) << plaintext_text.out;
  EXPECT_NE(plaintext_text.out.find("may require TLS (--tls-ca)"), std::string::npos)
      << plaintext_text.out;
}

TEST(TlsClusterTest, RefusesPlaintextClientsWrongCaAndCertificatelessPeers) {
  LocalCluster cluster(tls_options());
  cluster.start_all();
  const int leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0);
  const std::string endpoint = cluster.address(leader);

  auto plaintext = single_client(endpoint, client::TlsOptions{});
  auto status = plaintext->status(endpoint);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.status().code(), client::StatusCode::kUnavailable)
      << status.status().to_string();
  EXPECT_FALSE(plaintext->append({"plaintext"}).ok());

  client::TlsOptions wrong_ca;
  wrong_ca.enabled = true;
  wrong_ca.ca_file = cluster.tls_dir() + "/rogue-ca.crt";
  auto distrusting = single_client(endpoint, wrong_ca);
  status = distrusting->status(endpoint);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.status().code(), client::StatusCode::kUnavailable)
      << status.status().to_string();
  EXPECT_FALSE(distrusting->append({"wrong ca"}).ok());

  // A TLS caller without a certificate reaches the port (clients need none) but not the Peer
  // service: one well-formed message from a member id is refused before it is looked at.
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = read_file(cluster.tls_dir() + "/ca.crt");
  auto channel = grpc::CreateChannel(endpoint, grpc::SslCredentials(ssl));
  auto stub = peer::v1::Peer::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 5s);
  peer::v1::StreamSummary summary;
  auto writer = stub->Stream(&context, &summary);
  peer::v1::RaftMessage message;
  message.set_cluster_id("raftlog");
  message.set_from(static_cast<std::uint64_t>(leader == 1 ? 2 : 1));
  message.set_to(static_cast<std::uint64_t>(leader));
  writer->Write(message);
  writer->WritesDone();
  const grpc::Status refused = writer->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAUTHENTICATED) << refused.error_message();
  EXPECT_NE(refused.error_message().find("cluster CA"), std::string::npos)
      << refused.error_message();

  // None of this disturbed the cluster.
  auto appended = cluster.client()->append({"still fine"});
  ASSERT_TRUE(appended.ok()) << appended.status().to_string();
}

TEST(TlsClusterTest, ClientCertificatesRequiredWithTlsCa) {
  LocalClusterOptions options = tls_options();
  options.tls_client_certificates = true;
  LocalCluster cluster(options);
  cluster.start_all();
  const int leader = cluster.wait_for_leader();  // LocalCluster's clients present client.crt
  ASSERT_NE(leader, 0) << cluster.log_tail(1);
  auto appended = cluster.client()->append({"with a client certificate"});
  ASSERT_TRUE(appended.ok()) << appended.status().to_string();

  client::TlsOptions no_certificate;
  no_certificate.enabled = true;
  no_certificate.ca_file = cluster.tls_dir() + "/ca.crt";
  auto anonymous = single_client(cluster.address(leader), no_certificate);
  auto status = anonymous->status(cluster.address(leader));
  ASSERT_FALSE(status.ok());
  EXPECT_FALSE(anonymous->append({"anonymous"}).ok());

  // A certificate from another CA is refused too.
  const std::string rogue = cluster.tls_dir() + "/node-from-rogue";
  CommandRun made = run_command(
      "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=rogue -keyout " +
      rogue + ".key -out " + rogue + ".csr && openssl x509 -req -in " + rogue + ".csr -CA " +
      cluster.tls_dir() + "/rogue-ca.crt -CAkey " + cluster.tls_dir() +
      "/rogue-ca.key -CAcreateserial -days 1 -out " + rogue + ".crt");
  ASSERT_EQ(made.exit_code, 0) << made.out;
  client::TlsOptions rogue_certificate = no_certificate;
  rogue_certificate.cert_file = rogue + ".crt";
  rogue_certificate.key_file = rogue + ".key";
  auto impostor = single_client(cluster.address(leader), rogue_certificate);
  EXPECT_FALSE(impostor->status(cluster.address(leader)).ok());
}

TEST(TlsClusterTest, NodeWithCertificateFromRogueCaNeverJoins) {
  LocalClusterOptions options = tls_options();
  options.tls_rogue_nodes = {3};
  LocalCluster cluster(options);
  cluster.start_all();
  const int leader = cluster.wait_for_leader(10s, {3});
  ASSERT_TRUE(leader == 1 || leader == 2) << leader << "\n" << cluster.log_tail(1);

  // The two good nodes are a majority: they commit without node 3.
  auto writer = cluster.client({}, {1, 2});
  std::uint64_t last = 0;
  for (int batch = 0; batch < 5; ++batch) {
    auto appended = writer->append(payloads(3, "good-"));
    ASSERT_TRUE(appended.ok()) << appended.status().to_string();
    last = appended->last_index;
  }
  ASSERT_TRUE(cluster.wait_for_commit(1, last));
  ASSERT_TRUE(cluster.wait_for_commit(2, last));
  std::this_thread::sleep_for(1s);  // several heartbeat rounds the rogue node could have used

  // Node 3 is asked with a client that trusts its CA: its log is empty and it knows no leader.
  client::TlsOptions rogue_trust;
  rogue_trust.enabled = true;
  rogue_trust.ca_file = cluster.tls_dir() + "/rogue-ca.crt";
  auto rogue_client = single_client(cluster.address(3), rogue_trust);
  auto rogue_status = rogue_client->status(cluster.address(3));
  ASSERT_TRUE(rogue_status.ok()) << rogue_status.status().to_string() << "\n"
                                 << cluster.log_tail(3);
  EXPECT_EQ(rogue_status->last_index, 0u);
  EXPECT_EQ(rogue_status->commit_index, 0u);
  EXPECT_EQ(rogue_status->leader_id, 0u);
  auto rogue_health = rogue_client->health(cluster.address(3), "");
  ASSERT_TRUE(rogue_health.ok()) << rogue_health.status().to_string();
  EXPECT_EQ(rogue_health.value(), client::HealthState::kNotServing);

  // The leader never reached node 3 either: no match index beyond 0.
  auto leader_status = cluster.status(leader);
  ASSERT_TRUE(leader_status.has_value());
  for (const client::PeerStatus& peer : leader_status->peers) {
    if (peer.id == 3) {
      EXPECT_EQ(peer.match_index, 0u);
    }
  }
  // ... and node 3 saw its streams fail (TLS handshake refused), not silently succeed. Its peers
  // were never reachable, which before kPeerStartupGrace is an info line, not a "down" warning.
  const std::string log = cluster.log_tail(3, 100000);
  EXPECT_TRUE(log.find(") not reachable yet:") != std::string::npos ||
              log.find(") down:") != std::string::npos)
      << log;
}

}  // namespace
}  // namespace raftlog::testing

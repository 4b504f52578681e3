// Peer authentication of a plaintext cluster over real raftlogd processes (docs/security.md): a
// multi-node node without --peer-secret-file (or with a bad one, or with the shared default cluster
// id) refuses to start with exit code 2, and a running node refuses forged peer streams from anyone
// who can reach its port.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "raftlog/peer/v1/peer.grpc.pb.h"
#include "server/peer_auth.h"
#include "shared/command_run.h"
#include "testing/local_cluster.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;
namespace pb = raftlog::peer::v1;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// One StreamBatches call to `address` with `auth` as the peer authenticator (none when empty)
// carrying `message`; returns how it ended.
grpc::Status send_raw(const std::string& address, const pb::RaftMessage& message,
                      const std::string& auth) {
  auto stub = pb::Peer::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 5s);
  if (!auth.empty()) context.AddMetadata(std::string(server::kPeerAuthMetadataKey), auth);
  pb::StreamSummary summary;
  auto writer = stub->StreamBatches(&context, &summary);
  pb::RaftMessageBatch batch;
  *batch.add_messages() = message;
  writer->Write(batch);
  writer->WritesDone();
  return writer->Finish();
}

// Waits (bounded) until node `id` answers a status request.
bool answers(LocalCluster& cluster, int id) {
  for (int attempt = 0; attempt < 250; ++attempt) {
    if (cluster.status(id).has_value()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

TEST(PeerSecret, MultiNodeNodeWithoutPeerAuthenticationRefusesToStart) {
  char pattern[] = "/tmp/raftlog-peer-secret.XXXXXX";
  const std::string dir = ::mkdtemp(pattern);
  const std::string data = dir + "/data";
  const std::string node = std::string(RAFTLOGD_PATH) +
                           " --id 1 --members 1=127.0.0.1:1,2=127.0.0.1:2 --data-dir " + data + " ";
  const auto expect_refused = [&](const std::string& flags, const std::string& message) {
    SCOPED_TRACE(flags);
    const CommandRun run = run_command(node + flags);
    EXPECT_EQ(run.exit_code, 2) << run.out;
    EXPECT_NE(run.out.find(message), std::string::npos) << "expected \"" << message << "\" in:\n"
                                                        << run.out;
    EXPECT_FALSE(std::filesystem::exists(data))
        << "a refused configuration touched the data directory";
  };
  expect_refused("--cluster-id test-7b2e", "needs --peer-secret-file");
  const std::string secret = dir + "/secret";
  std::ofstream(secret) << "0123456789abcdef0123456789abcdef\n";
  std::filesystem::permissions(secret, std::filesystem::perms::owner_read |
                                           std::filesystem::perms::owner_write |
                                           std::filesystem::perms::others_read);
  expect_refused("--cluster-id test-7b2e --peer-secret-file " + secret, "has mode 0604");
  std::filesystem::permissions(secret, std::filesystem::perms::others_read,
                               std::filesystem::perm_options::remove);
  expect_refused("--peer-secret-file " + secret,
                 "a multi-node cluster needs --cluster-id set to a token unique to it");
  expect_refused("--cluster-id test-7b2e --peer-secret-file " + dir + "/missing",
                 "--peer-secret-file: cannot open");
  std::filesystem::remove_all(dir);
}

TEST(PeerSecret, PlaintextNodeRefusesForgedPeerStreams) {
  LocalClusterOptions options;
  options.raftlogd_path = RAFTLOGD_PATH;
  LocalCluster cluster(options);  // plaintext, with a peer secret; only node 1 runs
  cluster.start(1);
  ASSERT_TRUE(answers(cluster, 1)) << cluster.log_tail(1);
  const std::string secret = [&] {
    std::string text = read_file(cluster.peer_secret_file());
    while (!text.empty() && text.back() == '\n') text.pop_back();
    return text;
  }();

  // What an attacker who reached the port sends: a heartbeat "from node 2" of a huge term with a
  // huge commit index, which would make node 1 adopt the term and believe entries committed.
  pb::RaftMessage forged;
  forged.set_cluster_id(cluster.cluster_id());
  forged.set_type(pb::HEARTBEAT);
  forged.set_from(2);
  forged.set_to(1);
  forged.set_term(1000000);
  forged.set_commit(1ULL << 40);
  const grpc::Status anonymous = send_raw(cluster.address(1), forged, "");
  EXPECT_EQ(anonymous.error_code(), grpc::StatusCode::UNAUTHENTICATED) << anonymous.error_message();
  EXPECT_NE(anonymous.error_message().find("peer secret"), std::string::npos)
      << anonymous.error_message();
  const grpc::Status guessed =
      send_raw(cluster.address(1), forged,
               server::peer_auth_token("a-guessed-secret-1234", cluster.cluster_id(), 2, 1));
  EXPECT_EQ(guessed.error_code(), grpc::StatusCode::UNAUTHENTICATED) << guessed.error_message();
  // Node 3's credential does not let it speak for node 2.
  const grpc::Status impersonating = send_raw(
      cluster.address(1), forged, server::peer_auth_token(secret, cluster.cluster_id(), 3, 1));
  EXPECT_EQ(impersonating.error_code(), grpc::StatusCode::PERMISSION_DENIED)
      << impersonating.error_message();

  const auto status = cluster.status(1);
  ASSERT_TRUE(status.has_value());
  EXPECT_LT(status->term, 1000000u) << "a forged heartbeat reached the Raft core";
  EXPECT_EQ(status->commit_index, 0u);

  // The genuine credential opens a stream (a harmless pre-vote request from node 2).
  pb::RaftMessage pre_vote;
  pre_vote.set_cluster_id(cluster.cluster_id());
  pre_vote.set_type(pb::PRE_VOTE);
  pre_vote.set_from(2);
  pre_vote.set_to(1);
  pre_vote.set_term(1);
  const grpc::Status genuine = send_raw(
      cluster.address(1), pre_vote, server::peer_auth_token(secret, cluster.cluster_id(), 2, 1));
  EXPECT_TRUE(genuine.ok()) << genuine.error_message();
  EXPECT_NE(cluster.log_tail(1).find("refused peer stream"), std::string::npos);
}

// A node with another cluster's secret redials both lanes every ~50 ms: each member logged every
// refusal (about 36 lines a second, 91 % of a member's log in an outside test). Now at most one line
// per 10 s, whatever the remote, with the count of those held back.
TEST(PeerSecret, RefusedPeerStreamsAreLoggedAtMostOncePerInterval) {
  LocalClusterOptions options;
  options.raftlogd_path = RAFTLOGD_PATH;
  LocalCluster cluster(options);
  cluster.start(1);
  ASSERT_TRUE(answers(cluster, 1)) << cluster.log_tail(1);
  pb::RaftMessage forged;
  forged.set_cluster_id(cluster.cluster_id());
  forged.set_type(pb::HEARTBEAT);
  forged.set_from(2);
  forged.set_to(1);
  forged.set_term(1);
  const auto count_lines = [&] {
    const std::string log = read_file(cluster.log_file(1));
    std::size_t lines = 0;
    for (std::size_t at = log.find("refused peer stream from"); at != std::string::npos;
         at = log.find("refused peer stream from", at + 1)) {
      ++lines;
    }
    return lines;
  };
  const auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < 40; ++i) {
    const grpc::Status refused = send_raw(
        cluster.address(1), forged,
        server::peer_auth_token("another-clusters-secret-12345678", cluster.cluster_id(), 2, 1));
    ASSERT_EQ(refused.error_code(), grpc::StatusCode::UNAUTHENTICATED) << refused.error_message();
  }
  const auto elapsed = std::chrono::steady_clock::now() - started;
  // 40 refusals: one line per 10 s that began, however slow this machine is.
  const auto intervals = static_cast<std::size_t>(elapsed / std::chrono::seconds(10)) + 1;
  EXPECT_GE(count_lines(), 1U);
  EXPECT_LE(count_lines(), intervals) << cluster.log_tail(1);
}

}  // namespace
}  // namespace raftlog::testing

// The standard gRPC health service and server reflection on a node's client port, and
// `raftlogctl status --watch` / `raftlogctl health`, against real raftlogd processes.
#include <google/protobuf/unknown_field_set.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/client_context.h>
#include <grpcpp/support/sync_stream.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <string>
#include <thread>

#include "shared/command_run.h"
#include "testing/local_cluster.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;

LocalClusterOptions plaintext_options() {
  LocalClusterOptions options;
  options.raftlogd_path = RAFTLOGD_PATH;
  return options;
}

client::HealthState health_of(LocalCluster& cluster, int id, const std::string& service) {
  auto c = cluster.client({}, {id});
  auto state = c->health(cluster.address(id), service);
  if (!state.ok()) return client::HealthState::kUnknown;
  return state.value();
}

// Polls until node `id` reports `want` for `service`, at most `timeout`.
bool wait_for_health(LocalCluster& cluster, int id, const std::string& service,
                     client::HealthState want, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (health_of(cluster, id, service) == want) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

TEST(HealthTest, ServingOnceALeaderIsKnownAndNotServingWithoutMajority) {
  LocalCluster cluster(plaintext_options());
  cluster.start_all();
  const int leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0);
  for (int id = 1; id <= 3; ++id) {
    // Within the reporter's poll interval (100 ms) of learning the leader.
    EXPECT_TRUE(wait_for_health(cluster, id, "", client::HealthState::kServing, 2s))
        << "node " << id;
    EXPECT_TRUE(wait_for_health(cluster, id, "raftlog.v1.Log", client::HealthState::kServing, 2s))
        << "node " << id;
  }
  EXPECT_EQ(health_of(cluster, leader, "no.such.Service"), client::HealthState::kServiceUnknown);

  // Leave one node alone: the leader steps down (check-quorum) or a follower's election timer
  // clears the leader it knew; either way it no longer knows a leader.
  const int survivor = leader;
  for (int id = 1; id <= 3; ++id) {
    if (id != survivor) {
      ASSERT_EQ(cluster.stop(id), 0);
    }
  }
  EXPECT_TRUE(wait_for_health(cluster, survivor, "", client::HealthState::kNotServing, 5s))
      << cluster.log_tail(survivor);
  EXPECT_EQ(health_of(cluster, survivor, "raftlog.v1.Log"), client::HealthState::kNotServing);
  // raftlogctl health is what probes run: exit 1 when a node is not serving.
  CommandRun probe = run_command(std::string(RAFTLOGCTL_PATH) + " health --endpoints " +
                                 cluster.address(survivor));
  EXPECT_EQ(probe.exit_code, 1) << probe.out;
  EXPECT_NE(probe.out.find("NOT_SERVING"), std::string::npos) << probe.out;

  // A majority again: serving again.
  const int other = survivor == 1 ? 2 : 1;
  cluster.start(other);
  EXPECT_TRUE(wait_for_health(cluster, survivor, "", client::HealthState::kServing, 10s))
      << cluster.log_tail(survivor);
  probe = run_command(std::string(RAFTLOGCTL_PATH) + " health --endpoints " +
                      cluster.address(survivor));
  EXPECT_EQ(probe.exit_code, 0) << probe.out;
  EXPECT_NE(probe.out.find("SERVING"), std::string::npos) << probe.out;
}

// grpc.reflection.v1alpha messages by hand (Debian ships no generated code for reflection.proto):
// ServerReflectionRequest{list_services = 7: "*"}; the answer's list_services_response (6) holds
// repeated ServiceResponse (1) whose name is field 1.
std::set<std::string> list_services(const std::string& endpoint) {
  auto channel = grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 5s);
  const grpc::internal::RpcMethod method(
      "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
      grpc::internal::RpcMethod::BIDI_STREAMING);
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> stream(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
          channel.get(), method, &context));
  const std::string request_bytes = std::string("\x3a\x01*", 3);
  grpc::Slice slice(request_bytes);
  grpc::ByteBuffer request(&slice, 1);
  std::set<std::string> names;
  if (!stream->Write(request)) return names;
  stream->WritesDone();
  grpc::ByteBuffer response;
  if (stream->Read(&response)) {
    std::vector<grpc::Slice> slices;
    std::string bytes;
    if (response.Dump(&slices).ok()) {
      for (const grpc::Slice& part : slices)
        bytes.append(reinterpret_cast<const char*>(part.begin()), part.size());
    }
    google::protobuf::UnknownFieldSet top;
    if (top.ParseFromString(bytes)) {
      for (int i = 0; i < top.field_count(); ++i) {
        if (top.field(i).number() != 6 ||
            top.field(i).type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
          continue;
        google::protobuf::UnknownFieldSet list;
        if (!list.ParseFromString(top.field(i).length_delimited())) continue;
        for (int j = 0; j < list.field_count(); ++j) {
          google::protobuf::UnknownFieldSet service;
          if (list.field(j).number() == 1 &&
              service.ParseFromString(list.field(j).length_delimited()) &&
              service.field_count() > 0 && service.field(0).number() == 1) {
            names.insert(service.field(0).length_delimited());
          }
        }
      }
    }
  }
  const grpc::Status finished = stream->Finish();
  EXPECT_TRUE(finished.ok()) << finished.error_message();
  return names;
}

TEST(ReflectionTest, ListsTheRaftlogServices) {
  LocalClusterOptions options = plaintext_options();
  options.nodes = 1;
  LocalCluster cluster(options);
  cluster.start_all();
  ASSERT_EQ(cluster.wait_for_leader(), 1);
  const std::set<std::string> names = list_services(cluster.address(1));
  EXPECT_TRUE(names.contains("raftlog.v1.Log")) << names.size();
  EXPECT_TRUE(names.contains("raftlog.v1.Admin")) << names.size();
  EXPECT_TRUE(names.contains("raftlog.peer.v1.Peer")) << names.size();
  EXPECT_TRUE(names.contains("grpc.reflection.v1alpha.ServerReflection")) << names.size();
}

TEST(StatusWatchTest, RefreshesCountTimesWithPeerLagAndLastContact) {
  LocalCluster cluster(plaintext_options());
  cluster.start_all();
  const int leader = cluster.wait_for_leader();
  ASSERT_NE(leader, 0);
  ASSERT_TRUE(cluster.client()->append({"a", "b"}).ok());
  const std::string ctl =
      std::string(RAFTLOGCTL_PATH) + " status --endpoints " + cluster.endpoints();

  const auto started = std::chrono::steady_clock::now();
  CommandRun watch = run_command(ctl + " --watch --count 3 --interval-ms 200");
  const auto took = std::chrono::steady_clock::now() - started;
  ASSERT_EQ(watch.exit_code, 0) << watch.out;
  std::size_t rounds = 0;
  for (std::size_t at = watch.out.find("--- "); at != std::string::npos;
       at = watch.out.find("--- ", at + 1))
    ++rounds;
  EXPECT_EQ(rounds, 3u) << watch.out;
  EXPECT_GE(took, 400ms);  // two intervals between three rounds
  // Every round shows the leader's two peers with their lag and last contact.
  std::size_t peer_lines = 0;
  for (std::size_t at = watch.out.find(" entries, last contact "); at != std::string::npos;
       at = watch.out.find(" entries, last contact ", at + 1)) {
    ++peer_lines;
  }
  EXPECT_EQ(peer_lines, 6u) << watch.out;

  CommandRun json = run_command(ctl + " --watch --count 2 --interval-ms 100 --json");
  ASSERT_EQ(json.exit_code, 0) << json.out;
  EXPECT_EQ(std::count(json.out.begin(), json.out.end(), '\n'), 6)
      << json.out;  // 2 rounds x 3 nodes
  EXPECT_NE(json.out.find("\"lag_entries\":"), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"last_contact_ms\":"), std::string::npos) << json.out;

  CommandRun too_fast = run_command(ctl + " --watch --interval-ms 5");
  EXPECT_EQ(too_fast.exit_code, 2) << too_fast.out;
  CommandRun count_without_watch = run_command(ctl + " --count 2");
  EXPECT_EQ(count_without_watch.exit_code, 2) << count_without_watch.out;
}

}  // namespace
}  // namespace raftlog::testing

// A new leader continues a snapshot transfer on a busy cluster (issue 15, item 4; docs/design.md,
// "Snapshot transfer", *A new leader continues*), over real raftlogd processes. A follower is
// stranded behind the leader's retention while 100,000 distinct dedup clients (the table's bound)
// append five times each (their table, about 20 MB, is nearly all of the snapshot); more new clients keep
// appending while the snapshot travels, so the two leaders' tables (and encodings) differ: the new
// leader has evicted the least recent clients the old one still carried, and its trailer differs. The leader is kill -9'd with
// the follower holding a few MiB; the new leader must continue the follower's partial after its
// last complete client block (saved bytes > 0, the follower spliced), the follower installs, and
// every acknowledged append is on every node.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cluster_test_support.h"
#include "snapshot_cluster_support.h"
#include "raftlog/v1/client.grpc.pb.h"
#include "testing/local_cluster.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;
namespace v1 = ::raftlog::v1;

constexpr int kAppendsPerMessage = 256;  // the node's default --max-appends-per-stream
// The node's default --dedup bounds: 100,000 clients, 64 sequences each. Five appends per client:
// 200 bytes of snapshot data per client, about 20 MB in all: far more than the dead leader's
// chunks in flight and in its sockets' buffers can bring the follower after the kill (with 9 MB,
// one run in two delivered the whole snapshot from the buffers, and nothing was left to continue).
constexpr int kInitialClients = 100'000;
constexpr std::uint64_t kAppendsPerClient = 5;

// Appends one one-entry append (sequence `sequence`) for each client id in [first_client, first_client + clients) to
// `address` over one AppendStream, kAppendsPerMessage appends per message and at most 8 messages
// unanswered, within `deadline`. Every acknowledged index and payload goes into *acknowledged
// (under *mu when given). Returns how many were acknowledged.
int append_from_clients(const std::string& address, std::uint64_t first_client, int clients,
                        Acknowledged* acknowledged, std::mutex* mu,
                        std::chrono::milliseconds deadline, std::uint64_t sequence = 1) {
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  auto stub = v1::Log::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + deadline);
  auto stream = stub->AppendStream(&context);
  int sent = 0;
  int answered = 0;
  int acked = 0;
  std::map<std::uint64_t, std::string> payloads;  // by request id (= client id)
  while (answered < clients) {
    while (sent < clients && sent - answered < 8 * kAppendsPerMessage) {
      v1::AppendStreamRequest request;
      const int in_message = std::min(kAppendsPerMessage, clients - sent);
      for (int i = 0; i < in_message; ++i) {
        const std::uint64_t client = first_client + static_cast<std::uint64_t>(sent + i);
        const std::string payload = "mc-" + std::to_string(client) + "-" + std::to_string(sequence);
        v1::AppendRequest* append = nullptr;
        if (i == 0) {
          request.set_request_id(client);
          append = request.mutable_append();
        } else {
          v1::AppendStreamItem* item = request.add_more();
          item->set_request_id(client);
          append = item->mutable_append();
        }
        append->add_entries(payload);
        append->set_client_id(client);
        append->set_sequence(sequence);
        payloads[client] = payload;
      }
      if (!stream->Write(request)) return acked;
      sent += in_message;
    }
    v1::AppendStreamResponse response;
    if (!stream->Read(&response)) return acked;
    for (const v1::AppendStreamResult& result : response.results()) {
      ++answered;
      if (result.code() != 0) continue;
      const std::uint64_t index = result.response().first_index();
      std::unique_lock<std::mutex> lock;
      if (mu != nullptr) lock = std::unique_lock<std::mutex>(*mu);
      (*acknowledged)[index] = payloads[result.request_id()];
      ++acked;
    }
  }
  stream->WritesDone();
  return acked;
}

// New clients appending in batches of kAppendsPerMessage to whichever of `endpoints` leads, from
// its own thread, until stopped (at most 2 minutes): the busy cluster.
class ManyClientLoad {
 public:
  ManyClientLoad(LocalCluster& cluster, std::vector<int> endpoints, std::uint64_t first_client)
      : thread_([this, &cluster, endpoints, first_client] {
          std::uint64_t next = first_client;
          const auto until = std::chrono::steady_clock::now() + 120s;
          std::size_t at = 0;
          while (!stop_ && std::chrono::steady_clock::now() < until) {
            const int id = endpoints[at % endpoints.size()];
            const int acked = append_from_clients(cluster.address(id), next, kAppendsPerMessage,
                                                  &acknowledged_, &mu_, 3s);
            next += kAppendsPerMessage;
            if (acked == 0) ++at;  // not the leader, or down: the next endpoint
            clients_ += kAppendsPerMessage;
            std::this_thread::sleep_for(20ms);
          }
        }) {}
  ~ManyClientLoad() { stop(); }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  Acknowledged acknowledged() {
    std::lock_guard lock(mu_);
    return acknowledged_;
  }
  int clients() const { return clients_; }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int> clients_{0};
  std::mutex mu_;
  Acknowledged acknowledged_;
  std::thread thread_;
};

TEST(SnapshotContinuationTest, ANewLeaderContinuesAPartialOfAnotherLeadersDataOnABusyCluster) {
  LocalClusterOptions options = small_segment_options(RAFTLOGD_PATH);
  options.metrics = true;
  options.extra_flags = {"--retention-follower-grace-ms=500"};
  LocalCluster cluster(options);
  Acknowledged acknowledged;
  const StrandedFollower stranded = strand_a_follower(cluster, &acknowledged);
  ASSERT_NE(stranded.first_leader, 0);
  const int first_leader = stranded.first_leader;
  const int follower = stranded.follower;
  client::Client* client = stranded.client.get();

  const auto load_started = std::chrono::steady_clock::now();
  for (std::uint64_t sequence = 1; sequence <= kAppendsPerClient; ++sequence) {
    ASSERT_EQ(append_from_clients(cluster.address(first_leader), 1'000'000, kInitialClients,
                                  &acknowledged, nullptr, 300s, sequence),
              kInitialClients)
        << cluster.log_tail(first_leader);
  }
  std::cout << kInitialClients << " clients appended " << kAppendsPerClient << " times in "
            << std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() -
                                                                load_started)
                   .count()
            << " s" << std::endl;
  const std::uint64_t last = append_entries(*client, 3, "f", &acknowledged);
  const int second = stranded.second;
  ASSERT_TRUE(cluster.wait_for_commit(second, last, 60s));
  // Past nearly all of it (a trim of many segments deletes them over several loop rounds): both
  // nodes' first index then lies in the last few segments, the same one on both (the same trim on
  // the same segment layout: the same snapshot point).
  const std::uint64_t first = trim_past(cluster, *client, first_leader, last + 1, last - 5000,
                                     120s);
  trim_past(cluster, *client, second, last + 1, last - 5000, 120s);
  ASSERT_TRUE(poll_until(
      [&] {
        auto a = cluster.status(first_leader);
        auto b = cluster.status(second);
        return a && b && a->first_index == b->first_index;
      },
      60s, 100ms))
      << "first index " << cluster.status(first_leader)->first_index << " and "
      << cluster.status(second)->first_index;
  const int leader = cluster.wait_for_leader();
  ASSERT_TRUE(leader == first_leader || leader == second) << "leader " << leader;
  const int other = 6 - leader - follower;

  // Busy from here on: new clients keep coming (the new leader's table will have evicted some of
  // the least recent clients the old leader's encoding carries).
  ManyClientLoad load(cluster, {leader, other}, 5'000'000);
  cluster.start(follower);
  const bool in_flight = kill_leader_mid_transfer(cluster, follower, leader, 2U << 20, 60s) > 0;
  ASSERT_TRUE(in_flight) << "the snapshot was never seen in flight: the kill tested nothing\n"
                         << cluster.log_tail(follower, 3000) << cluster.log_tail(leader, 3000);
  ASSERT_TRUE(wait_until_leading(cluster, other)) << cluster.log_tail(other);
  // More new clients on the new leader before its snapshot goes out (its retry timeout is 5 s).
  std::this_thread::sleep_for(2s);
  ASSERT_TRUE(poll_until(
      [&] {
        auto status = cluster.status(follower);
        return status.has_value() && status->commit_index >= last && !status->receiving_snapshot;
      },
      120s, 20ms))
      << cluster.log_tail(follower, 4000) << cluster.log_tail(other, 4000);
  load.stop();
  std::cout << load.clients() << " more clients appended meanwhile, "
            << load.acknowledged().size() << " acknowledged" << std::endl;

  const std::optional<client::NodeStatus> leading = cluster.status(other);
  const std::optional<client::NodeStatus> caught_up = cluster.status(follower);
  ASSERT_TRUE(leading && caught_up);
  std::cout << "new leader: " << leading->snapshots_continued << " continuation(s), "
            << leading->snapshot_resume_saved_bytes << " bytes saved, "
            << leading->snapshots_resumed << " offset resume(s); follower: "
            << caught_up->snapshot_partials_spliced << " spliced, "
            << caught_up->snapshot_splices_refused << " refused" << std::endl;
  EXPECT_GE(leading->snapshots_continued, 1U) << cluster.log_tail(other, 4000);
  EXPECT_GT(leading->snapshot_resume_saved_bytes, 1U << 20)
      << "the follower held at least 2 MiB: all but its last block kept";
  EXPECT_GE(caught_up->snapshot_partials_spliced, 1U) << cluster.log_tail(follower, 4000);
  EXPECT_EQ(caught_up->snapshot_splices_refused, 0U);
  // The spliced data itself was installed (review M2): the follower (restarted before the
  // transfer: fresh counters) received one whole snapshot, no second one after a refusal, and no
  // reassembled data failed its whole-data CRC.
  std::cout << "follower: " << caught_up->snapshots_received << " snapshot(s) received, "
            << caught_up->snapshot_chunks_refused << " chunk(s) refused or mismatched" << std::endl;
  EXPECT_EQ(caught_up->snapshots_received, 1U) << cluster.log_tail(follower, 4000);

  for (const auto& [index, payload] : load.acknowledged()) acknowledged[index] = payload;
  expect_all_converge(cluster, leader, acknowledged, first, 3, ConvergeTimeouts{60s, 60s});
}

}  // namespace
}  // namespace raftlog::testing

// The public gRPC API over a real 3-node cluster: every error case returns its status (and leaves
// the log unchanged), redirects name the leader, and idempotent retries return the original indexes
// across a leader change and across restarts of every node.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <thread>

#include "api_errors/error_info.h"
#include "client/producer.h"
#include "testing/local_cluster.h"
#include "raftlog/v1/client.grpc.pb.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;
namespace v1 = ::raftlog::v1;

std::unique_ptr<v1::Log::Stub> stub(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(64 << 20);
  args.SetMaxReceiveMessageSize(64 << 20);
  return v1::Log::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
}

grpc::Status append(v1::Log::Stub& s, const std::vector<std::string>& entries,
                    std::uint64_t client_id, std::uint64_t sequence, v1::AppendResponse* response,
                    grpc::ClientContext* context = nullptr) {
  grpc::ClientContext local;
  grpc::ClientContext* ctx = context != nullptr ? context : &local;
  ctx->set_deadline(std::chrono::system_clock::now() + 5s);
  v1::AppendRequest request;
  for (const auto& e : entries) request.add_entries(e);
  request.set_client_id(client_id);
  request.set_sequence(sequence);
  return s.Append(ctx, request, response);
}

class ApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LocalClusterOptions options;
    options.raftlogd_path = RAFTLOGD_PATH;
    options.max_entry_size_bytes = 1024;
    options.extra_flags = {"--max-entries-per-append", "8"};
    cluster_ = std::make_unique<LocalCluster>(options);
    cluster_->start_all();
    leader_ = cluster_->wait_for_leader();
    ASSERT_NE(leader_, 0) << cluster_->log_tail(1);
  }
  std::uint64_t last_index(int id) {
    auto s = cluster_->status(id);
    return s ? s->last_index : 0;
  }
  std::unique_ptr<LocalCluster> cluster_;
  int leader_ = 0;
};

TEST_F(ApiTest, BadRequestsGetSpecificStatusesAndChangeNothing) {
  auto leader = stub(cluster_->address(leader_));
  v1::AppendResponse ok_response;
  ASSERT_TRUE(append(*leader, {"seed"}, 0, 0, &ok_response).ok());
  ASSERT_TRUE(cluster_->wait_for_commit(leader_, ok_response.last_index()));
  const std::uint64_t last_before = last_index(leader_);

  v1::AppendResponse response;
  EXPECT_EQ(append(*leader, {}, 0, 0, &response).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  grpc::Status too_large = append(*leader, {std::string(1025, 'x')}, 0, 0, &response);
  EXPECT_EQ(too_large.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(too_large.error_message().find("maximum entry size"), std::string::npos)
      << too_large.error_message();
  grpc::Status too_many = append(*leader, std::vector<std::string>(9, "e"), 0, 0, &response);
  EXPECT_EQ(too_many.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(too_many.error_message().find("too many entries"), std::string::npos)
      << too_many.error_message();

  // Reads: index 0, past the end.
  {
    grpc::ClientContext ctx;
    v1::ReadRequest request;
    request.set_from_index(0);
    v1::ReadResponse read;
    EXPECT_EQ(leader->Read(&ctx, request, &read).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    grpc::ClientContext ctx;
    v1::ReadRequest request;
    request.set_from_index(last_before + 100);
    v1::ReadResponse read;
    grpc::Status st = leader->Read(&ctx, request, &read);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::OUT_OF_RANGE);
    EXPECT_NE(st.error_message().find("past the committed end"), std::string::npos)
        << st.error_message();
  }

  // A follower refuses writes and names the leader, in the message and in ErrorInfo (once it has
  // heard from the leader: until then it says NO_LEADER).
  const int follower = leader_ == 1 ? 2 : 1;
  ASSERT_TRUE(cluster_->wait_for_commit(follower, ok_response.last_index()))
      << cluster_->log_tail(follower);
  auto f = stub(cluster_->address(follower));
  grpc::ClientContext ctx;
  grpc::Status redirected = append(*f, {"x"}, 0, 0, &response, &ctx);
  EXPECT_EQ(redirected.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  auto details = api_errors::error_details(ctx);
  ASSERT_TRUE(details.has_value());
  EXPECT_EQ(details->leader_id, static_cast<std::uint64_t>(leader_));
  EXPECT_EQ(details->leader_address, cluster_->address(leader_));
  EXPECT_NE(redirected.error_message().find(cluster_->address(leader_)), std::string::npos);

  EXPECT_EQ(last_index(leader_), last_before) << "a bad request changed the log";
}

TEST_F(ApiTest, IdempotentRetryReturnsOriginalIndexesAcrossLeaderChangeAndRestart) {
  const std::uint64_t client_id = 0xC0FFEE;
  auto leader = stub(cluster_->address(leader_));
  v1::AppendResponse first;
  ASSERT_TRUE(append(*leader, {"once-a", "once-b"}, client_id, 1, &first).ok());
  EXPECT_FALSE(first.duplicate());

  // Same node, immediate retry.
  v1::AppendResponse retry;
  ASSERT_TRUE(append(*leader, {"once-a", "once-b"}, client_id, 1, &retry).ok());
  EXPECT_TRUE(retry.duplicate());
  EXPECT_EQ(retry.first_index(), first.first_index());
  EXPECT_EQ(retry.last_index(), first.last_index());

  // New leader after kill -9 of the old one.
  for (int id = 1; id <= 3; ++id) ASSERT_TRUE(cluster_->wait_for_commit(id, first.last_index()));
  cluster_->kill(leader_);
  const int new_leader = cluster_->wait_for_leader(10s, {leader_});
  ASSERT_NE(new_leader, 0);
  auto second_leader = stub(cluster_->address(new_leader));
  v1::AppendResponse after_failover;
  grpc::Status st = append(*second_leader, {"once-a", "once-b"}, client_id, 1, &after_failover);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(after_failover.duplicate());
  EXPECT_EQ(after_failover.first_index(), first.first_index());
  EXPECT_EQ(after_failover.last_index(), first.last_index());

  // Every node restarted: the dedup table is rebuilt from the log.
  cluster_->start(leader_);
  for (int id = 1; id <= 3; ++id) {
    if (cluster_->running(id)) {
      EXPECT_EQ(cluster_->stop(id), 0) << cluster_->log_tail(id);
    }
  }
  cluster_->start_all();
  const int third_leader = cluster_->wait_for_leader();
  ASSERT_NE(third_leader, 0);
  auto after_restart_stub = stub(cluster_->address(third_leader));
  v1::AppendResponse after_restart;
  st = append(*after_restart_stub, {"once-a", "once-b"}, client_id, 1, &after_restart);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(after_restart.duplicate());
  EXPECT_EQ(after_restart.first_index(), first.first_index());

  // Exactly one copy in the log.
  int copies = 0;
  for (const client::Entry& e : cluster_->read_all(third_leader))
    copies += e.payload == "once-a" ? 1 : 0;
  EXPECT_EQ(copies, 1);

  // A new sequence is a new append.
  v1::AppendResponse next;
  ASSERT_TRUE(append(*after_restart_stub, {"twice"}, client_id, 2, &next).ok());
  EXPECT_FALSE(next.duplicate());
  EXPECT_GT(next.first_index(), first.last_index());
}

// Idempotency is exact, through the public API: a retry with other entries (contents or count) is
// FAILED_PRECONDITION / SEQUENCE_REUSED and writes nothing, on the leader that wrote the append and
// on a new leader that holds it from replication; the exact retry is still OK, duplicate, same
// range. A client library that restarts with a fixed client_id and sequence 1 is told, not fooled.
TEST_F(ApiTest, ARetryWithOtherEntriesIsRefusedAndTheExactRetryIsADuplicate) {
  const std::uint64_t client_id = 0xD1FF;
  auto leader = stub(cluster_->address(leader_));
  v1::AppendResponse first;
  ASSERT_TRUE(append(*leader, {"one", "two"}, client_id, 1, &first).ok());
  auto expect_refused = [&](v1::Log::Stub& node, const std::vector<std::string>& entries) {
    grpc::ClientContext ctx;
    v1::AppendResponse response;
    const grpc::Status st = append(node, entries, client_id, 1, &response, &ctx);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
        << entries.size() << ": " << st.error_message();
    const auto details = api_errors::error_details(ctx);
    ASSERT_TRUE(details.has_value());
    EXPECT_EQ(details->reason, api_errors::reason::kSequenceReused);
  };
  auto expect_duplicate = [&](v1::Log::Stub& node) {
    v1::AppendResponse retry;
    const grpc::Status st = append(node, {"one", "two"}, client_id, 1, &retry);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_TRUE(retry.duplicate());
    EXPECT_EQ(retry.first_index(), first.first_index());
    EXPECT_EQ(retry.last_index(), first.last_index());
  };
  const std::vector<std::vector<std::string>> others{
      {"one", "TWO"}, {"one"}, {"one", "two", "three"}};
  for (const auto& entries : others) expect_refused(*leader, entries);
  expect_duplicate(*leader);

  // Sequence 0 with a client_id is refused outright.
  {
    grpc::ClientContext ctx;
    v1::AppendResponse response;
    EXPECT_EQ(append(*leader, {"zero"}, client_id, 0, &response, &ctx).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
    const auto details = api_errors::error_details(ctx);
    ASSERT_TRUE(details.has_value());
    EXPECT_EQ(details->reason, api_errors::reason::kBadSequence);
  }

  // The library restarted with the same fixed id starts again at sequence 1, with new data: refused
  // at once (not retried), where the old answer was "OK, duplicate" and the data was dropped.
  client::Options options;
  options.client_id = client_id;
  auto restarted = cluster_->client(options);
  auto reused = restarted->append({"new data"});
  ASSERT_FALSE(reused.ok());
  EXPECT_EQ(reused.status().code(), client::StatusCode::kFailedPrecondition)
      << reused.status().to_string();
  ASSERT_TRUE(reused.status().details().has_value());
  EXPECT_EQ(reused.status().details()->reason, api_errors::reason::kSequenceReused);

  // A new leader knows the append from replication (not from its own proposal) and compares as exactly.
  for (int id = 1; id <= 3; ++id) ASSERT_TRUE(cluster_->wait_for_commit(id, first.last_index()));
  const std::uint64_t last_before = last_index(leader_);
  cluster_->kill(leader_);
  const int new_leader = cluster_->wait_for_leader(10s, {leader_});
  ASSERT_NE(new_leader, 0);
  auto second = stub(cluster_->address(new_leader));
  for (const auto& entries : others) expect_refused(*second, entries);
  expect_duplicate(*second);
  int copies = 0;
  for (const client::Entry& e : cluster_->read_all(new_leader)) {
    EXPECT_TRUE(e.payload != "TWO" && e.payload != "three" && e.payload != "new data" &&
                e.payload != "zero");
    copies += e.payload == "one" ? 1 : 0;
  }
  EXPECT_EQ(copies, 1);
  EXPECT_LE(last_index(new_leader), last_before + 1) << "only the new leader's no-op was added";
}

TEST_F(ApiTest, GracefulStopExitsZeroAndRestartsWithNormalRecovery) {
  auto c = cluster_->client();
  auto r = c->append({"durable"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  for (int id = 1; id <= 3; ++id) ASSERT_TRUE(cluster_->wait_for_commit(id, r->last_index));
  const int follower = leader_ == 1 ? 2 : 1;
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(cluster_->stop(follower), 0) << cluster_->log_tail(follower);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
  cluster_->start(follower);
  ASSERT_TRUE(cluster_->wait_for_commit(follower, r->last_index)) << cluster_->log_tail(follower);
  EXPECT_NE(cluster_->log_tail(follower).find("mode=normal"), std::string::npos)
      << "a clean shutdown should recover in normal mode:\n"
      << cluster_->log_tail(follower);
}

// Twelve threads share one Producer against the real cluster, which accepts at most 8 entries per
// Append: batches of up to 32 are refused as a whole (INVALID_ARGUMENT, nothing written) and resent
// one by one, and one oversized entry fails alone. Every acknowledged entry is in the log, once, at
// the index its caller was given.
TEST_F(ApiTest, ProducerCoalescesConcurrentAppendsAndEveryAcknowledgedEntryIsInTheLog) {
  client::ProducerOptions options;
  auto endpoints = client::parse_endpoints(cluster_->endpoints());
  ASSERT_TRUE(endpoints.ok());
  options.client.endpoints = endpoints.value();
  options.lanes = 2;
  options.max_batch_entries = 32;
  auto created = client::Producer::create(options);
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  client::Producer& producer = *created.value();

  constexpr int kThreads = 12;
  constexpr int kAppendsPerThread = 20;
  std::mutex mu;
  std::map<std::uint64_t, std::string> acknowledged;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kAppendsPerThread; ++i) {
        const bool oversized = t == 0 && i == 5;
        const std::string payload =
            oversized ? std::string(2000, 'X') : "p" + std::to_string(t) + "-" + std::to_string(i);
        auto result = producer.append(payload);
        if (oversized) {
          EXPECT_FALSE(result.ok());
          EXPECT_EQ(result.status().code(), client::StatusCode::kInvalidArgument)
              << result.status().to_string();
          continue;
        }
        ASSERT_TRUE(result.ok()) << payload << ": " << result.status().to_string();
        std::lock_guard lock(mu);
        EXPECT_TRUE(acknowledged.emplace(result->first_index, payload).second)
            << "index given twice";
      }
    });
  }
  for (auto& thread : threads) thread.join();
  ASSERT_EQ(acknowledged.size(), static_cast<std::size_t>(kThreads * kAppendsPerThread - 1));
  ASSERT_TRUE(cluster_->wait_for_commit(leader_, acknowledged.rbegin()->first));
  std::map<std::uint64_t, std::string> in_log;
  for (const client::Entry& entry : cluster_->read_all(leader_)) {
    if (entry.type == client::EntryType::kNormal) in_log.emplace(entry.index, entry.payload);
  }
  for (const auto& [index, payload] : acknowledged) {
    auto found = in_log.find(index);
    ASSERT_NE(found, in_log.end()) << "acknowledged index " << index << " missing";
    EXPECT_EQ(found->second, payload) << "index " << index;
  }
  EXPECT_EQ(in_log.size(),
            acknowledged.size());  // nothing else written: no duplicate, no oversized entry
  EXPECT_GT(producer.stats().rpcs, 0u);
}

}  // namespace
}  // namespace raftlog::testing

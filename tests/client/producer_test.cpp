// The Producer against a fake Log service on 127.0.0.1: appends that arrive while every lane is busy
// share the next RPC, each caller gets its own entry's index, batch bounds hold, an invalid entry fails
// alone, other failures are shared by the batch, and the queue bound refuses without writing.
#include "client/producer.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "api_errors/error_info.h"
#include "fake_log.h"

namespace raftlog::client {
namespace {

// The fake node refuses appends as raftlogd does, through the ErrorInfo mapping both sides share.
using api_errors::error_status;
using namespace std::chrono_literals;

// Holds Append handlers until opened (bounded wait, so a broken test cannot hang).
class Gate {
 public:
  void open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, 10s, [&] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

// A leader that hands out consecutive indexes, holding the calls numbered <= held_calls at the gate.
// It keeps where it placed each payload under the same lock that assigns the index: the order in which
// FakeLog recorded concurrent calls is not the order in which they reach this lock.
struct GatedLeader {
  FakeNode node{1};
  Gate gate;
  std::mutex mu;
  std::uint64_t next_index = 1;
  std::map<std::uint64_t, std::string> placed;  // index -> payload, guarded by mu

  explicit GatedLeader(int held_calls) {
    node.log.on_append = [this, held_calls](grpc::ServerContext* context, int call,
                                            const pb::AppendRequest& request,
                                            pb::AppendResponse* response) {
      if (call <= held_calls) gate.wait();
      for (const std::string& entry : request.entries()) {
        if (entry == "too big") {
          ErrorDetails details;
          details.reason = std::string(reason::kEntryTooLarge);
          return error_status(context, grpc::StatusCode::INVALID_ARGUMENT,
                              "entry exceeds the limit", details);
        }
        if (entry == "disk full") {
          ErrorDetails details;
          details.reason = "DISK_FULL";
          return error_status(context, grpc::StatusCode::RESOURCE_EXHAUSTED,
                              "disk full on the leader", details);
        }
      }
      std::lock_guard lock(mu);
      const grpc::Status status = accept_append(request, response, next_index);
      for (const std::string& entry : request.entries()) placed.emplace(next_index++, entry);
      return status;
    };
  }
};

ProducerOptions producer_options(const std::string& endpoint, std::size_t lanes) {
  ProducerOptions options;
  options.client = fast_options({endpoint});
  options.lanes = lanes;
  return options;
}

std::unique_ptr<Producer> make_producer(const ProducerOptions& options) {
  auto created = Producer::create(options);
  EXPECT_TRUE(created.ok()) << created.status().to_string();
  return std::move(created).value();
}

// Waits (bounded) until `count` entries are queued behind busy lanes.
bool wait_until_queued(const Producer& producer, std::size_t count) {
  for (int i = 0; i < 1000; ++i) {
    if (producer.stats().queued == count) return true;
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

bool wait_until_calls(const FakeNode& node, std::size_t count) {
  for (int i = 0; i < 1000; ++i) {
    if (node.log.append_calls() == count) return true;
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

// Starts one thread per payload, each calling append once; results by payload.
class Callers {
 public:
  Callers(Producer& producer, const std::vector<std::string>& payloads) {
    for (const std::string& payload : payloads) {
      threads_.emplace_back([this, &producer, payload] {
        auto result = producer.append(payload);
        std::lock_guard lock(mu_);
        results_.emplace(payload, std::move(result));
      });
    }
  }
  std::map<std::string, Result<AppendResult>> join() {
    for (auto& thread : threads_) thread.join();
    threads_.clear();
    return std::move(results_);
  }
  ~Callers() {
    for (auto& thread : threads_) thread.join();
  }

 private:
  std::mutex mu_;
  std::vector<std::thread> threads_;
  std::map<std::string, Result<AppendResult>> results_;
};

std::vector<std::string> numbered(const std::string& prefix, int count) {
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) out.push_back(prefix + std::to_string(i));
  return out;
}

using Results = std::map<std::string, Result<AppendResult>>;

// A one-lane Producer whose lane is held busy by a first append ("first") that the fake leader keeps
// at its gate: what callers append next queues up, and the RPCs after the gate opens carry it.
struct BusyLane {
  GatedLeader leader{1};
  std::unique_ptr<Producer> producer;
  std::optional<Callers> first;

  explicit BusyLane(const std::function<void(ProducerOptions&)>& adjust = {}) {
    ProducerOptions options = producer_options(leader.node.address(), 1);
    if (adjust) adjust(options);
    producer = make_producer(options);
    first.emplace(*producer, std::vector<std::string>{"first"});
  }

  // Appends each payload from its own thread behind the busy lane, asserts that all of them queued,
  // opens the gate and collects every result (the first append's into *first_results, if given).
  void release_with(const std::vector<std::string>& payloads, Results* results,
                    Results* first_results = nullptr) {
    ASSERT_TRUE(wait_until_calls(leader.node, 1));
    Callers queued(*producer, payloads);
    ASSERT_TRUE(wait_until_queued(*producer, payloads.size()));
    leader.gate.open();
    *results = queued.join();
    Results first_done = first->join();
    if (first_results != nullptr) *first_results = std::move(first_done);
  }
};

TEST(Producer, AppendsThatArriveWhileTheLaneIsBusyShareTheNextRpc) {
  BusyLane busy;
  Results results;
  Results first_result;
  ASSERT_NO_FATAL_FAILURE(busy.release_with(numbered("e", 10), &results, &first_result));
  const GatedLeader& leader = busy.leader;

  ASSERT_TRUE(first_result.at("first").ok()) << first_result.at("first").status().to_string();
  EXPECT_EQ(first_result.at("first")->first_index, 1u);
  const auto requests = leader.node.log.appends();
  ASSERT_EQ(requests.size(), 2u);
  ASSERT_EQ(requests[1].entries_size(), 10);
  EXPECT_EQ(requests[0].client_id(), requests[1].client_id());  // one lane, one client id
  EXPECT_EQ(requests[1].sequence(), requests[0].sequence() + 1);
  // Each caller's index is its entry's position in the shared request.
  for (int position = 0; position < requests[1].entries_size(); ++position) {
    const auto& result = results.at(requests[1].entries(position));
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    EXPECT_EQ(result->first_index, 2u + static_cast<std::uint64_t>(position));
    EXPECT_EQ(result->last_index, result->first_index);
    EXPECT_EQ(result->sequence, requests[1].sequence());
    EXPECT_EQ(result->term, 3u);
  }
  const Producer::Stats stats = busy.producer->stats();
  EXPECT_EQ(stats.rpcs, 2u);
  EXPECT_EQ(stats.entries, 11u);
  EXPECT_EQ(stats.queued, 0u);
}

TEST(Producer, BatchesRespectTheEntryAndByteBounds) {
  BusyLane by_count([](ProducerOptions& o) {
    o.max_batch_entries = 3;
    o.max_batch_bytes = 40;  // "b" + 19 bytes: two payloads of 20 bytes fit
  });
  Results results;
  ASSERT_NO_FATAL_FAILURE(by_count.release_with(numbered("s", 7), &results));
  for (const auto& [payload, result] : results) EXPECT_TRUE(result.ok()) << payload;
  auto requests = by_count.leader.node.log.appends();
  ASSERT_EQ(requests.size(), 4u);  // first, then 3 + 3 + 1
  EXPECT_EQ(requests[1].entries_size(), 3);
  EXPECT_EQ(requests[2].entries_size(), 3);
  EXPECT_EQ(requests[3].entries_size(), 1);

  BusyLane by_bytes([](ProducerOptions& o) { o.max_batch_bytes = 40; });
  std::vector<std::string> twenty_byte_payloads;
  for (int i = 0; i < 5; ++i)
    twenty_byte_payloads.push_back("b" + std::to_string(i) + std::string(18, 'x'));
  twenty_byte_payloads.push_back(std::string(100, 'L'));  // larger than the bound: goes alone
  ASSERT_NO_FATAL_FAILURE(by_bytes.release_with(twenty_byte_payloads, &results));
  for (const auto& [payload, result] : results) EXPECT_TRUE(result.ok()) << payload.substr(0, 4);
  requests = by_bytes.leader.node.log.appends();
  std::size_t entries = 0;
  for (std::size_t i = 1; i < requests.size(); ++i) {
    std::size_t bytes = 0;
    for (const std::string& entry : requests[i].entries()) bytes += entry.size();
    EXPECT_TRUE(bytes <= 40 || requests[i].entries_size() == 1)
        << "request " << i << " carries " << bytes;
    entries += static_cast<std::size_t>(requests[i].entries_size());
  }
  EXPECT_EQ(entries, 6u);
  EXPECT_GE(requests.size(),
            1u + 4u);  // 2 + 2 + 1 twenty-byte payloads in some order, and the large one
}

TEST(Producer, AnInvalidEntryFailsAloneAndTheRestOfItsBatchIsResentOneByOne) {
  BusyLane busy;
  std::vector<std::string> payloads = numbered("ok", 4);
  payloads.push_back("too big");
  Results results;
  ASSERT_NO_FATAL_FAILURE(busy.release_with(payloads, &results));
  std::set<std::uint64_t> indexes;
  for (const auto& [payload, result] : results) {
    if (payload == "too big") {
      ASSERT_FALSE(result.ok());
      EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
      ASSERT_TRUE(result.status().details().has_value());
      EXPECT_EQ(result.status().details()->reason, reason::kEntryTooLarge);
    } else {
      ASSERT_TRUE(result.ok()) << payload << ": " << result.status().to_string();
      indexes.insert(result->first_index);
    }
  }
  EXPECT_EQ(indexes, (std::set<std::uint64_t>{2, 3, 4, 5}));  // the refused batch wrote nothing
  const auto requests = busy.leader.node.log.appends();
  ASSERT_EQ(requests.size(), 1u + 1u + 5u);  // first, the refused batch, five single resends
  EXPECT_EQ(requests[1].entries_size(), 5);
  for (std::size_t i = 2; i < requests.size(); ++i) {
    EXPECT_EQ(requests[i].entries_size(), 1);
    EXPECT_EQ(requests[i].sequence(),
              requests[i - 1].sequence() + 1);  // each resend its own sequence
  }
}

TEST(Producer, AnyOtherFailureIsSharedByTheWholeBatch) {
  BusyLane busy;
  std::vector<std::string> payloads = numbered("x", 3);
  payloads.push_back("disk full");
  Results results;
  ASSERT_NO_FATAL_FAILURE(busy.release_with(payloads, &results));
  for (const auto& [payload, result] : results) {
    ASSERT_FALSE(result.ok()) << payload;
    EXPECT_EQ(result.status().code(), StatusCode::kResourceExhausted) << payload;
  }
  EXPECT_EQ(busy.leader.node.log.append_calls(), 2u);  // no resend: the outcome is the batch's
}

TEST(Producer, LanesRunRpcsAtOnceEachWithItsOwnClientId) {
  GatedLeader leader(2);
  auto producer = make_producer(producer_options(leader.node.address(), 2));
  Callers callers(*producer, {"a", "b"});
  ASSERT_TRUE(wait_until_calls(leader.node, 2));  // both in flight: neither waited for the other
  leader.gate.open();
  for (const auto& [payload, result] : callers.join()) ASSERT_TRUE(result.ok()) << payload;
  const auto requests = leader.node.log.appends();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_NE(requests[0].client_id(), requests[1].client_id());
  EXPECT_NE(requests[0].client_id(), 0u);
}

TEST(Producer, AFullQueueRefusesWithoutWriting) {
  BusyLane busy([](ProducerOptions& o) { o.max_queued_entries = 2; });
  GatedLeader& leader = busy.leader;
  Producer* producer = busy.producer.get();
  ASSERT_TRUE(wait_until_calls(leader.node, 1));
  Callers queued(*producer, {"q1", "q2"});
  ASSERT_TRUE(wait_until_queued(*producer, 2));
  auto refused = producer->append("one too many");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("producer queue full"), std::string::npos);
  leader.gate.open();
  for (const auto& [payload, result] : queued.join()) EXPECT_TRUE(result.ok()) << payload;
  busy.first->join();
  for (const pb::AppendRequest& request : leader.node.log.appends()) {
    for (const std::string& entry : request.entries()) EXPECT_NE(entry, "one too many");
  }
}

TEST(Producer, ManyThreadsEachGetDistinctIndexesForEveryEntry) {
  GatedLeader leader(0);
  auto producer = make_producer(producer_options(leader.node.address(), 3));
  constexpr int kThreads = 16;
  constexpr int kAppendsPerThread = 50;
  std::mutex mu;
  std::map<std::uint64_t, std::string> by_index;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::uint64_t previous = 0;
      for (int i = 0; i < kAppendsPerThread; ++i) {
        const std::string payload = "t" + std::to_string(t) + "-" + std::to_string(i);
        auto result = producer->append(payload);
        ASSERT_TRUE(result.ok()) << result.status().to_string();
        EXPECT_GT(result->first_index, previous);  // a thread's appends are in its order
        previous = result->first_index;
        std::lock_guard lock(mu);
        EXPECT_TRUE(by_index.emplace(result->first_index, payload).second) << "index given twice";
      }
    });
  }
  for (auto& thread : threads) thread.join();
  ASSERT_EQ(by_index.size(), static_cast<std::size_t>(kThreads * kAppendsPerThread));
  // The index each caller got is where the fake leader placed exactly that payload.
  std::lock_guard lock(leader.mu);
  EXPECT_EQ(leader.placed, by_index);
  EXPECT_EQ(producer->stats().entries, static_cast<std::uint64_t>(kThreads * kAppendsPerThread));
}

TEST(Producer, OptionsAreChecked) {
  ProducerOptions options = producer_options("127.0.0.1:1", 1);
  EXPECT_EQ(validate_producer_options(options), "");
  auto with = [&](auto change) {
    ProducerOptions changed = options;
    change(changed);
    return validate_producer_options(changed);
  };
  EXPECT_NE(with([](ProducerOptions& o) { o.client.client_id = 5; }).find("client_id must be 0"),
            std::string::npos);
  EXPECT_NE(with([](ProducerOptions& o) { o.lanes = 0; }).find("lanes"), std::string::npos);
  EXPECT_NE(with([](ProducerOptions& o) { o.lanes = kMaxProducerLanes + 1; }).find("lanes"),
            std::string::npos);
  EXPECT_NE(with([](ProducerOptions& o) { o.max_batch_entries = 0; }).find("max_batch_entries"),
            std::string::npos);
  EXPECT_NE(with([](ProducerOptions& o) { o.max_batch_entries = 1025; }).find("max_batch_entries"),
            std::string::npos);
  EXPECT_NE(with([](ProducerOptions& o) { o.max_batch_bytes = 0; }).find("max_batch_bytes"),
            std::string::npos);
  EXPECT_NE(with([](ProducerOptions& o) { o.max_queued_entries = 0; }).find("max_queued_entries"),
            std::string::npos);
  EXPECT_NE(with([](ProducerOptions& o) { o.client.endpoints.clear(); }), "");
  auto refused = Producer::create([&] {
    ProducerOptions o = options;
    o.lanes = 0;
    return o;
  }());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace raftlog::client

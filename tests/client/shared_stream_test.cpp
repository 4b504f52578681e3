// Client::append() of many Clients in one process over the shared AppendStream (Options::
// share_append_stream) against fake nodes on 127.0.0.1: appends queued at the same moment leave in
// one message on one stream; each keeps its own answer, refusal, redirect, sequence and retry; a
// broken stream fails every append on it and each is retried with its own sequence; a node that
// does not announce several appends per message gets one message per append.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "fake_log.h"
#include "shared/loopback.h"

namespace raftlog::client {
namespace {

using namespace std::chrono_literals;
using Stream = grpc::ServerReaderWriter<pb::AppendStreamResponse, pb::AppendStreamRequest>;

// One append of a message as the fake read it.
struct SeenAppend {
  std::uint64_t request_id;
  const pb::AppendRequest* append;
};

std::vector<SeenAppend> appends_of(const pb::AppendStreamRequest& message) {
  std::vector<SeenAppend> appends{{message.request_id(), &message.append()}};
  for (const pb::AppendStreamItem& item : message.more()) {
    appends.push_back({item.request_id(), &item.append()});
  }
  return appends;
}

// What the fakes saw: per message, its appends' (client_id, sequence, first payload).
struct SeenMessages {
  struct Append {
    std::uint64_t client_id;
    std::uint64_t sequence;
    std::string payload;
  };
  std::mutex mu;
  std::vector<std::vector<Append>> messages;
  void add(const pb::AppendStreamRequest& message) {
    std::vector<Append> appends;
    for (const SeenAppend& seen : appends_of(message)) {
      appends.push_back({seen.append->client_id(), seen.append->sequence(),
                         seen.append->entries_size() > 0 ? seen.append->entries(0) : ""});
    }
    std::lock_guard lock(mu);
    messages.push_back(std::move(appends));
  }
  std::vector<std::vector<Append>> get() {
    std::lock_guard lock(mu);
    return messages;
  }
  std::size_t count() {
    std::lock_guard lock(mu);
    return messages.size();
  }
};

// A fake node's stream handler: answers every append of every message OK with consecutive indexes
// from `first_index` (or with what `refuse` returns for it), announcing `announce` appends per
// message (0: like an older node). The first message of the first call is answered only after
// `hold_first`, so that other Clients queue meanwhile.
struct FakeStreamNode {
  std::function<bool(const pb::AppendRequest&, pb::AppendStreamResult*)> refuse;
  std::uint32_t announce = 256;
  std::chrono::milliseconds hold_first{0};
  std::uint64_t first_index = 1;
  SeenMessages seen;
  std::atomic<std::uint64_t> next_index{0};

  FakeLog::AppendStreamHandler handler() {
    next_index = first_index;
    return [this](grpc::ServerContext*, int call, Stream* stream) {
      pb::AppendStreamRequest message;
      bool first = true;
      while (stream->Read(&message)) {
        seen.add(message);
        if (first && call == 1) std::this_thread::sleep_for(hold_first);
        first = false;
        pb::AppendStreamResponse answer;
        answer.set_max_appends_per_message(announce);
        for (const SeenAppend& seen_append : appends_of(message)) {
          pb::AppendStreamResult* result = answer.add_results();
          result->set_request_id(seen_append.request_id);
          if (refuse && refuse(*seen_append.append, result)) continue;
          const auto entries = static_cast<std::uint64_t>(seen_append.append->entries_size());
          const std::uint64_t first_of_append = next_index.fetch_add(entries);
          result->mutable_response()->set_first_index(first_of_append);
          result->mutable_response()->set_last_index(first_of_append + entries - 1);
          result->mutable_response()->set_term(7);
        }
        if (!stream->Write(answer)) break;
      }
      return grpc::Status::OK;
    };
  }
};

// Runs `first` alone until the fake has its message, then every one of `others` at once, each on
// its own thread; returns when all have returned.
void first_then_together(SeenMessages& seen, const std::function<void()>& first,
                         const std::vector<std::function<void()>>& others) {
  std::thread first_thread(first);
  ASSERT_TRUE(raftlog::testing::eventually([&] { return seen.count() >= 1; }, 5s));
  std::vector<std::thread> threads;
  for (const auto& other : others) threads.emplace_back(other);
  for (auto& thread : threads) thread.join();
  first_thread.join();
}

TEST(SharedStream, AppendsOfManyClientsWaitingTogetherLeaveInOneMessageOnOneStream) {
  FakeNode node(1);
  FakeStreamNode fake;
  fake.hold_first = 300ms;
  node.log.on_append_stream = fake.handler();
  constexpr int kClients = 8;
  constexpr int kRounds = 4;
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(make_client(fast_options({node.address()})));
  std::vector<std::vector<Result<AppendResult>>> results(kClients);
  const auto run = [&](int i) {
    return [&, i] {
      for (int round = 0; round < kRounds; ++round) {
        results[static_cast<std::size_t>(i)].push_back(
            clients[static_cast<std::size_t>(i)]->append({"c" + std::to_string(i), "x"}));
      }
    };
  };
  std::vector<std::function<void()>> others;
  for (int i = 1; i < kClients; ++i) others.push_back(run(i));
  // Client 0's first append holds the stream for 300 ms: the others queue meanwhile.
  first_then_together(fake.seen, run(0), others);

  EXPECT_EQ(node.log.append_stream_calls(), 1);  // one stream for all eight Clients
  EXPECT_EQ(node.log.append_calls(), 0u);
  const auto messages = fake.seen.get();
  ASSERT_GE(messages.size(), 2u);
  EXPECT_EQ(messages[0].size(), 1u);  // alone: the node had not announced its bound yet
  // The seven queued (and client 0 again when it queued before the next writer woke).
  EXPECT_GE(messages[1].size(), static_cast<std::size_t>(kClients - 1));
  EXPECT_LT(messages.size(), static_cast<std::size_t>(kClients * kRounds));
  // Every append answered with its own range; each Client's sequences in order, one per append.
  std::set<std::uint64_t> firsts;
  std::map<std::uint64_t, std::vector<std::uint64_t>> sequences_by_client;
  for (const auto& message : messages) {
    for (const auto& append : message) {
      sequences_by_client[append.client_id].push_back(append.sequence);
    }
  }
  for (int i = 0; i < kClients; ++i) {
    const auto& mine = results[static_cast<std::size_t>(i)];
    ASSERT_EQ(mine.size(), static_cast<std::size_t>(kRounds));
    for (int round = 0; round < kRounds; ++round) {
      const auto& result = mine[static_cast<std::size_t>(round)];
      ASSERT_TRUE(result.ok()) << i << "/" << round << ": " << result.status().to_string();
      EXPECT_EQ(result->last_index, result->first_index + 1);
      EXPECT_EQ(result->sequence, static_cast<std::uint64_t>(round) + 1);
      EXPECT_TRUE(firsts.insert(result->first_index).second) << "index given twice";
    }
    EXPECT_EQ(sequences_by_client[clients[static_cast<std::size_t>(i)]->client_id()],
              (std::vector<std::uint64_t>{1, 2, 3, 4}));
  }
}

TEST(SharedStream, ARefusedOrRedirectedAppendFailsAloneAndTheOthersOfItsMessageCommit) {
  FakeNode leader(2);
  FakeStreamNode leader_fake;
  leader_fake.first_index = 900;
  leader.log.on_append_stream = leader_fake.handler();
  const std::string leader_address = leader.address();

  FakeNode node(1);
  FakeStreamNode fake;
  fake.hold_first = 300ms;
  fake.refuse = [leader_address](const pb::AppendRequest& append, pb::AppendStreamResult* result) {
    if (append.entries(0) == "big") {
      result->set_code(static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
      result->set_message("entry too large");
      result->mutable_error_info()->set_reason(std::string(reason::kEntryTooLarge));
      return true;
    }
    if (append.entries(0) == "moved") {
      result->set_code(static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION));
      result->set_message("not the leader");
      result->mutable_error_info()->set_leader_id(2);
      result->mutable_error_info()->set_leader_address(leader_address);
      result->mutable_error_info()->set_reason(std::string(reason::kNotLeader));
      return true;
    }
    return false;
  };
  node.log.on_append_stream = fake.handler();

  const std::vector<std::string> payloads = {"first", "ok1", "big", "moved", "ok2"};
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<std::optional<Result<AppendResult>>> results(payloads.size());
  for (std::size_t i = 0; i < payloads.size(); ++i) {
    clients.push_back(make_client(fast_options({node.address(), leader.address()})));
  }
  const auto run = [&](std::size_t i) {
    return [&, i] { results[i].emplace(clients[i]->append({payloads[i]})); };
  };
  first_then_together(fake.seen, run(0), {run(1), run(2), run(3), run(4)});

  const auto messages = fake.seen.get();
  ASSERT_EQ(messages.size(), 2u);
  ASSERT_EQ(messages[1].size(), 4u);  // ok1, big, moved and ok2 in one message
  for (std::size_t i : {0u, 1u, 4u}) {
    ASSERT_TRUE(results[i]->ok()) << payloads[i] << ": " << results[i]->status().to_string();
    EXPECT_LT(results[i].value()->first_index, 900u) << payloads[i];
    EXPECT_EQ(clients[i]->preferred_endpoint(), node.address());
  }
  ASSERT_FALSE(results[2]->ok());
  EXPECT_EQ(results[2]->status().code(), StatusCode::kInvalidArgument);  // not retried
  ASSERT_TRUE(results[2]->status().details().has_value());
  EXPECT_EQ(results[2]->status().details()->reason, reason::kEntryTooLarge);
  // The redirected one went to the leader in one hop, with its own sequence.
  ASSERT_TRUE(results[3]->ok()) << results[3]->status().to_string();
  EXPECT_EQ(results[3].value()->first_index, 900u);
  EXPECT_EQ(results[3].value()->sequence, 1u);
  EXPECT_EQ(clients[3]->preferred_endpoint(), leader.address());
  const auto at_leader = leader_fake.seen.get();
  ASSERT_EQ(at_leader.size(), 1u);
  EXPECT_EQ(at_leader[0][0].client_id, clients[3]->client_id());
  EXPECT_EQ(at_leader[0][0].sequence, 1u);
  EXPECT_EQ(node.log.append_stream_calls(), 1);  // the refusals left the stream open
}

TEST(SharedStream, ABrokenStreamFailsEveryAppendOnItAndEachIsRetriedWithItsOwnSequence) {
  FakeNode node(1);
  SeenMessages seen;
  std::atomic<std::uint64_t> next_index{1};
  node.log.on_append_stream = [&](grpc::ServerContext*, int call, Stream* stream) {
    pb::AppendStreamRequest message;
    int read = 0;
    while (stream->Read(&message)) {
      seen.add(message);
      ++read;
      if (call == 1 && read == 1) std::this_thread::sleep_for(300ms);  // the others queue
      if (call == 1 && read == 2) {
        // The second message (the queued appends together) is never answered: the node goes away.
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "node going away");
      }
      pb::AppendStreamResponse answer;
      answer.set_max_appends_per_message(256);
      for (const SeenAppend& append : appends_of(message)) {
        pb::AppendStreamResult* result = answer.add_results();
        result->set_request_id(append.request_id);
        const std::uint64_t index = next_index.fetch_add(1);
        result->mutable_response()->set_first_index(index);
        result->mutable_response()->set_last_index(index);
      }
      if (!stream->Write(answer)) break;
    }
    return grpc::Status::OK;
  };
  constexpr std::size_t kClients = 5;
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<std::optional<Result<AppendResult>>> results(kClients);
  for (std::size_t i = 0; i < kClients; ++i) {
    clients.push_back(make_client(fast_options({node.address()})));
  }
  const auto run = [&](std::size_t i) {
    return [&, i] { results[i].emplace(clients[i]->append({"p" + std::to_string(i)})); };
  };
  first_then_together(seen, run(0), {run(1), run(2), run(3), run(4)});

  for (std::size_t i = 0; i < kClients; ++i) {
    ASSERT_TRUE(results[i]->ok()) << i << ": " << results[i]->status().to_string();
    EXPECT_EQ(results[i].value()->sequence, 1u);
  }
  EXPECT_GE(node.log.append_stream_calls(), 2);  // the retries went on a new stream
  const auto messages = seen.get();
  ASSERT_GE(messages.size(), 3u);
  ASSERT_EQ(messages[1].size(), kClients - 1);  // the message the node dropped
  // Each of its appends was sent again, with the same (client_id, sequence), after the break.
  std::map<std::uint64_t, int> sent_with_sequence_1;
  for (std::size_t m = 2; m < messages.size(); ++m) {
    for (const auto& append : messages[m]) {
      EXPECT_EQ(append.sequence, 1u);
      ++sent_with_sequence_1[append.client_id];
    }
  }
  for (const auto& dropped : messages[1]) {
    EXPECT_EQ(sent_with_sequence_1[dropped.client_id], 1) << "client " << dropped.client_id;
  }
}

TEST(SharedStream, ANodeThatAnnouncesNoBoundGetsOneAppendPerMessage) {
  FakeNode node(1);
  FakeStreamNode fake;
  fake.announce = 0;  // as a node from before AppendStreamRequest.more
  fake.hold_first = 300ms;
  node.log.on_append_stream = fake.handler();
  constexpr std::size_t kClients = 6;
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<std::optional<Result<AppendResult>>> results(kClients);
  for (std::size_t i = 0; i < kClients; ++i) {
    clients.push_back(make_client(fast_options({node.address()})));
  }
  const auto run = [&](std::size_t i) {
    return [&, i] { results[i].emplace(clients[i]->append({"p" + std::to_string(i)})); };
  };
  std::vector<std::function<void()>> others;
  for (std::size_t i = 1; i < kClients; ++i) others.push_back(run(i));
  first_then_together(fake.seen, run(0), others);

  const auto messages = fake.seen.get();
  EXPECT_EQ(messages.size(), kClients);
  for (const auto& message : messages) EXPECT_EQ(message.size(), 1u);
  std::set<std::uint64_t> firsts;
  for (std::size_t i = 0; i < kClients; ++i) {
    ASSERT_TRUE(results[i]->ok()) << i << ": " << results[i]->status().to_string();
    EXPECT_TRUE(firsts.insert(results[i].value()->first_index).second);
  }
  EXPECT_EQ(node.log.append_stream_calls(), 1);
}

TEST(SharedStream, ClientsThatOptOutKeepAStreamEach) {
  FakeNode node(1);
  FakeStreamNode fake;
  node.log.on_append_stream = fake.handler();
  Options options = fast_options({node.address()});
  options.share_append_stream = false;
  auto a = make_client(options);
  auto b = make_client(options);
  ASSERT_TRUE(a->append({"a"}).ok());
  ASSERT_TRUE(b->append({"b"}).ok());
  EXPECT_EQ(node.log.append_stream_calls(), 2);
}

}  // namespace
}  // namespace raftlog::client

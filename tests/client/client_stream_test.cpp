// Client::append() over AppendStream against fake nodes on 127.0.0.1: a late answer cuts the stream
// off at the call timeout and the append is retried, with the same sequence, on a new stream; a
// refusal on the stream redirects like a unary one; a node without AppendStream gets unary calls.
// (client_test covers the unary path: its fakes have no AppendStream.)
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "client/client.h"
#include "fake_log.h"
#include "shared/loopback.h"

namespace raftlog::client {
namespace {

using namespace std::chrono_literals;
using Stream = grpc::ServerReaderWriter<pb::AppendStreamResponse, pb::AppendStreamRequest>;

// The sequence numbers of every request a fake's stream handlers received, in arrival order.
struct SeenSequences {
  std::mutex mu;
  std::vector<std::uint64_t> sequences;
  void add(const pb::AppendStreamRequest& request) {
    std::lock_guard lock(mu);
    sequences.push_back(request.append().sequence());
  }
  std::vector<std::uint64_t> get() {
    std::lock_guard lock(mu);
    return sequences;
  }
};

bool answer_ok(Stream* stream, const pb::AppendStreamRequest& request, std::uint64_t first_index) {
  pb::AppendStreamResponse answer;
  pb::AppendStreamResult* result = answer.add_results();
  result->set_request_id(request.request_id());
  result->mutable_response()->set_first_index(first_index);
  result->mutable_response()->set_last_index(
      first_index + static_cast<std::uint64_t>(request.append().entries_size()) - 1);
  result->mutable_response()->set_term(5);
  return stream->Write(answer);
}

TEST(ClientStream, AnAnswerLaterThanTheCallTimeoutIsRetriedOnANewStreamWithTheSameSequence) {
  FakeNode node(1);
  SeenSequences seen;
  node.log.on_append_stream = [&seen](grpc::ServerContext* context, int call, Stream* stream) {
    pb::AppendStreamRequest request;
    std::uint64_t next_index = 100;
    while (stream->Read(&request)) {
      seen.add(request);
      if (call == 1) {
        // The first stream swallows its request: the client's watchdog must cancel it.
        for (int i = 0; i < 400 && !context->IsCancelled(); ++i) std::this_thread::sleep_for(5ms);
        return grpc::Status(grpc::StatusCode::CANCELLED, "gave up");
      }
      if (!answer_ok(stream, request, next_index)) break;
      next_index += static_cast<std::uint64_t>(request.append().entries_size());
    }
    return grpc::Status::OK;
  };
  Options options = fast_options({node.address()});
  options.call_timeout_ms = 150;
  auto client = make_client(options);
  const auto started = std::chrono::steady_clock::now();
  auto first = client->append({"a"});
  const auto elapsed = std::chrono::steady_clock::now() - started;
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_EQ(first->first_index, 100u);
  EXPECT_EQ(first->sequence, 1u);
  EXPECT_GE(elapsed, 140ms);   // it waited for the first stream's answer until the call timeout
  EXPECT_LT(elapsed, 1500ms);  // and no longer: the watchdog cut the stream off
  // The retry went out on a second stream, with the sequence of the first attempt.
  EXPECT_EQ(node.log.append_stream_calls(), 2);
  EXPECT_EQ(seen.get(), (std::vector<std::uint64_t>{1, 1}));

  // The next appends reuse the open stream: no new call per append.
  for (int i = 0; i < 5; ++i) {
    auto next = client->append({"b", "c"});
    ASSERT_TRUE(next.ok()) << next.status().to_string();
    EXPECT_EQ(next->first_index, 101u + 2u * static_cast<std::uint64_t>(i));
  }
  EXPECT_EQ(node.log.append_stream_calls(), 2);
  EXPECT_EQ(seen.get(), (std::vector<std::uint64_t>{1, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(node.log.append_calls(), 0u);  // never a unary call
}

TEST(ClientStream, ARefusalOnTheStreamRedirectsAndANodeWithoutStreamsGetsUnaryCalls) {
  FakeNode old_leader(1);  // predates AppendStream: no stream handler, unary only
  FakeNode follower(2);
  const std::string leader_address = old_leader.address();
  SeenSequences seen;
  std::atomic<int> refusals{0};
  follower.log.on_append_stream = [&](grpc::ServerContext*, int, Stream* stream) {
    pb::AppendStreamRequest request;
    while (stream->Read(&request)) {
      seen.add(request);
      pb::AppendStreamResponse answer;
      pb::AppendStreamResult* result = answer.add_results();
      result->set_request_id(request.request_id());
      result->set_code(static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION));
      result->set_message("not the leader");
      result->mutable_error_info()->set_leader_id(1);
      result->mutable_error_info()->set_leader_address(leader_address);
      result->mutable_error_info()->set_reason(std::string(reason::kNotLeader));
      ++refusals;
      if (!stream->Write(answer)) break;
    }
    return grpc::Status::OK;
  };
  old_leader.log.on_append = [](grpc::ServerContext*, int call, const pb::AppendRequest& request,
                                pb::AppendResponse* response) {
    return accept_append(request, response, 10 * static_cast<std::uint64_t>(call));
  };

  auto client = make_client(fast_options({follower.address(), old_leader.address()}));
  auto first = client->append({"a"});
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_EQ(first->first_index, 10u);
  EXPECT_EQ(refusals.load(), 1);
  EXPECT_EQ(seen.get(), (std::vector<std::uint64_t>{1}));
  // One hop to the named leader; it answered UNIMPLEMENTED to the stream and the unary call
  // carried the same sequence.
  EXPECT_EQ(old_leader.log.append_stream_calls(), 1);
  ASSERT_EQ(old_leader.log.append_calls(), 1u);
  EXPECT_EQ(old_leader.log.appends()[0].sequence(), 1u);
  EXPECT_EQ(client->preferred_endpoint(), old_leader.address());

  // Later appends go straight to unary calls: the node is remembered as stream-less.
  auto second = client->append({"b"});
  ASSERT_TRUE(second.ok()) << second.status().to_string();
  EXPECT_EQ(second->first_index, 20u);
  EXPECT_EQ(old_leader.log.append_stream_calls(), 1);
  EXPECT_EQ(old_leader.log.append_calls(), 2u);
}

// TOO_MANY_PENDING is the leader asking for a pause: the retry stays on it, on the same stream,
// rather than moving to a follower that would only redirect back (and cost a new stream).
TEST(ClientStream, TooManyPendingIsRetriedOnTheSameNodeAndStream) {
  FakeNode leader(1);
  FakeNode follower(2);
  const std::string leader_address = leader.address();
  SeenSequences seen;
  std::atomic<int> answered{0};  // over all of the leader's streams
  leader.log.on_append_stream = [&](grpc::ServerContext*, int, Stream* stream) {
    pb::AppendStreamRequest request;
    while (stream->Read(&request)) {
      seen.add(request);
      if (++answered == 1) {
        pb::AppendStreamResponse answer;
        pb::AppendStreamResult* result = answer.add_results();
        result->set_request_id(request.request_id());
        result->set_code(static_cast<int>(grpc::StatusCode::RESOURCE_EXHAUSTED));
        result->set_message("node input queue full; retry later");
        result->mutable_error_info()->set_reason(std::string(reason::kTooManyPending));
        if (!stream->Write(answer)) break;
      } else if (!answer_ok(stream, request, 30)) {
        break;
      }
    }
    return grpc::Status::OK;
  };
  std::atomic<int> redirects{0};
  follower.log.on_append_stream = [&](grpc::ServerContext*, int, Stream* stream) {
    pb::AppendStreamRequest request;
    while (stream->Read(&request)) {
      ++redirects;
      pb::AppendStreamResponse answer;
      pb::AppendStreamResult* result = answer.add_results();
      result->set_request_id(request.request_id());
      result->set_code(static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION));
      result->set_message("not the leader");
      result->mutable_error_info()->set_leader_address(leader_address);
      result->mutable_error_info()->set_reason(std::string(reason::kNotLeader));
      if (!stream->Write(answer)) break;
    }
    return grpc::Status::OK;
  };
  auto client = make_client(fast_options({leader.address(), follower.address()}));
  auto appended = client->append({"a"});
  ASSERT_TRUE(appended.ok()) << appended.status().to_string();
  EXPECT_EQ(appended->first_index, 30u);
  EXPECT_EQ(seen.get(), (std::vector<std::uint64_t>{1, 1}));
  EXPECT_EQ(leader.log.append_stream_calls(), 1);
  EXPECT_EQ(follower.log.append_stream_calls(), 0);
  EXPECT_EQ(redirects.load(), 0);
}

TEST(ClientStream, AnInvalidAppendFailsAloneAndTheStreamCarriesOn) {
  FakeNode node(1);
  node.log.on_append_stream = [](grpc::ServerContext*, int, Stream* stream) {
    pb::AppendStreamRequest request;
    std::uint64_t next_index = 1;
    while (stream->Read(&request)) {
      if (request.append().entries(0).size() > 4) {
        pb::AppendStreamResponse answer;
        pb::AppendStreamResult* result = answer.add_results();
        result->set_request_id(request.request_id());
        result->set_code(static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
        result->set_message("entry of 5 bytes exceeds 4");
        result->mutable_error_info()->set_reason(std::string(reason::kEntryTooLarge));
        if (!stream->Write(answer)) break;
        continue;
      }
      if (!answer_ok(stream, request, next_index)) break;
      ++next_index;
    }
    return grpc::Status::OK;
  };
  auto client = make_client(fast_options({node.address()}));
  auto refused = client->append({"12345"});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);  // not retried
  ASSERT_TRUE(refused.status().details().has_value());
  EXPECT_EQ(refused.status().details()->reason, reason::kEntryTooLarge);
  EXPECT_NE(refused.status().message().find("exceeds 4"), std::string::npos)
      << refused.status().message();
  auto accepted = client->append({"1234"});
  ASSERT_TRUE(accepted.ok()) << accepted.status().to_string();
  EXPECT_EQ(accepted->first_index, 1u);
  EXPECT_EQ(node.log.append_stream_calls(), 1);
}

}  // namespace
}  // namespace raftlog::client

namespace raftlog::client {
namespace {

TEST(ClientStream, AnIdleStreamIsClosedAndTheNextAppendOpensANewOneWithoutARetry) {
  FakeNode node(1);
  std::atomic<int> ended_by_client{0};
  node.log.on_append_stream = [&](grpc::ServerContext* context, int, Stream* stream) {
    pb::AppendStreamRequest request;
    std::uint64_t next_index = 1;
    while (stream->Read(&request)) {
      if (!answer_ok(stream, request, next_index)) break;
      ++next_index;
    }
    if (context->IsCancelled()) ++ended_by_client;
    return grpc::Status::OK;
  };
  Options options = fast_options({node.address()});
  options.append_stream_idle_ms = 150;
  auto client = make_client(options);
  ASSERT_TRUE(client->append({"a"}).ok());
  ASSERT_TRUE(client->append({"b"}).ok());
  EXPECT_EQ(node.log.append_stream_calls(), 1);  // back to back: one stream
  // Idle for longer than append_stream_idle_ms: the watchdog cancels the stream by itself.
  ASSERT_TRUE(raftlog::testing::eventually([&] { return ended_by_client.load() == 1; }, 2s));
  const auto started = std::chrono::steady_clock::now();
  auto after_idle = client->append({"c"});
  ASSERT_TRUE(after_idle.ok()) << after_idle.status().to_string();
  EXPECT_EQ(after_idle->first_index, 1u);  // a new stream (the fake counts per stream)
  EXPECT_EQ(after_idle->sequence, 3u);
  EXPECT_EQ(node.log.append_stream_calls(), 2);
  // Not an attempt that failed on the closed stream and slept before retrying.
  EXPECT_LT(std::chrono::steady_clock::now() - started, 100ms);
}

}  // namespace
}  // namespace raftlog::client

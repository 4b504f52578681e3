// The client library against fake Log/Admin services on 127.0.0.1: redirects, retries, idempotent
// sequence numbers, deadlines, tail resumption and endpoint parsing.
#include "client/client.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <stop_token>
#include <thread>
#include <vector>

#include "api_errors/error_info.h"
#include "fake_log.h"
#include "raftlog/v1/client.grpc.pb.h"
#include "shared/loopback.h"

namespace raftlog::client {
namespace {

// The fake nodes refuse calls as raftlogd does, through the ErrorInfo mapping both sides share.
using api_errors::error_status;
using api_errors::not_leader_status;
using raftlog::testing::loopback_address;
using raftlog::testing::pick_free_loopback_port;
using namespace std::chrono_literals;

// A Tail handler: sends the entry at the requested index, then stays open on an idle log until the
// client cancels (at most 5 s).
FakeLog::TailHandler send_first_entry_then_idle() {
  return [](grpc::ServerContext* context, int, const pb::TailRequest& request,
            grpc::ServerWriter<pb::TailResponse>* writer) {
    pb::TailResponse response;
    *response.add_entries() = wire_entry(request.from_index());
    writer->Write(response);
    for (int i = 0; i < 1000 && !context->IsCancelled(); ++i) std::this_thread::sleep_for(5ms);
    return grpc::Status::OK;
  };
}

TEST(Client, RedirectsToTheNamedLeaderInOneHop) {
  FakeNode follower_a(2);
  FakeNode follower_b(3);
  FakeNode leader(1);
  const std::string leader_address = leader.address();
  for (FakeNode* follower : {&follower_a, &follower_b}) {
    follower->log.on_append = [leader_address](grpc::ServerContext* context, int,
                                               const pb::AppendRequest&, pb::AppendResponse*) {
      return not_leader_status(context, 1, leader_address);
    };
  }
  leader.log.on_append = [](grpc::ServerContext*, int call, const pb::AppendRequest& request,
                            pb::AppendResponse* response) {
    return accept_append(request, response, 10 * static_cast<std::uint64_t>(call));
  };

  auto client =
      make_client(fast_options({follower_a.address(), follower_b.address(), leader.address()}));
  auto first = client->append({"a", "b"});
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_EQ(first->first_index, 10u);
  EXPECT_EQ(first->last_index, 11u);
  EXPECT_EQ(first->term, 3u);
  EXPECT_EQ(follower_a.log.append_calls(), 1u);
  EXPECT_EQ(follower_b.log.append_calls(), 0u);  // one hop: the hint, not the next endpoint
  EXPECT_EQ(leader.log.append_calls(), 1u);
  EXPECT_EQ(client->preferred_endpoint(), leader.address());

  auto second = client->append({"c"});  // straight to the known leader
  ASSERT_TRUE(second.ok()) << second.status().to_string();
  EXPECT_EQ(follower_a.log.append_calls(), 1u);
  EXPECT_EQ(leader.log.append_calls(), 2u);
}

TEST(Client, RetryAfterUnavailableReusesClientIdAndSequence) {
  FakeNode leader(1);
  leader.log.on_append = [](grpc::ServerContext*, int call, const pb::AppendRequest& request,
                            pb::AppendResponse* response) {
    if (call == 1)
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "leadership lost; outcome unknown");
    if (call == 2)
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "not committed in time");
    response->set_duplicate(call == 3);
    return accept_append(request, response, 7);
  };
  auto client = make_client(fast_options({leader.address()}));
  EXPECT_NE(client->client_id(), 0u);  // random by default
  auto result = client->append({"x"});
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  EXPECT_TRUE(result->duplicate);
  const auto requests = leader.log.appends();
  ASSERT_EQ(requests.size(), 3u);
  for (const pb::AppendRequest& request : requests) {
    EXPECT_EQ(request.client_id(), client->client_id());
    EXPECT_EQ(request.sequence(), result->sequence);
    ASSERT_EQ(request.entries_size(), 1);
    EXPECT_EQ(request.entries(0), "x");
  }
}

TEST(Client, EveryAppendCallTakesTheNextSequence) {
  FakeNode leader(1);
  leader.log.on_append = [](grpc::ServerContext* context, int, const pb::AppendRequest& request,
                            pb::AppendResponse* response) {
    if (request.entries(0) == "too big") {
      ErrorDetails details;
      details.reason = std::string(reason::kEntryTooLarge);
      return error_status(context, grpc::StatusCode::INVALID_ARGUMENT, "entry of 9 bytes exceeds 8",
                          details);
    }
    return accept_append(request, response, request.sequence() * 100);
  };
  Options options = fast_options({leader.address()});
  options.client_id = 77;
  auto client = make_client(options);
  EXPECT_EQ(client->client_id(), 77u);
  EXPECT_EQ(client->next_sequence(), 1u);
  ASSERT_EQ(client->append({"one"})->sequence, 1u);
  ASSERT_EQ(client->append({"two"})->sequence, 2u);
  auto refused = client->append({"too big"});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);  // not retried
  ASSERT_TRUE(refused.status().details().has_value());
  EXPECT_EQ(refused.status().details()->reason, reason::kEntryTooLarge);
  auto four = client->append({"four"});
  ASSERT_TRUE(four.ok());
  EXPECT_EQ(four->sequence, 4u);  // the refused call consumed 3
  EXPECT_EQ(four->first_index, 400u);
  EXPECT_EQ(client->next_sequence(), 5u);
  const auto requests = leader.log.appends();
  ASSERT_EQ(requests.size(), 4u);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(requests[i].client_id(), 77u);
    EXPECT_EQ(requests[i].sequence(), i + 1);
  }
  EXPECT_EQ(client->append({}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(client->next_sequence(), 5u);  // refused locally, nothing sent, nothing consumed
}

// SEQUENCE_REUSED (this client's id and sequence already hold other entries, e.g. after a restart
// with a fixed client_id) cannot be cured by retrying the same request: it is returned at once, and
// the next append takes the next sequence.
TEST(Client, SequenceReusedIsReturnedAtOnceNotRetried) {
  FakeNode leader(1);
  leader.log.on_append = [](grpc::ServerContext* context, int, const pb::AppendRequest& request,
                            pb::AppendResponse* response) {
    if (request.sequence() == 1) {
      ErrorDetails details;
      details.reason = std::string(reason::kSequenceReused);
      return error_status(context, grpc::StatusCode::FAILED_PRECONDITION, "sequence 1 already used",
                          details);
    }
    return accept_append(request, response, 5);
  };
  Options options = fast_options({leader.address()});
  options.client_id = 9;
  auto client = make_client(options);
  auto refused = client->append({"new data"});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(refused.status().details().has_value());
  EXPECT_EQ(refused.status().details()->reason, reason::kSequenceReused);
  EXPECT_EQ(leader.log.append_calls(), 1u);
  auto next = client->append({"new data"});
  ASSERT_TRUE(next.ok()) << next.status().to_string();
  EXPECT_EQ(next->sequence, 2u);
  EXPECT_EQ(leader.log.append_calls(), 2u);
}

TEST(Client, NoLeaderYetIsRetriedUntilALeaderAnswers) {
  FakeNode node(2);
  node.log.on_append = [](grpc::ServerContext* context, int call, const pb::AppendRequest& request,
                          pb::AppendResponse* response) {
    if (call <= 2) return not_leader_status(context, 0, "");
    return accept_append(request, response, 1);
  };
  auto client = make_client(fast_options({node.address()}));
  auto result = client->append({"x"});
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  EXPECT_EQ(node.log.append_calls(), 3u);
}

TEST(Client, TooManyPendingIsRetriedButDiskFullIsNot) {
  FakeNode node(2);
  node.log.on_append = [](grpc::ServerContext* context, int call, const pb::AppendRequest& request,
                          pb::AppendResponse* response) {
    ErrorDetails details;
    if (request.entries(0) == "full") {
      details.reason = std::string(reason::kDiskFull);
      return error_status(context, grpc::StatusCode::RESOURCE_EXHAUSTED, "disk full", details);
    }
    if (call <= 2) {
      details.reason = std::string(reason::kTooManyPending);
      return error_status(context, grpc::StatusCode::RESOURCE_EXHAUSTED, "too many pending",
                          details);
    }
    return accept_append(request, response, 1);
  };
  Options options = fast_options({node.address()});
  options.append_stream = false;  // count unary calls only
  auto client = make_client(options);
  auto result = client->append({"x"});
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  EXPECT_EQ(node.log.append_calls(), 3u);
  auto full = client->append({"full"});
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().details()->reason, reason::kDiskFull);
  EXPECT_EQ(node.log.append_calls(), 4u);
}

TEST(Client, GivesUpAtTheRetryDeadlineWithAClearStatus) {
  FakeNode down(2);
  down.log.on_append = [](grpc::ServerContext*, int, const pb::AppendRequest&,
                          pb::AppendResponse*) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "shutting down");
  };
  const std::string dead = loopback_address(pick_free_loopback_port());  // nothing listens there
  Options options = fast_options({dead, down.address()});
  options.retry_deadline_ms = 300;
  options.call_timeout_ms = 100;
  auto client = make_client(options);
  const auto started = std::chrono::steady_clock::now();
  auto result = client->append({"x"});
  const auto elapsed = std::chrono::steady_clock::now() - started;
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(result.status().message().find("gave up after"), std::string::npos)
      << result.status().message();
  EXPECT_NE(result.status().message().find("UNAVAILABLE"), std::string::npos)
      << result.status().message();
  EXPECT_GE(elapsed, 290ms);
  EXPECT_LT(elapsed, 1000ms);
  EXPECT_GE(down.log.append_calls(), 2u);  // it kept trying within the deadline
  const auto requests = down.log.appends();
  for (const pb::AppendRequest& request : requests)
    EXPECT_EQ(request.sequence(), requests.front().sequence());
}

TEST(Client, SlowServerIsCutOffByTheCallTimeoutAndRetriedIdempotently) {
  FakeNode slow(1);
  slow.log.on_append = [](grpc::ServerContext* context, int, const pb::AppendRequest&,
                          pb::AppendResponse*) {
    // Never answers in time: waits until the client gives up on this attempt.
    for (int i = 0; i < 200 && !context->IsCancelled(); ++i) std::this_thread::sleep_for(5ms);
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "not committed in time");
  };
  Options options = fast_options({slow.address()});
  options.call_timeout_ms = 80;
  options.retry_deadline_ms = 350;
  auto client = make_client(options);
  const auto started = std::chrono::steady_clock::now();
  auto result = client->append({"x"});
  const auto elapsed = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(result.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_LT(elapsed, 1000ms);
  ASSERT_TRUE(raftlog::testing::eventually([&] { return slow.log.append_calls() >= 2; }, 1s));
  const auto requests = slow.log.appends();
  for (const pb::AppendRequest& request : requests) {
    EXPECT_EQ(request.client_id(), client->client_id());
    EXPECT_EQ(request.sequence(), 1u);
  }
}

TEST(Client, LinearizableReadFollowsRedirectAndChecksContiguity) {
  FakeNode follower(2);
  FakeNode leader(1);
  const std::string leader_address = leader.address();
  follower.log.on_read = [leader_address](grpc::ServerContext* context, int, const pb::ReadRequest&,
                                          pb::ReadResponse*) {
    return not_leader_status(context, 1, leader_address);
  };
  leader.log.on_read = [](grpc::ServerContext*, int call, const pb::ReadRequest& request,
                          pb::ReadResponse* response) {
    EXPECT_TRUE(request.linearizable());
    for (std::uint64_t i = 0; i < 3; ++i)
      *response->add_entries() = wire_entry(request.from_index() + i);
    if (call == 2) response->mutable_entries(1)->set_index(99);  // a broken answer
    response->set_commit_index(50);
    return grpc::Status::OK;
  };
  auto client = make_client(fast_options({follower.address(), leader.address()}));
  auto read = client->read(5, 3, 0, true);
  ASSERT_TRUE(read.ok()) << read.status().to_string();
  ASSERT_EQ(read->entries.size(), 3u);
  EXPECT_EQ(read->entries[0].index, 5u);
  EXPECT_EQ(read->entries[2].payload, "e7");
  EXPECT_EQ(read->commit_index, 50u);
  EXPECT_EQ(read->served_by, leader.address());
  auto broken = client->read(5, 3, 0, true);
  EXPECT_EQ(broken.status().code(), StatusCode::kInternal);
  EXPECT_EQ(client->read(0, 1, 0, false).status().code(), StatusCode::kInvalidArgument);
}

TEST(Client, TailResumesOnAnotherNodeWithoutGapsOrDuplicates) {
  FakeNode first(1);
  FakeNode second(2);
  // Node 1 serves 1..5 in two messages, then its stream breaks.
  first.log.on_tail = [](grpc::ServerContext*, int, const pb::TailRequest& request,
                         grpc::ServerWriter<pb::TailResponse>* writer) {
    EXPECT_EQ(request.from_index(), 1u);
    pb::TailResponse response;
    for (std::uint64_t i = 1; i <= 3; ++i) *response.add_entries() = wire_entry(i);
    writer->Write(response);
    response.Clear();
    for (std::uint64_t i = 4; i <= 5; ++i) *response.add_entries() = wire_entry(i);
    writer->Write(response);
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "node shutting down");
  };
  // Node 2 restarts slightly early (an overlap the client must skip) and then follows the log.
  second.log.on_tail = [](grpc::ServerContext* context, int, const pb::TailRequest& request,
                          grpc::ServerWriter<pb::TailResponse>* writer) {
    pb::TailResponse response;
    for (std::uint64_t i = request.from_index() - 2; i <= 12; ++i) {
      response.Clear();
      *response.add_entries() = wire_entry(i);
      if (!writer->Write(response)) break;
    }
    for (int i = 0; i < 400 && !context->IsCancelled(); ++i) std::this_thread::sleep_for(5ms);
    return grpc::Status::OK;
  };
  auto client = make_client(fast_options({first.address(), second.address()}));
  std::vector<std::uint64_t> delivered;
  TailOptions options;
  options.from_index = 1;
  auto next = client->tail(options, [&](const Entry& entry) {
    delivered.push_back(entry.index);
    EXPECT_EQ(entry.payload, "e" + std::to_string(entry.index));
    return entry.index < 10;
  });
  ASSERT_TRUE(next.ok()) << next.status().to_string();
  EXPECT_EQ(next.value(), 11u);
  std::vector<std::uint64_t> expected;
  for (std::uint64_t i = 1; i <= 10; ++i) expected.push_back(i);
  EXPECT_EQ(delivered, expected);
  const auto resumed = second.log.tails();
  ASSERT_EQ(resumed.size(), 1u);
  EXPECT_EQ(resumed[0].from_index(), 6u);
}

TEST(Client, TailEndsOnStopRequestAndOnDuration) {
  FakeNode node(1);
  node.log.on_tail = send_first_entry_then_idle();
  auto client = make_client(fast_options({node.address()}));

  std::stop_source stop;
  TailOptions options;
  options.from_index = 3;
  options.stop = stop.get_token();
  // The stop comes once the entry was delivered (the first call's set-up may take longer than a
  // fixed delay under the sanitizers): from then on the stream is idle and only the stop ends it.
  std::atomic<bool> delivered{false};
  std::chrono::steady_clock::time_point stop_requested;
  std::thread stopper([&] {
    (void)raftlog::testing::eventually([&] { return delivered.load(); }, 10s);
    std::this_thread::sleep_for(100ms);
    stop_requested = std::chrono::steady_clock::now();
    stop.request_stop();
  });
  auto next = client->tail(options, [&](const Entry&) {
    delivered = true;
    return true;
  });
  const auto stopped = std::chrono::steady_clock::now();
  stopper.join();
  ASSERT_TRUE(next.ok()) << next.status().to_string();
  EXPECT_EQ(next.value(), 4u);
  EXPECT_LT(stopped - stop_requested, 1000ms);

  TailOptions timed;
  timed.from_index = 8;
  timed.duration_ms = 150;
  const auto started = std::chrono::steady_clock::now();
  next = client->tail(timed, [](const Entry&) { return true; });
  ASSERT_TRUE(next.ok()) << next.status().to_string();
  EXPECT_EQ(next.value(), 9u);
  EXPECT_GE(std::chrono::steady_clock::now() - started, 140ms);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 1000ms);
}

TEST(Client, TailReportsAGapAndARefusedRange) {
  FakeNode node(1);
  node.log.on_tail = [](grpc::ServerContext*, int call, const pb::TailRequest&,
                        grpc::ServerWriter<pb::TailResponse>* writer) {
    if (call == 2)
      return grpc::Status(grpc::StatusCode::OUT_OF_RANGE,
                          "index 1 is below the first retained index 50");
    pb::TailResponse response;
    *response.add_entries() = wire_entry(1);
    *response.add_entries() = wire_entry(2);
    *response.add_entries() = wire_entry(4);
    writer->Write(response);
    return grpc::Status::OK;
  };
  auto client = make_client(fast_options({node.address()}));
  std::vector<std::uint64_t> delivered;
  auto gap = client->tail(TailOptions{}, [&](const Entry& entry) {
    delivered.push_back(entry.index);
    return true;
  });
  EXPECT_EQ(gap.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(gap.status().message().find("from index 3 to 4"), std::string::npos)
      << gap.status().message();
  EXPECT_EQ(delivered, (std::vector<std::uint64_t>{1, 2}));
  auto refused = client->tail(TailOptions{}, [](const Entry&) { return true; });
  EXPECT_EQ(refused.status().code(), StatusCode::kOutOfRange);
}

// A stream idle on a quiet log for longer than the retry deadline was healthy: when its node fails,
// the tail resumes on another node instead of giving up at once (the stall clock restarts at the
// end of an established stream).
TEST(Client, TailOnAQuietLogResumesWhenItsNodeFails) {
  FakeNode quiet(1);
  FakeNode survivor(2);
  quiet.log.on_tail = [](grpc::ServerContext* context, int, const pb::TailRequest&,
                         grpc::ServerWriter<pb::TailResponse>*) {
    const auto until =
        std::chrono::steady_clock::now() + 700ms;  // idle for over twice the deadline
    while (std::chrono::steady_clock::now() < until && !context->IsCancelled())
      std::this_thread::sleep_for(5ms);
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "node shutting down");
  };
  survivor.log.on_tail = send_first_entry_then_idle();
  Options options = fast_options({quiet.address(), survivor.address()});
  options.call_timeout_ms = 100;
  options.retry_deadline_ms = 300;
  auto client = make_client(options);
  TailOptions from_seven;
  from_seven.from_index = 7;
  std::vector<std::uint64_t> delivered;
  auto next = client->tail(from_seven, [&](const Entry& entry) {
    delivered.push_back(entry.index);
    return false;
  });
  ASSERT_TRUE(next.ok()) << next.status().to_string();
  EXPECT_EQ(next.value(), 8u);
  EXPECT_EQ(delivered, (std::vector<std::uint64_t>{7}));
  ASSERT_EQ(survivor.log.tails().size(), 1u);
  EXPECT_EQ(survivor.log.tails()[0].from_index(), 7u);
}

// A node that takes a Tail but never accepts it (wedged; a quiet log sends nothing) is left for
// the next endpoint after the call timeout, instead of holding the tail for as long as its
// connection lives.
TEST(Client, TailMovesOnFromANodeThatDoesNotAcceptTheStream) {
  FakeNode wedged(1);
  FakeNode survivor(2);
  wedged.log.accept_tails = false;
  wedged.log.on_tail = [](grpc::ServerContext* context, int, const pb::TailRequest&,
                          grpc::ServerWriter<pb::TailResponse>*) {
    for (int i = 0; i < 1000 && !context->IsCancelled(); ++i) std::this_thread::sleep_for(5ms);
    return grpc::Status::OK;
  };
  survivor.log.on_tail = send_first_entry_then_idle();
  Options options = fast_options({wedged.address(), survivor.address()});
  options.call_timeout_ms = 300;
  auto client = make_client(options);
  TailOptions from_three;
  from_three.from_index = 3;
  const auto started = std::chrono::steady_clock::now();
  auto next = client->tail(from_three, [](const Entry&) { return false; });
  ASSERT_TRUE(next.ok()) << next.status().to_string();
  EXPECT_EQ(next.value(), 4u);
  // The wedged node holds its stream for 5 s: the tail left it after its 300 ms call timeout.
  EXPECT_LT(std::chrono::steady_clock::now() - started, 3s);
  EXPECT_EQ(wedged.log.tails().size(), 1u);
  ASSERT_EQ(survivor.log.tails().size(), 1u);
}

// Streams the node accepted were working even when each ended quickly without an entry (a node
// restarting, a quiet log): the give-up clock restarts at each, so a retry deadline shorter than
// the call timeout does not end the tail while a node keeps accepting it.
TEST(Client, TailCountsAcceptedStreamsAsWorkingWithoutWaitingForTheCallTimeout) {
  FakeNode node(1);
  constexpr int kShortStreams = 8;
  node.log.on_tail = [](grpc::ServerContext*, int call, const pb::TailRequest& request,
                        grpc::ServerWriter<pb::TailResponse>* writer) {
    if (call <= kShortStreams) {
      std::this_thread::sleep_for(60ms);
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "node shutting down");
    }
    pb::TailResponse response;
    *response.add_entries() = wire_entry(request.from_index());
    writer->Write(response);
    return grpc::Status::OK;
  };
  Options options = fast_options({node.address()});
  options.call_timeout_ms = 5000;
  options.retry_deadline_ms = 300;  // less than the short streams take together (> 480 ms)
  auto client = make_client(options);
  TailOptions from_five;
  from_five.from_index = 5;
  auto next = client->tail(from_five, [](const Entry&) { return false; });
  ASSERT_TRUE(next.ok()) << next.status().to_string();
  EXPECT_EQ(next.value(), 6u);
  EXPECT_EQ(node.log.tails().size(), static_cast<std::size_t>(kShortStreams + 1));
}

TEST(Client, TailGivesUpWhenNoNodeServesIt) {
  const std::string dead = loopback_address(pick_free_loopback_port());
  Options options = fast_options({dead});
  options.retry_deadline_ms = 200;
  auto client = make_client(options);
  const auto started = std::chrono::steady_clock::now();
  auto result = client->tail(TailOptions{}, [](const Entry&) { return true; });
  EXPECT_EQ(result.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(result.status().message().find("no node served index 1"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 1500ms);
}

TEST(Client, StatusAllFlushAndTransfer) {
  FakeNode leader(1);
  FakeNode follower(2);
  const std::string dead = loopback_address(pick_free_loopback_port());
  const std::string leader_address = leader.address();
  follower.admin.on_transfer = [leader_address](grpc::ServerContext* context,
                                                const pb::TransferLeadershipRequest&,
                                                pb::TransferLeadershipResponse*) {
    return not_leader_status(context, 1, leader_address);
  };
  leader.admin.on_transfer = [](grpc::ServerContext*, const pb::TransferLeadershipRequest& request,
                                pb::TransferLeadershipResponse* response) {
    response->set_leader_id(request.target_id());
    response->set_term(5);
    return grpc::Status::OK;
  };
  auto client = make_client(fast_options({follower.address(), dead, leader.address()}));
  const auto all = client->status_all();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].endpoint, follower.address());
  ASSERT_TRUE(all[0].status.ok());
  EXPECT_EQ(all[0].status->node_id, 2u);
  EXPECT_EQ(all[0].status->role, Role::kFollower);
  EXPECT_FALSE(all[1].status.ok());
  EXPECT_EQ(all[1].status.status().code(), StatusCode::kUnavailable);
  ASSERT_TRUE(all[2].status.ok());
  EXPECT_EQ(all[2].status->role, Role::kLeader);
  EXPECT_EQ(all[2].status->flush_mode, FlushMode::kSync);
  EXPECT_EQ(all[2].status->commit_index, 42u);
  ASSERT_EQ(all[2].status->peers.size(), 1u);
  EXPECT_EQ(all[2].status->peers[0].match_index, 40u);

  auto flushed = client->flush(follower.address());
  ASSERT_TRUE(flushed.ok());
  EXPECT_EQ(flushed.value(), 1234u);

  auto transferred = client->transfer_leadership(2);
  ASSERT_TRUE(transferred.ok()) << transferred.status().to_string();
  EXPECT_EQ(transferred->leader_id, 2u);
  EXPECT_EQ(follower.admin.transfer_calls.load(), 1);
  EXPECT_EQ(leader.admin.transfer_calls.load(), 1);
}

TEST(Endpoints, ParsesAndRejects) {
  auto good = parse_endpoints(" 127.0.0.1:7001, localhost:7002,[::1]:7003 ");
  ASSERT_TRUE(good.ok()) << good.status().to_string();
  EXPECT_EQ(good.value(),
            (std::vector<std::string>{"127.0.0.1:7001", "localhost:7002", "[::1]:7003"}));
  for (const char* bad : {"", "  ", "host", "host:", ":7001", "h:0", "h:65536", "h:12x", "a:1,,b:2",
                          "a:1,", "a:1,a:1", "::1:7001", "[::1]7001", "bad host:1"}) {
    auto parsed = parse_endpoints(bad);
    EXPECT_FALSE(parsed.ok()) << "accepted \"" << bad << "\"";
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  std::string too_many;
  for (int i = 1; i <= 65; ++i)
    too_many += (i > 1 ? "," : "") + std::string("h:") + std::to_string(i);
  EXPECT_FALSE(parse_endpoints(too_many).ok());

  Options options;
  options.endpoints = {"127.0.0.1:1", "nope"};
  auto created = Client::create(options);
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(created.status().message().find("nope"), std::string::npos);
  options.endpoints.clear();
  EXPECT_FALSE(Client::create(options).ok());
  options.endpoints = {"127.0.0.1:1"};
  options.backoff_min_ms = 100;
  options.backoff_max_ms = 10;
  EXPECT_FALSE(Client::create(options).ok());
}

TEST(Endpoints, TlsOptionsAreCheckedAtCreate) {
  char pattern[] = "/tmp/raftlog-client-tls.XXXXXX";
  const int fd = ::mkstemp(pattern);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "not a certificate\n", 18), 18);
  ::close(fd);
  const std::string not_pem = pattern;
  Options options;
  options.endpoints = {"127.0.0.1:1"};
  options.tls.ca_file = not_pem;  // files without enabled: a mistake, not silently plaintext
  auto created = Client::create(options);
  ASSERT_FALSE(created.ok());
  EXPECT_NE(created.status().message().find("tls.enabled"), std::string::npos)
      << created.status().to_string();

  options.tls.enabled = true;
  options.tls.ca_file = "/nonexistent/ca.crt";
  created = Client::create(options);
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(created.status().message().find("cannot read TLS CA file /nonexistent/ca.crt"),
            std::string::npos)
      << created.status().to_string();

  options.tls.ca_file = not_pem;  // readable, but not PEM
  created = Client::create(options);
  ASSERT_FALSE(created.ok());
  EXPECT_NE(created.status().message().find("is not a PEM file"), std::string::npos)
      << created.status().to_string();

  options.tls.ca_file.clear();  // system roots
  options.tls.cert_file = "/nonexistent/client.crt";
  created = Client::create(options);
  ASSERT_FALSE(created.ok());
  EXPECT_NE(created.status().message().find("cert_file and key_file"), std::string::npos)
      << created.status().to_string();

  options.tls.cert_file.clear();
  EXPECT_TRUE(Client::create(options).ok());  // TLS with the system's roots
  ::unlink(not_pem.c_str());
}

TEST(HealthState, NamesFollowTheProtocol) {
  EXPECT_STREQ(to_string(HealthState::kServing), "SERVING");
  EXPECT_STREQ(to_string(HealthState::kNotServing), "NOT_SERVING");
  EXPECT_STREQ(to_string(HealthState::kServiceUnknown), "SERVICE_UNKNOWN");
  EXPECT_EQ(static_cast<int>(HealthState::kNotServing), 2);  // grpc.health.v1 ServingStatus numbers
}

TEST(ErrorInfo, StatusToStringNamesTheCode) {
  EXPECT_EQ(Status().to_string(), "OK");
  EXPECT_EQ(Status(StatusCode::kFailedPrecondition, "not the leader").to_string(),
            "FAILED_PRECONDITION: not the leader");
}

}  // namespace
}  // namespace raftlog::client

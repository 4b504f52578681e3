// The client-facing services of a real node, in process (server::Server on a one-node cluster,
// 127.0.0.1 only), against clients that misbehave: Tail readers that never read, one connection
// that wants every stream slot, and requests that are not valid protobuf messages.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "raftlog/v1/client.grpc.pb.h"
#include "server/in_process_node.h"
#include "server/server.h"
#include "shared/loopback.h"

namespace raftlog::testing {
namespace {

using namespace std::chrono_literals;
namespace v1 = ::raftlog::v1;

// One Tail call on a channel, read or not as the test pleases.
struct TailCall {
  TailCall(const std::shared_ptr<grpc::Channel>& channel, std::uint64_t from_index,
           std::chrono::milliseconds deadline = 30s)
      : stub(v1::Log::NewStub(channel)) {
    context.set_deadline(std::chrono::system_clock::now() + deadline);
    v1::TailRequest request;
    request.set_from_index(from_index);
    reader = stub->Tail(&context, request);
  }
  // Reads whatever is left, then the status the stream ended with.
  grpc::Status drain_and_finish() {
    v1::TailResponse ignored;
    while (reader->Read(&ignored)) {
    }
    return reader->Finish();
  }
  std::unique_ptr<v1::Log::Stub> stub;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::TailResponse>> reader;
};

// The value of the "accepted" initial metadata key of a Tail call, or nullopt when its headers
// (or its end) came without it. Waits for the headers.
std::optional<std::string> tail_accepted_value(TailCall& call) {
  call.reader->WaitForInitialMetadata();
  const auto& headers = call.context.GetServerInitialMetadata();
  const auto found = headers.find("raftlog-tail-accepted");
  if (found == headers.end()) return std::nullopt;
  return std::string(found->second.data(), found->second.size());
}

// --- The accepted signal of a Tail ---------------------------------------------------------------

// A Tail on a quiet log sends nothing for as long as no entry commits: the node's initial metadata
// is how a client knows the stream was accepted, at once, instead of after a guessed delay.
TEST(TailAccepted, AnAcceptedTailIsSignalledAtOnceOnAQuietLogAndARefusedOneIsNot) {
  InProcessNode node([](server::NodeConfig&) {});
  ASSERT_TRUE(node.started());
  const std::uint64_t last = node.append(1, 16);
  ASSERT_NE(last, 0u);

  TailCall quiet(node.new_connection(), last + 1, 5s);
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(tail_accepted_value(quiet), std::to_string(last + 1));
  // Before the signal, the headers came with the first entry: here, at the 5 s deadline.
  EXPECT_LT(std::chrono::steady_clock::now() - started, 2s);
  EXPECT_EQ(node.open_tail_streams(), 1u);  // the signal follows the registration
  ASSERT_EQ(node.append(1, 16), last + 1);
  v1::TailResponse next;
  ASSERT_TRUE(quiet.reader->Read(&next));
  ASSERT_EQ(next.entries_size(), 1);
  EXPECT_EQ(next.entries(0).index(), last + 1);
  quiet.context.TryCancel();
  (void)quiet.drain_and_finish();

  TailCall from_zero(node.new_connection(), 0, 5s);
  EXPECT_EQ(tail_accepted_value(from_zero), std::nullopt);
  EXPECT_EQ(from_zero.drain_and_finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// --- Tail readers that never read -----------------------------------------------------------------

TEST(TailStall, StreamsWhoseReaderTakesNothingAreEndedAfterTheStallTimeoutAndFreeTheirSlots) {
  constexpr std::size_t kSlots = 3;
  InProcessNode node([](server::NodeConfig& c) {
    c.max_tail_streams = kSlots;
    c.stream_stall_timeout_ms = 500;
  });
  ASSERT_TRUE(node.started());
  // More than the readers' HTTP/2 windows hold, so a stream that is not read has a write
  // outstanding that cannot complete. gRPC's BDP probing would grow the windows to several MiB per
  // stream on loopback (seen: 7 MiB), which only takes more data to fill; the hog turns it off so
  // its windows stay at 64 KiB and a few MiB suffice.
  constexpr std::size_t kEntries = 8;
  ASSERT_NE(node.append(kEntries, 1 << 20, 8), 0u);

  grpc::ChannelArguments no_window_growth;
  no_window_growth.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  auto hog = node.new_connection(no_window_growth);
  // No stream can have stalled for its timeout before this instant.
  const auto started = std::chrono::steady_clock::now();
  std::vector<std::unique_ptr<TailCall>> stalled;
  for (std::size_t i = 0; i < kSlots; ++i) stalled.push_back(std::make_unique<TailCall>(hog, 1));
  // A call whose request was sent may not hold its slot yet (a loaded machine runs the handler
  // later); a reader let in before it would take the slot and leave that call refused.
  ASSERT_TRUE(eventually([&] { return node.open_tail_streams() == kSlots; }, 10s))
      << node.open_tail_streams() << " of " << kSlots << " stalled readers hold a slot";
  // Every slot is taken: a reader on another connection is refused until the stalled ones end.
  bool served = false;
  while (!served && std::chrono::steady_clock::now() - started < 10s) {
    TailCall reader(node.new_connection(), kEntries);
    v1::TailResponse first;
    served = reader.reader->Read(&first) && first.entries_size() > 0;
    reader.context.TryCancel();
    (void)reader.drain_and_finish();
    if (!served) std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(served) << "no Tail slot came free within 10 s of the readers stalling";
  EXPECT_GE(std::chrono::steady_clock::now() - started, 400ms)
      << "a stream was ended before its stall timeout";
  // Reading a stalled stream before the node ended it would let its write complete: wait for all.
  ASSERT_TRUE(eventually([&] { return node.open_tail_streams() == 0; }, 10s))
      << node.open_tail_streams() << " stalled readers still hold a slot";
  for (auto& call : stalled) {
    const grpc::Status status = call->drain_and_finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
    EXPECT_NE(status.error_message().find("not reading"), std::string::npos)
        << status.error_message();
  }
}

TEST(AppendStreamStall,
     AStreamWhoseClientReadsNoAnswersIsEndedAfterTheStallTimeoutAndFreesItsSlot) {
  InProcessNode node([](server::NodeConfig& c) {
    c.max_append_streams = 1;
    c.max_appends_per_stream = 16;
    c.stream_stall_timeout_ms = 500;
  });
  ASSERT_TRUE(node.started());
  grpc::ChannelArguments no_window_growth;  // as in TailStall: the answers fill 64 KiB windows
  no_window_growth.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  auto stub = v1::Log::NewStub(node.new_connection(no_window_growth));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 30s);
  auto hog = stub->AppendStream(&context);
  // As in TailStall: a stream let in before the hog holds its slot would leave the hog refused.
  ASSERT_TRUE(eventually([&] { return node.open_append_streams() == 1; }, 10s))
      << "the hog holds no slot";
  // Empty appends are refused at once, each answer carrying a message: a few thousand fill the
  // windows. The writer stops when the node stops reading (flow control) and the stream ends.
  std::thread writer([&] {
    v1::AppendStreamRequest empty;
    for (std::uint64_t id = 1; id <= 20000; ++id) {
      empty.set_request_id(id);
      empty.mutable_append();
      if (!hog->Write(empty)) return;
    }
  });
  const auto appends_on_a_new_stream = [&] {
    auto other_stub = v1::Log::NewStub(node.new_connection());
    grpc::ClientContext other_context;
    other_context.set_deadline(std::chrono::system_clock::now() + 5s);
    auto other = other_stub->AppendStream(&other_context);
    v1::AppendStreamRequest request;
    request.set_request_id(1);
    request.mutable_append()->add_entries("x");
    v1::AppendStreamResponse response;
    const bool answered =
        other->Write(request) && other->Read(&response) && response.results_size() == 1;
    other_context.TryCancel();
    (void)other->Finish();
    return answered;
  };
  EXPECT_TRUE(eventually(appends_on_a_new_stream, 10000ms))
      << "the stalled stream kept the node's only slot";
  writer.join();
  v1::AppendStreamResponse ignored;
  while (hog->Read(&ignored)) {
  }
  const grpc::Status status = hog->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_NE(status.error_message().find("not reading"), std::string::npos)
      << status.error_message();
}

// --- One connection cannot take every slot ---------------------------------------------------------

TEST(PerConnectionCaps, ATailStreamPastTheConnectionsCapIsRefusedWhileAnotherConnectionGetsOne) {
  InProcessNode node([](server::NodeConfig& c) {
    c.max_tail_streams = 8;
    c.max_tail_streams_per_connection = 2;
  });
  ASSERT_TRUE(node.started());
  ASSERT_NE(node.append(1, 10), 0u);
  auto greedy = node.new_connection();
  std::vector<std::unique_ptr<TailCall>> held;
  for (int i = 0; i < 2; ++i) {
    held.push_back(std::make_unique<TailCall>(greedy, 1));
    v1::TailResponse first;
    ASSERT_TRUE(held.back()->reader->Read(&first)) << "tail " << i;
  }
  TailCall third(greedy, 1);
  const grpc::Status refused = third.drain_and_finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_NE(refused.error_message().find("on this connection (2,"), std::string::npos)
      << refused.error_message();

  TailCall other(node.new_connection(), 1);
  v1::TailResponse first;
  EXPECT_TRUE(other.reader->Read(&first));
  other.context.TryCancel();
  (void)other.drain_and_finish();
  for (auto& call : held) {
    call->context.TryCancel();
    (void)call->drain_and_finish();
  }
}

TEST(PerConnectionCaps, AnAppendStreamPastTheConnectionsCapIsRefusedWhileAnotherConnectionGetsOne) {
  InProcessNode node([](server::NodeConfig& c) { c.max_append_streams_per_connection = 2; });
  ASSERT_TRUE(node.started());
  struct Stream {
    explicit Stream(const std::shared_ptr<grpc::Channel>& channel)
        : stub(v1::Log::NewStub(channel)) {
      context.set_deadline(std::chrono::system_clock::now() + 30s);
      call = stub->AppendStream(&context);
    }
    bool append_one() {
      v1::AppendStreamRequest request;
      request.set_request_id(1);
      request.mutable_append()->add_entries("s");
      v1::AppendStreamResponse response;
      return call->Write(request) && call->Read(&response) && response.results_size() == 1 &&
             response.results(0).code() == 0;
    }
    grpc::Status close() {
      call->WritesDone();
      v1::AppendStreamResponse ignored;
      while (call->Read(&ignored)) {
      }
      return call->Finish();
    }
    std::unique_ptr<v1::Log::Stub> stub;
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReaderWriter<v1::AppendStreamRequest, v1::AppendStreamResponse>>
        call;
  };
  auto greedy = node.new_connection();
  // One at a time: streams opened together reach the node's handlers in any order, and the third
  // could take a slot before the first (seen on a loaded machine).
  Stream first(greedy);
  ASSERT_TRUE(first.append_one());
  Stream second(greedy);
  ASSERT_TRUE(second.append_one());
  Stream third(greedy);
  EXPECT_FALSE(third.append_one());
  const grpc::Status refused = third.close();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_NE(refused.error_message().find("on this connection (2,"), std::string::npos)
      << refused.error_message();

  Stream other(node.new_connection());
  EXPECT_TRUE(other.append_one());
  EXPECT_TRUE(other.close().ok());
  EXPECT_TRUE(first.close().ok());
  EXPECT_TRUE(second.close().ok());
}

// --- Requests that are not valid protobuf -----------------------------------------------------------

grpc::ByteBuffer bytes_of(const std::string& data) {
  grpc::Slice slice(data);
  return grpc::ByteBuffer(&slice, 1);
}

// Field 1 as a length-delimited field claiming 5 bytes, followed by 2: truncated.
const std::string kTruncatedField = std::string(
    "\x0a\x05"
    "ab",
    4);
// Field 1 as a varint whose last byte still says "more follows": truncated.
const std::string kTruncatedVarint = std::string("\x08\xff", 2);

grpc::Status raw_unary(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                       const std::string& request_bytes) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 10s);
  const grpc::ByteBuffer request = bytes_of(request_bytes);
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status status) { done.set_value(std::move(status)); });
  return done.get_future().get();
}

// A streaming call of raw messages through the generic stub (one operation at a time).
class RawStream {
 public:
  RawStream(const std::shared_ptr<grpc::Channel>& channel, const std::string& method)
      : stub_(channel) {
    context_.set_deadline(std::chrono::system_clock::now() + 10s);
    call_ = stub_.PrepareCall(&context_, method, &cq_);
    call_->StartCall(this);
    started_ = await();
  }
  ~RawStream() {
    cq_.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (cq_.Next(&tag, &ok)) {
    }
  }
  bool started() const { return started_; }
  bool write(const std::string& data) {
    call_->Write(bytes_of(data), this);
    return await();
  }
  bool writes_done() {
    call_->WritesDone(this);
    return await();
  }
  std::optional<grpc::ByteBuffer> read() {
    grpc::ByteBuffer buffer;
    call_->Read(&buffer, this);
    if (!await()) return std::nullopt;
    return buffer;
  }
  grpc::Status finish() {
    grpc::Status status;
    call_->Finish(&status, this);
    if (!await())
      return grpc::Status(grpc::StatusCode::INTERNAL, "the test's Finish did not complete");
    return status;
  }

 private:
  bool await() {
    void* tag = nullptr;
    bool ok = false;
    const auto deadline = std::chrono::system_clock::now() + 15s;
    return cq_.AsyncNext(&tag, &ok, deadline) == grpc::CompletionQueue::GOT_EVENT && ok;
  }

  grpc::GenericStub stub_;
  grpc::ClientContext context_;
  grpc::CompletionQueue cq_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  bool started_ = false;
};

std::string serialized_append(std::uint64_t request_id, const std::string& payload) {
  v1::AppendStreamRequest request;
  request.set_request_id(request_id);
  request.mutable_append()->add_entries(payload);
  return request.SerializeAsString();
}

class MalformedRequests : public ::testing::Test {
 protected:
  void SetUp() override {
    node_ = std::make_unique<InProcessNode>([](server::NodeConfig&) {});
    ASSERT_TRUE(node_->started());
    ASSERT_NE(node_->append(1, 10), 0u);  // elected and serving
    // The status a test counts from is published after the loop round that answered the append:
    // wait until it shows the no-op and that entry.
    ASSERT_TRUE(eventually([&] { return last_index() >= 2; }, 5s))
        << "the status never showed index 2";
  }
  std::uint64_t last_index() {
    auto stub = v1::Log::NewStub(node_->new_connection());
    grpc::ClientContext context;
    v1::StatusRequest request;
    v1::StatusResponse response;
    EXPECT_TRUE(stub->Status(&context, request, &response).ok());
    return response.last_index();
  }
  std::unique_ptr<InProcessNode> node_;
};

TEST_F(MalformedRequests, EveryUnaryMethodAnswersInvalidArgumentWithAMessage) {
  auto channel = node_->new_connection();
  const std::uint64_t before = last_index();
  for (const char* method : {"/raftlog.v1.Log/Append", "/raftlog.v1.Log/Read",
                             "/raftlog.v1.Log/Status", "/raftlog.v1.Admin/TransferLeadership",
                             "/raftlog.v1.Admin/Flush", "/raftlog.v1.Admin/Trim"}) {
    for (const std::string& garbage : {kTruncatedField, kTruncatedVarint}) {
      const grpc::Status status = raw_unary(channel, method, garbage);
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
          << method << ": " << status.error_message();
      EXPECT_FALSE(status.error_message().empty()) << method;
    }
  }
  EXPECT_EQ(last_index(), before);
  EXPECT_NE(node_->append(1, 10), 0u);  // and the node keeps serving
}

TEST_F(MalformedRequests, ATailRequestThatDoesNotParseIsRefusedWithInvalidArgument) {
  RawStream tail(node_->new_connection(), "/raftlog.v1.Log/Tail");
  ASSERT_TRUE(tail.started());
  tail.write(kTruncatedVarint);
  tail.writes_done();
  while (tail.read()) {
  }
  const grpc::Status status = tail.finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_FALSE(status.error_message().empty());
}

TEST_F(MalformedRequests, AnAppendStreamRequestThatDoesNotParseEndsTheStreamWithInvalidArgument) {
  const std::uint64_t before = last_index();
  RawStream stream(node_->new_connection(), "/raftlog.v1.Log/AppendStream");
  ASSERT_TRUE(stream.started());
  ASSERT_TRUE(stream.write(serialized_append(7, "good")));
  auto answer = stream.read();
  ASSERT_TRUE(answer.has_value());
  v1::AppendStreamResponse response;
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(answer->Dump(&slices).ok());
  std::string joined;
  for (const grpc::Slice& slice : slices)
    joined.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  ASSERT_TRUE(response.ParseFromString(joined));
  ASSERT_EQ(response.results_size(), 1);
  EXPECT_EQ(response.results(0).request_id(), 7u);
  EXPECT_EQ(response.results(0).code(), 0) << response.results(0).message();

  // The bad message, then a good one the node must not read.
  (void)stream.write(kTruncatedField);
  (void)stream.write(serialized_append(8, "after the bad one"));
  (void)stream.writes_done();
  int further_answers = 0;
  while (stream.read()) ++further_answers;
  const grpc::Status status = stream.finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_NE(status.error_message().find("nor anything sent after it was read"), std::string::npos)
      << status.error_message();
  EXPECT_EQ(further_answers, 0);
  EXPECT_EQ(last_index(), before + 1);  // request 7 only
}

}  // namespace
}  // namespace raftlog::testing

// --- Several appends in one AppendStream message -------------------------------------------------

namespace raftlog::testing {
namespace {

// The answers to one AppendStream message, by request_id.
std::map<std::uint64_t, v1::AppendStreamResult> exchange(
    grpc::ClientReaderWriter<v1::AppendStreamRequest, v1::AppendStreamResponse>* call,
    const v1::AppendStreamRequest& message, std::size_t answers,
    std::uint32_t* announced = nullptr) {
  std::map<std::uint64_t, v1::AppendStreamResult> results;
  EXPECT_TRUE(call->Write(message));
  v1::AppendStreamResponse response;
  while (results.size() < answers && call->Read(&response)) {
    if (announced != nullptr) *announced = response.max_appends_per_message();
    for (const v1::AppendStreamResult& result : response.results()) {
      EXPECT_TRUE(results.emplace(result.request_id(), result).second)
          << "request " << result.request_id() << " answered twice";
    }
  }
  EXPECT_EQ(results.size(), answers);
  return results;
}

void set_append(v1::AppendRequest* append, std::uint64_t client_id, std::uint64_t sequence,
                std::size_t entries) {
  append->set_client_id(client_id);
  append->set_sequence(sequence);
  for (std::size_t i = 0; i < entries; ++i) {
    append->add_entries("c" + std::to_string(client_id) + "e" + std::to_string(i));
  }
}

TEST(AppendStreamMessages, EachAppendOfAMessageGetsItsOwnRangeDedupAndAnswerAndABadOneFailsAlone) {
  InProcessNode node([](server::NodeConfig& c) { c.max_appends_per_stream = 8; });
  ASSERT_TRUE(node.started());
  auto stub = v1::Log::NewStub(node.new_connection());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 30s);
  auto call = stub->AppendStream(&context);

  // Four appends of three clients in one message; the third is empty and must fail alone.
  v1::AppendStreamRequest message;
  message.set_request_id(11);
  set_append(message.mutable_append(), 101, 1, 2);
  const auto add = [&message](std::uint64_t request_id, std::uint64_t client_id,
                              std::uint64_t sequence, std::size_t entries) {
    v1::AppendStreamItem* item = message.add_more();
    item->set_request_id(request_id);
    set_append(item->mutable_append(), client_id, sequence, entries);
  };
  add(12, 102, 1, 1);
  add(13, 103, 1, 0);  // empty: INVALID_ARGUMENT
  add(14, 102, 2, 3);
  std::uint32_t announced = 0;
  auto results = exchange(call.get(), message, 4, &announced);
  EXPECT_EQ(announced, 8u);  // the node's max_appends_per_stream
  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(results[13].code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_EQ(results[13].error_info().reason(), "EMPTY_APPEND");
  for (std::uint64_t id : {11u, 12u, 14u}) {
    EXPECT_EQ(results[id].code(), 0) << id << ": " << results[id].message();
    EXPECT_FALSE(results[id].response().duplicate()) << id;
  }
  // Each its own range, of its own size, proposed in the message's order and contiguous.
  const v1::AppendResponse& a = results[11].response();
  const v1::AppendResponse& b = results[12].response();
  const v1::AppendResponse& d = results[14].response();
  EXPECT_EQ(a.last_index() - a.first_index() + 1, 2u);
  EXPECT_EQ(b.first_index(), a.last_index() + 1);
  EXPECT_EQ(b.last_index(), b.first_index());
  EXPECT_EQ(d.first_index(), b.last_index() + 1);
  EXPECT_EQ(d.last_index() - d.first_index() + 1, 3u);

  // The same message again: each append is a retry of its own (client_id, sequence) and is
  // answered from the dedup table with its original range.
  auto again = exchange(call.get(), message, 4);
  for (std::uint64_t id : {11u, 12u, 14u}) {
    EXPECT_EQ(again[id].code(), 0) << id << ": " << again[id].message();
    EXPECT_TRUE(again[id].response().duplicate()) << id;
    EXPECT_EQ(again[id].response().first_index(), results[id].response().first_index()) << id;
    EXPECT_EQ(again[id].response().last_index(), results[id].response().last_index()) << id;
  }
  EXPECT_EQ(again[13].code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));

  // A message over the bound: every append in it refused, nothing written, the stream usable.
  v1::AppendStreamRequest too_many;
  too_many.set_request_id(100);
  set_append(too_many.mutable_append(), 200, 1, 1);
  for (std::uint64_t i = 1; i <= 8; ++i) {
    v1::AppendStreamItem* item = too_many.add_more();
    item->set_request_id(100 + i);
    set_append(item->mutable_append(), 200 + i, 1, 1);
  }
  auto refused = exchange(call.get(), too_many, 9);
  for (const auto& [id, result] : refused) {
    EXPECT_EQ(result.code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT)) << id;
    EXPECT_EQ(result.error_info().reason(), "TOO_MANY_APPENDS") << id;
  }
  // A one-append message, as every older client sends, still works on the same stream.
  v1::AppendStreamRequest single;
  single.set_request_id(500);
  set_append(single.mutable_append(), 300, 1, 1);
  auto last = exchange(call.get(), single, 1);
  EXPECT_EQ(last[500].code(), 0) << last[500].message();
  EXPECT_EQ(last[500].response().first_index(), d.last_index() + 1);  // the refused wrote nothing
  call->WritesDone();
  EXPECT_TRUE(call->Finish().ok());
}

// The node answers a message's appends one after another in one loop round (and a refused one at
// once, before the others commit); the stream holds them until the last, so one message of
// appends costs one answer message rather than a first answer alone and the rest in a second.
TEST(AppendStreamMessages, TheAnswersOfOneMessageLeaveInOneResponseMessage) {
  InProcessNode node([](server::NodeConfig& c) { c.max_appends_per_stream = 16; });
  ASSERT_TRUE(node.started());
  auto stub = v1::Log::NewStub(node.new_connection());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 30s);
  auto call = stub->AppendStream(&context);
  for (std::uint64_t round = 1; round <= 3; ++round) {
    v1::AppendStreamRequest message;
    message.set_request_id(round * 100);
    set_append(message.mutable_append(), 400, round, 1);
    for (std::uint64_t i = 1; i < 6; ++i) {
      v1::AppendStreamItem* item = message.add_more();
      item->set_request_id(round * 100 + i);
      // The third is empty: refused at once, while the others wait for their commit.
      set_append(item->mutable_append(), 400 + i, round, i == 3 ? 0 : 1);
    }
    ASSERT_TRUE(call->Write(message));
    v1::AppendStreamResponse response;
    ASSERT_TRUE(call->Read(&response));
    EXPECT_EQ(response.results_size(), 6) << "round " << round;
    int refused = 0;
    for (const v1::AppendStreamResult& result : response.results()) {
      if (result.code() != 0) ++refused;
    }
    EXPECT_EQ(refused, 1) << "round " << round;
  }
  call->WritesDone();
  EXPECT_TRUE(call->Finish().ok());
}

}  // namespace
}  // namespace raftlog::testing

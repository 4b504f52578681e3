// Fakes of the Log and Admin services for the client library tests (client_test, producer_test):
// scriptable handlers decide each answer from the call number and the request; every request is
// recorded. Served on 127.0.0.1 with a port picked at run time.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "api_errors/error_details.h"
#include "client/client.h"
#include "raftlog/v1/client.grpc.pb.h"
#include "shared/loopback.h"

namespace raftlog::client {

namespace pb = raftlog::v1;

// A scriptable node: each handler decides the answer from the call number and the request.
class FakeLog final : public pb::Log::Service {
 public:
  using AppendHandler = std::function<grpc::Status(grpc::ServerContext*, int call,
                                                   const pb::AppendRequest&, pb::AppendResponse*)>;
  using ReadHandler = std::function<grpc::Status(grpc::ServerContext*, int call,
                                                 const pb::ReadRequest&, pb::ReadResponse*)>;
  using TailHandler =
      std::function<grpc::Status(grpc::ServerContext*, int call, const pb::TailRequest&,
                                 grpc::ServerWriter<pb::TailResponse>*)>;

  using AppendStreamHandler = std::function<grpc::Status(
      grpc::ServerContext*, int call,
      grpc::ServerReaderWriter<pb::AppendStreamResponse, pb::AppendStreamRequest>*)>;

  AppendHandler on_append;
  // Unset: AppendStream answers UNIMPLEMENTED, like a node that predates it, and the client
  // library falls back to unary Append calls (which on_append then answers).
  AppendStreamHandler on_append_stream;
  ReadHandler on_read;
  TailHandler on_tail;
  // As raftlogd: a Tail gets its "accepted" headers before the handler runs. False: a node that
  // never accepts (wedged, or from before the signal): its headers come with the first message.
  std::atomic<bool> accept_tails{true};
  std::uint64_t node_id = 0;
  // Set: fills in the Status answer after the defaults below (a test's own fields).
  std::function<void(pb::StatusResponse*)> on_status;

  grpc::Status Append(grpc::ServerContext* context, const pb::AppendRequest* request,
                      pb::AppendResponse* response) override {
    const int call = record(appends_, *request);
    if (!on_append) return {grpc::StatusCode::UNIMPLEMENTED, "no append handler"};
    return on_append(context, call, *request, response);
  }
  grpc::Status AppendStream(grpc::ServerContext* context,
                            grpc::ServerReaderWriter<pb::AppendStreamResponse,
                                                     pb::AppendStreamRequest>* stream) override {
    const int call = ++append_stream_calls_;
    if (!on_append_stream) return {grpc::StatusCode::UNIMPLEMENTED, "no append stream handler"};
    return on_append_stream(context, call, stream);
  }
  grpc::Status Read(grpc::ServerContext* context, const pb::ReadRequest* request,
                    pb::ReadResponse* response) override {
    const int call = record(reads_, *request);
    if (!on_read) return {grpc::StatusCode::UNIMPLEMENTED, "no read handler"};
    return on_read(context, call, *request, response);
  }
  grpc::Status Tail(grpc::ServerContext* context, const pb::TailRequest* request,
                    grpc::ServerWriter<pb::TailResponse>* writer) override {
    const int call = record(tails_, *request);
    if (!on_tail) return {grpc::StatusCode::UNIMPLEMENTED, "no tail handler"};
    if (accept_tails.load()) {
      context->AddInitialMetadata(std::string(api_errors::kTailAcceptedMetadataKey),
                                  std::to_string(request->from_index()));
      writer->SendInitialMetadata();
    }
    return on_tail(context, call, *request, writer);
  }
  grpc::Status Status(grpc::ServerContext*, const pb::StatusRequest*,
                      pb::StatusResponse* response) override {
    response->set_node_id(node_id);
    response->set_role(node_id == 1 ? pb::ROLE_LEADER : pb::ROLE_FOLLOWER);
    response->set_term(4);
    response->set_leader_id(1);
    response->set_commit_index(42);
    response->set_flush_mode(pb::FLUSH_MODE_SYNC);
    pb::PeerStatus* peer = response->add_peers();
    peer->set_id(2);
    peer->set_match_index(40);
    if (on_status) on_status(response);
    return grpc::Status::OK;
  }

  std::vector<pb::AppendRequest> appends() const { return snapshot(appends_); }
  std::vector<pb::TailRequest> tails() const { return snapshot(tails_); }
  std::size_t append_calls() const { return appends().size(); }
  std::size_t read_calls() const { return snapshot(reads_).size(); }
  int append_stream_calls() const { return append_stream_calls_.load(); }

 private:
  template <typename T>
  int record(std::vector<T>& log, const T& request) {
    std::lock_guard lock(mu_);
    log.push_back(request);
    return static_cast<int>(log.size());
  }
  template <typename T>
  std::vector<T> snapshot(const std::vector<T>& log) const {
    std::lock_guard lock(mu_);
    return log;
  }

  mutable std::mutex mu_;
  std::vector<pb::AppendRequest> appends_;
  std::vector<pb::ReadRequest> reads_;
  std::vector<pb::TailRequest> tails_;
  std::atomic<int> append_stream_calls_{0};
};

class FakeAdmin final : public pb::Admin::Service {
 public:
  std::function<grpc::Status(grpc::ServerContext*, const pb::TransferLeadershipRequest&,
                             pb::TransferLeadershipResponse*)>
      on_transfer;
  std::atomic<int> transfer_calls{0};

  grpc::Status TransferLeadership(grpc::ServerContext* context,
                                  const pb::TransferLeadershipRequest* request,
                                  pb::TransferLeadershipResponse* response) override {
    ++transfer_calls;
    if (!on_transfer) return {grpc::StatusCode::UNIMPLEMENTED, "no transfer handler"};
    return on_transfer(context, *request, response);
  }
  grpc::Status Flush(grpc::ServerContext*, const pb::FlushRequest*,
                     pb::FlushResponse* response) override {
    response->set_flushed_index(1234);
    return grpc::Status::OK;
  }
};

struct FakeNode {
  FakeLog log;
  FakeAdmin admin;
  raftlog::testing::StartedServer server;

  explicit FakeNode(std::uint64_t id) {
    log.node_id = id;
    server = raftlog::testing::start_server({&log, &admin});
  }
  ~FakeNode() { server.shutdown(); }
  std::string address() const { return server.address(); }
};

inline Options fast_options(std::vector<std::string> endpoints) {
  Options options;
  options.endpoints = std::move(endpoints);
  options.call_timeout_ms = 500;
  options.retry_deadline_ms = 3000;
  options.backoff_min_ms = 5;
  options.backoff_max_ms = 50;
  return options;
}

inline std::unique_ptr<Client> make_client(Options options) {
  auto created = Client::create(std::move(options));
  EXPECT_TRUE(created.ok()) << created.status().to_string();
  return std::move(created).value();
}

inline grpc::Status accept_append(const pb::AppendRequest& request, pb::AppendResponse* response,
                                  std::uint64_t first) {
  response->set_first_index(first);
  response->set_last_index(first + static_cast<std::uint64_t>(request.entries_size()) - 1);
  response->set_term(3);
  return grpc::Status::OK;
}

inline pb::Entry wire_entry(std::uint64_t index) {
  pb::Entry entry;
  entry.set_index(index);
  entry.set_term(1);
  entry.set_payload("e" + std::to_string(index));
  return entry;
}

}  // namespace raftlog::client

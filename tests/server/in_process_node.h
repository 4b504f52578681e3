// A one-node raftlog cluster served in this process (server::Server on 127.0.0.1), for tests of the
// client-facing services against clients that misbehave.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "node/temp_dir.h"
#include "raftlog/v1/client.grpc.pb.h"
#include "server/server.h"
#include "shared/loopback.h"

namespace raftlog::testing {

// A one-node cluster served in this process; it elects itself at once.
class InProcessNode {
  using Log = ::raftlog::v1::Log;

 public:
  explicit InProcessNode(const std::function<void(server::NodeConfig&)>& adjust) {
    config_.node_id = 1;
    config_.members[1] = loopback_address(pick_free_loopback_port());
    config_.data_dir = dir_.path();
    config_.store.flush_mode = store::FlushMode::kAsync;  // nothing here is about durability
    config_.store.segment_size_bytes = 64ULL << 20;
    // The shared test machine's disk may be fuller than the default high watermark.
    config_.disk_high_watermark = 1.0;
    config_.disk_low_watermark = 0.99;
    adjust(config_);
    std::string error;
    server_ = server::Server::start(config_, &error);
    EXPECT_NE(server_, nullptr) << error;
    if (server_ != nullptr) {
      EXPECT_TRUE(eventually([&] { return is_leader(); }, std::chrono::seconds(10)))
          << "no election in 10 s";
    }
  }
  ~InProcessNode() {
    if (server_ != nullptr) server_->shutdown();
  }

  bool started() const { return server_ != nullptr; }
  // Stops the server now (its data directory stays until this object goes).
  void shutdown() {
    if (server_ != nullptr) server_->shutdown();
    server_.reset();
  }
  // Starts the server again on the same data directory (after shutdown()); false if it did not
  // start or elect itself within 10 s.
  bool restart() {
    std::string error;
    server_ = server::Server::start(config_, &error);
    EXPECT_NE(server_, nullptr) << error;
    return server_ != nullptr && eventually([&] { return is_leader(); }, std::chrono::seconds(10));
  }
  const server::NodeConfig& config() const { return config_; }
  const std::string& address() const { return server_->bound_address(); }
  const std::string& data_dir() const { return config_.data_dir; }
  std::size_t open_tail_streams() const { return server_->open_tail_streams(); }
  std::size_t open_append_streams() const { return server_->open_append_streams(); }
  // A channel on a TCP connection of its own: gRPC otherwise shares one connection between
  // channels with equal arguments.
  std::shared_ptr<grpc::Channel> new_connection(grpc::ChannelArguments args = {}) const {
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetMaxReceiveMessageSize(64 << 20);
    args.SetMaxSendMessageSize(64 << 20);
    return grpc::CreateCustomChannel(address(), grpc::InsecureChannelCredentials(), args);
  }
  bool is_leader() const {
    auto stub = Log::NewStub(new_connection());
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
    ::raftlog::v1::StatusResponse response;
    return stub->Status(&context, ::raftlog::v1::StatusRequest(), &response).ok() &&
           response.role() == ::raftlog::v1::ROLE_LEADER;
  }
  // Appends `count` entries of `bytes` bytes each, `per_call` per Append; the last index or 0.
  std::uint64_t append(std::size_t count, std::size_t bytes, std::size_t per_call = 1) {
    return append_in_calls(count, per_call,
                           [&](std::size_t, ::raftlog::v1::AppendRequest* request) {
                             request->add_entries(std::string(bytes, 'e'));
                           });
  }

  // Appends `count` entries of `bytes` bytes each to `topic`, each with the key "<topic>-<i>", one
  // Append per `per_call` entries; the last index or 0.
  std::uint64_t append_to_topic(const std::string& topic, std::size_t count, std::size_t bytes,
                                std::size_t per_call = 1) {
    return append_in_calls(count, per_call,
                           [&](std::size_t i, ::raftlog::v1::AppendRequest* request) {
                             request->add_entries(std::string(bytes, 't'));
                             ::raftlog::v1::EntryAttributes* attributes = request->add_attributes();
                             attributes->set_topic(topic);
                             attributes->add_keys(topic + "-" + std::to_string(i));
                           });
  }
  // Appends `count` entries of `bytes` bytes in one Append, entry i to topic "topic-<i>" with the
  // key "key-<i>"; the last index or 0.
  std::uint64_t append_to_topics(std::size_t count, std::size_t bytes) {
    return append_in_calls(count, count, [&](std::size_t i, ::raftlog::v1::AppendRequest* request) {
      request->add_entries(std::string(bytes, 'm'));
      ::raftlog::v1::EntryAttributes* attributes = request->add_attributes();
      attributes->set_topic("topic-" + std::to_string(i));
      attributes->add_keys("key-" + std::to_string(i));
    });
  }

  // Trims the log before `before_index` (the Admin Trim RPC), retried until the log's first index
  // is above `first_above` or `timeout` passed (the consumer group table holds retention until it
  // persisted its boundary, so the first tries may trim less); the first index last answered (0
  // when no call succeeded).
  std::uint64_t trim_before(std::uint64_t before_index, std::uint64_t first_above,
                            std::chrono::milliseconds timeout) const {
    auto stub = ::raftlog::v1::Admin::NewStub(new_connection());
    std::uint64_t first = 0;
    (void)eventually(
        [&] {
          grpc::ClientContext context;
          context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
          ::raftlog::v1::TrimRequest request;
          request.set_before_index(before_index);
          ::raftlog::v1::TrimResponse response;
          if (stub->Trim(&context, request, &response).ok()) first = response.first_index();
          return first > first_above;
        },
        timeout);
    return first;
  }

  // The last log index the node's derived indexes cover (its Status), or 0 when it does not answer.
  std::uint64_t derived_indexed_through() const {
    auto stub = Log::NewStub(new_connection());
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
    ::raftlog::v1::StatusResponse response;
    if (!stub->Status(&context, ::raftlog::v1::StatusRequest(), &response).ok()) return 0;
    return response.derived_indexed_through();
  }

 private:
  // `count` entries, `per_call` per Append, each added to its request by `add` (with its number
  // from 0); the last index or 0 (a failed Append fails the test).
  std::uint64_t append_in_calls(
      std::size_t count, std::size_t per_call,
      const std::function<void(std::size_t, ::raftlog::v1::AppendRequest*)>& add) {
    auto stub = Log::NewStub(new_connection());
    std::uint64_t last = 0;
    for (std::size_t done = 0; done < count;) {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      ::raftlog::v1::AppendRequest request;
      for (std::size_t i = 0; i < per_call && done < count; ++i, ++done) add(done, &request);
      ::raftlog::v1::AppendResponse response;
      const grpc::Status status = stub->Append(&context, request, &response);
      EXPECT_TRUE(status.ok()) << status.error_message();
      if (!status.ok()) return 0;
      last = response.last_index();
    }
    return last;
  }

  server::testing::TempDir dir_;
  server::NodeConfig config_;
  std::unique_ptr<server::Server> server_;
};

}  // namespace raftlog::testing

// What the PeerTransport tests share: transports on 127.0.0.1 with their gRPC servers (TestNode,
// recording what each receives), options fast enough for tests, message makers, and raw client
// streams that write hand-made (possibly invalid) wire messages to a transport's Peer service.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <algorithm>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "raftlog/peer/v1/peer.grpc.pb.h"
#include "server/message_codec.h"
#include "server/peer_auth.h"
#include "server/snapshot_chunks.h"
#include "server/transport.h"
#include "shared/loopback.h"
#include "util/crc32c.h"

namespace raftlog::server::peer_testing {

namespace pb = raftlog::peer::v1;
using raftlog::testing::eventually;
using raftlog::testing::loopback_address;
using raftlog::testing::pick_free_loopback_port;
using namespace std::chrono_literals;

inline constexpr const char* kTestSecret = "a-test-peer-secret-of-32-bytes!!";

// Options fast enough for tests: short backoff and connect timeout.
inline PeerTransportOptions test_options(raft::NodeId self,
                                         const std::map<raft::NodeId, std::string>& addresses) {
  PeerTransportOptions options;
  options.cluster_id = "test-cluster";
  options.self_id = self;
  for (const auto& [id, address] : addresses) {
    if (id != self) options.peers[id] = address;
  }
  options.reconnect_backoff_min_ms = 10;
  options.reconnect_backoff_max_ms = 100;
  options.connect_timeout_ms = 200;
  options.stop_timeout_ms = 1000;
  return options;
}

inline raft::Message heartbeat(raft::NodeId from, raft::NodeId to, raft::Index sequence_number) {
  raft::Message message;
  message.type = raft::MessageType::kHeartbeat;
  message.from = from;
  message.to = to;
  message.term = 1;
  message.context = sequence_number;  // identifies the message in order checks
  return message;
}

// Runs on a gRPC thread for every message a TestNode receives, before it is recorded.
using ReceiveHook = std::function<void(const raft::Message&)>;

// A transport plus the gRPC server its Peer service runs on, recording what it receives.
class TestNode {
 public:
  TestNode(PeerTransportOptions options, int port, ReceiveHook hook = {}) : hook_(std::move(hook)) {
    transport_ = std::make_unique<PeerTransport>(std::move(options), [this](raft::Message message) {
      if (hook_) hook_(message);
      std::lock_guard lock(mu_);
      received_.push_back(std::move(message));
    });
    server_ = raftlog::testing::start_server(
        {transport_->service()}, port, static_cast<int>(transport_->max_receive_message_bytes()));
    transport_->start();
  }
  ~TestNode() { shut_down(); }

  void shut_down() {
    if (!transport_) return;
    EXPECT_TRUE(transport_->stop());
    server_.shutdown();
    transport_.reset();
  }

  PeerTransport& transport() { return *transport_; }
  std::vector<raft::Message> received() const {
    std::lock_guard lock(mu_);
    return received_;
  }
  std::size_t received_count() const {
    std::lock_guard lock(mu_);
    return received_.size();
  }
  PeerStats stats_for(raft::NodeId peer) const {
    for (const PeerStats& stats : transport_->peer_stats()) {
      if (stats.id == peer) return stats;
    }
    ADD_FAILURE() << "no stats for peer " << peer;
    return {};
  }

 private:
  const ReceiveHook hook_;
  std::unique_ptr<PeerTransport> transport_;
  raftlog::testing::StartedServer server_;
  mutable std::mutex mu_;
  std::vector<raft::Message> received_;
};

inline std::map<raft::NodeId, std::string> pick_addresses(std::initializer_list<raft::NodeId> ids) {
  std::map<raft::NodeId, std::string> addresses;
  const std::vector<int> ports =
      raftlog::testing::distinct_free_loopback_ports(static_cast<int>(ids.size()));
  std::size_t next = 0;
  for (const raft::NodeId id : ids) addresses[id] = loopback_address(ports[next++]);
  return addresses;
}

// For failure messages: the counters that tell a stuck stream from one that keeps reconnecting.
inline std::string describe(const PeerStats& stats) {
  return "connects " + std::to_string(stats.connects) + ", failures " +
         std::to_string(stats.connect_failures) + ", queued " +
         std::to_string(stats.queued_messages) + ", sent " + std::to_string(stats.sent_messages) +
         ", expired " + std::to_string(stats.dropped_expired) + ", connected " +
         (stats.connected ? "yes" : "no") + ", last error: " + stats.last_error;
}

inline int port_of(const std::string& address) {
  return std::stoi(address.substr(address.rfind(':') + 1));
}

inline raft::Message empty_append(raft::NodeId from, raft::NodeId to, raft::Index sequence_number) {
  raft::Message message = heartbeat(from, to, sequence_number);
  message.type = raft::MessageType::kAppend;
  return message;
}

// Opens a raw client stream to `address` with `open` (Peer/Stream or Peer/StreamBatches), with the
// peer authenticator `auth` unless empty, writes `elements`, and returns the final status.
template <typename Element, typename Open>
inline grpc::Status write_raw(const std::string& address, const std::vector<Element>& elements,
                              Open open, const std::string& auth = "") {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(64 << 20);
  auto channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  auto stub = pb::Peer::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 3s);
  if (!auth.empty()) context.AddMetadata(std::string(kPeerAuthMetadataKey), auth);
  pb::StreamSummary summary;
  auto writer = open(*stub, &context, &summary);
  for (const Element& element : elements) {
    if (!writer->Write(element)) break;
  }
  writer->WritesDone();
  return writer->Finish();
}

inline grpc::Status raw_stream(const std::string& address,
                               const std::vector<pb::RaftMessage>& messages,
                               const std::string& auth = "") {
  return write_raw(
      address, messages,
      [](pb::Peer::Stub& stub, grpc::ClientContext* context, pb::StreamSummary* summary) {
        return stub.Stream(context, summary);
      },
      auth);
}

inline grpc::Status raw_batch_stream(const std::string& address,
                                     const std::vector<pb::RaftMessageBatch>& batches,
                                     const std::string& auth = "") {
  return write_raw(
      address, batches,
      [](pb::Peer::Stub& stub, grpc::ClientContext* context, pb::StreamSummary* summary) {
        return stub.StreamBatches(context, summary);
      },
      auth);
}

// The chunks of `message`'s data numbered `chunk_numbers` (chunk n at n * kSnapshotChunkBytes) in
// one batch, as node `message.from`'s lane would have written them.
inline pb::RaftMessageBatch chunk_batch(const raft::Message& message,
                                        const std::vector<std::uint64_t>& chunk_numbers) {
  const std::uint64_t total = message.snapshot->data.size();
  const std::uint32_t crc = util::crc32c::value(message.snapshot->data.view());
  // As this build's lane sends them: with the data's digest.
  const std::uint32_t digest = replica::snapshot_data_digest(message.snapshot->data.view(), crc);
  pb::RaftMessageBatch batch;
  for (const std::uint64_t number : chunk_numbers) {
    const std::uint64_t offset = number * kSnapshotChunkBytes;
    const std::size_t length =
        static_cast<std::size_t>(std::min<std::uint64_t>(kSnapshotChunkBytes, total - offset));
    encode_snapshot_chunk(message, SnapshotChunkPlace{offset, total, crc, digest}, length,
                          "test-cluster", batch.add_messages());
  }
  return batch;
}

}  // namespace raftlog::server::peer_testing

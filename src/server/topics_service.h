// The raftlog.v1.Topics service (proto/raftlog/v1/topics.proto): topic reads and tails, key lookups
// and time lookups, answered from this node's derived indexes (server/dispatcher.h) and its
// committed log. A synchronous gRPC service: each call runs on one of gRPC's server threads, and a
// TailTopic holds one while it waits (at most kMaxTopicTails at once, each wait at most 200 ms
// before it checks for cancellation and shutdown).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include "raftlog/v1/topics.grpc.pb.h"
#include "server/dispatcher.h"
#include "server/node.h"
#include "server/write_stall_watchdog.h"

namespace raftlog::server {

class TopicsService final : public raftlog::v1::Topics::Service {
 public:
  static constexpr int kMaxTopicTails = 64;
  static constexpr std::uint32_t kDefaultEntries = 256;
  static constexpr std::uint32_t kMaxEntries = 1024;

  // `dispatcher` may be null (indexes unusable): every call is then UNAVAILABLE. A TailTopic write
  // not completed within `stall_timeout` ends its stream (RESOURCE_EXHAUSTED).
  TopicsService(Node* node, const Dispatcher* dispatcher, std::uint64_t max_read_bytes,
                std::chrono::milliseconds stall_timeout);
  // Ends open tails (they return UNAVAILABLE, SHUTTING_DOWN) and refuses new calls.
  void shutdown() { stopping_.store(true); }

  grpc::Status ListTopics(grpc::ServerContext* context, const raftlog::v1::ListTopicsRequest* request,
                          raftlog::v1::ListTopicsResponse* response) override;
  grpc::Status ReadTopic(grpc::ServerContext* context, const raftlog::v1::ReadTopicRequest* request,
                         raftlog::v1::ReadTopicResponse* response) override;
  grpc::Status TailTopic(grpc::ServerContext* context, const raftlog::v1::ReadTopicRequest* request,
                         grpc::ServerWriter<raftlog::v1::ReadTopicResponse>* writer) override;
  grpc::Status LookupKey(grpc::ServerContext* context, const raftlog::v1::LookupKeyRequest* request,
                         raftlog::v1::LookupKeyResponse* response) override;
  grpc::Status FindByTime(grpc::ServerContext* context, const raftlog::v1::FindByTimeRequest* request,
                          raftlog::v1::FindByTimeResponse* response) override;

 private:
  // True when no call is served here: no usable derived indexes, stopping, or a removed node (whose
  // indexes stop at its removal for good); unavailable() then says which.
  bool serves_nothing() const;
  grpc::Status unavailable(grpc::ServerContext* context) const;
  // One ReadTopic answer from `from_offset`; the commit index is read once, before the indexes.
  grpc::Status read_topic(grpc::ServerContext* context, const std::string& topic,
                          std::uint64_t from_offset, std::uint32_t max_entries,
                          raftlog::v1::ReadTopicResponse* response) const;
  std::uint64_t indexed_through() const { return dispatcher_->indexes().boundary() - 1; }

  Node* node_;
  const Dispatcher* dispatcher_;
  std::uint64_t max_read_bytes_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> tails_{0};
  WriteStallWatchdog tail_watchdog_;  // ends TailTopic streams whose reader takes nothing
};

}  // namespace raftlog::server

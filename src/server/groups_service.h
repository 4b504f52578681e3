// The raftlog.v1.Groups service (proto/raftlog/v1/groups.proto): consumer groups commit their
// offsets through the log and fetch them back (docs/design.md, "Consumer groups"). Served by the
// leader: a commit is an entry flagged is_group_commit (Node::append_group_commit), answered once
// committed and applied to the leader's group table; a fetch or list takes a ReadIndex and waits
// (at most kApplyWaitMs) until the table applied through it. A synchronous gRPC service: each call
// holds one of gRPC's server threads while it waits, at most kMaxPendingCalls at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/functional/function_ref.h"

#include "raftlog/v1/groups.grpc.pb.h"
#include "server/dispatcher.h"
#include "server/node.h"

namespace raftlog::server {

class GroupsService final : public raftlog::v1::Groups::Service {
 public:
  static constexpr int kMaxPendingCalls = 64;
  // Below the client library's default call timeout (2000 ms), so a slow table is answered
  // GROUPS_BEHIND (retried) rather than by the client's DEADLINE_EXCEEDED. A call with a shorter
  // deadline waits only until it.
  static constexpr std::uint32_t kApplyWaitMs = 1500;
  // The commits a leader admits at once pass fits() against the same table: the group table must
  // accept that many past its bounds (derived::kGroupBoundSlack).
  static_assert(static_cast<std::size_t>(kMaxPendingCalls) <= derived::kGroupBoundSlack);

  // `dispatcher` may be null (derived state unusable): every call is then UNAVAILABLE.
  GroupsService(Node* node, const Dispatcher* dispatcher);
  void shutdown() { stopping_.store(true); }

  grpc::Status CommitOffset(grpc::ServerContext* context,
                            const raftlog::v1::CommitOffsetRequest* request,
                            raftlog::v1::CommitOffsetResponse* response) override;
  grpc::Status FetchOffsets(grpc::ServerContext* context,
                            const raftlog::v1::FetchOffsetsRequest* request,
                            raftlog::v1::FetchOffsetsResponse* response) override;
  grpc::Status ListGroups(grpc::ServerContext* context,
                          const raftlog::v1::ListGroupsRequest* request,
                          raftlog::v1::ListGroupsResponse* response) override;

 private:
  // Admits the call (the dispatcher is usable, at most kMaxPendingCalls waiting), takes the read
  // barrier below and runs `serve` with its read index while the call still counts as pending.
  grpc::Status after_read_barrier(grpc::ServerContext* context, bool with_indexes,
                                  absl::FunctionRef<grpc::Status(std::uint64_t read_index)> serve);
  grpc::Status commit_after_barrier(grpc::ServerContext* context,
                                    const raftlog::v1::CommitOffsetRequest& request,
                                    std::uint64_t read_index,
                                    raftlog::v1::CommitOffsetResponse* response);
  grpc::Status fetch_after_barrier(grpc::ServerContext* context,
                                   const raftlog::v1::FetchOffsetsRequest& request,
                                   std::uint64_t read_index,
                                   raftlog::v1::FetchOffsetsResponse* response) const;
  // A ReadIndex, then the wait until the group table (and, `with_indexes`, the topic indexes, which
  // a commit's checks read) applied through it: OK with *read_index set, or the status to answer.
  grpc::Status read_barrier(grpc::ServerContext* context, std::uint64_t* read_index,
                            bool with_indexes) const;
  // Refuses a commit that could not apply (bad names, unknown topic, offset, bounds); OK if none.
  grpc::Status check_commit(grpc::ServerContext* context,
                            const raftlog::v1::CommitOffsetRequest& request,
                            std::uint64_t read_index) const;
  grpc::Status unavailable(grpc::ServerContext* context) const;

  Node* node_;
  const Dispatcher* dispatcher_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> pending_{0};
};

}  // namespace raftlog::server

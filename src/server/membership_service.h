// MembershipService: raftlog.v1.Membership (proto/raftlog/v1/admin.proto), the membership admin API.
// Each call checks its request (ids, addresses: INVALID_ARGUMENT with BAD_MEMBER / BAD_ADDRESS before
// the node sees it) and hands the change to the node's Raft loop (Node::change_membership); the call
// is answered when the configuration entry commits, or with the refusal's reason word
// (docs/errors.md). Leader only: the node answers NOT_LEADER with the leader hint otherwise.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace grpc {
class ChannelCredentials;
class Service;
}  // namespace grpc

namespace raftlog::server {

class Node;

// How long a change may wait for its commit: the call's deadline, capped at this, or this when the
// call has none (the node answers CONF_CHANGE_TIMEOUT, with the outcome unknown).
inline constexpr std::chrono::milliseconds kMaxMembershipWait{60000};
inline constexpr std::chrono::milliseconds kDefaultMembershipWait{10000};

// "" when `id` and `address` may name a new member, else what is wrong (the phrase follows
// "AddMember: "). Exposed for tests.
std::string check_add_member(std::uint64_t id, const std::string& address);

// How long a leader waits for the node at a new member's address to say who it is (ProbeMember)
// before it proposes the add; a node that does not answer by then is taken for one not started yet.
inline constexpr std::chrono::milliseconds kAddProbeDeadline{1000};

// Why the node that answered a probe of `address` must not be added as `id` of `cluster_id`, or "":
// it is another node, or of another cluster (drills7 M2: the add committed, then timed out, and its
// natural repair retired an id). Exposed for tests.
std::string add_probe_problem(std::uint64_t id, const std::string& address,
                              const std::string& cluster_id, std::uint64_t answered_id,
                              const std::string& answered_cluster_id);

class MembershipService {
 public:
  // `credentials`: how the leader calls a new member's port before adding it (join.h,
  // member_channel_credentials).
  MembershipService(Node* node, std::shared_ptr<grpc::ChannelCredentials> credentials);
  ~MembershipService();
  MembershipService(const MembershipService&) = delete;
  MembershipService& operator=(const MembershipService&) = delete;

  grpc::Service* service();

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace raftlog::server

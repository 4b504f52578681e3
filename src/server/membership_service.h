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

class MembershipService {
 public:
  explicit MembershipService(Node* node);
  ~MembershipService();
  MembershipService(const MembershipService&) = delete;
  MembershipService& operator=(const MembershipService&) = delete;

  grpc::Service* service();

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace raftlog::server

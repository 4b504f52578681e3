#include "server/membership_service.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <string>

#include "api_errors/error_details.h"
#include "raft/types.h"
#include "raftlog/v1/admin.grpc.pb.h"
#include "server/node.h"
#include "server/node_error_status.h"

namespace raftlog::server {

namespace v1 = raftlog::v1;
using Clock = std::chrono::steady_clock;

std::string check_add_member(std::uint64_t id, const std::string& address) {
  if (id == raft::kNoNode) return "node id 0 is not a node";
  if (address.empty()) return "the new member needs its address (host:port)";
  if (std::string problem = raft::check_member_address(address); !problem.empty()) {
    return "address '" + address + "' " + problem;
  }
  return "";
}

namespace {

// The refusal of a node that is not the leader, from its published status (what the Raft loop's
// not_leader_error says, without a trip through the loop for a read-only call).
NodeError not_leader(const NodeStatus& status) {
  if (status.leader_id == 0) {
    return make_error(ErrorCode::kNoLeader,
                      "no leader known yet (election in progress); retry shortly");
  }
  NodeError error = make_error(ErrorCode::kNotLeader,
                               "node " + std::to_string(status.node_id) +
                                   " is not the leader; the leader is node " +
                                   std::to_string(status.leader_id));
  error.leader_id = status.leader_id;
  error.leader_address = status.leader_address;
  if (!status.leader_address.empty()) error.message += " at " + status.leader_address;
  return error;
}

void fill_members(const NodeStatus& status, const std::string& cluster_id,
                  v1::ListMembersResponse* out) {
  std::vector<std::uint64_t> ids = status.voters;
  ids.insert(ids.end(), status.learners.begin(), status.learners.end());
  std::sort(ids.begin(), ids.end());
  for (std::uint64_t id : ids) {
    v1::Member* member = out->add_members();
    member->set_id(id);
    if (auto it = status.member_addresses.find(id); it != status.member_addresses.end())
      member->set_address(it->second);
    member->set_voter(std::binary_search(status.voters.begin(), status.voters.end(), id));
    member->set_leader(id == status.node_id);
    std::uint64_t match = 0;
    if (id == status.node_id) {
      match = status.last_index;
    } else {
      for (const PeerStatus& peer : status.peers) {
        if (peer.id != id) continue;
        match = peer.match_index;
        member->set_last_contact_ms(peer.last_contact_ms);
        member->set_unreachable(peer.unreachable);
      }
    }
    member->set_match_index(match);
    member->set_lag_entries(status.last_index > match ? status.last_index - match : 0);
    member->set_caught_up(match >= status.commit_index);
  }
  out->set_config_index(status.conf_index);
  out->set_config_committed(status.conf_committed);
  out->set_leader_id(status.node_id);
  out->set_term(status.term);
  out->set_commit_index(status.commit_index);
  out->set_last_index(status.last_index);
  for (std::uint64_t voter : status.bootstrap_voters) out->add_bootstrap_voters(voter);
  for (std::uint64_t id : status.retired_ids) out->add_retired_ids(id);
  out->set_cluster_id(cluster_id);
}

Clock::time_point wait_deadline(const grpc::CallbackServerContext& context) {
  const auto now = Clock::now();
  const auto cap = now + kMaxMembershipWait;
  const auto call_deadline = context.deadline();
  if (call_deadline == std::chrono::system_clock::time_point::max()) {
    return now + kDefaultMembershipWait;
  }
  const auto left = call_deadline - std::chrono::system_clock::now();
  // A little before the call's own deadline, so the answer (CONF_CHANGE_TIMEOUT) still reaches it.
  const auto wait = std::chrono::duration_cast<Clock::duration>(left) * 9 / 10;
  return std::min(cap, now + std::max<Clock::duration>(wait, Clock::duration::zero()));
}

}  // namespace

class MembershipService::Impl final : public v1::Membership::CallbackService {
 public:
  explicit Impl(Node* node) : node_(node) {}

  grpc::ServerUnaryReactor* ListMembers(grpc::CallbackServerContext* context,
                                        const v1::ListMembersRequest*,
                                        v1::ListMembersResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    const NodeStatus status = node_->status();
    if (status.role != raft::Role::kLeader) {
      reactor->Finish(to_grpc(context, not_leader(status)));
      return reactor;
    }
    fill_members(status, node_->config().cluster_id, response);
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  grpc::ServerUnaryReactor* AddMember(grpc::CallbackServerContext* context,
                                      const v1::AddMemberRequest* request,
                                      v1::ChangeMembersResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    if (std::string problem = check_add_member(request->id(), request->address());
        !problem.empty()) {
      const std::string_view reason = request->id() == raft::kNoNode
                                          ? api_errors::reason::kBadMember
                                          : api_errors::reason::kBadAddress;
      reactor->Finish(
          reason_status(context, grpc::StatusCode::INVALID_ARGUMENT, "AddMember: " + problem, std::string(reason)));
      return reactor;
    }
    const raft::ConfChangeType type = request->learner() ? raft::ConfChangeType::kAddLearner
                                                         : raft::ConfChangeType::kAddVoter;
    change(context, reactor, response, raft::ConfChange{type, request->id()}, request->address());
    return reactor;
  }

  grpc::ServerUnaryReactor* PromoteMember(grpc::CallbackServerContext* context,
                                          const v1::PromoteMemberRequest* request,
                                          v1::ChangeMembersResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    change(context, reactor, response,
           raft::ConfChange{raft::ConfChangeType::kPromoteLearner, request->id()}, "");
    return reactor;
  }

  grpc::ServerUnaryReactor* RemoveMember(grpc::CallbackServerContext* context,
                                         const v1::RemoveMemberRequest* request,
                                         v1::ChangeMembersResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    change(context, reactor, response,
           raft::ConfChange{raft::ConfChangeType::kRemoveNode, request->id()}, "");
    return reactor;
  }

 private:
  void change(grpc::CallbackServerContext* context, grpc::ServerUnaryReactor* reactor,
              v1::ChangeMembersResponse* response, raft::ConfChange conf_change,
              std::string address) {
    if (conf_change.node == raft::kNoNode) {
      reactor->Finish(reason_status(context, grpc::StatusCode::INVALID_ARGUMENT,
                                    "node id 0 is not a node",
                                    std::string(api_errors::reason::kBadMember)));
      return;
    }
    node_->change_membership(
        std::move(conf_change), std::move(address), wait_deadline(*context),
        [context, reactor, response](MembershipResult result) {
          if (!result.error.ok()) {
            reactor->Finish(to_grpc(context, result.error));
            return;
          }
          response->set_config_index(result.index);
          response->set_term(result.term);
          for (std::uint64_t voter : result.conf.voters) response->add_voters(voter);
          for (std::uint64_t learner : result.conf.learners) response->add_learners(learner);
          reactor->Finish(grpc::Status::OK);
        });
  }

  Node* node_;
};

MembershipService::MembershipService(Node* node) : impl_(std::make_unique<Impl>(node)) {}
MembershipService::~MembershipService() = default;
grpc::Service* MembershipService::service() { return impl_.get(); }

}  // namespace raftlog::server

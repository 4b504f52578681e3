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

std::string add_probe_problem(std::uint64_t id, const std::string& address,
                              const std::string& cluster_id, std::uint64_t answered_id,
                              const std::string& answered_cluster_id) {
  const std::string remedy =
      ": nothing was proposed and no id was used; check the id and the address (a removed "
      "member's id is retired for good, so an add is better caught than undone)";
  if (!answered_cluster_id.empty() && answered_cluster_id != cluster_id) {
    return "a node of another cluster ('" + answered_cluster_id + "', node " +
           std::to_string(answered_id) + ") answers at " + address + ", not node " +
           std::to_string(id) + " of this one" + remedy;
  }
  if (answered_id != 0 && answered_id != id) {
    return "node " + std::to_string(answered_id) + " answers at " + address + ", not node " +
           std::to_string(id) + remedy;
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

// Any role answers: the founding check asks followers too (server/founding_check.h).
void fill_probe(const NodeStatus& status, const std::string& cluster_id, std::uint64_t asking_id,
                v1::ProbeMemberResponse* out) {
  out->set_node_id(status.node_id);
  out->set_cluster_id(cluster_id);
  out->set_term(status.term);
  out->set_last_index(status.last_index);
  out->set_config_index(status.conf_index);
  for (std::uint64_t voter : status.bootstrap_voters) out->add_bootstrap_voters(voter);
  out->set_asking_id_retired(
      asking_id != 0 && std::find(status.retired_ids.begin(), status.retired_ids.end(),
                                  asking_id) != status.retired_ids.end());
  const bool leader = status.role == raft::Role::kLeader;
  out->set_leader(leader);
  if (!leader) return;
  for (const PeerStatus& peer : status.peers) {
    if (peer.id == asking_id) out->set_asking_id_match_index(peer.match_index);
  }
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
  Impl(Node* node, std::shared_ptr<grpc::ChannelCredentials> credentials)
      : node_(node), credentials_(std::move(credentials)) {}

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

  grpc::ServerUnaryReactor* ProbeMember(grpc::CallbackServerContext* context,
                                        const v1::ProbeMemberRequest* request,
                                        v1::ProbeMemberResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    fill_probe(node_->status(), node_->config().cluster_id, request->asking_id(), response);
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
    const raft::ConfChange conf_change{type, request->id()};
    // A follower refuses at once (NOT_LEADER) without the probe's round trip, and so does the
    // leader an address a member has (ADDRESS_IN_USE names that member better than a probe).
    const NodeStatus status = node_->status();
    const bool members_address =
        std::any_of(status.member_addresses.begin(), status.member_addresses.end(),
                    [&](const auto& member) { return member.second == request->address(); });
    if (status.role != raft::Role::kLeader || members_address) {
      change(context, reactor, response, conf_change, request->address());
      return reactor;
    }
    probe_then_add(context, reactor, response, conf_change, request->address());
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

  // Asks the node at `address` who it is (ProbeMember, kAddProbeDeadline) and refuses the add with
  // WRONG_NODE_AT_ADDRESS when another node or cluster answers; anything else (no answer yet, an
  // older node without ProbeMember, a TLS failure) proposes the add as before: operators add a
  // node before they start it. One probe per AddMember call, on gRPC's callback threads.
  void probe_then_add(grpc::CallbackServerContext* context, grpc::ServerUnaryReactor* reactor,
                      v1::ChangeMembersResponse* response, raft::ConfChange conf_change,
                      std::string address) {
    struct Probe {
      std::unique_ptr<v1::Membership::Stub> stub;
      grpc::ClientContext context;
      v1::ProbeMemberRequest request;
      v1::ProbeMemberResponse response;
    };
    auto probe = std::make_shared<Probe>();
    probe->stub = v1::Membership::NewStub(grpc::CreateChannel(address, credentials_));
    probe->context.set_deadline(std::chrono::system_clock::now() + kAddProbeDeadline);
    probe->request.set_asking_id(node_->config().node_id);
    Probe* raw = probe.get();
    raw->stub->async()->ProbeMember(
        &raw->context, &raw->request, &raw->response,
        [this, probe, context, reactor, response, conf_change,
         address = std::move(address)](grpc::Status status) mutable {
          // The caller gave up while the probe ran: proposing now would make an add it was told
          // timed out (review of found6, L5).
          if (context->IsCancelled()) {
            reactor->Finish(reason_status(context, grpc::StatusCode::DEADLINE_EXCEEDED,
                                          "AddMember: the call ended while the leader probed " +
                                              address + "; nothing was proposed",
                                          std::string(api_errors::reason::kConfChangeTimeout)));
            return;
          }
          if (status.ok()) {
            const std::string problem =
                add_probe_problem(conf_change.node, address, node_->config().cluster_id,
                                  probe->response.node_id(), probe->response.cluster_id());
            if (!problem.empty()) {
              reactor->Finish(reason_status(context, grpc::StatusCode::FAILED_PRECONDITION,
                                            "AddMember: " + problem,
                                            std::string(api_errors::reason::kWrongNodeAtAddress)));
              return;
            }
          }
          change(context, reactor, response, conf_change, std::move(address));
        });
  }

  Node* node_;
  std::shared_ptr<grpc::ChannelCredentials> credentials_;
};

MembershipService::MembershipService(Node* node,
                                     std::shared_ptr<grpc::ChannelCredentials> credentials)
    : impl_(std::make_unique<Impl>(node, std::move(credentials))) {}
MembershipService::~MembershipService() = default;
grpc::Service* MembershipService::service() { return impl_.get(); }

}  // namespace raftlog::server

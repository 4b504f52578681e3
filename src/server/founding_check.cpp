#include "server/founding_check.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>

#include "raft/types.h"
#include "raftlog/v1/admin.grpc.pb.h"
#include "server/join.h"

namespace raftlog::server {

namespace {

constexpr std::size_t kMaxClusterIdBytes = 256;  // node_config.cpp's bound on --cluster-id

std::string member_name(const FoundingAnswer& answer) {
  return "member " + std::to_string(answer.member) + " (" + answer.address + ")";
}

// What a member's answer shows of this cluster's state, or "" when it shows none.
std::string held_state(const FoundingAnswer& answer) {
  std::string held;
  const auto add = [&held](const std::string& part) { held += (held.empty() ? "" : ", ") + part; };
  if (answer.term > 0) add("term " + std::to_string(answer.term));
  if (answer.last_index > 0) add("a log up to index " + std::to_string(answer.last_index));
  if (answer.config_index > 0)
    add("a configuration changed at index " + std::to_string(answer.config_index));
  return held;
}

}  // namespace

bool founding_check_applies(const NodeConfig& config, bool joins) {
  return !joins && config.bootstrap_voters.empty() && config.members.size() > 1 &&
         !data_dir_has_state(config.data_dir);
}

std::string check_probe_answer(const FoundingAnswer& answer) {
  if (answer.node_id == 0) return "it names node 0";
  if (answer.cluster_id.empty() || answer.cluster_id.size() > kMaxClusterIdBytes)
    return "its cluster id is empty or longer than 256 bytes";
  if (answer.term > raft::kMaxTerm) return "its term is beyond any term";
  if (answer.bootstrap_voters.size() > raft::kMaxMembers ||
      std::find(answer.bootstrap_voters.begin(), answer.bootstrap_voters.end(), 0) !=
          answer.bootstrap_voters.end()) {
    return "its bootstrap voters are not 1 to 64 non-zero ids";
  }
  // Nothing else is judged: a malformed answer counts as none, which lets the start found, so an
  // odd but possible combination must not be one: a configuration entry past the log's end is
  // what a member that lost only log/ (CONFSTATE kept) or had its log cut below CONFSTATE's entry
  // by a storage fault answers (review of found6).
  return "";
}

static std::string id_list(const std::vector<std::uint64_t>& ids) {
  std::string out;
  for (std::uint64_t id : ids) out += (out.empty() ? "" : ", ") + std::to_string(id);
  return "{" + out + "}";
}

FoundingDecision decide_founding(std::uint64_t self_id, const std::string& cluster_id,
                                 const std::vector<FoundingAnswer>& answers,
                                 const std::vector<std::uint64_t>& founders) {
  FoundingDecision decision;
  const std::string self = "node " + std::to_string(self_id);
  const std::string remedy =
      ". If " + self + " lost its data directory, do not start it under its id: replace it "
      "under a new id (a new node with --join, then raftlogctl members replace " +
      std::to_string(self_id) + " NEW_ID NEW_ADDRESS; docs/operations.md, \"Membership\"). "
      "Nothing was written";
  const FoundingAnswer* holder = nullptr;
  const FoundingAnswer* leader_of_bootstrap = nullptr;
  bool changed_configuration = false;
  for (const FoundingAnswer& answer : answers) {
    if (!answer.answered) continue;
    if (answer.node_id != answer.member) {
      decision.refusal = "--members names node " + std::to_string(answer.member) + " at " +
                         answer.address + ", but node " + std::to_string(answer.node_id) +
                         " answers there: fix --members (" + self +
                         " founds nothing with a member list that names the wrong nodes; "
                         "nothing was written)";
      return decision;
    }
    if (answer.cluster_id != cluster_id) {
      decision.refusal = member_name(answer) + " belongs to cluster '" + answer.cluster_id +
                         "', not to --cluster-id '" + cluster_id +
                         "': fix --members or --cluster-id (nothing was written)";
      return decision;
    }
    if (!founders.empty() && !answer.bootstrap_voters.empty() &&
        answer.bootstrap_voters != founders) {
      decision.refusal = member_name(answer) + " belongs to a cluster founded by " +
                         id_list(answer.bootstrap_voters) + ", but this node's --members names " +
                         id_list(founders) + ": a node that is not a founder joins a running "
                         "cluster with --join (--members naming itself alone), then raftlogctl "
                         "members add; if --members is simply wrong, fix it (nothing was written)";
      return decision;
    }
    if (answer.self_retired) {
      decision.refusal = member_name(answer) + " lists " + self +
                         " as retired (removed from the cluster by a committed change): a "
                         "removed id is never reused, and an empty directory under it must not "
                         "found the cluster again. Stop this node for good; a node on this host "
                         "joins under a new id (--join, then raftlogctl members add NEW_ID "
                         "ADDRESS; docs/operations.md, \"Membership\"). Nothing was written";
      return decision;
    }
    if (held_state(answer).empty()) continue;
    if (holder == nullptr) holder = &answer;
    if (answer.config_index > 0) changed_configuration = true;
    if (answer.leader && answer.config_index == 0) leader_of_bootstrap = &answer;
  }
  if (holder == nullptr) return decision;
  const std::vector<std::uint64_t>* leaders_founders =
      leader_of_bootstrap != nullptr ? &leader_of_bootstrap->bootstrap_voters : nullptr;
  if (leader_of_bootstrap != nullptr && !changed_configuration &&
      leader_of_bootstrap->self_match_index == 0 &&
      (leaders_founders->empty() ||
       std::binary_search(leaders_founders->begin(), leaders_founders->end(), self_id))) {
    decision.note = member_name(*leader_of_bootstrap) + " leads the founders' configuration in "
                    "term " + std::to_string(leader_of_bootstrap->term) +
                    " and never replicated an entry to " + self +
                    " in that term: starting as a late founder; this node grants no vote to a "
                    "candidate with entries until that leader has caught it up";
    return decision;
  }
  decision.ask_again = leader_of_bootstrap == nullptr && !changed_configuration;
  decision.refusal =
      self + "'s data directory is empty and --members names other members, so this start "
      "would found the cluster at term 0, but " + member_name(*holder) +
      " holds this cluster's state (" + held_state(*holder) +
      "): the cluster exists already, and a founder on an empty directory beside it would elect "
      "in terms it used already and fork it" + remedy + "." +
      (decision.ask_again
           ? " If this is this node's first start, the new cluster may have had no leader while "
             "it asked (an election, or its leader restarting): start it again once one is "
             "elected (its leader lets a founder that never held entries in)."
           : "") +
      " If you are sure that this node never held data of this cluster, start it once with "
      "--skip-founding-check";
  return decision;
}

std::vector<FoundingAnswer> ask_other_members(const NodeConfig& config, const NodeTls& tls,
                                              std::chrono::milliseconds deadline) {
  struct Call {
    std::unique_ptr<raftlog::v1::Membership::Stub> stub;
    grpc::ClientContext context;
    raftlog::v1::ProbeMemberRequest request;
    raftlog::v1::ProbeMemberResponse response;
    grpc::Status status;
  };
  const std::shared_ptr<grpc::ChannelCredentials> credentials = member_channel_credentials(tls);
  std::vector<FoundingAnswer> answers;
  std::vector<std::unique_ptr<Call>> calls;
  std::mutex mu;
  std::condition_variable finished;
  std::size_t done = 0;
  // config.members holds at most raft::kMaxMembers (validate()): bounded, one call each.
  for (const auto& [id, address] : config.members) {
    if (id == config.node_id) continue;
    FoundingAnswer answer;
    answer.member = id;
    answer.address = address;
    answers.push_back(std::move(answer));
    auto call = std::make_unique<Call>();
    call->stub = raftlog::v1::Membership::NewStub(grpc::CreateChannel(address, credentials));
    call->context.set_deadline(std::chrono::system_clock::now() + deadline);
    call->request.set_asking_id(config.node_id);
    calls.push_back(std::move(call));
  }
  for (const std::unique_ptr<Call>& call : calls) {
    Call* c = call.get();
    c->stub->async()->ProbeMember(&c->context, &c->request, &c->response,
                                  [c, &mu, &finished, &done](grpc::Status status) {
                                    std::lock_guard lock(mu);
                                    c->status = std::move(status);
                                    ++done;
                                    finished.notify_all();
                                  });
  }
  {
    // Every call ends by its deadline; a little beyond it, the stragglers are cancelled (their
    // callbacks still run, and are waited for: they touch `calls`).
    std::unique_lock lock(mu);
    if (!finished.wait_for(lock, deadline + std::chrono::milliseconds(500),
                           [&] { return done == calls.size(); })) {
      for (const std::unique_ptr<Call>& call : calls) call->context.TryCancel();
      finished.wait(lock, [&] { return done == calls.size(); });
    }
  }
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const Call& call = *calls[i];
    FoundingAnswer& answer = answers[i];
    if (!call.status.ok()) {
      const grpc::StatusCode code = call.status.error_code();
      answer.failure_is_loud = code != grpc::StatusCode::UNAVAILABLE &&
                               code != grpc::StatusCode::DEADLINE_EXCEEDED &&
                               code != grpc::StatusCode::CANCELLED &&
                               code != grpc::StatusCode::UNIMPLEMENTED;
      answer.failure = call.status.error_code() == grpc::StatusCode::UNIMPLEMENTED
                           ? "it runs a raftlogd from before the founding check"
                           : "gRPC status " + std::to_string(call.status.error_code()) + ": " +
                                 call.status.error_message();
      continue;
    }
    answer.node_id = call.response.node_id();
    answer.cluster_id = call.response.cluster_id();
    answer.term = call.response.term();
    answer.last_index = call.response.last_index();
    answer.config_index = call.response.config_index();
    answer.self_retired = call.response.asking_id_retired();
    answer.leader = call.response.leader();
    answer.self_match_index = call.response.asking_id_match_index();
    answer.bootstrap_voters.assign(call.response.bootstrap_voters().begin(),
                                   call.response.bootstrap_voters().end());
    std::sort(answer.bootstrap_voters.begin(), answer.bootstrap_voters.end());
    answer.failure = check_probe_answer(answer);
    answer.answered = answer.failure.empty();
    if (!answer.answered) {
      answer.failure = "a malformed answer: " + answer.failure;
      answer.failure_is_loud = true;
    }
  }
  return answers;
}

}  // namespace raftlog::server

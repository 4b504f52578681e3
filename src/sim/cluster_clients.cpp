// Client operations sent to a node: appends, linearizable reads, membership changes and leadership
// transfers, each answered after the checker saw the Ready batch it depends on (cluster.h).
#include "sim/cluster.h"

#include <fmt/format.h>

#include <memory>
#include <utility>

namespace raftlog::sim {

std::vector<std::string> Cluster::make_payloads(std::uint64_t client_id, std::uint64_t sequence,
                                                std::size_t count) {
  std::vector<std::string> payloads(count);
  for (std::size_t k = 0; k < count; ++k) {
    payloads[k] = fmt::format("s{}c{}q{}e{}", seed_, client_id, sequence, k);
    payloads[k].append(prng_.below(config_.payload_padding_max_bytes + 1), '.');
  }
  return payloads;
}

replica::Replica::AppendPlacement Cluster::append(raft::NodeId target, ClientAppend request,
                                                  AppendDone done) {
  Node& n = node(target);
  if (!is_running(target)) {
    done(
        replica::failed_append(replica::make_error(replica::ErrorCode::kUnavailable, "node down")));
    return {};
  }
  const std::size_t entry_count = request.payloads.size();
  std::vector<std::string> payloads = request.payloads;
  replica::Replica::AppendRequest in;
  in.payloads = std::move(request.payloads);
  in.client_id = request.client_id;
  in.sequence = request.sequence;
  in.deadline = now_time() + std::chrono::milliseconds(n.replica->config().append_timeout_ms);
  in.done = [this, target, client = request.client_id, sequence = request.sequence,
             done = std::move(done)](replica::AppendResult result) {
    completions_.push_back([this, target, client, sequence, done, result = std::move(result)] {
      if (result.error.ok()) {
        trace_.log("n{} acknowledges c{} q{}: [{}..{}] t{}{}", target, client, sequence,
                   result.first_index, result.last_index, result.term,
                   result.duplicate ? " (duplicate)" : "");
        if (result.duplicate) ++stats_.duplicate_answers;
      } else {
        trace_.log("n{} refuses c{} q{}: {}", target, client, sequence,
                   replica::to_string(result.error.code));
      }
      done(result);
    });
  };
  const replica::Replica::AppendPlacement placement = n.replica->append(std::move(in));
  if (placement.proposed) {
    trace_.log("n{} append c{} q{} x{} proposed at [{}..{}] t{}", target, request.client_id,
               request.sequence, entry_count, placement.first, placement.last, placement.term);
  } else {
    trace_.log("n{} append c{} q{} x{} not proposed", target, request.client_id, request.sequence,
               entry_count);
  }
  // The entries reach the log in the Ready batch the proposal produced.
  process(n);
  if (!placement.proposed) {
    ++stats_.proposals_refused;
    return placement;
  }
  ++stats_.proposals_accepted;
  if (checker_.failed() || !n.replica) return placement;
  if (placement.last + 1 - placement.first != entry_count) {
    contract_violation(n, fmt::format("accepted {} entries but reported indexes [{}..{}]",
                                      entry_count, placement.first, placement.last));
  } else {
    checker_.observe_proposal(target, placement.first, placement.term, payloads);
  }
  return placement;
}

bool Cluster::request_read(raft::NodeId target) {
  Node& n = node(target);
  if (!is_running(target)) return false;
  const std::uint64_t request_id = next_read_id_++;
  ++stats_.reads_requested;
  checker_.observe_read_request(request_id);
  auto refused = std::make_shared<bool>(false);
  replica::Replica::ReadIndexRequest in;
  in.deadline = now_time() + std::chrono::milliseconds(50 * kTickMs);
  in.done = [this, target, request_id, refused](replica::ReadIndexResult result) {
    if (!result.error.ok()) *refused = true;
    completions_.push_back([this, target, request_id, result] {
      if (result.error.ok()) {
        trace_.log("n{} read {} released at {}", target, request_id, result.read_index);
        checker_.observe_read_released(target, request_id, result.read_index);
      } else {
        ++stats_.reads_aborted;
        trace_.log("n{} read {} aborted ({})", target, request_id,
                   replica::to_string(result.error.code));
        checker_.observe_read_aborted(request_id);
      }
    });
  };
  n.replica->read_index(std::move(in));
  const bool accepted = !*refused;  // a refusal is answered within read_index()
  trace_.log("n{} read {} requested -> {}", target, request_id, accepted ? "ok" : "refused");
  process(n);
  return accepted;
}

void Cluster::propose_conf_change(raft::NodeId target, const raft::ConfChange& change) {
  Node& n = node(target);
  if (!is_running(target)) return;
  replica::Replica::MembershipRequest in;
  in.change = change;
  in.deadline = now_time() + std::chrono::milliseconds(n.replica->config().append_timeout_ms);
  auto refused_at_once = std::make_shared<bool>(false);
  auto answered = std::make_shared<bool>(false);
  in.done = [this, target, change, refused_at_once,
             answered](const replica::MembershipResult& result) {
    if (!*answered && !result.error.ok()) *refused_at_once = true;
    *answered = true;
    completions_.push_back([this, target, change, result] {
      if (result.error.ok()) {
        ++stats_.conf_changes_committed;
        trace_.log("n{} committed {} n{} at {}: {}", target, raft::to_string(change.type),
                   change.node, result.index, raft::to_string(result.conf));
      } else {
        trace_.log("n{} {} n{} failed: {}", target, raft::to_string(change.type), change.node,
                   result.error.reason);
      }
    });
  };
  n.replica->propose_conf_change(std::move(in));
  if (*refused_at_once) {
    ++stats_.conf_changes_refused;
  } else {
    ++stats_.conf_changes_proposed;
  }
  trace_.log("n{} {} n{} -> {}", target, raft::to_string(change.type), change.node,
             *refused_at_once ? "refused" : "proposed");
  process(n);
}

void Cluster::transfer_leadership(raft::NodeId leader_id, raft::NodeId target) {
  Node& n = node(leader_id);
  if (!is_running(leader_id)) return;
  replica::Replica::TransferRequest in;
  in.target = target;
  in.done = [](const replica::TransferResult&) {};
  n.replica->transfer_leadership(std::move(in));
  trace_.log("n{} transfer leadership to n{}", leader_id, target);
  ++stats_.transfers_started;
  process(n);
}

}  // namespace raftlog::sim

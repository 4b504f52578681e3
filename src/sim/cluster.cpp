#include "sim/cluster.h"

#include <algorithm>
#include <cassert>
#include <numeric>
#include <utility>

namespace raftlog::sim {

namespace {

std::string describe_message(const raft::Message& m) {
  std::string text = fmt::format("n{}->n{} {} t{}", m.from, m.to, raft::to_string(m.type), m.term);
  switch (m.type) {
    case raft::MessageType::kAppend:
      text += fmt::format(" prev={}/t{} +{} commit={}", m.index, m.log_term, m.entries.size(), m.commit);
      if (!m.entries.empty()) text += fmt::format(" [{}..{}]", m.entries.front().index, m.entries.back().index);
      break;
    case raft::MessageType::kAppendResponse:
      text += fmt::format(" index={}{}", m.index, m.reject ? fmt::format(" REJECT hint={}/t{}", m.reject_hint,
                                                                          m.hint_term)
                                                           : std::string());
      break;
    case raft::MessageType::kVote:
    case raft::MessageType::kPreVote:
      text += fmt::format(" last={}/t{}", m.index, m.log_term);
      break;
    case raft::MessageType::kVoteResponse:
    case raft::MessageType::kPreVoteResponse:
      text += m.reject ? " REJECT" : " GRANT";
      break;
    case raft::MessageType::kHeartbeat:
      text += fmt::format(" commit={} ctx={}", m.commit, m.context);
      break;
    case raft::MessageType::kHeartbeatResponse:
      text += fmt::format(" ctx={}", m.context);
      break;
    case raft::MessageType::kTimeoutNow:
      break;
  }
  return text;
}

}  // namespace

Cluster::Cluster(const ClusterConfig& config, std::uint64_t seed, util::Prng& prng, Checker& checker, Trace& trace)
    : config_(config), seed_(seed), prng_(prng), checker_(checker), trace_(trace), network_(config.node_count) {
  assert(config.node_count >= 1);
  assert(config.min_persist_delay_steps >= 1 && config.min_persist_delay_steps <= config.max_persist_delay_steps);
  nodes_.resize(config.node_count);
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    Node& n = nodes_[i];
    n.id = i + 1;
    n.storage = std::make_unique<SimStorage>();
    checker_.attach_log(n.id, n.storage.get());
  }
  for (Node& n : nodes_) {
    n.raft = std::make_unique<raft::Raft>(config_for(n.id), *n.storage, n.storage->durable_hard_state());
    n.soft = raft::SoftState{n.raft->role(), n.raft->leader(), n.raft->term()};
    n.commit = n.raft->commit_index();
    checker_.observe_restart(n.id, n.commit);
  }
  for (Node& n : nodes_) drain_ready(n);
}

Cluster::~Cluster() {
  // Cores hold references into their storage: destroy them first.
  for (Node& n : nodes_) n.raft.reset();
}

Cluster::Node& Cluster::node(raft::NodeId id) {
  assert(id >= 1 && id <= nodes_.size());
  return nodes_[id - 1];
}

const Cluster::Node& Cluster::node(raft::NodeId id) const {
  assert(id >= 1 && id <= nodes_.size());
  return nodes_[id - 1];
}

raft::Config Cluster::config_for(raft::NodeId id) {
  raft::Config config = config_.raft;
  config.id = id;
  config.initial_conf.voters.clear();
  for (const Node& n : nodes_) config.initial_conf.voters.push_back(n.id);
  config.random_seed = prng_.derive_seed();
  return config;
}

void Cluster::set_clock(std::uint64_t step_in_tick) {
  step_in_tick_ = step_in_tick;
  trace_.set_clock(tick_, step_in_tick_);
}

raft::NodeId Cluster::leader() const {
  raft::NodeId best = raft::kNoNode;
  raft::Term best_term = 0;
  for (const Node& n : nodes_) {
    if (!is_running(n.id) || n.soft.role != raft::Role::kLeader) continue;
    if (best == raft::kNoNode || n.soft.term > best_term) {
      best = n.id;
      best_term = n.soft.term;
    }
  }
  return best;
}

void Cluster::run_tick() {
  ++tick_;
  set_clock(0);
  for (Node& n : nodes_) {
    if (n.restart_at_tick != 0 && n.restart_at_tick <= tick_) restart(n.id);
    if (checker_.failed()) return;
  }
  // Nodes tick in a random order each time, so no node is systematically first to time out.
  std::vector<raft::NodeId> order(nodes_.size());
  std::iota(order.begin(), order.end(), raft::NodeId{1});
  for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[prng_.below(i)]);
  for (raft::NodeId id : order) {
    if (checker_.failed()) return;
    Node& n = node(id);
    if (!is_running(id)) continue;
    n.raft->tick();
    drain_ready(n);
  }
  for (std::uint64_t step = 0; step < kStepsPerTick && !checker_.failed(); ++step) {
    set_clock(step);
    run_due_strike();
    deliver_due_messages();
    for (Node& n : nodes_) {
      if (checker_.failed()) return;
      complete_due_writes(n);
    }
  }
}

void Cluster::deliver_due_messages() {
  bool dropped_by_partition = false;
  // Bounded by the network's own bound on messages in flight: each pop removes one.
  for (std::size_t budget = Network::kMaxInFlight + 1; budget > 0 && !checker_.failed(); --budget) {
    std::optional<raft::Message> message = network_.pop_due(now_step(), dropped_by_partition);
    if (!message) return;
    Node& to = node(message->to);
    if (dropped_by_partition || !is_up(to.id)) {
      ++stats_.messages_dropped;
      trace_.log("lost {} ({})", describe_message(*message), dropped_by_partition ? "partition" : "node down");
      continue;
    }
    if (is_paused(to.id)) {
      // A paused process does not read its socket; the message waits for it.
      network_.hold_until(*message, to.paused_until_tick * kStepsPerTick + prng_.below(kStepsPerTick));
      continue;
    }
    ++stats_.messages_delivered;
    trace_.log("recv {}", describe_message(*message));
    to.raft->step(*message);
    drain_ready(to);
  }
}

void Cluster::send(Node& from, const raft::Message& message) {
  if (message.from != from.id || message.to < 1 || message.to > nodes_.size() || message.to == from.id) {
    contract_violation(from, fmt::format("emitted a misaddressed message: {}", describe_message(message)));
    return;
  }
  ++stats_.messages_sent;
  const int copies = network_.send(message, now_step(), prng_);
  if (copies == 0) ++stats_.messages_dropped;
  trace_.log("send {}{}", describe_message(message), copies == 0 ? " DROPPED" : (copies == 2 ? " DUPLICATED" : ""));
}

void Cluster::contract_violation(const Node& n, const std::string& what) {
  checker_.report("ready-contract", fmt::format("node {} {}", n.id, what));
}

void Cluster::drain_ready(Node& n) {
  for (int batch = 0; batch < kMaxReadyBatchesPerDrain; ++batch) {
    if (checker_.failed() || !n.raft || !n.raft->has_ready()) return;
    raft::Ready ready = n.raft->ready();
    handle_ready(n, ready);
  }
  contract_violation(n, "kept producing Ready batches without new input");
}

void Cluster::handle_ready(Node& n, raft::Ready& ready) {
  SimStorage& storage = *n.storage;

  // must_sync must cover every change of term, vote or log.
  const bool log_changes = ready.truncate_from.has_value() || !ready.entries.empty();
  const bool vote_changes = ready.hard_state && (ready.hard_state->term != n.last_hard_state.term ||
                                                 ready.hard_state->vote != n.last_hard_state.vote);
  if ((log_changes || vote_changes) && !ready.must_sync) {
    contract_violation(n, "changed its term, vote or log without must_sync");
    return;
  }
  if (ready.hard_state) n.last_hard_state = *ready.hard_state;

  // 1 and 2: truncate, then append, on the volatile log.
  if (ready.truncate_from) {
    trace_.log("n{} truncate from {}", n.id, *ready.truncate_from);
    checker_.observe_truncate(n.id, *ready.truncate_from);
  }
  const raft::Index last_before = storage.last_index();
  if (!storage.apply_volatile(ready.truncate_from, ready.entries)) {
    contract_violation(n, fmt::format("gave a batch that does not fit its log (last {}, truncate {}, first entry {})",
                                      last_before, ready.truncate_from.value_or(0),
                                      ready.entries.empty() ? 0 : ready.entries.front().index));
    return;
  }
  if (!ready.entries.empty()) {
    trace_.log("n{} append [{}..{}] last {}", n.id, ready.entries.front().index, ready.entries.back().index,
               describe(ready.entries.back()));
    checker_.observe_append(n.id, ready.entries.front().index, ready.entries.back().index);
  }

  if (ready.soft_state) {
    n.soft = *ready.soft_state;
    trace_.log("n{} is {} of term {} (leader n{})", n.id, raft::to_string(n.soft.role), n.soft.term, n.soft.leader);
    checker_.observe_role(n.id, n.soft.term, n.soft.role);
    if (n.soft.role == raft::Role::kLeader) maybe_schedule_strike(n);
  }

  // 3: messages that need not wait for this batch to be durable.
  for (const raft::Message& message : ready.messages) send(n, message);

  // 4: queue the durable write; it completes after a random delay, in order with earlier writes.
  if (ready.hard_state || log_changes || !ready.messages_after_persist.empty()) {
    PersistJob job;
    job.truncate_from = ready.truncate_from;
    job.entries = std::move(ready.entries);
    job.hard_state = ready.hard_state;
    job.must_sync = ready.must_sync;
    job.messages_after_persist = std::move(ready.messages_after_persist);
    job.last_index = storage.last_index();
    job.last_term = storage.term_at(job.last_index).value_or(0);
    job.log_changed = log_changes;
    const std::uint64_t delay =
        prng_.between(config_.min_persist_delay_steps, config_.max_persist_delay_steps);
    job.complete_at_step = std::max(now_step() + delay, storage.last_queued_completion_step());
    if (storage.pending_jobs() >= SimStorage::kMaxPendingJobs) {
      contract_violation(n, "outran its disk: too many unpersisted batches");
      return;
    }
    n.storage->enqueue(std::move(job));
  }

  // 5: committed entries are delivered; reads wait for their index.
  if (ready.commit_index) {
    n.commit = *ready.commit_index;
    trace_.log("n{} commit {}", n.id, n.commit);
    checker_.observe_commit(n.id, n.commit, n.soft.term);
    if (strike_after_commit_ && strike_target_ == n.id && strike_term_ == n.soft.term) {
      strike_after_commit_ = false;
      strike_at_step_ = now_step() + prng_.between(0, strike_.max_delay_steps);
    }
  }
  for (const raft::ReadState& read : ready.read_states) {
    if (n.waiting_reads.size() >= kMaxWaitingReads) {
      contract_violation(n, "confirmed more reads than any bound allows");
      return;
    }
    n.waiting_reads.push_back(read);
  }
  release_reads(n);

  // 6.
  for (std::uint64_t request_id : ready.aborted_reads) {
    ++stats_.reads_aborted;
    trace_.log("n{} read {} aborted", n.id, request_id);
    checker_.observe_read_aborted(request_id);
  }
}

void Cluster::release_reads(Node& n) {
  auto ready_end = std::stable_partition(n.waiting_reads.begin(), n.waiting_reads.end(),
                                         [&n](const raft::ReadState& read) { return read.index <= n.commit; });
  for (auto it = n.waiting_reads.begin(); it != ready_end; ++it) {
    trace_.log("n{} read {} released at {}", n.id, it->request_id, it->index);
    checker_.observe_read_released(n.id, it->request_id, it->index);
  }
  n.waiting_reads.erase(n.waiting_reads.begin(), ready_end);
}

void Cluster::abort_waiting_reads(Node& n) {
  for (const raft::ReadState& read : n.waiting_reads) {
    ++stats_.reads_aborted;
    checker_.observe_read_aborted(read.request_id);
  }
  n.waiting_reads.clear();
}

void Cluster::complete_due_writes(Node& n) {
  // Bounded by the storage's own bound on queued writes: each iteration completes one.
  for (std::size_t budget = SimStorage::kMaxPendingJobs + 1; budget > 0; --budget) {
    if (checker_.failed() || !is_running(n.id) || !n.storage->has_due_job(now_step())) return;
    PersistJob job = n.storage->complete_oldest();
    trace_.log("n{} durable up to {}/t{}{}", n.id, job.last_index, job.last_term,
               job.hard_state ? fmt::format(" hs(t{} v{} c{})", job.hard_state->term, job.hard_state->vote,
                                            job.hard_state->commit)
                              : std::string());
    if (job.hard_state) checker_.observe_durable_hard_state(n.id, *job.hard_state);
    if (job.log_changed) n.raft->on_persisted(job.last_index, job.last_term);
    for (const raft::Message& message : job.messages_after_persist) send(n, message);
    drain_ready(n);
  }
}

void Cluster::maybe_schedule_strike(const Node& n) {
  if (strike_.per_million == 0 || strike_target_ != raft::kNoNode) return;
  if (!prng_.chance_per_million(strike_.per_million)) return;
  strike_target_ = n.id;
  strike_term_ = n.soft.term;
  // Half the strikes land at once (the new leader's first messages die with it); the other half land
  // right after the leader's first commit (its followers have not all heard of it yet).
  strike_after_commit_ = prng_.below(2) == 0;
  strike_at_step_ = strike_after_commit_ ? UINT64_MAX : now_step() + prng_.between(0, strike_.max_delay_steps);
}

void Cluster::run_due_strike() {
  if (strike_target_ == raft::kNoNode || strike_at_step_ > now_step()) return;
  const Node& target = node(strike_target_);
  strike_target_ = raft::kNoNode;
  if (!is_running(target.id) || target.soft.role != raft::Role::kLeader || target.soft.term != strike_term_) return;
  ++stats_.leader_strikes;
  trace_.log("STRIKE new leader n{} of term {}", target.id, strike_term_);
  crash(target.id, prng_.between(1, strike_.max_down_ticks));
}

void Cluster::crash(raft::NodeId id, std::uint64_t down_ticks) {
  Node& n = node(id);
  if (!n.raft) return;
  ++stats_.crashes;
  const std::size_t lost_messages =
      network_.drop_in_flight_from(id, config_.crash_loses_outgoing_per_million, prng_);
  n.restart_at_tick = down_ticks == 0 ? 0 : tick_ + down_ticks;
  trace_.log("n{} CRASH (loses {} unpersisted writes, {} unsent messages; down for {} ticks)", id,
             n.storage->pending_jobs(), lost_messages, down_ticks);
  abort_waiting_reads(n);
  n.raft.reset();
  n.storage->crash();
  n.soft = raft::SoftState{};
  n.paused_until_tick = 0;
  checker_.observe_crash(id);
}

void Cluster::restart(raft::NodeId id) {
  Node& n = node(id);
  n.restart_at_tick = 0;
  if (n.raft) return;
  const raft::HardState& durable = n.storage->durable_hard_state();
  n.raft = std::make_unique<raft::Raft>(config_for(id), *n.storage, durable);
  n.last_hard_state = durable;
  n.soft = raft::SoftState{n.raft->role(), n.raft->leader(), n.raft->term()};
  n.commit = n.raft->commit_index();
  trace_.log("n{} RESTART term {} vote {} commit {} log {}", id, durable.term, durable.vote, n.commit,
             n.storage->last_index());
  checker_.observe_restart(id, n.commit);
  checker_.observe_role(id, n.soft.term, n.soft.role);
  drain_ready(n);
}

void Cluster::pause(raft::NodeId id, std::uint64_t ticks) {
  Node& n = node(id);
  if (!is_running(id)) return;
  ++stats_.pauses;
  n.paused_until_tick = tick_ + ticks;
  trace_.log("n{} PAUSE until tick {}", id, n.paused_until_tick);
}

void Cluster::unpause_all() {
  for (Node& n : nodes_) n.paused_until_tick = 0;
}

raft::ProposeResult Cluster::propose(raft::NodeId target, std::size_t entry_count, std::vector<std::string>* payloads) {
  assert(entry_count >= 1);
  Node& n = node(target);
  if (!is_running(target)) return raft::ProposeResult{};
  std::vector<raft::Entry> entries(entry_count);
  payloads->clear();
  for (raft::Entry& entry : entries) {
    // Unique per run: the checker tells proposals apart by payload.
    std::string payload = fmt::format("s{}p{}", seed_, next_payload_++);
    payload.append(prng_.below(config_.payload_padding_max_bytes + 1), '.');
    entry.payload = std::move(payload);
    payloads->push_back(entry.payload);
  }
  raft::ProposeResult result = n.raft->propose(std::move(entries));
  trace_.log("n{} propose x{} -> {} [{}..{}] t{} hint n{}", target, entry_count, raft::to_string(result.status),
             result.first_index, result.last_index, result.term, result.leader_hint);
  if (result.status != raft::ProposeStatus::kOk) {
    ++stats_.proposals_refused;
    return result;
  }
  ++stats_.proposals_accepted;
  drain_ready(n);
  if (checker_.failed()) return result;
  if (result.last_index + 1 - result.first_index != entry_count) {
    contract_violation(n, fmt::format("accepted {} entries but reported indexes [{}..{}]", entry_count,
                                      result.first_index, result.last_index));
    return result;
  }
  checker_.observe_proposal(target, result.first_index, result.term, *payloads);
  return result;
}

raft::ReadIndexStatus Cluster::request_read(raft::NodeId target) {
  Node& n = node(target);
  if (!is_running(target)) return raft::ReadIndexStatus::kNotLeader;
  const std::uint64_t request_id = next_read_id_++;
  ++stats_.reads_requested;
  checker_.observe_read_request(request_id);
  const raft::ReadIndexStatus status = n.raft->read_index(request_id);
  trace_.log("n{} read {} requested -> {}", target, request_id, status == raft::ReadIndexStatus::kOk ? "ok" : "refused");
  if (status != raft::ReadIndexStatus::kOk) checker_.observe_read_aborted(request_id);
  drain_ready(n);
  return status;
}

raft::TransferStatus Cluster::transfer_leadership(raft::NodeId leader_id, raft::NodeId target) {
  Node& n = node(leader_id);
  if (!is_running(leader_id)) return raft::TransferStatus::kNotLeader;
  const raft::TransferStatus status = n.raft->transfer_leadership(target);
  trace_.log("n{} transfer leadership to n{} -> {}", leader_id, target, raft::to_string(status));
  if (status == raft::TransferStatus::kOk) ++stats_.transfers_started;
  drain_ready(n);
  return status;
}

}  // namespace raftlog::sim

// The cluster's messages and disks: sending and delivering messages over the simulated network,
// the stepped stores' flush cycles and checkpoints, and the replicas' off-loop jobs (cluster.h).
#include "sim/cluster.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <utility>

namespace raftlog::sim {

namespace {

std::string describe_message(const raft::Message& m) {
  std::string text = fmt::format("n{}->n{} {} t{}", m.from, m.to, raft::to_string(m.type), m.term);
  switch (m.type) {
    case raft::MessageType::kAppend:
      text += fmt::format(" prev={}/t{} +{} commit={}", m.index, m.log_term, m.entries.size(),
                          m.commit);
      if (!m.entries.empty())
        text += fmt::format(" [{}..{}]", m.entries.front().index, m.entries.back().index);
      break;
    case raft::MessageType::kAppendResponse:
      text += fmt::format(" index={}{}", m.index,
                          m.reject ? fmt::format(" REJECT hint={}/t{}", m.reject_hint, m.hint_term)
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
    case raft::MessageType::kSnapshot:
      if (m.snapshot) {
        text += fmt::format(" snapshot={}/t{} data={}B commit={}", m.snapshot->index,
                            m.snapshot->term, m.snapshot->data.size(), m.commit);
      }
      break;
  }
  return text;
}

}  // namespace

void Cluster::schedule_flush(Node& n) {
  if (n.flush_at_step != 0 || !n.replica) return;
  const store::CommitLog& log = n.replica->log();
  if (log.flushed_index() >= log.last_index()) return;
  std::uint64_t delay = prng_.between(config_.min_flush_delay_steps, config_.max_flush_delay_steps);
  if (config_.slow_flush_per_million != 0 &&
      prng_.chance_per_million(config_.slow_flush_per_million)) {
    delay += prng_.between(1, config_.slow_flush_max_steps);
  }
  n.flush_at_step = now_step() + delay;
  n.sync_will_fail = config_.failing_sync_per_million != 0 &&
                     prng_.chance_per_million(config_.failing_sync_per_million);
}

void Cluster::run_due_flushes() {
  for (Node& n : nodes_) {
    if (checker_.failed()) return;
    if (!is_running(n.id) || n.flush_at_step == 0 || n.flush_at_step > now_step()) continue;
    n.flush_at_step = 0;
    store::CommitLog& log = n.replica->log();
    // The failing sync is the flush cycle's own: armed only when it has something to sync (a
    // snapshot install may have made the log durable since the cycle was scheduled), and disarmed
    // after it, so that it never lands on a later write (a checkpoint, TOPICSTATE).
    const bool arm_failure = n.sync_will_fail && log.flushed_index() < log.last_index();
    n.sync_will_fail = false;
    if (arm_failure) n.env->fail_next_syncs(1);
    ++stats_.flush_cycles;
    const store::Status flushed = log.run_flush_cycle();
    if (arm_failure) n.env->fail_next_syncs(0);
    if (store::Status st = flushed; !st.ok()) {
      // The store fails for good on a sync error; the process stops and its supervisor restarts it.
      ++stats_.sync_failures;
      trace_.log("n{} SYNC FAILED ({}): the node stops", n.id, st.to_string());
      crash(n.id, prng_.between(1, 10));
      continue;
    }
    trace_.log("n{} flushed to {}", n.id, log.flushed_index());
    process(n);
  }
}

void Cluster::run_due_off_loop_jobs() {
  for (Node& n : nodes_) {
    // A paused node's worker may finish, but its loop takes the result only when it runs again.
    while (!checker_.failed() && is_running(n.id) && !n.off_loop_jobs.empty() &&
           n.off_loop_jobs.front().due_step <= now_step()) {
      Node::OffLoopJob job = std::move(n.off_loop_jobs.front());
      n.off_loop_jobs.pop_front();
      ++stats_.off_loop_jobs;
      trace_.log("n{} off-loop job done", n.id);
      job.job();
      job.done();
      process(n);
    }
  }
}

void Cluster::run_checkpoints() {
  for (Node& n : nodes_) {
    if (checker_.failed()) return;
    if (!is_running(n.id) || tick_ % config_.checkpoint_every_ticks != n.checkpoint_phase) continue;
    store::CommitLog& log = n.replica->log();
    if (store::Status st = log.run_checkpoint(); !st.ok()) {
      stop_failed(n, "checkpoint: " + st.to_string());
      return;
    }
    // The checkpoint vouches for the commit index as far as the log it recorded is durable (a follower
    // may commit beyond its own flush): a restart never comes back below that.
    const raft::Index durable_commit = std::min(log.commit_index(), log.flushed_index());
    if (durable_commit > n.durable_hard_state.commit) {
      n.durable_hard_state.commit = durable_commit;
      checker_.observe_durable_hard_state(n.id, n.durable_hard_state);
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
      if (trace_.enabled())
        trace_.log("lost {} ({})", describe_message(*message),
                   dropped_by_partition ? "partition" : "node down");
      continue;
    }
    if (is_paused(to.id)) {
      // A paused process does not read its socket; the message waits for it.
      network_.hold_until(*message,
                          to.paused_until_tick * kStepsPerTick + prng_.below(kStepsPerTick));
      continue;
    }
    ++stats_.messages_delivered;
    if (trace_.enabled()) trace_.log("recv {}", describe_message(*message));
    to.replica->step(*message);
    const bool from_leader = message->type == raft::MessageType::kAppend ||
                             message->type == raft::MessageType::kHeartbeat;
    if (from_leader && to.replica->core().leader() == message->from &&
        to.replica->core().term() == message->term) {
      to.heard_hold = Node::HeardHold{message->from, message->term, message->retention_hold,
                                      now_time()};
    }
    process(to);
  }
}

void Cluster::send(Node& from, raft::Message message) {
  if (message.from != from.id || message.to < 1 || message.to > nodes_.size() ||
      message.to == from.id) {
    contract_violation(
        from, fmt::format("emitted a misaddressed message: {}", describe_message(message)));
    return;
  }
  ++stats_.messages_sent;
  const int copies = network_.send(message, now_step(), prng_);
  if (copies == 0) ++stats_.messages_dropped;
  if (trace_.enabled())
    trace_.log("send {}{}", describe_message(message),
               copies == 0 ? " DROPPED" : (copies == 2 ? " DUPLICATED" : ""));
}

}  // namespace raftlog::sim

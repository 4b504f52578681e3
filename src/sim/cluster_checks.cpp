// What the cluster checks of each replica as it runs: the Ready contract (must_sync, addressing),
// where each log starts, snapshot points, and everything it reports to the Checker (cluster.h).
#include "sim/cluster.h"

#include <fmt/format.h>

#include <algorithm>

namespace raftlog::sim {

void Cluster::stop_failed(Node& n, const std::string& why) {
  // Nothing the simulator injects outside a sync failure may stop a replica: a fatal error is a bug.
  checker_.report("replica-failed", fmt::format("node {} stopped: {}", n.id, why));
}

void Cluster::contract_violation(const Node& n, const std::string& what) {
  checker_.report("ready-contract", fmt::format("node {} {}", n.id, what));
}

void Cluster::observe_log_base(const Node& n) {
  const raft::LogReader& log = this->log(n.id);
  if (log.first_index() <= 1) return;
  // A trimmed log, or one that starts after an installed snapshot: the configuration the replica
  // recovered as in force before its first entry (its newest record below it), which the checker
  // compares with the committed history at that point.
  const raft::ConfRecord* below = nullptr;
  for (const raft::ConfRecord& record : n.replica->core().conf_history()) {
    if (record.index < log.first_index()) below = &record;
  }
  if (below != nullptr) {
    checker_.observe_log_base(n.id, log.first_index() - 1, below->conf);
  } else {
    checker_.observe_log_base(n.id, log.first_index() - 1, std::nullopt);
  }
}

void Cluster::check_snapshot_point(const Node& n, raft::Index point) {
  // The leader that sent it, if it still leads the follower's term (a new leader may hold less).
  const raft::Raft& core = n.replica->core();
  const raft::NodeId leader_id = core.leader();
  if (leader_id == raft::kNoNode || leader_id == n.id || !is_up(leader_id)) return;
  const Node& leader = node(leader_id);
  const raft::Raft& leader_core = leader.replica->core();
  if (leader_core.role() != raft::Role::kLeader || leader_core.term() != core.term()) return;
  // Its first index only grew since it filled the snapshot (trims), so this is no stricter than
  // the first index then: the follower's log starts at or before the leader's.
  const raft::Index leader_first = leader.replica->log().first_index();
  if (point < leader_first) {
    ++stats_.snapshots_at_first_index;
    return;
  }
  // The fallbacks the leader cannot avoid, counted: it does not know its topic table at its first
  // index - 1 (a trim a power cut stopped part-way), or a configuration committed above its first
  // index and it does not know the one in force at the first index - 1. A configuration committed
  // above it is no excuse otherwise (docs/raft.md, "Snapshots").
  if (!leader.replica->knows_first_index_topics()) {
    ++stats_.snapshots_above_first_index_fallback;
    return;
  }
  raft::Index newest_committed_conf = 0;
  for (const raft::ConfRecord& record : leader_core.conf_history()) {
    if (record.index <= leader_core.commit_index()) {
      newest_committed_conf = std::max(newest_committed_conf, record.index);
    }
  }
  if (newest_committed_conf >= leader_first && !leader.replica->knows_first_index_conf()) {
    ++stats_.snapshots_above_first_index_conf_unknown;
    return;
  }
  checker_.report("snapshot-point",
                  fmt::format("node {} installed a snapshot of index {}, but its leader {} holds "
                              "every entry from {} and knows its state there: the entries {}..{} "
                              "are not on the follower",
                              n.id, point, leader_id, leader_first, leader_first, point));
}

void Cluster::before_ready(Node& n, const raft::Ready& ready) {
  if (checker_.failed()) return;
  // must_sync must cover every change of term, vote, the term's leader or log.
  const bool log_changes =
      ready.snapshot || ready.truncate_from.has_value() || !ready.entries.empty();
  const bool vote_changes =
      ready.hard_state && raft::durable_fields_differ(*ready.hard_state, n.last_hard_state);
  if ((log_changes || vote_changes) && !ready.must_sync) {
    contract_violation(n,
                       "changed its term, vote, term's leader (or its nonce) or log without "
                       "must_sync");
    return;
  }
  if (ready.hard_state) n.last_hard_state = *ready.hard_state;
  if (ready.truncate_from) {
    trace_.log("n{} truncate from {}", n.id, *ready.truncate_from);
    checker_.observe_truncate(n.id, *ready.truncate_from);
  }
}

// A node refuses a leader message of its term from another node than the term's leader it knows
// (docs/raft.md, "A second leader of a term"): only after two leaders of one term, which
// election-safety reports first (it sees every leader's role as it takes it). Without that, a
// refusal is a false alarm that took a healthy node out of service.
void Cluster::check_no_second_leader(const Node& n) {
  const raft::Raft& core = n.replica->core();
  for (const raft::TermLeaderClash* clash : {&core.second_leader(), &core.leadership_refused()}) {
    if (clash->count == 0) continue;
    checker_.report("second-leader",
                    fmt::format("node {}: node {} refused node {}'s leader messages of term {}, "
                                "knowing node {} as its leader, with no two leaders of that term",
                                n.id, clash->refused_by, clash->other_leader, clash->term,
                                clash->known_leader));
    return;
  }
}

// Every leadership draws a non-zero nonce that no earlier leadership of its id drew in the run,
// across restarts and wipes (raft::Config::leadership_nonce_seed: the simulator's seeds are drawn
// per start of a node). A repeat after a wipe would let a node that lost its state and was elected
// again in a term it led pass for its first leadership (docs/raft.md, "A second leader of a term").
void Cluster::check_fresh_leadership_nonce(Node& n) {
  const std::uint64_t nonce = n.replica->core().term_leader_nonce();
  if (nonce != 0 && n.leadership_nonces.insert(nonce).second) return;
  checker_.report(
      "leadership-nonce",
      fmt::format("node {} leads term {} with nonce {:016x}, {}", n.id, n.soft.term, nonce,
                  nonce == 0 ? "which says none" : "which it drew before in this run"));
}

void Cluster::after_ready(Node& n, const raft::Ready& ready) {
  if (checker_.failed()) return;
  // The replica wrote term and vote before anything else of the batch (or failed, and this is not
  // called).
  if (ready.hard_state && raft::durable_fields_differ(*ready.hard_state, n.durable_hard_state)) {
    n.durable_hard_state.term = ready.hard_state->term;
    n.durable_hard_state.vote = ready.hard_state->vote;
    n.durable_hard_state.leader = ready.hard_state->leader;
    n.durable_hard_state.leader_nonce = ready.hard_state->leader_nonce;
    trace_.log("n{} hard state t{} v{} leader n{}", n.id, n.durable_hard_state.term,
               n.durable_hard_state.vote, n.durable_hard_state.leader);
    checker_.observe_durable_hard_state(n.id, n.durable_hard_state);
  }
  if (ready.snapshot) {
    ++stats_.snapshots_installed;
    trace_.log("n{} installed a snapshot of index {} term {} ({})", n.id, ready.snapshot->index,
               ready.snapshot->term, raft::to_string(ready.snapshot->conf));
    checker_.observe_log_base(n.id, ready.snapshot->index, ready.snapshot->conf);
    if (checker_.failed()) return;
    check_snapshot_point(n, ready.snapshot->index);
    if (checker_.failed()) return;
    maybe_schedule_install_strike(n);
  }
  if (!ready.entries.empty()) {
    if (trace_.enabled())
      trace_.log("n{} append [{}..{}] last {}", n.id, ready.entries.front().index,
                 ready.entries.back().index, describe(ready.entries.back()));
    checker_.observe_append(n.id, ready.entries.front().index, ready.entries.back().index);
  }
  // Reading the configuration changes nothing in the replica (the observer contract forbids calls
  // that would). It must be the newest in the log, committed or not.
  n.conf = n.replica->conf();
  checker_.observe_conf(n.id, n.conf);
  if (checker_.failed()) return;
  if (ready.soft_state) {
    n.soft = *ready.soft_state;
    trace_.log("n{} is {} of term {} (leader n{})", n.id, raft::to_string(n.soft.role), n.soft.term,
               n.soft.leader);
    checker_.observe_role(n.id, n.soft.term, n.soft.role, n.replica->core().term_leader_nonce());
    if (n.soft.role == raft::Role::kLeader) {
      check_fresh_leadership_nonce(n);
      if (checker_.failed()) return;
      maybe_schedule_strike(n);
    }
  }
  if (ready.commit_index && *ready.commit_index > n.commit) {
    n.commit = *ready.commit_index;
    n.knew_commit = true;
    trace_.log("n{} commit {}", n.id, n.commit);
    checker_.observe_commit(n.id, n.commit, n.soft.term);
    if (strike_after_commit_ && strike_target_ == n.id && strike_term_ == n.soft.term) {
      strike_after_commit_ = false;
      strike_at_step_ = now_step() + prng_.between(0, strike_.max_delay_steps);
    }
  }
  check_no_second_leader(n);
  if (checker_.failed()) return;
  // Acknowledgements and released reads of this batch, now that the checker saw its commit.
  run_completions();
}

}  // namespace raftlog::sim

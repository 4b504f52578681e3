#include "sim/cluster.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cassert>
#include <memory>
#include <numeric>
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

// What a crash does to the bytes the store wrote but did not sync (store::CrashMode): a power cut
// loses them, tears them at a random byte or keeps them sector by sector at random; a process crash
// (kill -9, the machine stays up) keeps them all. Bit flips in unsynced bytes are the store's own
// tests' concern.
store::CrashMode draw_crash_mode(util::Prng& prng) {
  switch (prng.below(4)) {
    case 0:
      return store::CrashMode::kLoseUnflushed;
    case 1:
      return store::CrashMode::kTornWrite;
    case 2:
      return store::CrashMode::kKeepRandomSectors;
    default:
      return store::CrashMode::kKeepAll;
  }
}

}  // namespace

// The node's log as the checker and the liveness phase read it: the replica's own view, or an empty
// log while the node is down.
class Cluster::ReplicaLogView final : public raft::LogReader {
 public:
  explicit ReplicaLogView(const Node& node) : node_(node) {}
  raft::Index first_index() const override { return up() ? reader().first_index() : 1; }
  raft::Index last_index() const override { return up() ? reader().last_index() : 0; }
  std::optional<raft::Term> term_at(raft::Index index) const override {
    if (!up()) return index == 0 ? std::optional<raft::Term>(0) : std::nullopt;
    return reader().term_at(index);
  }
  std::vector<raft::Entry> entries(raft::Index from, raft::Index to,
                                   std::size_t max_bytes) const override {
    return up() ? reader().entries(from, to, max_bytes) : std::vector<raft::Entry>{};
  }

 private:
  bool up() const { return node_.replica != nullptr; }
  const raft::LogReader& reader() const { return node_.replica->log_reader(); }
  const Node& node_;
};

class Cluster::NodeSender final : public replica::MessageSender {
 public:
  NodeSender(Cluster& cluster, raft::NodeId id) : cluster_(cluster), id_(id) {}
  void send(raft::Message message) override {
    cluster_.send(cluster_.node(id_), std::move(message));
  }

 private:
  Cluster& cluster_;
  raft::NodeId id_;
};

class Cluster::NodeObserver final : public replica::ReadyObserver {
 public:
  NodeObserver(Cluster& cluster, raft::NodeId id) : cluster_(cluster), id_(id) {}
  void before_ready(const raft::Ready& ready) override {
    cluster_.before_ready(cluster_.node(id_), ready);
  }
  void after_ready(const raft::Ready& ready) override {
    cluster_.after_ready(cluster_.node(id_), ready);
  }

 private:
  Cluster& cluster_;
  raft::NodeId id_;
};

class Cluster::NodeOffLoop final : public replica::OffLoopExecutor {
 public:
  NodeOffLoop(Cluster& cluster, raft::NodeId id) : cluster_(cluster), id_(id) {}
  bool run(std::function<void()> job, std::function<void()> done) override {
    Node& n = cluster_.node(id_);
    const std::uint64_t due =
        cluster_.now_step() + cluster_.prng_.between(1, cluster_.config_.max_off_loop_steps);
    cluster_.trace_.log("n{} off-loop job handed off, due at step {}", id_, due);
    n.off_loop_jobs.push_back(Node::OffLoopJob{due, std::move(job), std::move(done)});
    return true;
  }

 private:
  Cluster& cluster_;
  raft::NodeId id_;
};

Cluster::Cluster(const ClusterConfig& config, std::uint64_t seed, util::Prng& prng,
                 Checker& checker, Trace& trace)
    : config_(config),
      seed_(seed),
      prng_(prng),
      checker_(checker),
      trace_(trace),
      network_(config.node_count) {
  assert(config.node_count >= 1 && config.voter_count <= config.node_count);
  const std::size_t voters = config.voter_count == 0 ? config.node_count : config.voter_count;
  for (raft::NodeId id = 1; id <= voters; ++id) bootstrap_conf_.voters.push_back(id);
  checker_.set_bootstrap_conf(bootstrap_conf_);
  assert(config.min_flush_delay_steps >= 1 &&
         config.min_flush_delay_steps <= config.max_flush_delay_steps);
  assert(config.checkpoint_every_ticks >= 1);
  // The replicas' log lines would drown the trace (and cost time); the trace says what happened.
  spdlog::set_level(spdlog::level::off);
  nodes_.resize(config.node_count);
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    Node& n = nodes_[i];
    n.id = i + 1;
    n.env = std::make_unique<store::MemoryEnv>();
    n.log_view = std::make_unique<ReplicaLogView>(n);
    n.sender = std::make_unique<NodeSender>(*this, n.id);
    n.observer = std::make_unique<NodeObserver>(*this, n.id);
    n.off_loop = std::make_unique<NodeOffLoop>(*this, n.id);
    n.checkpoint_phase = prng_.below(config_.checkpoint_every_ticks);
    checker_.attach_log(n.id, n.log_view.get());
  }
  for (Node& n : nodes_) {
    if (!open_replica(n)) return;
    observe_log_base(n);
    checker_.observe_restart(n.id, n.commit);
    checker_.observe_conf(n.id, n.conf);
  }
  for (Node& n : nodes_) process(n);
}

Cluster::~Cluster() {
  // The replicas call back into this object while they close.
  for (Node& n : nodes_) n.replica.reset();
}

Cluster::Node& Cluster::node(raft::NodeId id) {
  assert(id >= 1 && id <= nodes_.size());
  return nodes_[id - 1];
}

const Cluster::Node& Cluster::node(raft::NodeId id) const {
  assert(id >= 1 && id <= nodes_.size());
  return nodes_[id - 1];
}

const raft::LogReader& Cluster::log(raft::NodeId id) const { return *node(id).log_view; }

replica::Clock::time_point Cluster::now_time() const {
  return replica::Clock::time_point(
      std::chrono::microseconds(now_step() * (kTickMs * 1000 / kStepsPerTick)));
}

replica::ReplicaConfig Cluster::replica_config_for(raft::NodeId id) {
  replica::ReplicaConfig c;
  c.node_id = id;
  for (const Node& n : nodes_) c.members[n.id] = fmt::format("n{}", n.id);
  c.data_dir = "/data";  // each node has its own Env
  c.tick_ms = kTickMs;
  c.election_ticks = static_cast<std::uint32_t>(config_.raft.election_ticks);
  c.store.flush_mode = store::FlushMode::kSync;
  c.store.background_work = store::BackgroundWork::kStepped;
  c.store.segment_size_bytes = store::Options::kMinSegmentSizeBytes;  // rolls happen in every run
  c.store.max_entry_size_bytes = 8 << 10;
  c.store.preallocate_next_segment = false;
  c.store.env = node(id).env.get();
  // An append not committed within 100 ticks fails (its client retries), well inside a run.
  c.append_timeout_ms = 100 * kTickMs;
  c.retention_follower_grace_ms = config_.retention_follower_grace_ms;
  c.snapshot_gather_slice_bytes = config_.snapshot_gather_slice_bytes;
  c.raft = config_.raft;
  c.raft.id = id;
  c.raft.initial_conf = bootstrap_conf_;
  c.raft.random_seed = prng_.derive_seed();
  c.same_boot = node(id).same_boot;
  return c;
}

bool Cluster::open_replica(Node& n) {
  replica::ReplicaDeps deps;
  deps.sender = n.sender.get();
  deps.disk = &n.disk;
  deps.clock = [this] { return now_time(); };
  deps.observer = n.observer.get();
  deps.off_loop = n.off_loop.get();
  n.off_loop_jobs.clear();  // the previous replica's: their results would find it gone
  replica::NodeError error;
  n.replica = replica::Replica::open(replica_config_for(n.id), std::move(deps), &error);
  if (n.replica == nullptr) {
    checker_.report("recovery", fmt::format("node {} cannot reopen its data directory: {}", n.id,
                                            error.message));
    return false;
  }
  const replica::NodeStatus status = n.replica->status();
  n.soft = raft::SoftState{status.role, status.leader_id, status.term};
  n.conf = n.replica->conf();
  n.commit = n.replica->commit_index();
  n.last_hard_state = raft::HardState{status.term, n.durable_hard_state.vote, n.commit};
  n.flush_at_step = 0;
  n.sync_will_fail = false;
  if (status.catching_up) {
    // Recovery judged that this node may have lost entries it acknowledged (replica/storage_fault.h):
    // it would neither vote nor count toward commit until it holds them again. The simulator damages
    // no durable byte, so a power cut alone must never look like that.
    ++stats_.restarts_catching_up;
    checker_.report("recovery",
                    fmt::format("node {} reopened suspecting a storage fault after a power cut: {}",
                                n.id, status.storage_fault));
    return false;
  }
  return true;
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
  run_checkpoints();
  // Nodes tick in a random order each time, so no node is systematically first to time out.
  std::vector<raft::NodeId> order(nodes_.size());
  std::iota(order.begin(), order.end(), raft::NodeId{1});
  for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[prng_.below(i)]);
  for (raft::NodeId id : order) {
    if (checker_.failed()) return;
    Node& n = node(id);
    if (!is_running(id)) continue;
    n.replica->expire_pending(now_time());
    n.replica->tick();
    process(n);
  }
  for (std::uint64_t step = 0; step < kStepsPerTick && !checker_.failed(); ++step) {
    set_clock(step);
    run_due_strike();
    deliver_due_messages();
    if (checker_.failed()) return;
    run_due_flushes();
    run_due_off_loop_jobs();
  }
}

void Cluster::process(Node& n) {
  if (checker_.failed() || !n.replica) return;
  n.replica->process();
  run_completions();
  if (checker_.failed() || !n.replica) return;
  if (n.replica->failed()) {
    stop_failed(n, n.replica->failure_reason());
    return;
  }
  schedule_flush(n);
}

void Cluster::run_completions() {
  // Bounded: each completion answers one pending request, and a completion adds none.
  while (!completions_.empty()) {
    std::function<void()> completion = std::move(completions_.front());
    completions_.pop_front();
    completion();
  }
}

void Cluster::stop_failed(Node& n, const std::string& why) {
  // Nothing the simulator injects outside a sync failure may stop a replica: a fatal error is a bug.
  checker_.report("replica-failed", fmt::format("node {} stopped: {}", n.id, why));
}

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

void Cluster::contract_violation(const Node& n, const std::string& what) {
  checker_.report("ready-contract", fmt::format("node {} {}", n.id, what));
}

void Cluster::trim(raft::NodeId id) {
  if (!is_running(id)) return;
  Node& n = node(id);
  const raft::Index first_before = n.replica->log().first_index();
  const replica::TrimResult result = n.replica->trim(n.commit + 1, "sim retention:");
  if (!result.error.ok()) {
    // A refused trim (a failing sync while it saved TOPICSTATE or SNAPSHOT) deletes nothing: fine.
    trace_.log("n{} TRIM refused: {}", id, result.error.message);
    return;
  }
  if (result.first_index > first_before) {
    ++stats_.trims;
    trace_.log("n{} TRIM first index {} -> {} (allowed up to {})", id, first_before,
               result.first_index, result.limit);
  }
}

void Cluster::observe_log_base(const Node& n) {
  const raft::LogReader& log = *n.log_view;
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
  // must_sync must cover every change of term, vote or log.
  const bool log_changes =
      ready.snapshot || ready.truncate_from.has_value() || !ready.entries.empty();
  const bool vote_changes = ready.hard_state && (ready.hard_state->term != n.last_hard_state.term ||
                                                 ready.hard_state->vote != n.last_hard_state.vote);
  if ((log_changes || vote_changes) && !ready.must_sync) {
    contract_violation(n, "changed its term, vote or log without must_sync");
    return;
  }
  if (ready.hard_state) n.last_hard_state = *ready.hard_state;
  if (ready.truncate_from) {
    trace_.log("n{} truncate from {}", n.id, *ready.truncate_from);
    checker_.observe_truncate(n.id, *ready.truncate_from);
  }
}

void Cluster::after_ready(Node& n, const raft::Ready& ready) {
  if (checker_.failed()) return;
  // The replica wrote term and vote before anything else of the batch (or failed, and this is not
  // called).
  if (ready.hard_state && (ready.hard_state->term != n.durable_hard_state.term ||
                           ready.hard_state->vote != n.durable_hard_state.vote)) {
    n.durable_hard_state.term = ready.hard_state->term;
    n.durable_hard_state.vote = ready.hard_state->vote;
    trace_.log("n{} hard state t{} v{}", n.id, n.durable_hard_state.term,
               n.durable_hard_state.vote);
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
    checker_.observe_role(n.id, n.soft.term, n.soft.role);
    if (n.soft.role == raft::Role::kLeader) maybe_schedule_strike(n);
  }
  if (ready.commit_index && *ready.commit_index > n.commit) {
    n.commit = *ready.commit_index;
    trace_.log("n{} commit {}", n.id, n.commit);
    checker_.observe_commit(n.id, n.commit, n.soft.term);
    if (strike_after_commit_ && strike_target_ == n.id && strike_term_ == n.soft.term) {
      strike_after_commit_ = false;
      strike_at_step_ = now_step() + prng_.between(0, strike_.max_delay_steps);
    }
  }
  // Acknowledgements and released reads of this batch, now that the checker saw its commit.
  run_completions();
}

void Cluster::maybe_schedule_strike(const Node& n) {
  if (strike_.per_million == 0 || strike_target_ != raft::kNoNode) return;
  if (!prng_.chance_per_million(strike_.per_million)) return;
  strike_target_ = n.id;
  strike_term_ = n.soft.term;
  // Half the strikes land at once (the new leader's first messages die with it); the other half land
  // right after the leader's first commit (its followers have not all heard of it yet).
  strike_after_commit_ = prng_.below(2) == 0;
  strike_at_step_ =
      strike_after_commit_ ? UINT64_MAX : now_step() + prng_.between(0, strike_.max_delay_steps);
}

void Cluster::run_due_strike() {
  if (strike_target_ == raft::kNoNode || strike_at_step_ > now_step()) return;
  const Node& target = node(strike_target_);
  strike_target_ = raft::kNoNode;
  if (!is_running(target.id) || target.soft.role != raft::Role::kLeader ||
      target.soft.term != strike_term_)
    return;
  ++stats_.leader_strikes;
  trace_.log("STRIKE new leader n{} of term {}", target.id, strike_term_);
  crash(target.id, prng_.between(1, strike_.max_down_ticks));
}

void Cluster::crash(raft::NodeId id, std::uint64_t down_ticks) {
  Node& n = node(id);
  if (!n.replica) return;
  ++stats_.crashes;
  const std::size_t lost_messages =
      network_.drop_in_flight_from(id, config_.crash_loses_outgoing_per_million, prng_);
  n.restart_at_tick = down_ticks == 0 ? 0 : tick_ + down_ticks;
  const store::CommitLog& log = n.replica->log();
  const store::CrashMode mode = draw_crash_mode(prng_);
  trace_.log("n{} CRASH {} (log {} flushed {}; loses {} unsent messages; down for {} ticks)", id,
             store::to_string(mode), log.last_index(), log.flushed_index(), lost_messages,
             down_ticks);
  // The power goes first: nothing the dying replica does afterwards reaches the disk.
  n.env->crash();
  // Its clients see their connections drop: every waiting request's outcome is unknown to them.
  n.replica->fail_all(replica::ErrorCode::kUnavailable, "the node crashed");
  n.replica.reset();
  run_completions();
  n.env->restart(store::CrashOptions{mode, prng_.derive_seed()});
  // The replica's recovery judges a cut log differently when the machine did not reboot.
  n.same_boot = mode == store::CrashMode::kKeepAll;
  n.soft = raft::SoftState{};
  n.paused_until_tick = 0;
  n.flush_at_step = 0;
  n.sync_will_fail = false;
  n.off_loop_jobs.clear();  // the worker died with the process
  checker_.observe_crash(id);
}

void Cluster::restart(raft::NodeId id) {
  Node& n = node(id);
  n.restart_at_tick = 0;
  if (n.replica) return;
  if (!open_replica(n)) return;
  trace_.log("n{} RESTART term {} vote {} commit {} log {}", id, n.soft.term,
             n.durable_hard_state.vote, n.commit, n.log_view->last_index());
  observe_log_base(n);
  checker_.observe_restart(id, n.commit);
  checker_.observe_role(id, n.soft.term, n.soft.role);
  checker_.observe_conf(id, n.conf);  // recovered from CONFSTATE: must be the log's newest
  process(n);
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

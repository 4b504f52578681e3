#include "sim/cluster.h"

#include <spdlog/spdlog.h>

#include <cassert>
#include <memory>
#include <numeric>
#include <utility>

namespace raftlog::sim {

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
  // The simulator's clock does not move within a round, so trim_round_budget_ms never cuts a trim:
  // two segments a round spread a trim's deletion over rounds (and crashes, installs, new trims
  // between them) in every retention run.
  c.trim_segments_per_round = 2;
  c.snapshot_gather_slice_bytes = config_.snapshot_gather_slice_bytes;
  c.raft = config_.raft;
  c.raft.id = id;
  c.raft.initial_conf = bootstrap_conf_;
  c.raft.random_seed = prng_.derive_seed();
  c.same_boot = node(id).same_boot;
  c.ignore_unvouched_marker = config_.ignore_unvouched_marker;
  c.ignore_not_founder_marker = config_.ignore_not_founder_marker;
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
  n.heard_hold = {};        // a new replica has heard no leader yet
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
  if (n.commit > 0) n.knew_commit = true;
  // The term's leader and its nonce as the core restored them from HARDSTATE (the contract check
  // compares with them).
  n.last_hard_state =
      raft::HardState{status.term, n.durable_hard_state.vote, n.commit,
                      n.replica->core().term_leader(), n.replica->core().term_leader_nonce()};
  n.flush_at_step = 0;
  n.sync_will_fail = false;
  // An unvouched node that a leader's word reached before the crash resumes its catch-up toward it
  // (DATA_DIR/UNVOUCHED, docs/raft.md "Unvouched nodes"): that is no storage fault.
  if (status.catching_up && !(status.unvouched && status.storage_fault == status.unvouched_reason)) {
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
    // After process(), as raftlogd's loop (src/server/node.cpp): a snapshot message the tick made
    // is planned against the log's start the core saw, not one a trim moved in between.
    if (is_running(id)) continue_trim(n);
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

}  // namespace raftlog::sim

// Node faults the fault schedule asks for: crashes (power cut or process crash), restarts, pauses,
// strikes on new leaders and on nodes that just installed a snapshot, and retention trims (cluster.h).
#include "sim/cluster.h"

#include "replica/unvouched_marker.h"

#include <fmt/format.h>

#include <chrono>
#include <utility>

namespace raftlog::sim {

namespace {

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

void Cluster::crash(raft::NodeId id, std::uint64_t down_ticks) {
  Node& n = node(id);
  if (!n.replica) return;
  ++stats_.crashes;
  const std::size_t lost_messages =
      network_.drop_in_flight_from(id, config_.crash_loses_outgoing_per_million, prng_);
  n.restart_at_tick = down_ticks == 0 ? 0 : tick_ + down_ticks;
  const store::CommitLog& log = n.replica->log();
  n.down_with_durable_log = log.flushed_index() > 0;
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

void Cluster::wipe(raft::NodeId id, std::uint64_t down_ticks, bool only_log) {
  Node& n = node(id);
  if (!n.replica) return;
  crash(id, down_ticks);
  ++stats_.wipes;
  n.down_after_wipe = true;
  n.down_with_durable_log = false;
  n.commit = 0;
  n.same_boot = false;
  if (only_log) {
    ++stats_.log_wipes;
    trace_.log("n{} LOG WIPED: restarts with an empty log/ (HARDSTATE, CONFSTATE, TOPICSTATE, "
               "SNAPSHOT kept)",
               id);
    // A log on its own mount that came back empty: the directory's other files stay as they were.
    const std::string log_dir = "/data/log";
    if (auto files = n.env->list_dir(log_dir); files.ok()) {
      for (const std::string& file : *files) (void)n.env->remove(log_dir + "/" + file);
    }
    (void)n.env->remove_dir(log_dir);
    (void)n.env->sync_dir("/data");
    n.durable_hard_state.commit = 0;  // the checkpoint was in log/
    n.last_hard_state.commit = 0;
    checker_.observe_log_wipe(id);
    return;
  }
  trace_.log("n{} WIPED: restarts on an empty data directory", id);
  n.knew_commit = false;
  // The old disk is replaced, not patched: everything it made durable is gone.
  n.env = std::make_unique<store::MemoryEnv>();
  n.durable_hard_state = raft::HardState{};
  n.last_hard_state = raft::HardState{};
  n.conf = bootstrap_conf_;
  checker_.observe_wipe(id);
}

bool Cluster::holds_vouched_log(raft::NodeId id) {
  Node& n = node(id);
  if (n.replica) {
    return log(id).last_index() > 0 && !n.replica->status().unvouched;
  }
  return n.down_with_durable_log &&
         !n.env->exists(std::string("/data/") + replica::UnvouchedMarker::kFileName);
}

void Cluster::restart(raft::NodeId id) {
  Node& n = node(id);
  n.restart_at_tick = 0;
  if (n.replica) return;
  if (!open_replica(n)) return;
  n.down_after_wipe = false;
  trace_.log("n{} RESTART term {} vote {} commit {} log {}", id, n.soft.term,
             n.durable_hard_state.vote, n.commit, log(id).last_index());
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

void Cluster::maybe_schedule_install_strike(const Node& n) {
  if (install_strike_.per_million == 0 || install_strike_target_ != raft::kNoNode) return;
  if (!prng_.chance_per_million(install_strike_.per_million)) return;
  install_strike_target_ = n.id;
  install_strike_at_step_ = now_step() + prng_.between(0, install_strike_.max_delay_steps);
}

void Cluster::run_due_strike() {
  if (install_strike_target_ != raft::kNoNode && install_strike_at_step_ <= now_step()) {
    const raft::NodeId target = std::exchange(install_strike_target_, raft::kNoNode);
    if (is_running(target)) {
      ++stats_.install_strikes;
      trace_.log("STRIKE n{} after its snapshot install", target);
      crash(target, prng_.between(1, install_strike_.max_down_ticks));
    }
  }
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
    check_retention_hold(n, first_before, result.first_index);
  }
}

void Cluster::continue_trim(Node& n) {
  if (n.replica->failed() || !n.replica->trim_in_progress()) return;
  const raft::Index first_before = n.replica->log().first_index();
  n.replica->apply_retention(now_time());  // no age or size policy here: only the trim's next steps
  if (n.replica->failed()) {
    stop_failed(n, n.replica->failure_reason());
    return;
  }
  const raft::Index first_after = n.replica->log().first_index();
  if (first_after > first_before) {
    ++stats_.trims;
    trace_.log("n{} TRIM continued: first index {} -> {}", n.id, first_before, first_after);
    check_retention_hold(n, first_before, first_after);
  }
}

void Cluster::check_retention_hold(const Node& n, raft::Index first_before,
                                   raft::Index first_after) {
  const raft::Raft& core = n.replica->core();
  const Node::HeardHold& heard = n.heard_hold;
  if (core.role() == raft::Role::kLeader || heard.hold == 0 || core.term() < heard.term) return;
  // Through an election (no leader known, even in a newer term) the last leader's hold still
  // applies; a known leader of another term replaces it with its own.
  if (core.leader() != raft::kNoNode && core.term() != heard.term) return;
  // Past its disk high watermark a follower trims by its own limit (docs/operations.md).
  if (n.replica->disk_watermark_exceeded()) return;
  if (core.leader() != raft::kNoNode && core.leader() != heard.leader) return;
  if (now_time() - heard.at >= std::chrono::milliseconds(config_.retention_follower_grace_ms)) {
    return;  // the leader went silent: its hold expired
  }
  if (first_after <= heard.hold) return;
  checker_.report("retention-hold",
                  fmt::format("node {} trimmed its log from {} to start at {}, past the retention "
                              "hold {} its leader {} sent in term {}: a node that leader keeps "
                              "entries for would need a snapshot from this one",
                              n.id, first_before, first_after, heard.hold, heard.leader,
                              heard.term));
}

}  // namespace raftlog::sim

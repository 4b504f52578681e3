// Snapshots: catching up a follower that needs entries the leader trimmed (docs/raft.md,
// "Snapshots"). raftlog's state machine is the log itself, so a snapshot only says where the log it
// replaces ended (index and term), the configuration in force there, and the driver's own state as
// of there (raftlog: the dedup table, which the driver fills in; the core never reads it).
#include <algorithm>

#include "raft/assert.h"
#include "raft/raft_impl.h"

namespace raftlog::raft {

// The newest point the leader can describe whole: its log from there on is retained, and it knows the
// configuration in force there. The first retained index - 1 when the newest committed configuration
// is at or below it, or when the driver told the configuration in force there
// (set_trim_point_conf): the follower then holds everything the leader holds. Otherwise (a
// configuration committed after the trim point, and the driver does not know the one in force at
// the trim point: conf_history() keeps only the newest committed one) that configuration's index.
// Index 0 when there is no such point yet.
Snapshot Raft::Impl::snapshot_to_send() const {
  // The newest committed configuration: usually the history's first record, but a history restored
  // at start (Config::conf_history) keeps the records its driver listed until the next commit_to(),
  // so a later one may be committed already (the simulator found a restarted leader sending the
  // configuration from before a committed removal).
  const ConfRecord* newest_committed = &conf_history_.front();
  for (const ConfRecord& record : conf_history_) {
    if (record.index <= log_.committed()) newest_committed = &record;
  }
  const ConfRecord& committed_conf = *newest_committed;
  const Index trim_point = log_.first_index() - 1;
  Snapshot snapshot;
  if (committed_conf.index <= trim_point) {
    snapshot.index = trim_point;
    snapshot.conf = committed_conf.conf;
  } else if (trim_point > 0 && trim_point_conf_ && trim_point_conf_->index == trim_point) {
    snapshot.index = trim_point;
    snapshot.conf = trim_point_conf_->conf;
  } else {
    snapshot.index = committed_conf.index;
    snapshot.conf = committed_conf.conf;
  }
  // A snapshot describes committed entries only. The driver trims only below its commit index, but
  // a leader restarted from a hard state whose commit lags its trim point learns its commit index
  // again only once its no-op commits: until then it sends none (index 0).
  if (snapshot.index > log_.committed()) return Snapshot{};
  const std::optional<Term> term = log_.term_at(snapshot.index);
  RAFT_ASSERT(term.has_value(), "the term of the entry before the first retained one is known");
  snapshot.term = *term;
  return snapshot;
}

void Raft::Impl::set_trim_point_conf(Index point, const ConfState& conf) {
  RAFT_ASSERT(is_valid_conf(conf), "the driver's configuration at its trim point is valid");
  trim_point_conf_ = TrimPointConf{point, conf};
}

bool Raft::Impl::send_snapshot(NodeId peer) {
  Progress& pr = progress_.at(peer);
  if (!config_.snapshots || pr.is_paused()) return false;
  Snapshot snapshot = snapshot_to_send();
  if (snapshot.index == 0) return false;  // nothing trimmed: an append can always be built
  Message m;
  m.type = MessageType::kSnapshot;
  m.to = peer;
  m.commit = log_.committed();
  pr.become_snapshot(snapshot.index);
  // Tell the peer at once that it is stranded (Message::sending_snapshot): our snapshot may take a
  // while to encode and send, and the peer's own log need not show that it needs one. Heartbeats
  // sent before we process the peer's answer may arrive after its install: the peer ignores them
  // (snapshot_held_through_).
  send_heartbeat(peer, /*context=*/0);
  m.snapshot = std::move(snapshot);
  send(std::move(m), /*after_persist=*/false);
  return true;
}

void Raft::Impl::retry_lost_snapshots() {
  for (auto& [peer, pr] : progress_) {
    if (pr.state != ReplicationState::kSnapshot) continue;
    if (++pr.snapshot_ticks < static_cast<std::uint64_t>(config_.snapshot_retry_ticks)) continue;
    // No answer: the snapshot, its answer or its install was lost. Probing again sends a new one
    // (from whatever this leader retains now) unless the follower meanwhile holds enough.
    pr.become_probe();
    send_append(peer, /*send_if_empty=*/true);
  }
}

void Raft::Impl::snapshot_progress(NodeId peer) {
  if (role_ != Role::kLeader) return;
  const auto found = progress_.find(peer);
  if (found == progress_.end() || found->second.state != ReplicationState::kSnapshot) return;
  found->second.snapshot_ticks = 0;  // still moving: a slow link is not a lost snapshot
}

void Raft::Impl::handle_snapshot(Message& m) {
  if (!config_.snapshots || !m.snapshot) return;  // a driver that cannot install one: ignored
  const Snapshot& snapshot = *m.snapshot;
  // The codec checked the structure; what contradicts this node's state is dropped, never asserted:
  // a snapshot describes committed entries of this leader's log, so its term is at most the leader's.
  if (snapshot.index == 0 || snapshot.term == 0 || snapshot.term > m.term ||
      !is_valid_conf(snapshot.conf)) {
    return;
  }
  note_leader_contact_while_unvouched(m);
  leader_commit_seen_ = std::max(leader_commit_seen_, m.commit);
  Message reply;
  reply.type = MessageType::kAppendResponse;
  reply.to = m.from;
  if (snapshot.index <= log_.committed()) {
    snapshot_held_through_ = std::max(snapshot_held_through_, snapshot.index);
    // Everything it replaces is committed here already, hence in our log as in the leader's: nothing
    // to install. Tell the leader where we stand, as for an append below our commit index.
    reply.index = log_.committed();
    mark_if_catching_up(reply);
    send(std::move(reply), /*after_persist=*/true);
    return;
  }
  if (log_.matches(snapshot.index, snapshot.term)) {
    snapshot_held_through_ = std::max(snapshot_held_through_, snapshot.index);
    // We hold its last entry, so (Log Matching) every entry it replaces: keep them and answer it like
    // an empty append at that point, which commits up to it and acknowledges it once durable.
    Message as_append;
    as_append.type = MessageType::kAppend;
    as_append.from = m.from;
    as_append.to = m.to;
    as_append.term = m.term;
    as_append.index = snapshot.index;
    as_append.log_term = snapshot.term;
    as_append.commit = std::max(m.commit, snapshot.index);
    handle_append(as_append);
    return;
  }
  snapshot_held_through_ = std::max(snapshot_held_through_, snapshot.index);
  stale_match_ruled_out_ = unvouched_;
  install_snapshot(std::move(*m.snapshot));
  reply.index = log_.last_index();  // the snapshot's index: acknowledged once installed durably
  mark_if_catching_up(reply);
  send(std::move(reply), /*after_persist=*/true);
}

void Raft::Impl::install_snapshot(Snapshot snapshot) {
  // Our log does not hold the snapshot's last entry, and everything we committed lies below it: our
  // entries above the commit index are uncommitted (a deposed leader's, or behind), and the ones at
  // or below it are committed, so the leader's log holds them too and the snapshot stands for them.
  RAFT_ASSERT(snapshot.index > log_.committed(), "a snapshot never replaces committed entries");
  const Index index = snapshot.index;
  conf_history_.assign(1, ConfRecord{index, snapshot.term, snapshot.conf});
  log_.restore(std::move(snapshot));
  refresh_conf();
  leader_match_ = index;
  rejected_leaders_first_probe_ = false;
  leader_sending_snapshot_ = false;
  // A node catching up after a storage fault counts the snapshot as what it holds durably.
  maybe_finish_catching_up();
}

}  // namespace raftlog::raft

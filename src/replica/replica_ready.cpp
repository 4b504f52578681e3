// Replica: the Ready driver — persist, send, apply — and durability reports, held
// acknowledgements and commit delivery.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <string>

#include "replica/durability_rules.h"
#include "replica/replica.h"

namespace raftlog::replica {
namespace {

// Ready batches whose acknowledgements may wait for a flush at once (docs/configuration.md).
constexpr std::size_t kMaxHeldBatches = 4096;
// Ready rounds per process() call: each drains the core's pending output; a new one appears only
// from new work, so more rounds than this means the core keeps producing on its own.
constexpr int kMaxReadyRoundsPerProcess = 64;

// An append whose entry was cut or overwritten by a new leader: its outcome is unknown to the client.
AppendResult replaced_entry_error() {
  return failed_append(
      make_error(ErrorCode::kUnavailable,
                 "the entry was replaced after a leadership change; retry with the same "
                 "client_id/sequence",
                 kReasonLeadershipLost));
}

// Leader changes and election outcomes, for metrics. An election is won when the node becomes
// leader (a single-node cluster gets there in one step, without a visible candidate state), and lost
// when a candidate becomes a follower or starts the next election in a higher term.
void report_role_change(NodeEvents& events, const raft::SoftState& before,
                        const raft::SoftState& after) {
  if (before.leader != after.leader) events.leader_changed();
  if (after.role == raft::Role::kLeader && before.role != raft::Role::kLeader) {
    events.election_finished(true);
  } else if (before.role == raft::Role::kCandidate &&
             (after.role == raft::Role::kFollower || after.term > before.term)) {
    events.election_finished(false);
  }
}

}  // namespace

void Replica::process() {
  // A leader's snapshot being gathered: one more slice per round (replica_snapshot_send.cpp). A
  // received one waiting for the executor (an earlier job's `done` came): handed off.
  if (!failed_) {
    RoundProfile::Scope part(round_, RoundPart::kSnapshotGather);
    continue_snapshot_gather();
  }
  // Durability may have advanced (a flush notice, or nothing at all: it is re-read every round).
  (void)guard_core([&] {
    report_durability();
    for (int round = 0; round < kMaxReadyRoundsPerProcess && !failed_; ++round) {
      std::optional<raft::Ready> ready;
      {
        RoundProfile::Scope part(round_, RoundPart::kCoreReady);
        if (!raft_->has_ready()) break;
        ready = raft_->ready();
      }
      conf_entries_since_ready_ = 0;  // the core's unstable entries are all in this Ready
      handle_ready(*ready);
      report_durability();
    }
  });
  if (!failed_) {
    RoundProfile::Scope part(round_, RoundPart::kConfState);
    settle_conf_records(commit_);
    forget_unvouched_marker_once_vouched();
    note_catch_up_for_unvouched_hint();
    record_not_founder_once_committed();
    record_removed_word();
    report_committed_conflict();
    report_term_leader_clashes();
  }
  RoundProfile::Scope part(round_, RoundPart::kSnapshotPrepare);
  discard_prepared_snapshot();  // installed by now, or answered without an install
  // A received snapshot waiting for the executor (an earlier job's `done` came, or the prepared
  // one's install freed SNAPSHOT.install): handed off now.
  if (!failed_) start_snapshot_preparation();
}

Clock::duration Replica::end_round(Clock::duration log_threshold) {
  const Clock::duration took = round_.end();
  const Clock::time_point now = deps_.clock();
  // The window closes at the first round after its kSlowRoundLogInterval: its longest later round.
  if (slow_window_ && now - slow_window_->opened >= kSlowRoundLogInterval) log_slow_round_window();
  if (log_threshold <= Clock::duration::zero() || took < log_threshold) return took;
  // Parts under a millisecond say nothing about a round this long (at least one is named).
  using std::chrono::milliseconds;
  const auto line = [&] {
    return fmt::format("term {} ({}): a loop round took {} ms (slow-round threshold {} ms): {}",
                       raft_->term(), raft::to_string(raft_->role()),
                       std::chrono::duration_cast<milliseconds>(took).count(),
                       std::chrono::duration_cast<milliseconds>(log_threshold).count(),
                       round_.describe(milliseconds(1)));
  };
  if (!slow_window_) {
    // The first slow round after a quiet interval: at once, and it opens a window.
    spdlog::warn("node {}: {}", config_.node_id, line());
    slow_window_.emplace();
    slow_window_->opened = now;
    return took;
  }
  // Within the window: counted, and the longest kept (described only when it is the longest).
  ++slow_window_->later_rounds;
  if (took > slow_window_->longest) {
    slow_window_->longest = took;
    slow_window_->longest_line = line();
  }
  return took;
}

void Replica::log_slow_round_window() {
  if (!slow_window_) return;
  if (slow_window_->later_rounds > 0) {
    spdlog::warn(
        "node {}: {}; the longest of {} more slow round(s) in the {} s after the last such "
        "line",
        config_.node_id, slow_window_->longest_line, slow_window_->later_rounds,
        std::chrono::duration_cast<std::chrono::seconds>(kSlowRoundLogInterval).count());
  }
  slow_window_.reset();
}

// One Ready batch, shown to the observer (the simulator's checker) before and after it is applied.
void Replica::handle_ready(raft::Ready& ready) {
  if (deps_.observer != nullptr) deps_.observer->before_ready(ready);
  apply_ready(ready);
  if (deps_.observer != nullptr && !failed_) deps_.observer->after_ready(ready);
}

// One Ready batch, in the order its contract (raft/types.h) and durability need:
//   0. persist: hard state (term, vote) before anything that depends on it; a snapshot's install;
//   1. persist: the log's truncation;
//   2. send: the messages that need not wait, before this batch's own (possibly large) write;
//   3. persist: the new entries, without waiting for their flush;
//   4. hold: acknowledgements and votes, until everything written so far is durable;
//   5. apply: the commit index and the reads it releases.
void Replica::apply_ready(raft::Ready& ready) {
  // A leader removed by a change steps down in the batch that commits it: the change succeeded, and
  // is answered so before the leadership loss fails what is still pending.
  if (ready.commit_index && ready.soft_state) answer_membership(*ready.commit_index);
  if (ready.soft_state) note_soft_state(*ready.soft_state);

  if (ready.hard_state && raft::durable_fields_differ(*ready.hard_state, persisted_hard_state_)) {
    RoundProfile::Scope part(round_, RoundPart::kHardState);
    if (store::Status st = hard_state_file_->write(*ready.hard_state); !st.ok()) {
      fatal("persisting hard state: " + st.to_string());
      return;
    }
    persisted_hard_state_.term = ready.hard_state->term;
    persisted_hard_state_.vote = ready.hard_state->vote;
    persisted_hard_state_.leader = ready.hard_state->leader;
    persisted_hard_state_.leader_nonce = ready.hard_state->leader_nonce;
  }
  // An unvouched node's leader word, before the entries or the snapshot that came with it
  // (replica_vouching.cpp).
  if (!record_vouching_word()) return;
  // Step 0: a snapshot replaces the whole log, after the term and vote are durable and before the
  // batch's own entries, which continue it (replica_snapshot.cpp).
  if (ready.snapshot) {
    RoundProfile::Scope part(round_, RoundPart::kSnapshotInstall);
    install_snapshot(*ready.snapshot);
    if (failed_) return;
  }
  if (ready.truncate_from) {
    RoundProfile::Scope part(round_, RoundPart::kLogTruncate);
    truncate_log_from(*ready.truncate_from);
    if (failed_) return;
  }
  // After the cut, before the batch's entries reach the store (conf_state_file.h).
  {
    RoundProfile::Scope part(round_, RoundPart::kConfState);
    persist_conf(ready);
    if (failed_) return;
  }

  // Messages before the entries (Ready's contract allows it: they do not depend on this batch): the
  // heartbeats and a leader's appends of this round leave before its own write of a large batch,
  // which holds this loop for milliseconds, far longer on a loaded machine.
  // A leader's snapshot leaves with its data filled in, later once its encoding is made off the
  // loop, or not at all (the core sends another after Config::snapshot_retry_ticks).
  if (!ready.messages.empty()) {
    RoundProfile::Scope part(round_, RoundPart::kSend);
    stamp_retention_hold(ready.messages);
    for (raft::Message& message : ready.messages) {
      if (message.type == raft::MessageType::kSnapshot && !send_or_hold_snapshot(message)) continue;
      deps_.sender->send(std::move(message));
    }
  }

  if (!ready.entries.empty()) {
    RoundProfile::Scope part(round_, RoundPart::kLogAppend);
    forget_replaced_proposals(ready.entries);
    if (failed_) return;
    std::vector<store::EntryToAppend> batch;
    batch.reserve(ready.entries.size());
    for (const raft::Entry& entry : ready.entries) batch.push_back(to_store_entry(entry));
    auto appended = log_->append_no_wait(batch);
    if (!appended.ok()) {
      // Raft already counts these entries as part of this node's log: continuing would diverge.
      fatal("appending entries " + std::to_string(ready.entries.front().index) + ".." +
            std::to_string(ready.entries.back().index) + ": " + appended.status().to_string());
      return;
    }
    record_dedup(ready.entries);
  }

  // The caller's next report_durability() releases them (at once in async mode).
  RoundProfile::Scope part(round_, RoundPart::kApplyCommit);
  if (!ready.messages_after_persist.empty())
    hold_until_durable(std::move(ready.messages_after_persist));

  if (ready.commit_index) deliver_commit(*ready.commit_index);
  deliver_read_states(ready);
}

namespace {

// Why a leader stopped leading, in the core's own word (Raft::last_step_down()).
std::string describe_step_down(const raft::StepDown& step_down, const raft::SoftState& next) {
  switch (step_down.reason) {
    case raft::StepDownReason::kRemoved:
      if (step_down.successor == raft::kNoNode) {
        return "stepping down: removed from the configuration; no voter holds the whole log yet, "
               "so the voters elect a leader after their election timeout";
      }
      return "stepping down: removed from the configuration; handed leadership over to node " +
             std::to_string(step_down.successor);
    case raft::StepDownReason::kToldRemoved:
      return "stepping down: member " + std::to_string(step_down.successor) +
             " answered that this node's id is retired, and this log lacks that member's newest "
             "committed configuration (a retired id restarted on a lost disk?): not leading nor "
             "campaigning until a leader replicates that configuration here (stop this node)";
    case raft::StepDownReason::kCheckQuorum:
      return "stepping down: no contact with a majority within the election timeout (check "
             "quorum)";
    case raft::StepDownReason::kNewerTerm:
      return "stepping down: another node is in the newer term " + std::to_string(next.term);
    case raft::StepDownReason::kNone:
      break;
  }
  return "stepping down in term " + std::to_string(next.term);
}

// One log line per role or leader change that says what happened and why, in words an operator can
// act on. The Raft core reports only the new state; the reason follows from the transition (the core
// runs with pre-vote, so a follower's own timeout always goes through pre-candidate first, and a
// follower that becomes candidate directly was told to by a leadership transfer); a leader's step
// down is the core's own word (Raft::last_step_down()).
std::string describe_transition(const raft::SoftState& prev, const raft::SoftState& next,
                                std::uint64_t election_timeout_ms,
                                const raft::StepDown& step_down) {
  using raft::Role;
  const std::string was_leader =
      prev.leader != raft::kNoNode ? "leader " + std::to_string(prev.leader) : "a leader";
  switch (next.role) {
    case Role::kPreCandidate:
      return "election timeout: no message from " + was_leader + " for " +
             std::to_string(election_timeout_ms) + "+ ms; asking for pre-votes (term stays " +
             std::to_string(next.term) + ")";
    case Role::kCandidate:
      if (prev.role == Role::kPreCandidate) {
        return "pre-vote won: starting the election for term " + std::to_string(next.term);
      }
      return "leadership transfer: " + was_leader +
             " handed over; starting the election for term " + std::to_string(next.term);
    case Role::kLeader:
      return "won the election: leader for term " + std::to_string(next.term);
    case Role::kFollower:
      break;
  }
  if (prev.role == Role::kLeader) return describe_step_down(step_down, next);
  if (next.leader != raft::kNoNode)
    return "following leader " + std::to_string(next.leader) + " in term " +
           std::to_string(next.term);
  if (prev.role != Role::kFollower)
    return "campaign ended without a leader (term " + std::to_string(next.term) + ")";
  return "no leader known in term " + std::to_string(next.term) + " (was " + was_leader + ")";
}

}  // namespace

void Replica::note_soft_state(const raft::SoftState& next) {
  if (next.role != soft_state_.role || next.leader != soft_state_.leader) {
    const std::string why = describe_transition(
        soft_state_, next, static_cast<std::uint64_t>(config_.election_ticks) * config_.tick_ms,
        raft_->last_step_down());
    if (next.role != soft_state_.role) {
      spdlog::info("node {}: role {} -> {}: {}", config_.node_id, raft::to_string(soft_state_.role),
                   raft::to_string(next.role), why);
    } else {
      spdlog::info("node {}: {}", config_.node_id,
                   why);  // same role, new leader: no "Follower -> Follower"
    }
  }
  const bool lost_leadership =
      soft_state_.role == raft::Role::kLeader && next.role != raft::Role::kLeader;
  if (deps_.events != nullptr) report_role_change(*deps_.events, soft_state_, next);
  soft_state_ = next;
  if (lost_leadership) {
    abandon_outgoing_snapshot("this node stopped leading");
    // Their entries may still commit under the new leader, but this node can no longer tell: the
    // clients retry at once (same client_id/sequence) instead of waiting out append_timeout_ms.
    fail_pending_appends(
        ErrorCode::kUnavailable,
        "leadership lost while the append was pending; the outcome is unknown: retry "
        "with the same client_id/sequence",
        kReasonLeadershipLost);
    fail_pending_memberships(make_error(
        ErrorCode::kUnavailable,
        "leadership lost while the configuration change was pending; the outcome is unknown: "
        "check the configuration and retry",
        kReasonLeadershipLost));
  }
  if (pending_transfer_ && next.leader == pending_transfer_->target) {
    pending_transfer_->done(TransferResult{NodeError{}, next.leader, next.term});
    pending_transfer_.reset();
  }
}

void Replica::truncate_log_from(std::uint64_t from) {
  if (from <= commit_) {
    fatal("Raft asked to truncate committed entries from " + std::to_string(from) + " (commit " +
          std::to_string(commit_) + ")");
    return;
  }
  spdlog::warn("node {}: term {}: truncating uncommitted log tail from index {} (last {})",
               config_.node_id, raft_->term(), from, log_->last_index());
  // force: the check above already guarantees no committed entry is cut; the store's own commit
  // index may be a stale checkpoint value above the recovered log (async mode after a power loss).
  if (store::Status st = log_->truncate_suffix(from, /*force=*/true); !st.ok()) {
    fatal("truncating the log from " + std::to_string(from) + ": " + st.to_string());
    return;
  }
  dedup_.truncate_from(from);
  dedup_recorded_through_ = std::min(dedup_recorded_through_, from - 1);
  std::erase_if(unwritten_proposals_,
                [&](const DedupTable::Range& range) { return range.last >= from; });
  // The topic table goes back to what it was before the cut entries (their offsets are handed out
  // again, so no hole is left in what commits).
  if (!topics_.truncate_from(from)) {
    fatal("the topic table cannot undo entries from " + std::to_string(from) +
          ": they were recorded as committed");
    return;
  }
  reported_durable_ = std::min(reported_durable_, from - 1);
  for (auto it = pending_memberships_.lower_bound(from); it != pending_memberships_.end();) {
    it->second.done(MembershipResult{
        make_error(ErrorCode::kUnavailable,
                   "the configuration entry was replaced after a leadership change; check the "
                   "configuration and retry",
                   kReasonLeadershipLost),
        0,
        0,
        {}});
    it = pending_memberships_.erase(it);
  }
  // Acknowledgements held for the removed suffix vouch for entries that no longer exist.
  std::erase_if(held_messages_,
                [&](const HeldMessages& held) { return held.required_index >= from; });
  // Appends waiting for indexes that no longer exist learn it now rather than at their deadline. A
  // leader's own proposals of its term are never cut (the core cuts only older terms' entries, and
  // only before its first proposal): a pending append of this term and leadership is rewritten by
  // this very Ready, not lost.
  for (auto it = pending_appends_.lower_bound(from); it != pending_appends_.end();) {
    if (raft_->role() == raft::Role::kLeader && it->second.term == raft_->term()) {
      ++it;
      continue;
    }
    it->second.done(replaced_entry_error());
    it = pending_appends_.erase(it);
  }
}

void Replica::hold_until_durable(std::vector<raft::Message> messages) {
  const std::uint64_t last = log_->last_index();
  std::uint64_t last_term = 0;
  if (last > 0) {
    auto term = log_->term_at(last);
    if (term.ok()) last_term = *term;
  }
  if (held_messages_.size() >= kMaxHeldBatches) {
    // Only when fsync stalls for long: dropping the oldest is safe (Raft retransmits and re-votes).
    spdlog::warn("node {}: {} acknowledgement batches wait for a flush; dropping the oldest",
                 config_.node_id, held_messages_.size());
    held_messages_.pop_front();
  }
  held_messages_.push_back(HeldMessages{last, last_term, std::move(messages)});
}

void Replica::deliver_read_states(const raft::Ready& ready) {
  for (const raft::ReadState& read : ready.read_states) {
    auto it = pending_reads_.find(read.request_id);
    if (it == pending_reads_.end()) continue;  // expired already
    if (read.index <= commit_) {
      it->second.done(ReadIndexResult{NodeError{}, read.index});
    } else {
      reads_awaiting_commit_.emplace(read.index, std::move(it->second));
    }
    pending_reads_.erase(it);
  }
  for (std::uint64_t id : ready.aborted_reads) {
    auto it = pending_reads_.find(id);
    if (it == pending_reads_.end()) continue;
    it->second.done(ReadIndexResult{not_leader_error(), 0});
    pending_reads_.erase(it);
  }
}

// Tells the core how far the log is durable and releases the acknowledgements that waited for it.
// It reads the store's flushed index rather than trusting a flush notice's value: the store lowers
// flushed_index() on truncate_suffix (this thread is its only writer) and a flush cycle excludes a
// truncation, so the current value always describes the current log. In async flush mode an entry
// counts once written to the mapping (docs/durability.md).
void Replica::report_durability() {
  RoundProfile::Scope part(round_, RoundPart::kDurability);
  const std::uint64_t last = log_->last_index();
  const bool async = config_.store.flush_mode == store::FlushMode::kAsync;
  const std::uint64_t durable = rules::persisted_index_for_core(last, log_->flushed_index(), async);
  if (durable != reported_durable_) {
    reported_durable_ = durable;
    if (durable > 0) {
      auto term = log_->term_at(durable);
      if (term.ok()) raft_->on_persisted(durable, *term);
    }
    record_commit_in_store();
  }
  // The flushed index moves on without the durable one in async mode (which counts written
  // entries): the topic table follows the flushed one (topic_state_through()).
  advance_topic_state();
  release_held(durable);
}

void Replica::release_held(std::uint64_t durable_index) {
  while (!held_messages_.empty() &&
         rules::may_release_held(held_messages_.front().required_index, durable_index)) {
    HeldMessages& held = held_messages_.front();
    bool still_valid = held.required_index == 0;
    if (!still_valid) {
      auto term = log_->term_at(held.required_index);
      still_valid = term.ok() && *term == held.required_term;
    }
    if (still_valid) {
      for (raft::Message& message : held.messages) deps_.sender->send(std::move(message));
    }
    held_messages_.pop_front();
  }
}

void Replica::deliver_commit(std::uint64_t commit) {
  if (commit <= commit_) return;
  commit_ = commit;
  if (deps_.commit_advanced) deps_.commit_advanced(commit);
  record_commit_in_store();
  advance_topic_state();
  while (!pending_appends_.empty() && pending_appends_.begin()->first <= commit) {
    PendingAppend& pending = pending_appends_.begin()->second;
    auto term = log_->term_at(pending.last);
    if (term.ok() && *term == pending.term) {
      if (deps_.events != nullptr && !pending.duplicate) {
        deps_.events->append_committed(pending.last - pending.first + 1, pending.payload_bytes,
                                       deps_.clock() - pending.proposed_at);
      }
      pending.done(
          AppendResult{NodeError{}, pending.first, pending.last, pending.term, pending.duplicate});
    } else {
      pending.done(replaced_entry_error());
    }
    pending_appends_.erase(pending_appends_.begin());
  }
  answer_membership(commit);
  while (!reads_awaiting_commit_.empty() && reads_awaiting_commit_.begin()->first <= commit) {
    auto first = reads_awaiting_commit_.begin();
    first->second.done(ReadIndexResult{NodeError{}, first->first});
    reads_awaiting_commit_.erase(first);
  }
}

// The store's checkpoint keeps the commit index for the next open, which takes a log that ends below
// it for lost durable data (a storage fault: the node then neither votes nor counts toward commit
// until it has caught up, storage_fault.h). A follower learns commit indexes beyond what its own flush
// covers; recording those would make an ordinary power cut look like such a fault — and a cluster
// whose followers all lost power at once would have no voter left. So the store records the commit
// index only as far as this node's log is durable (the simulator found this: docs/testing.md).
void Replica::record_commit_in_store() {
  const std::uint64_t last = log_->last_index();
  const bool async = config_.store.flush_mode == store::FlushMode::kAsync;
  const std::uint64_t durable = async ? last : std::min(log_->flushed_index(), last);
  const std::uint64_t commit = std::min(commit_, durable);
  if (commit <= log_->commit_index()) return;
  if (store::Status st = log_->set_commit_index(commit); !st.ok()) {
    spdlog::warn("node {}: recording commit index {}: {}", config_.node_id, commit, st.to_string());
  }
}

void Replica::forget_replaced_proposals(const std::vector<raft::Entry>& entries) {
  const std::uint64_t first = entries.front().index;
  const std::uint64_t last = entries.back().index;
  // The first handed-out index where one of our unwritten proposals stood under another term: a
  // term has one leader, so a different term there is another leader's entry, and ours (with every
  // later one of ours) is gone from the log. Entries are contiguous, so entries[i - first] is index i.
  std::optional<std::uint64_t> replaced_from;
  for (const DedupTable::Range& range : unwritten_proposals_) {
    for (std::uint64_t i = std::max(range.first, first); i <= std::min(range.last, last); ++i) {
      if (entries[i - first].term != range.term) {
        replaced_from = i;
        break;
      }
    }
    if (replaced_from) break;
  }
  if (replaced_from) {
    const std::uint64_t from = *replaced_from;
    spdlog::info("node {}: term {}: proposals from index {} were replaced before they were written; "
                 "forgetting their deduplication and topic records",
                 config_.node_id, raft_->term(), from);
    dedup_.truncate_from(from);
    dedup_recorded_through_ = std::min(dedup_recorded_through_, from - 1);
    if (!topics_.truncate_from(from)) {
      fatal("the topic table cannot undo replaced proposals from " + std::to_string(from) +
            ": they were recorded as committed");
      return;
    }
    std::erase_if(unwritten_proposals_,
                  [&](const DedupTable::Range& range) { return range.last >= from; });
  }
  // Handed out now (written, or replaced above): no longer unwritten.
  while (!unwritten_proposals_.empty() && unwritten_proposals_.front().last <= last) {
    unwritten_proposals_.pop_front();
  }
}

void Replica::record_dedup(const std::vector<raft::Entry>& entries) {
  const std::uint64_t now_ms = wall_now_ms();
  for (const raft::Entry& entry : entries) {
    if (entry.index <= dedup_recorded_through_) continue;
    dedup_.record_entry(entry.client_id, entry.sequence, entry.index, entry.term,
                        entry.payload.view(), entry.has_envelope);
    note_entry(entry.index, entry.has_envelope, entry.payload.view(), now_ms);
    dedup_recorded_through_ = entry.index;
  }
}

void Replica::fatal(const std::string& what) {
  spdlog::critical("node {}: term {}: cannot continue: {}", config_.node_id, raft_->term(), what);
  failed_ = true;
  if (failure_.empty()) failure_ = what;
}

}  // namespace raftlog::replica

// Replica: the inputs that ask for something (appends, reads, transfers), their bounds and answers,
// and their expiry.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "derived/envelope.h"
#include "replica/replica.h"

namespace raftlog::replica {

namespace {
// Why a transfer to `target` was refused at once (raft::TransferStatus::kTargetSilent): how long
// the leader has not heard from it, so the operator looks at that node instead of retrying.
std::string silent_transfer_target_text(std::uint64_t target,
                                        const std::vector<raft::PeerProgress>& progress,
                                        const ReplicaConfig& config) {
  std::uint64_t silent_ms = 0;
  for (const raft::PeerProgress& peer : progress) {
    if (peer.id == target) silent_ms = peer.ticks_since_contact * config.tick_ms;
  }
  return "node " + std::to_string(target) + " has not answered this leader (node " +
         std::to_string(config.node_id) + ") for " + std::to_string(silent_ms) +
         " ms, an election timeout (" +
         std::to_string(std::uint64_t{config.election_ticks} * config.tick_ms) +
         " ms) or more: is it running? Leadership stays here; name a node that answers";
}
}  // namespace

NodeError Replica::not_leader_error() const {
  const raft::NodeId leader = raft_->leader();
  if (leader == raft::kNoNode) {
    return make_error(ErrorCode::kNoLeader,
                      "no leader known yet (election in progress); retry shortly");
  }
  NodeError error =
      make_error(ErrorCode::kNotLeader, "node " + std::to_string(config_.node_id) +
                                            " is not the leader; the leader is node " +
                                            std::to_string(leader));
  error.leader_id = leader;
  const std::map<std::uint64_t, std::string>& book = address_book();
  auto it = book.find(leader);
  if (it != book.end()) {
    error.leader_address = it->second;
    error.message += " at " + it->second;
  }
  return error;
}

// A member answered that our id is retired and our log lacks its committed configuration
// (raft::Raft::told_removed): there is no leader to send the client to, and this node must not
// look like one that will soon have one (drills7 H2: retired founders restarted on lost disks).
NodeError Replica::told_removed_error() const {
  return make_error(ErrorCode::kUnavailable,
                    "member " + std::to_string(raft_->removed_by()) + " answered that node " +
                        std::to_string(config_.node_id) +
                        "'s id is retired (removed by a committed change this node's log lacks): "
                        "it accepts no append; append to a member (raftlogctl members list)",
                    kReasonNodeRemoved);
}

Replica::AppendPlacement Replica::append(AppendRequest in) {
  // This node just became leader in a step() of this input batch, and the core may already have cut
  // an unfinished proposal from its log (noop_index_after_unfinished_proposal): hand that out
  // first, so that the dedup table forgets the cut entries before a retry is looked up in it, and
  // so that the cut fails no append proposed after it. Once per leadership: the Ready carries the
  // soft state that makes soft_state_ a leader.
  // The same for entries of this leadership the core holds but has not handed out yet (its noop, a
  // configuration entry): the topic offsets below continue the topic table, which must cover them.
  if (raft_->role() == raft::Role::kLeader &&
      (soft_state_.role != raft::Role::kLeader ||
       (in.has_envelopes && topics_.through() != raft_->last_index()))) {
    process();
  }
  if (in.client_id != 0 && in.sequence == 0) {
    // Sequences start at 1: 0 is what a client that forgot to set one sends (the proto default), and
    // taking it would make every later append of that client a retry of the first.
    in.done(failed_append(make_error(ErrorCode::kInvalidArgument,
                                     "sequence 0 with client_id " + std::to_string(in.client_id) +
                                         ": an idempotent append needs a sequence of at least 1 "
                                         "(client_id 0 appends without deduplication)",
                                     kReasonBadSequence)));
    return {};
  }
  if (raft_->role() != raft::Role::kLeader) {
    in.done(failed_append(raft_->told_removed() ? told_removed_error() : not_leader_error()));
    return {};
  }
  if (pending_appends_.size() >= config_.max_pending_appends) {
    in.done(
        failed_append(make_error(ErrorCode::kResourceExhausted,
                                 "too many appends waiting for commit on this node (" +
                                     std::to_string(config_.max_pending_appends) + "); retry later",
                                 kReasonTooManyPending)));
    return {};
  }
  if (in.client_id != 0 && answer_from_dedup(in)) return {};
  std::uint64_t append_bytes = 0;
  for (const std::string& payload : in.payloads) append_bytes += payload.size();
  if (NodeError full; !disk_has_room(append_bytes, &full)) {
    in.done(failed_append(full));
    return {};
  }
  // Taken before the payloads move into the proposal; a retry is compared against it (find()).
  const std::uint32_t digest =
      in.client_id != 0 ? append_digest(in.payloads, in.has_envelopes) : 0;
  // Timestamp and topic offsets: the offsets continue the topic table, which covers every entry of
  // the log (handed out above).
  if (in.has_envelopes) {
    if (topics_.through() != raft_->last_index()) {
      in.done(failed_append(make_error(
          ErrorCode::kUnavailable,
          "the leader's topic table is behind its log (" + std::to_string(topics_.through()) +
              " < " + std::to_string(raft_->last_index()) + "); retry",
          kReasonLeadershipLost)));
      return {};
    }
    if (NodeError refused = stamp_proposal(in.payloads, raft_->last_index() + 1); !refused.ok()) {
      in.done(failed_append(refused));
      return {};
    }
  }
  std::vector<raft::Entry> entries;
  entries.reserve(in.payloads.size());
  for (std::string& payload : in.payloads) {
    raft::Entry entry;
    entry.type = raft::EntryType::kNormal;
    entry.client_id = in.client_id;
    entry.sequence = in.sequence;
    entry.has_envelope = in.has_envelopes;
    entry.is_group_commit = in.group_commits;
    entry.payload = std::move(payload);
    entries.push_back(std::move(entry));
  }
  raft::ProposeResult result;
  const std::uint64_t proposed_first = raft_->last_index() + 1;
  const bool proposed =
      guard_core([&] { result = raft_->propose(std::move(entries)); });
  if (!proposed || result.status != raft::ProposeStatus::kOk) {
    (void)topics_.truncate_from(proposed_first);  // the stamped offsets were not used
  } else if (result.first_index != proposed_first) {
    fatal("the core placed a proposal at " + std::to_string(result.first_index) + ", not at " +
          std::to_string(proposed_first) + " where its offsets were stamped");
    in.done(failed_append(make_error(ErrorCode::kInternal,
                                     "this node stopped on an internal error; retry on another",
                                     kReasonStorageError)));
    return {};
  } else {
    (void)topics_.record(result.last_index, {}, std::nullopt);  // through() covers the proposal
  }
  if (!proposed) {
    in.done(failed_append(make_error(ErrorCode::kInternal,
                                     "this node stopped on a storage fault; retry on another",
                                     kReasonStorageError)));
    return {};
  }
  switch (result.status) {
    case raft::ProposeStatus::kOk:
      break;
    case raft::ProposeStatus::kNotLeader:
      in.done(failed_append(not_leader_error()));
      return {};
    case raft::ProposeStatus::kTransferring:
      in.done(failed_append(make_error(ErrorCode::kUnavailable,
                                       "leadership transfer in progress; retry on the new leader",
                                       kReasonLeadershipLost)));
      return {};
    case raft::ProposeStatus::kTooManyPending:
      in.done(failed_append(make_error(ErrorCode::kResourceExhausted,
                                       "too many uncommitted entries on the leader; retry later",
                                       kReasonTooManyPending)));
      return {};
    case raft::ProposeStatus::kEmpty:
      in.done(failed_append(make_error(ErrorCode::kInvalidArgument,
                                       std::string("append refused by Raft: ") +
                                           raft::to_string(result.status) + " (no entries)",
                                       kReasonEmptyAppend)));
      return {};
    case raft::ProposeStatus::kTooLarge:
    case raft::ProposeStatus::kInvalidEntry:
      // Node::append validates against limits the core is configured to accept (open()), so these
      // mean a configuration mismatch; still answered precisely rather than asserted.
      in.done(failed_append(
          make_error(ErrorCode::kInvalidArgument,
                     std::string("append refused by Raft: ") + raft::to_string(result.status),
                     kReasonAppendTooLarge)));
      return {};
  }
  // Recorded at once, not when the entries reach the store: a retry arriving in the same input batch
  // must already see this append.
  if (in.client_id != 0) {
    dedup_.record_append(in.client_id, in.sequence,
                         DedupTable::Range{result.first_index, result.last_index, result.term},
                         digest);
  }
  dedup_recorded_through_ = std::max(dedup_recorded_through_, result.last_index);
  unwritten_proposals_.push_back(
      DedupTable::Range{result.first_index, result.last_index, result.term});
  pending_appends_.emplace(
      result.last_index,
      PendingAppend{result.first_index, result.last_index, result.term, false, std::move(in.done),
                    in.deadline, deps_.clock(), append_bytes});
  if (deps_.events != nullptr) deps_.events->append_proposed();
  return AppendPlacement{true, result.first_index, result.last_index, result.term};
}

// A retry of an append this node's log holds (or one it can no longer judge) is answered from the
// dedup table: true when `in` was answered (or now waits for the original's commit).
bool Replica::answer_from_dedup(AppendRequest& in) {
  DedupTable::Range range;
  switch (dedup_.find(in.client_id, in.sequence, in.payloads, &range, in.has_envelopes)) {
    case DedupTable::Lookup::kFound:
      if (range.last <= commit_) {
        // The table records a proposal at once (above), before its entries reach the store. A
        // leader that loses leadership before writing them, and whose log then takes another
        // leader's entries at those indexes, runs no store truncation, so the record outlives its
        // entries. A committed index holding another term than the record's is such a record: the
        // retry is a new append (proposed below; the table answers the newest record from then
        // on). An index the log no longer holds (retention) keeps the record's answer.
        const auto committed_term = log_->term_at(range.last);
        if (committed_term.ok() && *committed_term != range.term) break;
        in.done(AppendResult{NodeError{}, range.first, range.last, range.term, true});
      } else {
        // The original is in this leader's log and will commit under it: wait for that.
        pending_appends_.emplace(range.last, PendingAppend{range.first, range.last, range.term,
                                                           true, std::move(in.done), in.deadline});
      }
      return true;
    case DedupTable::Lookup::kReused: {
      // Answering with the old range would drop this request's entries without a word.
      const std::uint64_t held = range.last - range.first + 1;
      const std::string difference = held == in.payloads.size()
                                         ? "this request's entries differ"
                                         : "this request has " + std::to_string(in.payloads.size());
      in.done(failed_append(make_error(
          ErrorCode::kFailedPrecondition,
          "sequence " + std::to_string(in.sequence) + " of client " + std::to_string(in.client_id) +
              " already holds other entries (" + std::to_string(held) + " at indexes " +
              std::to_string(range.first) + ".." + std::to_string(range.last) + "; " + difference +
              "): a retry must carry the same entries, new data needs a new sequence",
          kReasonSequenceReused)));
      return true;
    }
    case DedupTable::Lookup::kTooOld:
      in.done(failed_append(make_error(
          ErrorCode::kFailedPrecondition,
          "sequence " + std::to_string(in.sequence) + " of client " + std::to_string(in.client_id) +
              " is older than the deduplication window; it cannot be retried safely",
          kReasonSequenceTooOld)));
      return true;
    case DedupTable::Lookup::kUnknown:
      break;
  }
  return false;
}

void Replica::read_index(ReadIndexRequest in) {
  const std::uint64_t id = next_read_id_++;
  switch (raft_->read_index(id)) {
    case raft::ReadIndexStatus::kOk:
      pending_reads_.emplace(id, PendingRead{std::move(in.done), in.deadline});
      return;
    case raft::ReadIndexStatus::kNotLeader:
      in.done(ReadIndexResult{not_leader_error(), 0});
      return;
    case raft::ReadIndexStatus::kTooManyPending:
      in.done(ReadIndexResult{
          make_error(ErrorCode::kResourceExhausted,
                     "too many linearizable reads pending; retry later", kReasonTooManyPending),
          0});
      return;
  }
}

void Replica::transfer_leadership(TransferRequest in) {
  // The leader's core judges the target by the configuration in force (--members names only the
  // founders: a member added since is a valid target); a follower redirects to the leader.
  raft::TransferStatus transfer = raft::TransferStatus::kNotLeader;
  if (!guard_core([&] { transfer = raft_->transfer_leadership(in.target); })) {
    in.done(TransferResult{make_error(ErrorCode::kInternal, "this node stopped on a storage fault",
                                      kReasonStorageError),
                           0, 0});
    return;
  }
  switch (transfer) {
    case raft::TransferStatus::kOk:
      break;
    case raft::TransferStatus::kAlreadyLeader:
      in.done(TransferResult{NodeError{}, config_.node_id, raft_->term()});
      return;
    case raft::TransferStatus::kNotLeader:
      in.done(TransferResult{not_leader_error(), 0, 0});
      return;
    case raft::TransferStatus::kUnknownTarget:
      // A learner is a member: "unknown" misled (drills7 L2). It may lead once promoted.
      if (raft::is_member(raft_->conf(), in.target)) {
        in.done(TransferResult{
            make_error(ErrorCode::kFailedPrecondition,
                       "node " + std::to_string(in.target) +
                           " is a learner, not a voter: it cannot lead until it is promoted "
                           "(raftlogctl members promote " +
                           std::to_string(in.target) + ")",
                       kReasonTransferTargetLearner),
            0, 0});
        return;
      }
      in.done(TransferResult{
          make_error(ErrorCode::kInvalidArgument,
                     "node " + std::to_string(in.target) +
                         " is not a member of the cluster's current configuration",
                     kReasonTransferTargetUnknown),
          0, 0});
      return;
    case raft::TransferStatus::kInProgress:
      in.done(TransferResult{
          make_error(ErrorCode::kUnavailable, "another leadership transfer is in progress",
                     kReasonTransferInProgress),
          0, 0});
      return;
    case raft::TransferStatus::kTargetSilent:
      in.done(TransferResult{make_error(ErrorCode::kFailedPrecondition,
                                        silent_transfer_target_text(in.target, raft_->progress(), config_),
                                        kReasonTransferTargetSilent),
                             0, 0});
      return;
  }
  if (pending_transfer_) {
    pending_transfer_->done(TransferResult{
        make_error(ErrorCode::kUnavailable, "superseded", kReasonTransferSuperseded), 0, 0});
  }
  pending_transfer_ = std::move(in);
  // The core aborts a transfer after an election timeout; allow two before reporting failure.
  transfer_deadline_ =
      deps_.clock() + std::chrono::milliseconds(4ULL * config_.election_ticks * config_.tick_ms);
}

void Replica::expire_pending(Clock::time_point now) {
  // Bounded by the number of pending requests (max_pending_appends / the core's read bound).
  for (auto it = pending_appends_.begin(); it != pending_appends_.end();) {
    if (it->second.deadline <= now) {
      it->second.done(failed_append(
          make_error(ErrorCode::kDeadlineExceeded,
                     "not committed within " + std::to_string(config_.append_timeout_ms) +
                         " ms; the outcome is unknown: retry with the same "
                         "client_id/sequence",
                     kReasonCommitTimeout)));
      it = pending_appends_.erase(it);
    } else {
      ++it;
    }
  }
  auto expire_reads = [&](auto& reads) {
    for (auto it = reads.begin(); it != reads.end();) {
      if (it->second.deadline <= now) {
        it->second.done(ReadIndexResult{
            make_error(ErrorCode::kDeadlineExceeded, "leadership could not be confirmed in time",
                       kReasonReadIndexTimeout),
            0});
        it = reads.erase(it);
      } else {
        ++it;
      }
    }
  };
  expire_reads(pending_reads_);
  expire_reads(reads_awaiting_commit_);
  expire_pending_memberships(now);
  if (pending_transfer_ && transfer_deadline_ <= now) {
    pending_transfer_->done(TransferResult{
        make_error(ErrorCode::kUnavailable, "leadership transfer did not complete in time",
                   kReasonTransferTimeout),
        0, 0});
    pending_transfer_.reset();
  }
}

void Replica::fail_all(ErrorCode code, const std::string& message) {
  fail_pending_appends(code,
                       message + "; the outcome is unknown: retry with the same client_id/sequence",
                       kReasonShuttingDown);
  for (auto& [id, read] : pending_reads_)
    read.done(ReadIndexResult{make_error(code, message, kReasonShuttingDown), 0});
  pending_reads_.clear();
  for (auto& [index, read] : reads_awaiting_commit_)
    read.done(ReadIndexResult{make_error(code, message, kReasonShuttingDown), 0});
  reads_awaiting_commit_.clear();
  if (pending_transfer_) {
    pending_transfer_->done(TransferResult{make_error(code, message, kReasonShuttingDown), 0, 0});
    pending_transfer_.reset();
  }
  fail_pending_memberships(make_error(code, message, kReasonShuttingDown));
}

void Replica::fail_pending_appends(ErrorCode code, const std::string& message, const char* reason) {
  for (auto& [last, pending] : pending_appends_) {
    pending.done(failed_append(make_error(code, message, reason)));
  }
  pending_appends_.clear();
}

bool Replica::disk_has_room(std::uint64_t append_bytes, NodeError* error) {
  return disk_.has_room(*deps_.disk, deps_.clock(), append_bytes, config_.store.segment_size_bytes,
                        error);
}

void Replica::step(raft::Message message) {
  if (message.type == raft::MessageType::kSnapshot && message.snapshot && config_.raft.snapshots) {
    receive_snapshot(std::move(message));  // prepared off the loop (replica_snapshot_receive.cpp)
    check_incoming_snapshot_current();
    return;
  }
  if (holds_back_for_incoming_snapshot(message)) return;
  if (message.type == raft::MessageType::kAppend) {
    // raftlogd steps every queued message before one process(), and a leader pipelines appends that
    // each carry its whole commit index: the configuration entries of an earlier one, committed
    // but not written yet, could not be flushed to settle, and two appends would put more in one
    // Ready than CONFSTATE holds. Written first, they can.
    const bool has_config = std::any_of(
        message.entries.begin(), message.entries.end(),
        [](const raft::Entry& entry) { return entry.type == raft::EntryType::kConfig; });
    if (has_config && conf_entries_since_ready_ > 0) process();
    if (failed_) return;
    hold_back_config_entries(message);
  }
  if (message.type == raft::MessageType::kPreVote || message.type == raft::MessageType::kVote) {
    note_vote_request_while_unvouched(message);
  }
  // A second leadership under the id the core follows (another nonce: a node that lost its state
  // and was elected again in the term) passes the leader() check below, yet the core refused it.
  const bool from_leader = (message.type == raft::MessageType::kAppend ||
                            message.type == raft::MessageType::kHeartbeat) &&
                           !raft_->is_second_leader_message(message);
  const raft::NodeId from = message.from;
  const raft::Term term = message.term;
  const std::uint64_t hold = message.retention_hold;
  (void)guard_core([&] { raft_->step(std::move(message)); });
  check_incoming_snapshot_current();
  observe_catch_up();
  // Kept only when the core took the sender for the leader of its current term (retention_hold.h).
  if (from_leader && raft_->leader() == from && raft_->term() == term) {
    ticks_without_leader_message_ = 0;
    leader_hold_.note(from, term, hold, deps_.clock());
  }
}

bool Replica::leader_silent() const {
  // A voter forgets a silent leader itself (its election timer: pre-vote); a learner never does.
  // Twice the election timeout: past the longest randomized timeout a voter waits.
  return raft_ != nullptr && !raft::is_voter(raft_->conf(), config_.node_id) &&
         raft_->role() == raft::Role::kFollower && raft_->leader() != raft::kNoNode &&
         ticks_without_leader_message_ >=
             2 * static_cast<std::uint64_t>(config_.raft.election_ticks);
}

void Replica::observe_catch_up() {
  if (raft_ == nullptr) return;
  using Seat = CatchUpRule::Seat;
  const bool follower_of_leader = raft_->role() == raft::Role::kFollower &&
                                  raft_->leader() != raft::kNoNode && !leader_silent();
  const Seat seat = raft_->role() == raft::Role::kLeader ? Seat::kLeader
                    : follower_of_leader                 ? Seat::kFollowerOfLeader
                                                         : Seat::kNoLeader;
  const std::uint64_t last = raft_->last_index();
  switch (catch_up_.observe(seat, raft_->behind_leader_commit(), last)) {
    case CatchUpRule::Change::kBehind:
      spdlog::info(
          "node {}: log ends at {}, {} entries behind the commit index {} leader {} named: not "
          "ready for reads (health NOT_SERVING) until it reaches that index",
          config_.node_id, last, catch_up_.gap(), catch_up_.catching_up_to(), raft_->leader());
      break;
    case CatchUpRule::Change::kCaughtUp:
      spdlog::info("node {}: caught up with the commit index leader {} named (log ends at {})",
                   config_.node_id, raft_->leader(), last);
      break;
    case CatchUpRule::Change::kNone:
      break;
  }
}

void Replica::tick() {
  const Clock::time_point now = deps_.clock();
  disk_.refresh_if_due(*deps_.disk, now);
  (void)guard_core([&] {
    raft_->set_disk_over_watermark(disk_.exceeded());
    report_snapshot_progress();
    deps_.sender->snapshots_useless_through(commit_);
    raft_->tick();
  });
  ++ticks_without_leader_message_;
  check_incoming_snapshot_current();
  observe_catch_up();
  hand_over_leadership_for_disk(now);
}

// A snapshot's chunks still going out restart its retry timer: only a transfer that stopped moving
// (or an install that does not answer) is sent again (raft::Config::snapshot_retry_ticks).
void Replica::report_snapshot_progress() {
  if (raft_->role() != raft::Role::kLeader) {
    snapshot_send_marks_.clear();
    snapshot_encoding_.invalidate();  // only a leader sends snapshots: its bytes go
    abandon_outgoing_snapshot("this node stopped leading");
    return;
  }
  snapshot_encoding_.expire(deps_.clock());
  std::map<std::uint64_t, MessageSender::SnapshotSendMark> seen;
  for (const raft::PeerProgress& progress : raft_->progress()) {
    if (progress.snapshot_index == 0 || progress.id == config_.node_id) continue;
    const MessageSender::SnapshotSendMark mark = deps_.sender->snapshot_send_mark(progress.id);
    const auto last = snapshot_send_marks_.find(progress.id);
    if (mark.sent_bytes != 0 && (last == snapshot_send_marks_.end() || !(last->second == mark))) {
      raft_->snapshot_progress(progress.id);
      snapshot_encoding_.touch(mark.index, deps_.clock());  // still being sent: keep its bytes
    }
    seen.emplace(progress.id, mark);
  }
  snapshot_send_marks_ = std::move(seen);  // only the peers a snapshot is in flight to
}

}  // namespace raftlog::replica

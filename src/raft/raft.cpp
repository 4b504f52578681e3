// Construction, configuration checks, the public forwarding layer and Ready assembly.
#include "raft/raft.h"

#include <algorithm>
#include <limits>

#include "raft/assert.h"
#include "raft/raft_impl.h"

namespace raftlog::raft {
namespace {

// Mixing the id in keeps nodes sharing one Config::random_seed from drawing identical timeouts.
std::uint64_t election_prng_seed(const Config& config) {
  return config.random_seed ^ (config.id * 0x9E3779B97F4A7C15ull);
}

// The driver's seed, or one derived from (random_seed, id) by another splitmix64 step than the
// election generator's first, so that the two streams do not start alike.
std::uint64_t nonce_prng_seed(const Config& config) {
  if (config.leadership_nonce_seed != 0) return config.leadership_nonce_seed;
  std::uint64_t state = election_prng_seed(config) ^ 0xD1B54A32D192ED03ull;
  return util::splitmix64(state);
}

// The configurations at start (Config::conf_history): the driver's, or found by scanning the log
// backwards in bounded chunks for kConfig entries, down to the newest one at or below the commit index
// (the oldest a truncation could roll back to) or the log's first index, so the scan's cost is bounded
// by the log length. A driver that keeps its configurations (the replica's CONFSTATE) never scans; a
// kConfig entry that does not decode in a scan is the driver's log handing over garbage (fatal, like
// a restart_problem()).
std::vector<ConfRecord> load_conf_history(const Config& config, const LogReader& log,
                                          Index commit) {
  if (!config.conf_history.empty()) return config.conf_history;
  std::vector<ConfRecord> newest_first;
  constexpr Index kScanChunkEntries = 64;
  Index high = log.last_index();
  const Index first = log.first_index();
  bool reached_committed = false;
  while (!reached_committed && high >= first && high > 0) {
    const Index low = high - first + 1 > kScanChunkEntries ? high - kScanChunkEntries + 1 : first;
    const std::vector<Entry> chunk =
        log.entries(low, high, std::numeric_limits<std::size_t>::max());
    RAFT_ASSERT(chunk.size() == high - low + 1,
                "LogReader::entries ignored an unlimited byte budget");
    for (auto it = chunk.rbegin(); it != chunk.rend() && !reached_committed; ++it) {
      if (it->type != EntryType::kConfig) continue;
      std::optional<ConfState> conf = decode_config(it->payload);
      RAFT_ASSERT(conf.has_value(),
                  "a kConfig entry in the log does not decode: the log is corrupt");
      newest_first.push_back(ConfRecord{it->index, it->term, std::move(*conf)});
      reached_committed = it->index <= commit;
    }
    high = low - 1;
  }
  if (!reached_committed) newest_first.push_back(ConfRecord{0, 0, config.initial_conf});
  return std::vector<ConfRecord>(newest_first.rbegin(), newest_first.rend());
}

const Config& checked(const Config& config, const HardState& hard_state, const LogReader& log) {
  const std::string problem = validate_config(config);
  RAFT_ASSERT(problem.empty(), problem.c_str());
  const std::string restart = restart_problem(hard_state, log);
  RAFT_ASSERT(restart.empty(), restart.c_str());
  return config;
}

}  // namespace

std::string restart_problem(const HardState& hard_state, const LogReader& log) {
  const Index last = log.last_index();
  if (hard_state.commit > last) {
    return "hard state commit " + std::to_string(hard_state.commit) +
           " is beyond the recovered log (last index " + std::to_string(last) +
           "): the log lost committed entries";
  }
  if (last == 0 || last < log.first_index()) return "";
  const std::optional<Term> last_term = log.term_at(last);
  if (last_term && *last_term > hard_state.term) {
    return "hard state term " + std::to_string(hard_state.term) + " is below the term " +
           std::to_string(*last_term) + " of log entry " + std::to_string(last) +
           ": the hard state was lost or replaced, and starting could vote twice in one term";
  }
  return "";
}

std::string validate_config(const Config& config) {
  if (config.id == kNoNode) return "Config::id must not be 0 (kNoNode)";
  if (!is_valid_conf(config.initial_conf)) {
    return "Config::initial_conf must be a valid configuration (1 to 64 members, voters "
           "non-empty, sorted, unique, non-zero, learners apart from voters)";
  }
  for (std::size_t i = 0; i < config.conf_history.size(); ++i) {
    if (!is_valid_conf(config.conf_history[i].conf)) {
      return "Config::conf_history[" + std::to_string(i) +
             "] is not a valid configuration (1 to 64 members, voters non-empty, sorted, unique, "
             "non-zero, learners apart from voters)";
    }
    if (i > 0 && config.conf_history[i - 1].index >= config.conf_history[i].index) {
      return "Config::conf_history indexes must increase";
    }
  }
  if (config.unvouched_may_elect == config.id) {
    return "Config::unvouched_may_elect must name another node (an unvouched node with entries "
           "never campaigns, and one with an empty log needs no word to vote for itself)";
  }
  if (config.heartbeat_ticks < 1) return "Config::heartbeat_ticks must be >= 1";
  if (config.election_ticks <= config.heartbeat_ticks) {
    return "Config::election_ticks must be greater than heartbeat_ticks";
  }
  if (config.election_ticks > (1 << 20)) return "Config::election_ticks must be <= 2^20";
  if (config.max_entries_per_message < 1) return "Config::max_entries_per_message must be >= 1";
  if (config.max_entries_per_message > kMaxProposalEntries) {
    return "Config::max_entries_per_message must be <= " + std::to_string(kMaxProposalEntries) +
           " (kMaxProposalEntries)";
  }
  if (config.max_bytes_per_message < Entry::kEntryOverheadBytes) {
    return "Config::max_bytes_per_message must hold at least one empty entry";
  }
  if (config.max_inflight_messages < 1) return "Config::max_inflight_messages must be >= 1";
  if (config.max_inflight_bytes < 1) return "Config::max_inflight_bytes must be >= 1";
  if (config.max_uncommitted_entries < config.max_entries_per_message) {
    return "Config::max_uncommitted_entries must be >= max_entries_per_message (one full proposal "
           "fits)";
  }
  if (config.max_uncommitted_bytes < config.max_bytes_per_message) {
    return "Config::max_uncommitted_bytes must be >= max_bytes_per_message (one full proposal "
           "fits)";
  }
  if (config.max_pending_reads < 1) return "Config::max_pending_reads must be >= 1";
  if (config.snapshot_retry_ticks < 1) return "Config::snapshot_retry_ticks must be >= 1";
  if (config.promised_term > kMaxTerm) return "Config::promised_term must be <= kMaxTerm";
  if (config.vouching_term > kMaxTerm) return "Config::vouching_term must be <= kMaxTerm";
  if (config.removed_word &&
      (config.removed_word->by == kNoNode || config.removed_word->by == config.id ||
       config.removed_word->conf_index == 0 || config.removed_word->conf_term == 0 ||
       config.removed_word->conf_term > kMaxTerm)) {
    return "Config::removed_word must name another node and a configuration entry (index and "
           "term 1..kMaxTerm)";
  }
  if (config.retired_ids.size() > kMaxRetiredIds) {
    return "Config::retired_ids holds more than " + std::to_string(kMaxRetiredIds) + " ids";
  }
  return {};
}

Raft::Impl::Impl(const Config& config, const LogReader& log, const HardState& hard_state)
    : config_(checked(config, hard_state, log)),
      log_(log, hard_state.commit),
      conf_history_(load_conf_history(config, log, hard_state.commit)),
      prng_(election_prng_seed(config)),
      nonce_prng_(nonce_prng_seed(config)),
      term_(hard_state.term),
      vote_(hard_state.vote),
      read_only_(config.max_pending_reads),
      retired_(config.retired_ids),
      term_leader_(hard_state.leader),
      term_leader_nonce_(hard_state.leader == kNoNode ? 0 : hard_state.leader_nonce),
      term_leader_term_(hard_state.term) {
  refresh_conf();
  unvouched_ = config.unvouched;
  // Recovery's storage fault first: when both apply, catch_up_cause() names it (the driver's and
  // the simulator's recovery checks tell it from an unvouched node resuming its catch-up).
  if (config.promised_index > 0) {
    enter_catching_up(config.promised_index, config.promised_term, Raft::CatchUpCause::kConfig);
  }
  if (unvouched_ && config.vouching_term > 0) {
    // The leader's word from an earlier start: the catch-up resumes toward it. The driver records
    // a word only once a stale match was ruled out (vouching()).
    vouching_term_ = config.vouching_term;
    vouch_index_ = config.vouching_index;
    stale_match_ruled_out_ = true;
    if (!catching_up_) catch_up_cause_ = Raft::CatchUpCause::kUnvouched;
    catching_up_ = true;
  }
  maybe_finish_catching_up();  // a log restored from an earlier start may meet the vouching word
  // A word from an earlier start binds again, unless the restored log already shows it stale.
  removed_word_ = config.removed_word;
  clear_removed_if_answered();
  randomize_election_timeout();
  reported_soft_state_ = soft_state();
  reported_hard_state_ = hard_state;
  counted_vouching_ = vouching();
}

std::vector<PeerProgress> Raft::Impl::progress() const {
  std::vector<PeerProgress> out;
  if (role_ != Role::kLeader) return out;
  out.push_back(PeerProgress{id(), log_.persisted_index(), log_.last_index() + 1, false, 0, 0,
                             disk_over_watermark_, true, is_voter(id()), catching_up_});
  for (const auto& [peer, pr] : progress_) {
    out.push_back(PeerProgress{peer, pr.match, pr.next, pr.state != ReplicationState::kReplicate,
                               pr.inflights.count(), pr.ticks_since_contact, pr.disk_over_watermark,
                               pr.heard_this_term, is_voter(peer), pr.catching_up,
                               pr.pending_snapshot, pr.inflights.bytes(), pr.answered_append});
  }
  std::sort(out.begin(), out.end(),
            [](const PeerProgress& a, const PeerProgress& b) { return a.id < b.id; });
  return out;
}

bool Raft::Impl::has_ready() const {
  return soft_state() != reported_soft_state_ || hard_state() != reported_hard_state_ ||
         log_.has_handout() || !messages_.empty() || !messages_after_persist_.empty() ||
         !read_states_.empty() || !aborted_reads_.empty();
}

Ready Raft::Impl::ready() {
  // The proposals since the last ready() leave now, as one AppendEntries per follower (as many as
  // each follower's window and max_entries/bytes_per_message allow). A node that stepped down
  // meanwhile sends nothing; a new leader broadcasts on its own (become_leader).
  if (broadcast_pending_) {
    broadcast_pending_ = false;
    if (role_ == Role::kLeader) broadcast_append(/*send_if_empty=*/false);
  }
  count_catch_up_move();  // before the reported states below take this Ready's
  Ready rd;
  const SoftState soft = soft_state();
  if (soft != reported_soft_state_) {
    rd.soft_state = soft;
    reported_soft_state_ = soft;
  }
  const HardState hard = hard_state();
  if (hard != reported_hard_state_) {
    rd.hard_state = hard;
    // The term's leader too: it must be durable before an acknowledgement to it leaves (once per
    // term and node, at the term's first leader message).
    if (durable_fields_differ(hard, reported_hard_state_)) rd.must_sync = true;
    if (hard.commit > reported_hard_state_.commit) rd.commit_index = hard.commit;
    reported_hard_state_ = hard;
  }
  RaftLog::Handout handout = log_.take_handout();
  if (handout.snapshot || handout.truncate_from || !handout.entries.empty()) rd.must_sync = true;
  if (handout.snapshot) rd.snapshot = std::move(*handout.snapshot);
  rd.truncate_from = handout.truncate_from;
  rd.entries = std::move(handout.entries);
  rd.messages = std::move(messages_);
  messages_.clear();
  rd.messages_after_persist = std::move(messages_after_persist_);
  messages_after_persist_.clear();
  rd.read_states = std::move(read_states_);
  read_states_.clear();
  rd.aborted_reads = std::move(aborted_reads_);
  aborted_reads_.clear();
  return rd;
}

// --- public forwarding ---

Raft::Raft(const Config& config, const LogReader& log, const HardState& hard_state)
    : impl_(std::make_unique<Impl>(config, log, hard_state)) {}
Raft::~Raft() = default;

void Raft::tick() { impl_->tick(); }
void Raft::step(Message message) { impl_->step(message); }
ProposeResult Raft::propose(std::vector<Entry> entries) {
  return impl_->propose(std::move(entries));
}
ReadIndexStatus Raft::read_index(std::uint64_t request_id) { return impl_->read_index(request_id); }
TransferStatus Raft::transfer_leadership(NodeId target) {
  return impl_->transfer_leadership(target);
}
void Raft::set_disk_over_watermark(bool over) { impl_->set_disk_over_watermark(over); }
void Raft::snapshot_progress(NodeId peer) { impl_->snapshot_progress(peer); }
void Raft::set_trim_point_conf(Index point, const ConfState& conf) {
  impl_->set_trim_point_conf(point, conf);
}
void Raft::forget_trim_point_conf() { impl_->forget_trim_point_conf(); }
void Raft::on_persisted(Index index, Term term) { impl_->on_persisted(index, term); }
bool Raft::has_ready() const { return impl_->has_ready(); }
Ready Raft::ready() { return impl_->ready(); }
NodeId Raft::id() const { return impl_->id(); }
Role Raft::role() const { return impl_->role(); }
Term Raft::term() const { return impl_->term(); }
NodeId Raft::leader() const { return impl_->leader(); }
Index Raft::commit_index() const { return impl_->commit_index(); }
const std::optional<Snapshot>& Raft::installing_snapshot() const {
  return impl_->installing_snapshot();
}
Index Raft::last_index() const { return impl_->last_index(); }
const ConfState& Raft::conf() const { return impl_->conf(); }
const std::vector<ConfRecord>& Raft::conf_history() const { return impl_->conf_history(); }
ConfChangeResult Raft::propose_conf_change(const ConfChange& change) {
  return impl_->propose_conf_change(change);
}
std::vector<PeerProgress> Raft::progress() const { return impl_->progress(); }
HardState Raft::hard_state() const { return impl_->hard_state(); }
SoftState Raft::soft_state() const { return impl_->soft_state(); }
Index Raft::persisted_index() const { return impl_->persisted_index(); }
NodeId Raft::transfer_target() const { return impl_->transfer_target(); }
std::size_t Raft::pending_reads() const { return impl_->pending_reads(); }
bool Raft::catching_up() const { return impl_->catching_up(); }
Index Raft::catching_up_to() const { return impl_->catching_up_to(); }
bool Raft::unvouched() const { return impl_->unvouched(); }
std::pair<Term, Index> Raft::vouching() const { return impl_->vouching(); }
std::uint64_t Raft::catch_up_moves() const { return impl_->catch_up_moves(); }
const CommittedConflict& Raft::committed_conflict() const { return impl_->committed_conflict(); }
NodeId Raft::term_leader() const { return impl_->term_leader(); }
std::uint64_t Raft::term_leader_nonce() const { return impl_->term_leader_nonce(); }
bool Raft::is_second_leader_message(const Message& message) const {
  return impl_->is_second_leader_message(message);
}
const TermLeaderClash& Raft::second_leader() const { return impl_->second_leader(); }
const TermLeaderClash& Raft::leadership_refused() const { return impl_->leadership_refused(); }
Raft::CatchUpCause Raft::catch_up_cause() const { return impl_->catch_up_cause(); }
bool Raft::removed() const { return impl_->removed(); }
NodeId Raft::removed_by() const { return impl_->removed_by(); }
bool Raft::told_removed() const { return impl_->told_removed(); }
const std::optional<RemovedWord>& Raft::removed_word() const { return impl_->removed_word(); }
const StepDown& Raft::last_step_down() const { return impl_->last_step_down(); }
const std::vector<NodeId>& Raft::retired_ids() const { return impl_->retired_ids(); }
Index Raft::stranded_below() const { return impl_->stranded_below(); }
Index Raft::behind_leader_commit() const { return impl_->behind_leader_commit(); }

}  // namespace raftlog::raft

#include "sim/checker.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>

namespace raftlog::sim {

namespace {

// FNV-1a over everything that makes an entry's content (index and term are the registry key).
std::uint64_t content_digest(const raft::Entry& entry) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  auto mix = [&hash](std::uint64_t value) {
    for (int byte = 0; byte < 8; ++byte) {
      hash ^= (value >> (8 * byte)) & 0xffU;
      hash *= 0x100000001b3ULL;
    }
  };
  mix(static_cast<std::uint64_t>(entry.type));
  mix(entry.client_id);
  mix(entry.sequence);
  mix(entry.payload.size());
  for (char c : entry.payload.view()) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

const char* type_name(raft::EntryType type) {
  switch (type) {
    case raft::EntryType::kNormal:
      return "normal";
    case raft::EntryType::kNoop:
      return "noop";
    case raft::EntryType::kConfig:
      return "config";
  }
  return "?";
}

}  // namespace

std::string describe(const raft::Entry& entry) {
  constexpr std::size_t kMaxShownPayloadBytes = 24;
  std::string payload = entry.payload.str().substr(0, kMaxShownPayloadBytes);
  for (char& c : payload) {
    if (c < 0x20 || c > 0x7e) c = '.';
  }
  return fmt::format("({}/t{} {} \"{}\"{}{})", entry.index, entry.term, type_name(entry.type),
                     payload, entry.payload.size() > kMaxShownPayloadBytes ? "..." : "",
                     entry.proposal_continues ? " +more" : "");
}

Checker::Checker(std::size_t node_count)
    : node_count_(node_count),
      logs_(node_count + 1, nullptr),
      commit_(node_count + 1, 0),
      leader_term_(node_count + 1, 0),
      durable_(node_count + 1),
      conf_entries_(node_count + 1),
      conf_base_unknown_(node_count + 1, false),
      log_wipe_base_unknown_(node_count + 1, false) {
  assert(node_count > 0);
  for (raft::NodeId id = 1; id <= node_count; ++id) bootstrap_conf_.voters.push_back(id);
  committed_conf_ = bootstrap_conf_;
}

void Checker::observe_conf(raft::NodeId node, const raft::ConfState& conf) {
  if (failed()) return;
  const std::map<raft::Index, raft::ConfState>& entries = conf_entries_[node];
  if (entries.empty() && conf_base_unknown_[node]) return;  // a trimmed log's, not known here
  const raft::ConfState& expected = entries.empty() ? bootstrap_conf_ : entries.rbegin()->second;
  if (conf != expected) {
    report("conf-in-force",
           fmt::format("node {} runs {}, but the newest configuration in its log is {} (entry {})",
                       node, raft::to_string(conf), raft::to_string(expected),
                       entries.empty() ? 0 : entries.rbegin()->first));
  }
}

void Checker::note_conf_entry(raft::NodeId node, const raft::Entry& entry) {
  std::map<raft::Index, raft::ConfState>& entries = conf_entries_[node];
  entries.erase(entries.lower_bound(entry.index), entries.end());  // replaced
  std::optional<raft::ConfState> conf = raft::decode_config(entry.payload);
  if (!conf) {
    report("conf-succession",
           fmt::format("node {} holds {}, which is no valid configuration", node, describe(entry)));
    return;
  }
  const raft::Index previous_index = entries.empty() ? 0 : entries.rbegin()->first;
  const raft::ConfState& previous = entries.empty() ? bootstrap_conf_ : entries.rbegin()->second;
  // The first one a trimmed log holds follows a configuration this checker cannot see.
  const bool unknown_previous = entries.empty() && conf_base_unknown_[node];
  if (!unknown_previous && !raft::single_change_between(previous, *conf)) {
    report("conf-succession",
           fmt::format(
               "node {}: configuration entry {} holds {}, not one change from {} (entry {})", node,
               entry.index, raft::to_string(*conf), raft::to_string(previous), previous_index));
    return;
  }
  if (previous_index > committed_.size()) {
    report(
        "conf-overlap",
        fmt::format("node {} appended configuration entry {} ({}) while the one before it, entry "
                    "{}, was not committed (committed up to {})",
                    node, entry.index, raft::to_string(*conf), previous_index, committed_.size()));
    return;
  }
  entries.emplace(entry.index, std::move(*conf));
}

void Checker::attach_log(raft::NodeId node, const raft::LogReader* log) {
  assert(node >= 1 && node <= node_count_ && log != nullptr);
  logs_[node] = log;
}

const raft::LogReader& Checker::log_of(raft::NodeId node) const {
  assert(node >= 1 && node <= node_count_ && logs_[node] != nullptr);
  return *logs_[node];
}

std::optional<raft::Entry> Checker::entry_at(raft::NodeId node, raft::Index index) const {
  const raft::LogReader& log = log_of(node);
  if (index < log.first_index() || index > log.last_index()) return std::nullopt;
  std::vector<raft::Entry> entries = log.entries(index, index, SIZE_MAX);
  if (entries.size() != 1 || entries[0].index != index) return std::nullopt;
  return std::move(entries[0]);
}

void Checker::report(std::string invariant, std::string detail) {
  if (violation_) return;
  violation_ = Violation{std::move(invariant), std::move(detail)};
}

bool Checker::is_acknowledged(raft::Index index) const {
  return index >= 1 && index <= committed_.size() && committed_[index - 1].acknowledged;
}

const raft::Entry* Checker::committed_entry(raft::Index index) const {
  if (index < 1 || index > committed_.size()) return nullptr;
  return &committed_[index - 1].entry;
}

void Checker::observe_role(raft::NodeId node, raft::Term term, raft::Role role,
                           std::uint64_t leader_nonce) {
  if (failed()) return;
  if (role != raft::Role::kLeader) {
    leader_term_[node] = 0;
    return;
  }
  auto [it, inserted] = leader_by_term_.emplace(term, Leadership{node, leader_nonce});
  if (!inserted && it->second.node != node) {
    report("election-safety", fmt::format("node {} and node {} are both leader of term {}",
                                          it->second.node, node, term));
    return;
  }
  // The same id, another leadership of the same term (both nonces known): it lost its state.
  if (!inserted && it->second.nonce != 0 && leader_nonce != 0 && it->second.nonce != leader_nonce) {
    report("election-safety",
           fmt::format("node {} led term {} twice (nonces {:016x} and {:016x}): it lost its state "
                       "and was elected again in a term it had led",
                       node, term, it->second.nonce, leader_nonce));
    return;
  }
  leader_term_[node] = term;
  // A new leader must hold every entry whose commit was observed at a lower term.
  for (raft::Index index = 1; index <= committed_.size() && !failed(); ++index) {
    if (committed_[index - 1].observed_term < term) check_leader_has(node, term, index);
  }
}

void Checker::check_leader_has(raft::NodeId leader, raft::Term leader_term, raft::Index index) {
  const CommittedEntry& committed = committed_[index - 1];
  const raft::LogReader& log = log_of(leader);
  if (index < log.first_index()) {
    // Trimmed, or replaced by a snapshot: only the term of the entry before the first is known.
    if (index + 1 == log.first_index() && log.term_at(index) != committed.entry.term) {
      report("leader-completeness",
             fmt::format("leader {} of term {} starts its log after index {} of term {}, but {} "
                         "was committed there",
                         leader, leader_term, index, log.term_at(index).value_or(0),
                         describe(committed.entry)));
    }
    return;
  }
  std::optional<raft::Entry> held = entry_at(leader, index);
  if (!held || *held != committed.entry) {
    report("leader-completeness",
           fmt::format(
               "leader {} of term {} holds {} at index {}, but {} was committed there at term {}",
               leader, leader_term, held ? describe(*held) : std::string("nothing"), index,
               describe(committed.entry), committed.observed_term));
  }
}

void Checker::observe_append(raft::NodeId node, raft::Index first, raft::Index last) {
  if (failed()) return;
  const raft::LogReader& log = log_of(node);
  for (raft::Index index = first; index <= last && !failed(); ++index) {
    std::optional<raft::Entry> entry = entry_at(node, index);
    std::optional<raft::Term> previous_term = log.term_at(index - 1);
    if (!entry || !previous_term) {
      report(
          "log-matching",
          fmt::format("node {} reported an append at {} that its log does not hold", node, index));
      return;
    }
    if (entry->term < *previous_term) {
      report("log-matching", fmt::format("node {}: entry {} follows an entry of later term {}",
                                         node, describe(*entry), *previous_term));
      return;
    }
    if (entry->type == raft::EntryType::kConfig) {
      note_conf_entry(node, *entry);
      if (failed()) return;
    } else {
      std::map<raft::Index, raft::ConfState>& confs = conf_entries_[node];
      confs.erase(confs.lower_bound(index), confs.end());  // a kConfig entry replaced
    }
    const EntryIdentity identity{*previous_term, content_digest(*entry)};
    auto [it, inserted] = identities_.emplace(std::make_pair(index, entry->term), identity);
    if (inserted) continue;
    if (it->second.digest != identity.digest) {
      report("log-matching",
             fmt::format("node {} holds {} but another log held different content at index {} "
                         "term {}",
                         node, describe(*entry), index, entry->term));
    } else if (it->second.previous_term != identity.previous_term) {
      report("log-matching",
             fmt::format(
                 "node {} holds {} after an entry of term {}, another log had it after term {}",
                 node, describe(*entry), identity.previous_term, it->second.previous_term));
    }
  }
}

void Checker::observe_truncate(raft::NodeId node, raft::Index from) {
  if (failed()) return;
  std::map<raft::Index, raft::ConfState>& confs = conf_entries_[node];
  confs.erase(confs.lower_bound(from), confs.end());
  if (from <= commit_[node]) {
    report("commit-index",
           fmt::format("node {} truncates its log from {} although its commit index is {}", node,
                       from, commit_[node]));
  }
}

void Checker::record_committed(raft::NodeId node, raft::Index index, const raft::Entry& entry,
                               raft::Term node_term) {
  if (index <= committed_.size()) {
    const CommittedEntry& known = committed_[index - 1];
    if (known.entry == entry) return;
    if (known.acknowledged_to_client) {
      report("append-durability",
             fmt::format("node {} commits {} at index {}, where {} was committed and "
                         "acknowledged to client {} (sequence {})",
                         node, describe(entry), index, describe(known.entry), known.entry.client_id,
                         known.entry.sequence));
      return;
    }
    report(known.acknowledged ? "proposal-durability" : "state-machine-safety",
           fmt::format("node {} commits {} at index {}, where {} was committed before{}", node,
                       describe(entry), index, describe(known.entry),
                       known.acknowledged ? " and acknowledged to its client" : ""));
    return;
  }
  assert(index == committed_.size() + 1);
  if (index > 1) {
    // Entries of one proposal share its term and nothing else comes between them.
    const raft::Entry& previous = committed_[index - 2].entry;
    if (previous.proposal_continues &&
        (entry.term != previous.term || entry.type != previous.type)) {
      report("proposal-atomicity",
             fmt::format(
                 "node {} commits {} at index {}, but the entry before it, {}, says its proposal "
                 "continues: that proposal committed only in part",
                 node, describe(entry), index, describe(previous)));
      return;
    }
  }
  committed_.push_back(CommittedEntry{entry, node_term, false, false});
  if (entry.type == raft::EntryType::kConfig) {
    if (std::optional<raft::ConfState> conf = raft::decode_config(entry.payload)) {
      committed_conf_ = std::move(*conf);
      committed_conf_set_ = true;
    }
  }
  resolve_proposals_at(index);
  // Every current leader of a later term must already hold it.
  for (raft::NodeId leader = 1; leader <= node_count_ && !failed(); ++leader) {
    if (leader_term_[leader] > node_term) check_leader_has(leader, leader_term_[leader], index);
  }
}

void Checker::resolve_proposals_at(raft::Index index) {
  CommittedEntry& committed = committed_[index - 1];
  auto [begin, end] = pending_proposals_.equal_range(index);
  for (auto it = begin; it != end; ++it) {
    const PendingProposal& proposal = it->second;
    if (committed.entry.term == proposal.term && committed.entry.payload == proposal.payload &&
        committed.entry.type == raft::EntryType::kNormal) {
      committed.acknowledged = true;
      ++acknowledged_proposals_;
    } else {
      ++failed_proposals_;
    }
  }
  pending_proposals_.erase(begin, end);
}

void Checker::observe_commit(raft::NodeId node, raft::Index commit, raft::Term node_term) {
  if (failed()) return;
  const raft::Index previous = commit_[node];
  if (commit < previous) {
    report("commit-index",
           fmt::format("node {} commit index went back from {} to {}", node, previous, commit));
    return;
  }
  if (commit > log_of(node).last_index()) {
    report("commit-index", fmt::format("node {} commits up to {} but its log ends at {}", node,
                                       commit, log_of(node).last_index()));
    return;
  }
  record_committed_range(node, previous + 1, commit, node_term);
  commit_[node] = commit;
}

void Checker::record_committed_range(raft::NodeId node, raft::Index from, raft::Index to,
                                     raft::Term node_term) {
  const raft::LogReader& log = log_of(node);
  // Entries below the log's first index were trimmed (committed, recorded when some node committed
  // them) or replaced by an installed snapshot: only the term before the first index is checked.
  if (from < log.first_index() && from <= to) {
    const raft::Index base = std::min(to, log.first_index() - 1);
    if (base > committed_.size()) {
      report("commit-index",
             fmt::format("node {} commits up to {}, past its log's start {}, beyond the {} entries "
                         "ever reported committed",
                         node, to, log.first_index(), committed_.size()));
      return;
    }
    if (base + 1 == log.first_index() && log.term_at(base) != committed_[base - 1].entry.term) {
      report("state-machine-safety",
             fmt::format("node {}'s log starts after index {} of term {}, but {} was committed "
                         "there",
                         node, base, log.term_at(base).value_or(0),
                         describe(committed_[base - 1].entry)));
      return;
    }
    from = base + 1;
  }
  for (raft::Index index = from; index <= to && !failed(); ++index) {
    std::optional<raft::Entry> entry = entry_at(node, index);
    assert(entry.has_value());  // index <= last_index was checked by the caller
    if (index > committed_.size() + 1) {
      report("commit-index", fmt::format("node {} commits index {} beyond the {} entries ever "
                                         "reported committed",
                                         node, index, committed_.size()));
      return;
    }
    record_committed(node, index, *entry, node_term);
  }
}

void Checker::observe_log_base(raft::NodeId node, raft::Index index,
                               const std::optional<raft::ConfState>& conf) {
  if (failed()) return;
  std::map<raft::Index, raft::ConfState>& confs = conf_entries_[node];
  confs.clear();
  conf_base_unknown_[node] = !conf.has_value();
  if (!conf) return;
  log_wipe_base_unknown_[node] = false;
  // The configuration in force at `index` by the committed history (when it reaches that far),
  // independently of what the node recorded.
  if (index <= committed_.size()) {
    raft::ConfState expected = bootstrap_conf_;
    for (raft::Index i = index; i >= 1; --i) {
      const raft::Entry& entry = committed_[i - 1].entry;
      if (entry.type != raft::EntryType::kConfig) continue;
      if (std::optional<raft::ConfState> decoded = raft::decode_config(entry.payload)) {
        expected = std::move(*decoded);
      }
      break;
    }
    if (!raft::same_members(expected, *conf)) {
      report("conf-in-force",
             fmt::format("node {}'s log starts after index {} with configuration {}, but {} was "
                         "in force there",
                         node, index, raft::to_string(*conf), raft::to_string(expected)));
      return;
    }
  }
  confs.emplace(index, *conf);
}

void Checker::observe_durable_hard_state(raft::NodeId node, const raft::HardState& hard_state) {
  if (failed()) return;
  const raft::HardState& before = durable_[node];
  if (hard_state.term < before.term) {
    report("vote-safety", fmt::format("node {} durable term went back from {} to {}", node,
                                      before.term, hard_state.term));
  } else if (hard_state.term == before.term && before.vote != raft::kNoNode &&
             hard_state.vote != before.vote) {
    report("vote-safety", fmt::format("node {} changed its durable vote in term {} from {} to {}",
                                      node, hard_state.term, before.vote, hard_state.vote));
  } else if (hard_state.commit < before.commit) {
    report("commit-index", fmt::format("node {} durable commit went back from {} to {}", node,
                                       before.commit, hard_state.commit));
  }
  durable_[node] = hard_state;
}

void Checker::observe_wipe(raft::NodeId node) {
  durable_[node] = raft::HardState{};
  commit_[node] = 0;
  leader_term_[node] = 0;
  conf_entries_[node].clear();
  conf_base_unknown_[node] = false;
  log_wipe_base_unknown_[node] = false;
}

void Checker::observe_log_wipe(raft::NodeId node) {
  durable_[node].commit = 0;
  commit_[node] = 0;
  leader_term_[node] = 0;
  conf_entries_[node].clear();
  conf_base_unknown_[node] = true;
  log_wipe_base_unknown_[node] = true;
}

void Checker::observe_crash(raft::NodeId node) {
  leader_term_[node] = 0;
  conf_entries_[node].clear();  // its log is empty while it is down (and rebuilt at restart)
  // A log-wiped node that crashes again before its log showed a configuration still runs its kept
  // CONFSTATE's (a restart of an empty log is no log base to judge it by).
  conf_base_unknown_[node] = log_wipe_base_unknown_[node];
}

void Checker::observe_restart(raft::NodeId node, raft::Index commit) {
  if (failed()) return;
  leader_term_[node] = 0;
  // conf_entries_ is empty since the crash, or holds the log's base (observe_log_base): the
  // recovered log's configuration entries are noted on top of it below.
  if (commit < durable_[node].commit) {
    report("commit-index",
           fmt::format("node {} restarted with commit {} below its durable commit {}", node, commit,
                       durable_[node].commit));
    return;
  }
  if (commit > log_of(node).last_index()) {
    report("commit-index",
           fmt::format("node {} restarted with commit {} but its durable log ends at {}", node,
                       commit, log_of(node).last_index()));
    return;
  }
  // The durable committed prefix must be the committed history (a crash must not lose committed
  // entries); below the log's first index, only the term before it is known.
  record_committed_range(node, 1, commit, durable_[node].term);
  commit_[node] = commit;
  // The rest of the recovered log (not committed, maybe about to be cut) must still be entries some
  // log really held at those (index, term)s: recovery may lose a tail, never invent or mix one.
  const raft::LogReader& log = log_of(node);
  if (!failed() && log.last_index() >= log.first_index())
    observe_append(node, log.first_index(), log.last_index());
}

void Checker::observe_acknowledged_append(std::uint64_t client_id, std::uint64_t sequence,
                                          raft::Index first, raft::Index last, raft::Term term,
                                          const std::vector<std::string>& payloads) {
  if (failed()) return;
  const AcknowledgedAppend answer{first, last, term};
  auto [it, inserted] = acknowledged_appends_.emplace(std::make_pair(client_id, sequence), answer);
  if (!inserted &&
      (it->second.first != first || it->second.last != last || it->second.term != term)) {
    report("dedup-consistency",
           fmt::format("client {} sequence {} was acknowledged with [{}..{}] t{}, later with "
                       "[{}..{}] t{}",
                       client_id, sequence, it->second.first, it->second.last, it->second.term,
                       first, last, term));
    return;
  }
  assert(acknowledged_appends_.size() <= kMaxTrackedAcknowledgements);
  if (last < first || last - first + 1 != payloads.size()) {
    report("append-durability",
           fmt::format("client {} sequence {} of {} entries was acknowledged with [{}..{}]",
                       client_id, sequence, payloads.size(), first, last));
    return;
  }
  for (raft::Index index = first; index <= last; ++index) {
    const raft::Entry* committed = committed_entry(index);
    const std::string& payload = payloads[index - first];
    if (committed == nullptr || committed->term != term || committed->payload != payload ||
        committed->client_id != client_id || committed->sequence != sequence) {
      report("append-durability",
             fmt::format("client {} sequence {} was acknowledged at index {} term {}, but {} is "
                         "committed there",
                         client_id, sequence, index, term,
                         committed != nullptr ? describe(*committed) : std::string("nothing")));
      return;
    }
    committed_[index - 1].acknowledged_to_client = true;
  }
}

void Checker::observe_proposal(raft::NodeId node, raft::Index first, raft::Term term,
                               const std::vector<std::string>& payloads) {
  if (failed()) return;
  assert(pending_proposals_.size() + payloads.size() <= kMaxTrackedProposals);
  for (std::size_t offset = 0; offset < payloads.size(); ++offset) {
    const raft::Index index = first + offset;
    std::optional<raft::Entry> entry = entry_at(node, index);
    if (!entry || entry->term != term || entry->payload != payloads[offset]) {
      report("proposal-result",
             fmt::format("node {} accepted a proposal at index {} term {}, but its log holds {}",
                         node, index, term, entry ? describe(*entry) : std::string("nothing")));
      return;
    }
    if (entry->proposal_continues != (offset + 1 < payloads.size())) {
      report("proposal-result",
             fmt::format("node {} placed entry {} of a {}-entry proposal at index {} with "
                         "proposal_continues = {}",
                         node, offset + 1, payloads.size(), index, entry->proposal_continues));
      return;
    }
    pending_proposals_.emplace(index, PendingProposal{node, term, payloads[offset]});
    // A stale leader can propose at an index that a newer leader already committed.
    if (index <= committed_.size()) resolve_proposals_at(index);
  }
}

void Checker::observe_read_request(std::uint64_t request_id) {
  assert(read_required_.size() < kMaxTrackedReads);
  read_required_[request_id] = committed_.size();
}

void Checker::observe_read_released(raft::NodeId node, std::uint64_t request_id,
                                    raft::Index read_index) {
  if (failed()) return;
  auto it = read_required_.find(request_id);
  if (it == read_required_.end()) {
    report("read-linearizability",
           fmt::format("node {} released read {} that was never requested (or twice)", node,
                       request_id));
    return;
  }
  const raft::Index required = it->second;
  read_required_.erase(it);
  ++released_reads_;
  if (read_index < required) {
    report("read-linearizability",
           fmt::format("node {} released read {} at index {}, but index {} was committed "
                       "before the read was requested",
                       node, request_id, read_index, required));
  } else if (read_index > commit_[node]) {
    report("read-linearizability",
           fmt::format("node {} released read {} at index {} before committing it (commit "
                       "{})",
                       node, request_id, read_index, commit_[node]));
  }
}

void Checker::observe_read_aborted(std::uint64_t request_id) { read_required_.erase(request_id); }

void Checker::abandon_proposals_beyond(raft::Index last_index) {
  auto first_abandoned = pending_proposals_.upper_bound(last_index);
  failed_proposals_ +=
      static_cast<std::uint64_t>(std::distance(first_abandoned, pending_proposals_.end()));
  pending_proposals_.erase(first_abandoned, pending_proposals_.end());
}

void Checker::check_committed_prefixes() {
  for (raft::NodeId node = 1; node <= node_count_ && !failed(); ++node) {
    if (logs_[node] == nullptr) continue;
    for (raft::Index index = std::max<raft::Index>(1, log_of(node).first_index());
         index <= commit_[node] && !failed(); ++index) {
      std::optional<raft::Entry> entry = entry_at(node, index);
      if (!entry) {
        report("commit-index", fmt::format("node {} committed {} but no longer holds index {}",
                                           node, commit_[node], index));
        return;
      }
      if (index > committed_.size()) {
        report("commit-index",
               fmt::format("node {} committed index {} that was never reported committed", node,
                           index));
        return;
      }
      record_committed(node, index, *entry, 0);
    }
  }
  if (!failed()) check_exactly_once();
}

void Checker::check_exactly_once() {
  // One append's entries are contiguous, and its last one ends the proposal (proposal_continues is
  // false): the same (client_id, sequence) after that is a retry that was committed a second time.
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::pair<raft::Index, bool>>
      seen;  // first index, ended
  for (raft::Index index = 1; index <= committed_.size(); ++index) {
    const raft::Entry& entry = committed_[index - 1].entry;
    if (entry.client_id == 0 || entry.type != raft::EntryType::kNormal) continue;
    auto [it, inserted] =
        seen.emplace(std::make_pair(entry.client_id, entry.sequence), std::make_pair(index, false));
    if (!inserted && it->second.second) {
      report("dedup-consistency",
             fmt::format("client {} sequence {} is committed at index {} and again at {}",
                         entry.client_id, entry.sequence, it->second.first, index));
      return;
    }
    if (!entry.proposal_continues) it->second.second = true;
  }
}

}  // namespace raftlog::sim

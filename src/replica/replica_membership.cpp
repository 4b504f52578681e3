// Replica: membership changes (docs/raft.md, "Membership changes"), answered once their
// configuration entry committed. The configuration itself is kept in CONFSTATE
// (conf_state_file.h, written by the Ready driver) and recovered at open (replica_open.cpp).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "replica/removed_word_record.h"
#include "replica/replica.h"

namespace raftlog::replica {
namespace {

MembershipResult refused(NodeError error) { return MembershipResult{std::move(error), 0, 0, {}}; }

// Who holds the address named for change.node (drills7 L4: the refusal named no one): the member
// of `conf` whose address in change.addresses equals the new member's; "" when none is found.
std::string address_holder(const raft::ConfChange& change, const raft::ConfState& conf) {
  std::string wanted;
  for (const raft::MemberAddress& member : change.addresses) {
    if (member.node == change.node) wanted = member.address;
  }
  if (wanted.empty()) return "";
  for (const raft::MemberAddress& member : change.addresses) {
    if (member.node != change.node && member.address == wanted && raft::is_member(conf, member.node))
      return "node " + std::to_string(member.node) + " already has " + wanted + ", the address given for ";
  }
  return "";
}

// Why a change was refused WOULD_LOSE_QUORUM (drills7 L6: the refusal named no voter): each voter
// of the new configuration the leader did not count, and why, with what to do about it.
std::string would_lose_quorum_text(const raft::ConfChange& change,
                                   const raft::ConfChangeResult& result, std::uint64_t tick_ms,
                                   std::uint64_t election_ms) {
  std::string text = "the new configuration needs " + std::to_string(result.quorum) +
                     " voters answering this leader, and " + std::to_string(result.reachable) +
                     " do: the change could not commit";
  for (const raft::UncountedVoter& voter : result.uncounted) {
    text += "; node " + std::to_string(voter.node);
    switch (voter.why) {
      case raft::UncountedVoter::Why::kCatchingUp:
        text += " is catching up (it lost its log or met a storage fault): wait until it serves "
                "again";
        break;
      case raft::UncountedVoter::Why::kNoAcknowledgement:
        text += " has not acknowledged an append of this leader yet (only heartbeats or refusals): "
                "retry once it has";
        break;
      case raft::UncountedVoter::Why::kSilent:
        if (change.type == raft::ConfChangeType::kAddVoter && voter.node == change.node) {
          text += " is new to the cluster: add it as a learner first, then promote it";
        } else if (!voter.heard_this_term) {
          text += " has not answered this leader since it was elected: is it running?";
        } else {
          text += " has not answered for " + std::to_string(voter.ticks_since_contact * tick_ms) +
                  " ms (an election timeout is " + std::to_string(election_ms) +
                  " ms): is it running?";
        }
        break;
    }
  }
  return text;
}

NodeError invalid_change_error(const raft::ConfChange& change, raft::ConfChangeProblem problem,
                               const raft::ConfState& conf) {
  const std::string node = "node " + std::to_string(change.node);
  switch (problem) {
    case raft::ConfChangeProblem::kNotMember:
      return make_error(ErrorCode::kInvalidArgument, node + " is not a member of the cluster",
                        kReasonNotAMember);
    case raft::ConfChangeProblem::kAlreadyMember:
      return make_error(ErrorCode::kFailedPrecondition, node + " is already a member",
                        kReasonAlreadyAMember);
    case raft::ConfChangeProblem::kNotLearner:
      return make_error(ErrorCode::kFailedPrecondition,
                        node + " is not a learner (only learners are promoted)",
                        kReasonNotALearner);
    case raft::ConfChangeProblem::kNoVotersLeft:
      return make_error(ErrorCode::kFailedPrecondition,
                        node + " is the last voter: removing it would leave no quorum",
                        kReasonWouldLoseQuorum);
    case raft::ConfChangeProblem::kTooManyMembers:
      return make_error(ErrorCode::kInvalidArgument,
                        "the cluster has " + std::to_string(raft::kMaxMembers) + " members already",
                        kReasonBadMember);
    case raft::ConfChangeProblem::kBadAddress:
      return make_error(ErrorCode::kInvalidArgument,
                        "an address of the new configuration is not host:port (at most " +
                            std::to_string(raft::kMaxMemberAddressBytes) + " bytes)",
                        kReasonBadAddress);
    case raft::ConfChangeProblem::kAddressInUse:
      if (std::string holder = address_holder(change, conf); !holder.empty()) {
        return make_error(ErrorCode::kFailedPrecondition, holder + node, kReasonAddressInUse);
      }
      return make_error(ErrorCode::kFailedPrecondition,
                        "another member already has " + node + "'s address", kReasonAddressInUse);
    case raft::ConfChangeProblem::kTooLarge:
      return make_error(ErrorCode::kInvalidArgument,
                        "the configuration would take more than " +
                            std::to_string(raft::kMaxConfigBytes) + " bytes (shorter addresses)",
                        kReasonBadAddress);
    case raft::ConfChangeProblem::kInvalidNode:
    case raft::ConfChangeProblem::kNone:
      break;
  }
  return make_error(ErrorCode::kInvalidArgument, "node id 0 is not a node", kReasonBadMember);
}

}  // namespace

const std::map<std::uint64_t, std::string>& Replica::address_book() const {
  const std::vector<raft::ConfRecord>& history = raft_->conf_history();
  const std::array<std::uint64_t, 4> key{history.size(), history.front().index,
                                         history.back().index, history.back().term};
  if (address_book_valid_ && address_book_key_ == key) return address_book_;
  address_book_ = config_.members;
  for (const raft::ConfRecord& record : history) {
    for (const raft::MemberAddress& member : record.conf.addresses)
      address_book_[member.node] = member.address;
  }
  address_book_key_ = key;
  address_book_valid_ = true;
  return address_book_;
}

std::map<std::uint64_t, std::string> Replica::peer_addresses() const {
  const std::map<std::uint64_t, std::string>& book = address_book();
  std::map<std::uint64_t, std::string> peers;
  auto add = [&](std::uint64_t id) {
    if (id == config_.node_id) return;
    if (auto it = book.find(id); it != book.end()) peers.emplace(id, it->second);
  };
  for (const raft::ConfRecord& record : raft_->conf_history()) {
    for (raft::NodeId id : record.conf.voters) add(id);
    for (raft::NodeId id : record.conf.learners) add(id);
  }
  if (raft_->conf().addresses.empty()) {
    for (const auto& [id, address] : config_.members) add(id);
  }
  return peers;
}

void Replica::propose_conf_change(MembershipRequest in) {
  // The new configuration records every member's address once one is known (the operator named
  // the new member's, or the configuration holds addresses already): from then on every node, a
  // new one too, finds its peers in the log rather than in its flags.
  const raft::ConfState& conf = raft_->conf();
  if (!in.address.empty() || !conf.addresses.empty()) {
    const std::map<std::uint64_t, std::string>& book = address_book();
    in.change.addresses.clear();
    for (const auto& [id, address] : book) {
      const bool named = id == in.change.node && !in.address.empty();
      if (named || !raft::is_member(conf, id)) continue;
      if (raft::check_member_address(address).empty()) in.change.addresses.push_back({id, address});
    }
    if (!in.address.empty()) {
      raft::MemberAddress added{in.change.node, in.address};
      auto at = std::lower_bound(in.change.addresses.begin(), in.change.addresses.end(), added.node,
                                 [](const raft::MemberAddress& m, raft::NodeId id) { return m.node < id; });
      in.change.addresses.insert(at, std::move(added));
    }
  }
  const bool adds = in.change.type == raft::ConfChangeType::kAddVoter ||
                   in.change.type == raft::ConfChangeType::kAddLearner;
  if (adds && !raft::is_member(conf, in.change.node)) {
    const std::vector<raft::NodeId> retired = retired_ids();
    if (std::find(retired.begin(), retired.end(), in.change.node) != retired.end()) {
      in.done(refused(make_error(ErrorCode::kFailedPrecondition,
                                 "node " + std::to_string(in.change.node) +
                                     " was removed from the cluster by a committed change; ids are "
                                     "never reused (a node under it could vote without the memory "
                                     "its old votes relied on): choose a new id",
                                 kReasonIdRetired)));
      return;
    }
  }
  raft::ConfChangeResult result;
  if (!guard_core([&] { result = raft_->propose_conf_change(in.change); })) {
    in.done(refused(make_error(ErrorCode::kInternal, "this node stopped on a storage fault",
                               kReasonStorageError)));
    return;
  }
  switch (result.status) {
    case raft::ConfChangeStatus::kOk:
      break;
    case raft::ConfChangeStatus::kNotLeader:
      in.done(refused(not_leader_error()));
      return;
    case raft::ConfChangeStatus::kTransferring:
      in.done(refused(make_error(ErrorCode::kUnavailable,
                                 "leadership transfer in progress; retry on the new leader",
                                 kReasonTransferInProgress)));
      return;
    case raft::ConfChangeStatus::kNotReady:
      in.done(refused(
          make_error(ErrorCode::kUnavailable,
                     "this leader has not committed an entry of its term yet; retry shortly",
                     kReasonLeaderNotReady)));
      return;
    case raft::ConfChangeStatus::kInProgress:
      in.done(refused(make_error(ErrorCode::kUnavailable,
                                 "another configuration change is not committed yet; one change "
                                 "at a time: retry once it is",
                                 kReasonConfChangeInProgress)));
      return;
    case raft::ConfChangeStatus::kInvalid:
      in.done(refused(invalid_change_error(in.change, result.problem, raft_->conf())));
      return;
    case raft::ConfChangeStatus::kWouldLoseQuorum:
      in.done(refused(make_error(
          ErrorCode::kFailedPrecondition,
          would_lose_quorum_text(in.change, result, config_.tick_ms,
                                 std::uint64_t{config_.election_ticks} * config_.tick_ms),
          kReasonWouldLoseQuorum)));
      return;
    case raft::ConfChangeStatus::kLearnerBehind:
      in.done(refused(make_error(ErrorCode::kFailedPrecondition,
                                 "node " + std::to_string(in.change.node) +
                                     " does not hold every committed entry yet; promote it once it "
                                     "caught up",
                                 kReasonLearnerBehind)));
      return;
    case raft::ConfChangeStatus::kTooManyPending:
      in.done(refused(make_error(ErrorCode::kResourceExhausted,
                                 "too many uncommitted entries on the leader; retry later",
                                 kReasonTooManyPending)));
      return;
  }
  spdlog::info("node {}: proposed {} of node {} at index {} (term {})", config_.node_id,
               raft::to_string(in.change.type), in.change.node, result.index, result.term);
  pending_memberships_.emplace(result.index,
                               PendingMembership{result.term, std::move(in.done), in.deadline});
}

void Replica::persist_conf(const raft::Ready& ready) {
  bool changed = false;
  auto drop_from = [&](std::uint64_t index) {
    // The oldest record stays: it is committed, a cut never reaches it.
    while (conf_records_.size() > 1 && conf_records_.back().index >= index) {
      conf_records_.pop_back();
      changed = true;
    }
  };
  if (ready.truncate_from) drop_from(*ready.truncate_from);
  for (const raft::Entry& entry : ready.entries) {
    if (entry.type != raft::EntryType::kConfig) continue;
    std::optional<raft::ConfState> conf = raft::decode_config(entry.payload);
    if (!conf) {  // the core validates every configuration before it reaches a Ready
      fatal("configuration entry " + std::to_string(entry.index) + " does not decode");
      return;
    }
    drop_from(entry.index);
    if (conf_records_.back().index >= entry.index) conf_records_.pop_back();  // the base, replaced
    conf_records_.push_back(raft::ConfRecord{entry.index, entry.term, std::move(*conf)});
    changed = true;
  }
  if (!changed) return;
  // The batch's own commit index counts: a follower learns it with the entries it covers.
  const std::uint64_t commit = std::max(commit_, ready.commit_index.value_or(0));
  std::size_t base = settled_conf_base(commit);
  if (conf_records_.size() - base > 1 + ConfStateFile::kMaxPendingRecords) {
    // Committed records of earlier batches whose entries the flusher has not reached yet: flushed
    // now, they join the base. Only the uncommitted ones remain, and hold_back_config_entries()
    // keeps those within the bound.
    if (store::Status st = log_->flush(); !st.ok()) {
      fatal("flushing the log to settle the configuration record: " + st.to_string());
      return;
    }
    base = settled_conf_base(commit);
  }
  const std::vector<raft::ConfState> committed_between = settle_to(base);
  if (conf_records_.size() > 1 + ConfStateFile::kMaxPendingRecords) {
    // Unreachable: the core's history bounds the uncommitted records (hold_back_config_entries),
    // step() drains an earlier append's Ready before the next one's are taken, and the committed
    // ones of earlier batches were just flushed. Kept so that a broken invariant stops the node
    // instead of writing a record that could name the wrong configuration after a crash.
    fatal(std::to_string(conf_records_.size() - 1) +
          " configuration entries are not settled (committed and flushed): more than CONFSTATE "
          "holds (docs/storage-format.md)");
    return;
  }
  if (store::Status st = conf_state_file_->write(conf_records_, committed_between); !st.ok()) {
    fatal("persisting the configuration: " + st.to_string());
    return;
  }
  spdlog::info("node {}: configuration {} (entry {}, term {})", config_.node_id,
               raft::to_string(conf_records_.back().conf), conf_records_.back().index,
               conf_records_.back().term);
}

std::size_t Replica::settled_conf_base(std::uint64_t commit) const {
  // The newest record that is committed and flushed: no crash or cut removes it, nor anything
  // before it.
  const std::uint64_t settled = std::min(commit, log_->flushed_index());
  std::size_t base = 0;
  for (std::size_t i = 1; i < conf_records_.size(); ++i) {
    if (conf_records_[i].index <= settled) base = i;
  }
  return base;
}

void Replica::settle_conf_records(std::uint64_t commit) {
  const std::size_t base = settled_conf_base(commit);
  if (base == 0) return;
  // The base keeps its members' addresses (a later record keeps roles only, conf_state_file.h):
  // moved up before retention can trim the entry, a restart still finds every member's address.
  const std::vector<raft::ConfState> committed_between = settle_to(base);
  if (store::Status st = conf_state_file_->write(conf_records_, committed_between); !st.ok()) {
    fatal("persisting the settled configuration: " + st.to_string());
  }
}

std::vector<raft::ConfState> Replica::settle_to(std::size_t base) {
  std::vector<raft::ConfState> passed;
  for (std::size_t i = 0; i < base; ++i) passed.push_back(std::move(conf_records_[i].conf));
  conf_records_.erase(conf_records_.begin(),
                      conf_records_.begin() + static_cast<std::ptrdiff_t>(base));
  return passed;
}

const std::vector<raft::NodeId>& Replica::retired_ids() const {
  // CONFSTATE's, and the members of configurations committed since its base whose removal
  // committed too (the base moves only once an entry is also flushed here).
  // Against the newest committed configuration (the core's oldest record), never the one in force:
  // a removal that is not committed yet may still be cut by a new leader, and the node is then a
  // member still (its status must not say removed, nor a re-add be refused as retired).
  const raft::ConfRecord& oldest = raft_->conf_history().front();
  // conf_records_ is in log order: the committed ones come first. Found by a binary search, so a
  // status round (this runs on every one) costs O(log n) of its up to 1 + kMaxPendingRecords
  // records while the cache holds, not a pass over them.
  const auto first_uncommitted =
      std::partition_point(conf_records_.begin(), conf_records_.end(),
                           [&](const raft::ConfRecord& record) { return record.index <= commit_; });
  const auto committed_records =
      static_cast<std::uint64_t>(first_uncommitted - conf_records_.begin());
  // conf_records_ changes with a CONFSTATE rewrite (or at open, before any call); its size and
  // newest index too, in case one happens without (a seam that skips the write).
  const std::array<std::uint64_t, 6> key{conf_state_file_->generation(),
                                         oldest.index,
                                         oldest.term,
                                         committed_records,
                                         conf_records_.size(),
                                         conf_records_.empty() ? 0 : conf_records_.back().index};
  if (retired_ids_valid_ && retired_ids_key_ == key) return retired_ids_;
  std::vector<raft::NodeId> retired = conf_state_file_->retired();
  const raft::ConfState& now = oldest.conf;
  for (auto record_it = conf_records_.begin(); record_it != first_uncommitted; ++record_it) {
    const raft::ConfRecord& record = *record_it;
    for (const std::vector<raft::NodeId>* ids : {&record.conf.voters, &record.conf.learners}) {
      for (raft::NodeId id : *ids) {
        if (!raft::is_member(now, id) && std::find(retired.begin(), retired.end(), id) == retired.end())
          retired.push_back(id);
      }
    }
  }
  std::erase_if(retired, [&](raft::NodeId id) { return raft::is_member(now, id); });
  retired_ids_ = std::move(retired);
  retired_ids_key_ = key;
  retired_ids_valid_ = true;
  return retired_ids_;
}

void Replica::hold_back_config_entries(raft::Message& append) {
  if (append.entries.empty()) return;
  // The core's history lists its newest committed configuration, then every configuration entry of
  // its log after it. Those before this append's entries stay uncommitted unless the append commits
  // them; the ones from its first entry on it repeats or replaces, so they are counted from it.
  const std::vector<raft::ConfRecord>& history = raft_->conf_history();
  const raft::Index first = append.entries.front().index;
  const raft::Index commits_to = std::min<raft::Index>(append.commit, first - 1);
  std::size_t pending = 0;
  for (std::size_t i = 1; i < history.size(); ++i) {
    if (history[i].index < first && history[i].index > commits_to) ++pending;
  }
  for (std::size_t i = 0; i < append.entries.size(); ++i) {
    if (append.entries[i].type != raft::EntryType::kConfig) continue;
    if (pending >= ConfStateFile::kMaxPendingRecords) {
      // A node replaying many changes receives them faster than it writes and flushes them, and a
      // batch's records cannot be flushed before CONFSTATE is written: it takes the entries before
      // this one, and the leader sends the rest again with a commit index that covers the earlier
      // ones (step() drains the Ready of an earlier append first, so the counts do not add up).
      spdlog::debug("node {}: holding back entries from {} ({} configuration entries uncommitted)",
                    config_.node_id, append.entries[i].index, pending);
      append.entries.resize(i);
      return;
    }
    ++pending;
    ++conf_entries_since_ready_;
  }
}

void Replica::answer_membership(std::uint64_t commit) {
  while (!pending_memberships_.empty() && pending_memberships_.begin()->first <= commit) {
    auto first = pending_memberships_.begin();
    const std::uint64_t index = first->first;
    auto batch = log_->read(index, 1, 1ULL << 20);
    std::optional<raft::ConfState> conf;
    if (batch.ok() && !batch->entries.empty() &&
        batch->entries.front().meta.term == first->second.term &&
        batch->entries.front().meta.type == store::EntryType::kConfig) {
      conf = raft::decode_config(std::string(batch->entries.front().payload));
    }
    if (conf) {
      first->second.done(
          MembershipResult{NodeError{}, index, first->second.term, std::move(*conf)});
    } else {
      first->second.done(refused(
          make_error(ErrorCode::kUnavailable,
                     "the configuration entry was replaced after a leadership change; check the "
                     "configuration and retry",
                     kReasonLeadershipLost)));
    }
    pending_memberships_.erase(first);
  }
}

void Replica::fail_pending_memberships(const NodeError& error) {
  for (auto& [index, pending] : pending_memberships_) pending.done(refused(error));
  pending_memberships_.clear();
}

void Replica::expire_pending_memberships(Clock::time_point now) {
  for (auto it = pending_memberships_.begin(); it != pending_memberships_.end();) {
    if (it->second.deadline <= now) {
      it->second.done(refused(make_error(
          ErrorCode::kDeadlineExceeded,
          "the configuration change did not commit in time; the outcome is unknown: check the "
          "configuration",
          kReasonConfChangeTimeout)));
      it = pending_memberships_.erase(it);
    } else {
      ++it;
    }
  }
}

bool Replica::open_removed_word_record(raft::Config* raft_config, NodeError* error) {
  const std::string path = config_.data_dir + "/" + RemovedWordRecord::kFileName;
  auto found = RemovedWordRecord::find(config_.store.env, config_.data_dir, config_.node_id);
  if (!found.ok()) {
    *error = make_error(ErrorCode::kInternal, "reading " + path + ": " + found.status().to_string());
    return false;
  }
  if (!found->present) return true;
  if (!found->damage.empty()) {
    // Neither guess is safe: no word lets a retired node campaign, and there is no word to keep.
    // The file exists only because a member said this node's id is retired (a power cut during
    // its first write leaves it without a valid record, removed_word_record.h).
    *error = make_error(ErrorCode::kInternal,
                        path + " records that a member said this node's id is retired, but " +
                            found->damage + ": a member told node " +
                            std::to_string(config_.node_id) +
                            " that a committed change removed it (a power cut during the "
                            "record's first write leaves it so). Check with `raftlogctl members "
                            "list` that the id is retired, then stop this node for good and wipe "
                            "its directory (docs/operations.md, \"Membership\")");
    return false;
  }
  raft_config->removed_word = found->word;
  recorded_removed_word_ = found->word;
  spdlog::warn("node {}: {}: member {} said this node's id is retired (its configuration entry {} "
               "of term {}): this node neither campaigns nor leads until its log holds that entry "
               "(docs/operations.md, \"Membership\")",
               config_.node_id, path, found->word.by, found->word.conf_index,
               found->word.conf_term);
  return true;
}

void Replica::record_removed_word() {
  // Only a binding word is kept: one without a position (an older member's) is information only.
  const std::optional<raft::RemovedWord> word =
      raft_->told_removed() ? raft_->removed_word() : std::nullopt;
  if (word == recorded_removed_word_) return;
  // Not fatal when it fails: the node is bound in memory as before the record existed, and the next
  // round retries.
  const store::Status st =
      word ? RemovedWordRecord::write(config_.store.env, config_.data_dir, config_.node_id, *word)
           : RemovedWordRecord::remove(config_.store.env, config_.data_dir);
  if (!st.ok()) {
    if (removed_word_log_.admit(deps_.clock())) {
      spdlog::error("node {}: {} {}/{}: {} (retried)", config_.node_id,
                    word ? "writing" : "removing", config_.data_dir, RemovedWordRecord::kFileName,
                    st.to_string());
    }
    return;
  }
  recorded_removed_word_ = word;
}

}  // namespace raftlog::replica

// Replica: a leader's snapshot sends (docs/design.md, "Snapshot transfer"; the point is chosen as
// replica_snapshot.cpp's "THE SNAPSHOT POINT" says). What holds the Raft loop is kept short:
//   1. plan_snapshot: the point, its term and configuration and the ids retired there, the
//      encoding's key (SnapshotEncoding), from the core's message alone, before anything is
//      gathered; a send the kept encoding serves (a retry, another follower at the same point)
//      takes its bytes and leaves at once, without walking the dedup table;
//   2. otherwise the data is gathered on the loop (it reads the replica's state), the dedup table in
//      slices of ReplicaConfig::snapshot_gather_slice_bytes, one per process(), by client id (the
//      table's order changes between rounds; a client evicted meanwhile is left out, as one the
//      budget leaves out; an append recorded meanwhile starts above the point and is not
//      carried). Each client is copied whole within one slice, and everything the data holds is as
//      of the point or later and valid there (a client's sequences only move up);
//   3. the encoding and its CRC-32C run off the loop (ReplicaDeps::off_loop), and the result comes
//      back on the loop (finish_snapshot_encoding): kept for later sends, and every message that
//      waited for it leaves with it.
// Bounded: one outgoing snapshot (gathering or encoding) at a time, and at most one waiting message
// per follower (a newer one of the same key replaces it). A message for another key while one is
// outgoing is dropped. The outgoing one is abandoned, its messages dropped, when a trim (the log it
// was taken from changes), an install or a loss of leadership overtakes it; a late result is then
// ignored (its generation). Every drop is counted (SnapshotStats::sends_dropped) and the core sends
// a new snapshot after its retry timeout (raft::Config::snapshot_retry_ticks), as for a lost one.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>

#include "replica/replica.h"
#include "util/crc32c.h"

namespace raftlog::replica {

std::optional<Replica::SnapshotPlan> Replica::plan_snapshot(const raft::Message& message) {
  const raft::Snapshot& snapshot = *message.snapshot;
  // The snapshot point (replica_snapshot.cpp): S itself when the topic table is known there (at
  // the first index - 1, or S at or above the table's committed point), else P.
  const std::uint64_t first_index = log_->first_index();
  const bool at_first_index = first_index_topics_.has_value() && snapshot.index + 1 == first_index;
  const std::uint64_t point =
      at_first_index ? snapshot.index : std::max(snapshot.index, topics_.committed_through());
  auto term =
      point == snapshot.index ? store::Result<std::uint64_t>(snapshot.term) : log_->term_at(point);
  // The newest committed configuration's index: below it, the configuration in force at the point
  // is known only as first_index_conf_ (the core named it then: set_trim_point_conf).
  raft::Index newest_committed_conf = 0;
  for (const raft::ConfRecord& record : raft_->conf_history()) {
    if (record.index <= commit_)
      newest_committed_conf = std::max(newest_committed_conf, record.index);
  }
  std::string problem;
  if (point > commit_ || point > topics_.through()) {
    problem = "its point " + std::to_string(point) + " is past the commit index " +
              std::to_string(commit_);
  } else if (point < newest_committed_conf &&
             !(at_first_index && first_index_conf_ && *first_index_conf_ == snapshot.conf)) {
    problem = "the configuration in force at its point " + std::to_string(point) +
              " is not known (a configuration committed at " +
              std::to_string(newest_committed_conf) + ")";
  } else if (!term.ok()) {
    problem = "the term at " + std::to_string(point) + ": " + term.status().to_string();
  }
  if (!problem.empty()) {
    if (const auto held_back = snapshot_log_.admit(util::RateLimit::Clock::now())) {
      spdlog::error(
          "node {}: cannot send follower {} a snapshot: {}; it stays behind the first "
          "index ({} more such reports since the last line)",
          config_.node_id, message.to, problem, *held_back);
    }
    return std::nullopt;
  }
  SnapshotPlan plan;
  plan.key.format = SnapshotDataFormat::kPlain;
  if (deps_.sender->takes_framed_snapshot_data(message.to)) {
    plan.key.format = deps_.sender->takes_stamped_snapshot_data(message.to)
                          ? SnapshotDataFormat::kFramedWithStamp
                          : SnapshotDataFormat::kFramed;
  }
  // The running max stamp as of the point: known at the first index - 1 when the trims (or the
  // install) that moved the log's start there carried it; not known at a point above (the
  // fallback P: nothing reads the stamps of (S, P] here), which version 6 says as "not known".
  if (at_first_index && point == snapshot.index && first_index_stamp_) {
    plan.key.stamp_known = true;
    plan.key.stamp = *first_index_stamp_;
  }
  plan.first_index = first_index;
  plan.core_point = snapshot.index;
  SnapshotKey& key = plan.key;
  key.index = point;
  key.term = *term;
  // The configuration in force at the point: the newest record at or below it (the core's, at
  // S, unless one lies in (S, point], which the core's choice of S rules out; checked anyway).
  // Below the history's records it is the core's, first_index_conf_ (checked above).
  key.conf = snapshot.conf;
  for (const raft::ConfRecord& record : raft_->conf_history()) {
    if (record.index <= point) key.conf = record.conf;
  }
  // The ids retired as of the point, for the follower's CONFSTATE: this node's, less the members
  // of the configuration there (those retired after the point retire on the follower as it
  // replays their removal). Ids that joined and left after the point are named early: harmless,
  // since a member of the base or of the newest committed configuration is never counted retired
  // (ConfStateFile, retired_ids(), the core's answer_retired), and the follower leads only once
  // it holds their committed removal. The newest kMaxRetiredIds, as CONFSTATE keeps them.
  for (raft::NodeId id : retired_ids()) {
    if (!raft::is_member(key.conf, id)) key.retired_ids.push_back(id);
  }
  if (key.retired_ids.size() > raft::kMaxRetiredIds) {
    key.retired_ids.erase(
        key.retired_ids.begin(),
        key.retired_ids.end() - static_cast<std::ptrdiff_t>(raft::kMaxRetiredIds));
  }
  return plan;
}

bool Replica::send_or_hold_snapshot(raft::Message& message) {
  const std::optional<SnapshotPlan> plan = plan_snapshot(message);
  if (!plan) return false;
  raft::Snapshot& snapshot = *message.snapshot;
  snapshot.index = plan->key.index;
  snapshot.term = plan->key.term;
  snapshot.conf = plan->key.conf;
  // The node's section is asked for only when the kept encoding lacks one (it costs the node an
  // encoding of its table); a gather that follows uses the answer.
  std::optional<std::string> section;
  const auto has_section = [&] {
    if (!section) section = deps_.snapshot_section ? deps_.snapshot_section(plan->key.index) : "";
    return !section->empty();
  };
  if (auto kept = snapshot_encoding_.find(plan->key, has_section, deps_.clock())) {
    snapshot.data = kept->bytes;
    snapshot.data_crc32c = kept->crc32c;
    snapshot_stats_.encodings_reused = snapshot_encoding_.counters().reuses;
    note_snapshot_sent(message, *plan, 0, 0);
    return true;
  }
  if (outgoing_snapshot_ && outgoing_snapshot_->plan.key == plan->key) {
    outgoing_snapshot_->waiting.insert_or_assign(message.to, std::move(message));
    return false;
  }
  if (outgoing_snapshot_) {
    ++snapshot_stats_.sends_dropped;
    if (const auto held_back = snapshot_log_.admit(util::RateLimit::Clock::now())) {
      spdlog::warn(
          "node {}: not sending follower {} the snapshot of index {} yet: the one of index {} is "
          "being encoded; the core retries ({} more such reports since the last line)",
          config_.node_id, message.to, plan->key.index, outgoing_snapshot_->plan.key.index,
          *held_back);
    }
    return false;
  }
  start_outgoing_snapshot(message, *plan, std::move(section));
  return false;
}

void Replica::start_outgoing_snapshot(raft::Message& message, const SnapshotPlan& plan,
                                      std::optional<std::string> section) {
  SnapshotData data;
  data.index = plan.key.index;
  data.term = plan.key.term;
  data.conf = plan.key.conf;
  data.retired_ids = plan.key.retired_ids;
  data.stamp_at_index = plan.key.stamp_known;
  data.stamp_max_ms = plan.key.stamp;
  data.timestamp_floor_ms = last_timestamp_ms_;
  data.topics = data.index >= topics_.committed_through() ? topics_.table_at(data.index)
                                                          : *first_index_topics_;
  if (section) {
    data.section = std::move(*section);
  } else if (deps_.snapshot_section) {
    data.section = deps_.snapshot_section(data.index);
  }
  data.dedup_view_start = std::min(dedup_.view_start(), data.index + 1);
  std::size_t fixed = encoded_size_without_dedup(data);
  if (plan.key.format == SnapshotDataFormat::kFramed) {
    fixed = framed_size_without_dedup(data, kFramedSnapshotVersion);
  } else if (plan.key.format == SnapshotDataFormat::kFramedWithStamp) {
    fixed = framed_size_without_dedup(data, kFramedSnapshotVersionWithStamp);
  }
  if (fixed > config_.max_snapshot_data_bytes) {
    ++snapshot_stats_.too_large;
    if (const auto held_back = snapshot_log_.admit(util::RateLimit::Clock::now())) {
      spdlog::error(
          "node {}: cannot send follower {} a snapshot: its data takes {} bytes without the dedup "
          "table, more than the {} one message may carry; it stays behind the first index ({} "
          "more such reports since the last line)",
          config_.node_id, message.to, fixed, config_.max_snapshot_data_bytes, *held_back);
    }
    return;
  }
  OutgoingSnapshot out;
  out.generation = ++outgoing_generation_;
  out.plan = plan;
  out.leader_term = raft_->term();
  out.without_section = data.section.empty();
  out.fixed_size = fixed;
  out.data = std::move(data);
  out.client_ids = dedup_.client_ids();
  out.waiting.emplace(message.to, std::move(message));
  outgoing_snapshot_ = std::move(out);
  snapshot_stats_.encoding_in_flight = 1;
  continue_snapshot_gather();
}

void Replica::continue_snapshot_gather() {
  if (!outgoing_snapshot_ || outgoing_snapshot_->encoding) return;
  OutgoingSnapshot& out = *outgoing_snapshot_;
  const std::uint64_t slice = deps_.off_loop != nullptr ? config_.snapshot_gather_slice_bytes
                                                        : std::numeric_limits<std::uint64_t>::max();
  std::uint64_t gathered = 0;
  DedupTable::ClientState client;
  while (out.next_client < out.client_ids.size() && gathered < slice) {
    const std::uint64_t id = out.client_ids[out.next_client++];
    if (!dedup_.client_through(id, out.data.index, commit_, &client)) continue;
    DedupTable::ClientState kept = exportable_client(client, out.data.term);
    const std::size_t cost = encoded_client_size(kept);
    // Versions 4 and 6 add their blocks' own fields: counted at their bound.
    const std::size_t clients_size = out.plan.key.format != SnapshotDataFormat::kPlain
                                         ? framed_clients_size_bound(out.client_bytes + cost)
                                         : out.client_bytes + cost;
    if (out.fixed_size + clients_size > config_.max_snapshot_data_bytes) {
      // The rest are less recently used (counted whether or not they hold an append at the point).
      snapshot_stats_.clients_left_out += out.client_ids.size() - out.next_client + 1;
      out.next_client = out.client_ids.size();
      break;
    }
    out.client_bytes += cost;
    gathered += cost;
    out.data.dedup_clients.push_back(std::move(kept));
  }
  if (out.next_client == out.client_ids.size()) {
    out.gathered = true;
    out.client_ids = {};
    // One job outstanding at a time: after an abandoned one's `done` (soon: it skips its work).
    if (off_loop_outstanding_ == 0) start_snapshot_encoding();
  }
}

void Replica::start_snapshot_encoding() {
  OutgoingSnapshot& out = *outgoing_snapshot_;
  out.encoding = true;
  out.dedup_clients = out.data.dedup_clients.size();
  out.topics = out.data.topics.size();
  auto data = std::make_shared<SnapshotData>(std::move(out.data));
  auto encoded = std::make_shared<SnapshotEncoding::Encoded>();
  auto took = std::make_shared<std::chrono::microseconds>();
  auto job = [data, encoded, took, format = out.plan.key.format,
              cancelled = out.cancelled]() mutable {
    if (cancelled->load()) {
      data.reset();
      return;
    }
    const auto start = std::chrono::steady_clock::now();
    *encoded = SnapshotEncoding::encode(*data, format);
    data.reset();  // its memory goes before the result waits for the loop
    *took = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                                  start);
  };
  auto done = [this, generation = out.generation, encoded, took] {
    finish_snapshot_encoding(generation, std::move(*encoded), *took);
  };
  if (!hand_off(std::move(job), std::move(done))) {
    abandon_outgoing_snapshot("the off-loop worker refused its encoding");
  }
}

void Replica::finish_snapshot_encoding(std::uint64_t generation, SnapshotEncoding::Encoded encoded,
                                       std::chrono::microseconds took) {
  if (!outgoing_snapshot_ || outgoing_snapshot_->generation != generation) return;  // abandoned
  OutgoingSnapshot out = std::move(*outgoing_snapshot_);
  outgoing_snapshot_.reset();
  snapshot_stats_.encoding_in_flight = 0;
  snapshot_stats_.last_encoding_duration = took;
  if (failed_) return;
  if (raft_->role() != raft::Role::kLeader || raft_->term() != out.leader_term) {
    // abandon_outgoing_snapshot runs at every loss of leadership; checked again all the same.
    snapshot_stats_.sends_dropped += out.waiting.size();
    return;
  }
  snapshot_encoding_.keep(out.plan.key, out.without_section, encoded, deps_.clock());
  snapshot_encoding_.count_shared(out.waiting.size() - 1);  // the first one made it
  snapshot_stats_.encodes = snapshot_encoding_.counters().encodes;
  snapshot_stats_.encodings_reused = snapshot_encoding_.counters().reuses;
  for (auto& [to, message] : out.waiting) {
    if (!raft::is_member(raft_->conf(), to)) {  // removed while the job ran
      ++snapshot_stats_.sends_dropped;
      continue;
    }
    message.snapshot->data = encoded.bytes;
    message.snapshot->data_crc32c = encoded.crc32c;
    note_snapshot_sent(message, out.plan, out.dedup_clients, out.topics);
    deps_.sender->send(std::move(message));
  }
}

void Replica::abandon_outgoing_snapshot(const char* why) {
  if (!outgoing_snapshot_) return;
  const std::size_t dropped = outgoing_snapshot_->waiting.size();
  snapshot_stats_.sends_dropped += dropped;
  spdlog::info("node {}: dropping the snapshot of index {} being {} for {} follower(s): {}",
               config_.node_id, outgoing_snapshot_->plan.key.index,
               outgoing_snapshot_->encoding ? "encoded" : "gathered", dropped, why);
  outgoing_snapshot_->cancelled->store(true);
  outgoing_snapshot_.reset();
  snapshot_stats_.encoding_in_flight = 0;
}

void Replica::note_snapshot_sent(const raft::Message& message, const SnapshotPlan& plan,
                                 std::size_t dedup_clients, std::size_t topics) {
  const std::uint64_t point = plan.key.index;
  ++snapshot_stats_.sent;
  if (point >= plan.first_index) {
    // The follower's log will start above ours: the entries [first_index, point] stay on the
    // nodes that hold them (counted: status and metrics).
    ++snapshot_stats_.sent_above_first_index;
    if (const auto held_back = snapshot_log_.admit(util::RateLimit::Clock::now())) {
      spdlog::warn(
          "node {}: the snapshot for follower {} is at index {}, above this node's first index "
          "{}: {} ({} more such reports since the last line)",
          config_.node_id, message.to, point, plan.first_index,
          plan.core_point + 1 != plan.first_index
              ? "a configuration committed above the first index, and the one in force at the "
                "first index - 1 is not known (a log trimmed by an older binary, or its SNAPSHOT "
                "was lost)"
              : "the topic table as of the first index - 1 is not known (a log trimmed by an "
                "older binary, or its SNAPSHOT was lost)",
          *held_back);
    }
  }
  if (dedup_clients != 0 || topics != 0) {
    spdlog::info(
        "node {}: sending follower {} a snapshot of index {} term {} ({} bytes, {} dedup "
        "clients, {} topics)",
        config_.node_id, message.to, point, plan.key.term, message.snapshot->data.size(),
        dedup_clients, topics);
  } else {
    spdlog::info(
        "node {}: sending follower {} a snapshot of index {} term {} ({} bytes, its encoding "
        "reused)",
        config_.node_id, message.to, point, plan.key.term, message.snapshot->data.size());
  }
}

}  // namespace raftlog::replica

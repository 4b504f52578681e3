// Replica: timestamps and topic offsets — what a leader stamps into its proposals' envelopes, the
// topic table every written entry updates, and TOPICSTATE, which keeps both across restarts and
// retention (docs/design.md, "Topics, keys and time").
#include <spdlog/spdlog.h>

#include <algorithm>

#include "derived/envelope.h"
#include "replica/replica.h"
#include "replica/topic_state_file.h"

namespace raftlog::replica {

std::uint64_t Replica::wall_now_ms() const {
  const auto now = deps_.wall_clock().time_since_epoch();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now).count();
  return static_cast<std::uint64_t>(std::max<std::int64_t>(ms, 0));
}

Replica::NotedEnvelope Replica::note_entry(std::uint64_t index, bool has_envelope,
                                           std::string_view payload, std::uint64_t now_ms) {
  std::string_view topic;
  std::optional<std::uint64_t> offset;
  derived::EnvelopeHeader header;
  NotedEnvelope noted = NotedEnvelope::kNone;
  // The full decoder: an entry whose envelope does not validate counts as one without a topic and
  // gives no timestamp (only a forged peer or a bug writes one).
  if (has_envelope &&
      derived::decode_envelope_header(payload, &header) == derived::EnvelopeDecode::kOk) {
    last_timestamp_ms_ =
        std::max(last_timestamp_ms_, std::min(header.timestamp_ms, now_ms + kMaxTimestampSkewMs));
    topic = header.topic;
    if (header.has_topic_offset) offset = header.topic_offset;
    noted = header.version >= 2 ? NotedEnvelope::kVersion2 : NotedEnvelope::kVersion1;
  }
  // record() moves through() on: whether the entry was new must be known before.
  const bool new_entry = index > topics_.through();
  if (!topics_.record(index, topic, offset) && !topic.empty() && new_entry) {
    if (const auto held_back = untracked_topic_log_.admit(util::RateLimit::Clock::now())) {
      spdlog::error(
          "node {}: entry {} adds a topic beyond the {} this node tracks; its offsets "
          "are not tracked ({} more such entries since the last line)",
          config_.node_id, index, TopicOffsets::kMaxTopics, *held_back);
    }
  }
  return noted;
}

std::uint64_t Replica::next_timestamp_ms() {
  last_timestamp_ms_ = std::max(last_timestamp_ms_, wall_now_ms());
  return last_timestamp_ms_;
}

NodeError Replica::stamp_proposal(std::vector<std::string>& payloads, std::uint64_t first_index) {
  const std::uint64_t timestamp_ms = next_timestamp_ms();
  for (std::size_t i = 0; i < payloads.size(); ++i) {
    NodeError refused;
    derived::EnvelopeHeader header;
    const derived::EnvelopeDecode decoded = derived::decode_envelope_header(payloads[i], &header);
    if (decoded != derived::EnvelopeDecode::kOk || header.version != derived::kEnvelopeVersion) {
      refused = make_error(ErrorCode::kInvalidArgument,
                           "entry " + std::to_string(i) + ": " +
                               (decoded != derived::EnvelopeDecode::kOk
                                    ? std::string(derived::to_string(decoded))
                                    : std::string("an envelope of an old version")),
                           kReasonBadAttributes);
    } else if (!header.topic.empty() && !topics_.knows(header.topic) &&
               topics_.topic_count() >= TopicOffsets::kMaxTopics) {
      refused = make_error(ErrorCode::kResourceExhausted,
                           "entry " + std::to_string(i) + ": the log holds " +
                               std::to_string(TopicOffsets::kMaxTopics) +
                               " topics already, the most it may; append to an existing topic",
                           kReasonTooManyTopics);
    }
    const std::uint64_t offset = header.topic.empty() ? 0 : topics_.next_offset(header.topic);
    if (refused.ok() && !derived::stamp_envelope(&payloads[i], timestamp_ms, offset)) {
      refused = make_error(ErrorCode::kInvalidArgument,
                           "entry " + std::to_string(i) + ": topic offset " +
                               std::to_string(offset) + " is past the envelope's bound",
                           kReasonBadAttributes);
    }
    if (!refused.ok()) {
      (void)topics_.truncate_from(first_index);  // above the commit index: always undoable
      return refused;
    }
    // The topic view points into payloads[i], which stamping did not move.
    (void)topics_.record(first_index + i, header.topic, offset);
  }
  return NodeError{};
}

std::uint64_t Replica::topic_state_through() const {
  return std::min(commit_, log_->flushed_index());
}

TopicState Replica::topic_state_to_save() const {
  // As of the commit index, as far as the log is flushed: a committed prefix never changes, so the
  // record stays true whatever happens to the tail (topic_state_file.h), and a flushed one survives
  // a power cut, so the file is never ahead of the log it describes. Not below what the table can
  // undo to.
  const std::uint64_t through =
      std::max(topics_.committed_through(), std::min(topic_state_through(), topics_.through()));
  return TopicState{through, last_timestamp_ms_, topics_.table_at(through)};
}

store::Status Replica::save_topic_state() {
  RoundProfile::Scope part(round_, RoundPart::kTopicState);
  const TopicState state = topic_state_to_save();
  store::Status written = write_topic_state(config_.store.env, config_.data_dir, state);
  if (written.ok()) {
    topic_state_saved_through_ = std::max(topic_state_saved_through_, state.through_index);
  }
  return written;
}

void Replica::advance_topic_state() {
  const std::uint64_t through = topic_state_through();
  topics_.committed(through);
  if (through < topic_state_saved_through_ + config_.topic_state_save_entries ||
      through < topic_state_retry_at_) {
    return;
  }
  // Off the loop (replica_off_loop_write.cpp); a failure is logged when it comes back, and tried
  // again after another interval. While another write is out: at the next commit.
  (void)start_topic_state_save();
}

bool Replica::load_topic_state(std::uint64_t* scan_from, bool* missing_on_trimmed_log,
                               std::string* problem) {
  *missing_on_trimmed_log = false;
  topics_ = TopicOffsets();
  last_timestamp_ms_ = 0;
  topic_state_saved_through_ = 0;
  const std::uint64_t first = log_->first_index();
  *scan_from = first;
  auto saved = read_topic_state(config_.store.env, config_.data_dir);
  const std::uint64_t last = log_->last_index();
  // A TOPICSTATE that cannot be used (below) on a trimmed log: SNAPSHOT's table as of the first
  // index - 1 (a trim's of version 2 on, or an installed snapshot's: load_first_index_topics, which
  // the open ran first) describes the same table exactly, and the scan replays the retained log on
  // it. Only without it are the trimmed entries' offsets lost.
  const auto rebuild_from_snapshot_table = [&](const std::string& what) {
    if (first <= 1 || !first_index_topics_) return false;
    spdlog::error(
        "node {}: {}; rebuilding the topic table from SNAPSHOT's table as of {} and the "
        "retained log",
        config_.node_id, what, first - 1);
    topics_.reset(first - 1, *first_index_topics_);
    if (loaded_snapshot_) {
      last_timestamp_ms_ = std::max(last_timestamp_ms_, loaded_snapshot_->timestamp_floor_ms);
    }
    *scan_from = first;
    return true;
  };
  if (saved.ok() && saved->has_value() && (*saved)->through_index > last) {
    // Saved beyond the log: the entries it counted after `last` are gone (a file from before the
    // flushed-index rule, a copied directory, or storage that lost flushed data). Its table would
    // keep offsets of entries that no longer exist: trusted only as far as the log reaches, i.e.
    // not at all. Its timestamp floor is kept: a floor only ever holds timestamps back.
    const std::string what = config_.data_dir + "/TOPICSTATE covers the log up to " +
                             std::to_string((*saved)->through_index) + ", but the log ends at " +
                             std::to_string(last);
    last_timestamp_ms_ = (*saved)->timestamp_floor_ms;
    if (first == 1) {
      spdlog::error("node {}: {}; rebuilding the topic table from the whole log", config_.node_id,
                    what);
      return true;
    }
    // (A storage fault that cut the log below TOPICSTATE's point, on a trimmed log, lands here:
    // the cut entries come again from the leader.)
    if (rebuild_from_snapshot_table(what)) return true;
    *problem =
        what + " and starts at " + std::to_string(first) +
        ": the offsets of the trimmed entries cannot be recovered; replace this node under a "
        "new id with an empty directory (docs/operations.md, \"Damaged data at startup\")";
    return false;
  }
  if (saved.ok() && saved->has_value() && (*saved)->through_index + 1 >= first) {
    const TopicState& state = **saved;
    topics_.reset(state.through_index, state.topics);
    // Trusted as saved: every value it took was bounded when it was raised (note_entry), and a
    // clock stepped back while the node was down must not lower it.
    last_timestamp_ms_ = state.timestamp_floor_ms;
    topic_state_saved_through_ = state.through_index;
    *scan_from = std::max(first, state.through_index + 1);
    return true;
  }
  // Removing the file helps only a log whose oldest envelope is of version 1 (rebuild_dedup).
  const std::string remedy =
      "; replace this node under a new id with an empty directory (if the log's oldest envelope "
      "is of version 1, "
      "written before the upgrade, removing TOPICSTATE instead counts topic offsets from the "
      "first retained entry; docs/operations.md, \"Topics and keys\")";
  if (!saved.ok()) {
    if (first == 1) {
      // The whole log is here: the scan rebuilds the table exactly.
      spdlog::error("node {}: {}; rebuilding it from the whole log", config_.node_id,
                    saved.status().to_string());
      return true;
    }
    if (rebuild_from_snapshot_table(config_.data_dir +
                                    "/TOPICSTATE: " + saved.status().to_string())) {
      return true;
    }
    // Entries before the first retained one are gone: a guess could hand out an offset twice.
    *problem = config_.data_dir + "/TOPICSTATE: " + saved.status().to_string() + remedy;
    return false;
  }
  if (!saved->has_value()) {
    if (rebuild_from_snapshot_table(config_.data_dir + "/TOPICSTATE is missing")) return true;
    if (first > 1) {
      // A log written before TOPICSTATE existed, already trimmed: its version-1 entries are
      // counted from the first retained one, as a rebuild of the derived indexes numbered them.
      // (If the oldest retained envelope is of version 2, version-2 entries may have been
      // trimmed: the file was lost, and rebuild_dedup refuses.)
      *missing_on_trimmed_log = true;
      spdlog::warn(
          "node {}: no TOPICSTATE and the log starts at {}: topic offsets of version-1 "
          "entries are counted from there",
          config_.node_id, first);
    }
    return true;
  }
  const std::string what = config_.data_dir + "/TOPICSTATE covers the log only up to " +
                           std::to_string((*saved)->through_index) + ", but the log starts at " +
                           std::to_string(first);
  last_timestamp_ms_ = (*saved)->timestamp_floor_ms;
  if (rebuild_from_snapshot_table(what)) return true;
  *problem = what + remedy;
  return false;
}

}  // namespace raftlog::replica
